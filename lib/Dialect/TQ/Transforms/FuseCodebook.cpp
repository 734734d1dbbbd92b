//===- FuseCodebook.cpp - Lookup-based scoring and accumulation -----------===//
//
// Once rotations are hoisted, keys and values enter qk/pv straight from
// tq.gather; the fused ops read the packed indices instead of materialising
// scale * C[idx] for the whole cache.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQFUSECODEBOOK
#include "tq/Dialect/TQ/Transforms/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;
using namespace mlir::tq;

namespace {

/// qk(q, gather(k)) -> score(q, k).
struct FuseScore : public OpRewritePattern<QKOp> {
  FuseScore(MLIRContext *context, LookupStrategy lookup)
      : OpRewritePattern(context), lookup(lookup) {}
  LogicalResult matchAndRewrite(QKOp op,
                                PatternRewriter &rewriter) const override {
    auto gather = op.getKeys().getDefiningOp<GatherOp>();
    if (!gather)
      return rewriter.notifyMatchFailure(op, "keys are not a tq.gather");
    rewriter.replaceOpWithNewOp<ScoreOp>(
        op, op.getType(), op.getQuery(), gather.getCache(),
        LookupStrategyAttr::get(rewriter.getContext(), lookup));
    return success();
  }
  LookupStrategy lookup;
};

/// pv(p, gather(v)) -> accumulate(p, v).
struct FuseAccumulate : public OpRewritePattern<PVOp> {
  FuseAccumulate(MLIRContext *context, LookupStrategy lookup)
      : OpRewritePattern(context), lookup(lookup) {}
  LogicalResult matchAndRewrite(PVOp op,
                                PatternRewriter &rewriter) const override {
    auto gather = op.getValues().getDefiningOp<GatherOp>();
    if (!gather)
      return rewriter.notifyMatchFailure(op, "values are not a tq.gather");
    rewriter.replaceOpWithNewOp<AccumulateOp>(
        op, op.getType(), op.getProbs(), gather.getCache(),
        LookupStrategyAttr::get(rewriter.getContext(), lookup));
    return success();
  }
  LookupStrategy lookup;
};

struct TQFuseCodebookPass
    : public mlir::tq::impl::TQFuseCodebookBase<TQFuseCodebookPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseCodebookPatterns(patterns, lookup);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tq::populateFuseCodebookPatterns(RewritePatternSet &patterns,
                                            LookupStrategy lookup) {
  patterns.add<FuseScore, FuseAccumulate>(patterns.getContext(), lookup);
}
