//===- ApproximateMath.cpp - exp / exp2 as polynomial approximations ------===//

#include "tq/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::tq {
#define GEN_PASS_DEF_TQAPPROXIMATEMATH
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {
/// f32 scalars and vectors of f32: what the approximation handles (its
/// range reduction mixes scalar constants into tensors otherwise).
bool isF32ScalarOrVector(Type type) {
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.getElementType().isF32();
  return type.isF32();
}

/// exp2(x) = exp(x * ln 2), for f32 scalars and vectors.
struct Exp2AsExp : public OpRewritePattern<math::Exp2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::Exp2Op op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!isF32ScalarOrVector(type))
      return rewriter.notifyMatchFailure(op, "not an f32 scalar or vector");
    Attribute ln2 = rewriter.getF32FloatAttr(float(M_LN2));
    if (auto vector = dyn_cast<VectorType>(type))
      ln2 = DenseElementsAttr::get(vector, ln2);
    Value c = arith::ConstantOp::create(rewriter, op.getLoc(), type,
                                        cast<TypedAttr>(ln2));
    Value scaled =
        arith::MulFOp::create(rewriter, op.getLoc(), op.getOperand(), c);
    rewriter.replaceOpWithNewOp<math::ExpOp>(op, scaled);
    return success();
  }
};

/// floor(x) for f32 (scalars and vectors) by truncation: t = float(int(x)),
/// minus one when t > x.
/// |x| >= 2^23 (or NaN) is integral already and passes through, so the
/// conversion never sees an out-of-range value.
struct FloorByTruncation : public OpRewritePattern<math::FloorOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FloorOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!isF32ScalarOrVector(type))
      return rewriter.notifyMatchFailure(op, "not an f32 scalar or vector");
    Location loc = op.getLoc();
    Value x = op.getOperand();
    auto vector = dyn_cast<VectorType>(type);
    auto f32 = [&](float v) -> Value {
      TypedAttr attr = rewriter.getF32FloatAttr(v);
      if (vector)
        attr = DenseElementsAttr::get(vector, attr);
      return arith::ConstantOp::create(rewriter, loc, attr);
    };
    Type i32 = rewriter.getI32Type();
    if (vector)
      i32 = vector.clone(i32);
    Value integral = arith::OrIOp::create(
        rewriter, loc,
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::UGE, x,
                              f32(8388608.0f)),
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::ULE, x,
                              f32(-8388608.0f)));
    Value truncated = arith::SIToFPOp::create(
        rewriter, loc, type,
        arith::FPToSIOp::create(rewriter, loc, i32, x));
    Value above = arith::CmpFOp::create(rewriter, loc,
                                        arith::CmpFPredicate::OGT, truncated, x);
    Value floored = arith::SelectOp::create(
        rewriter, loc, above,
        arith::SubFOp::create(rewriter, loc, truncated, f32(1.0f)), truncated);
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, integral, x, floored);
    return success();
  }
};

struct TQApproximateMathPass
    : public mlir::tq::impl::TQApproximateMathBase<TQApproximateMathPass> {
  using TQApproximateMathBase::TQApproximateMathBase;
  void runOnOperation() override {
    RewritePatternSet exp2(&getContext());
    exp2.add<Exp2AsExp>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(exp2))))
      return signalPassFailure();
    // The upstream patterns match by op name only, so they run on the
    // f32 scalar and vector exps and floors alone (and on the ops they
    // create).
    SmallVector<Operation *> exps;
    getOperation()->walk([&](Operation *op) {
      if ((isa<math::ExpOp>(op) ||
           (isa<math::FloorOp>(op) && !nativeFmaFloor)) &&
          isF32ScalarOrVector(op->getResult(0).getType()))
        exps.push_back(op);
    });
    if (exps.empty())
      return;
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) { return name == "math.exp"; });
    // The approximation emits math.fma and math.floor, expanded to arith
    // for the same reason unless the target has them.
    if (!nativeFmaFloor) {
      patterns.add<FloorByTruncation>(&getContext());
      math::populateExpansionPatterns(patterns, {"fma"});
    }
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    if (failed(applyOpPatternsGreedily(exps, std::move(patterns), config)))
      signalPassFailure();
  }
};
} // namespace
