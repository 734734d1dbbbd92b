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

struct TQApproximateMathPass
    : public mlir::tq::impl::TQApproximateMathBase<TQApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<Exp2AsExp>(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) { return name == "exp"; });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
