//===- ApproximateMath.cpp - exp / exp2 as polynomial approximations ------===//

#include "tq/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::tq {
#define GEN_PASS_DEF_TQAPPROXIMATEMATH
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {
/// exp2(x) = exp(x * ln 2), for f32 scalars and vectors.
struct Exp2AsExp : public OpRewritePattern<math::Exp2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::Exp2Op op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32())
      return rewriter.notifyMatchFailure(op, "not f32");
    Attribute ln2 = rewriter.getF32FloatAttr(float(M_LN2));
    if (auto shaped = dyn_cast<ShapedType>(type))
      ln2 = DenseElementsAttr::get(shaped, ln2);
    Value c = arith::ConstantOp::create(rewriter, op.getLoc(), type,
                                        cast<TypedAttr>(ln2));
    Value scaled =
        arith::MulFOp::create(rewriter, op.getLoc(), op.getOperand(), c);
    rewriter.replaceOpWithNewOp<math::ExpOp>(op, scaled);
    return success();
  }
};

/// floor(x) for f32 by truncation: t = float(int(x)), minus one when t > x.
/// |x| >= 2^23 (or NaN) is integral already and passes through, so the
/// conversion never sees an out-of-range value.
struct FloorByTruncation : public OpRewritePattern<math::FloorOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FloorOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!type.isF32())
      return rewriter.notifyMatchFailure(op, "not an f32 scalar");
    Location loc = op.getLoc();
    Value x = op.getOperand();
    auto f32 = [&](float v) {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getF32FloatAttr(v));
    };
    Value integral = arith::OrIOp::create(
        rewriter, loc,
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::UGE, x,
                              f32(8388608.0f)),
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::ULE, x,
                              f32(-8388608.0f)));
    Value truncated = arith::SIToFPOp::create(
        rewriter, loc, type,
        arith::FPToSIOp::create(rewriter, loc, rewriter.getI32Type(), x));
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
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<Exp2AsExp, FloorByTruncation>(&getContext());
    // The predicate sees the op name ("math.exp"). The approximation emits
    // math.fma and math.floor, expanded to arith for the same reason.
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) { return name == "math.exp"; });
    math::populateExpansionPatterns(patterns, {"fma"});
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
