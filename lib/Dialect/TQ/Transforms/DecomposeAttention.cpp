//===- DecomposeAttention.cpp - tq.attention step by step -----------------===//
//
// Rewrites tq.attention into the naive computation: every key and value is
// gathered, un-rotated and sliced to the logical head dim, then
// qk -> softmax -> pv. Later passes derive the fused form from this one.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQDECOMPOSEATTENTION
#include "tq/Dialect/TQ/Transforms/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;
using namespace mlir::tq;

Value mlir::tq::buildDequantizedRows(OpBuilder &rewriter, Location loc,
                                     Value cache) {
  auto cacheType = cast<CacheType>(cache.getType());
  ::tq::quant::Format format = cacheType.getQuantFormat();
  Value rows =
      GatherOp::create(rewriter, loc, cacheType.getRotatedType(), cache);
  if (format.hasRotation()) {
    auto rotation =
        RotationAttr::get(rewriter.getContext(), *format.spec().rotation);
    rows = RotateOp::create(rewriter, loc, rows.getType(), rows, rotation,
                            rewriter.getUnitAttr());
  }
  if (format.paddedDim() != format.headDim()) {
    SmallVector<OpFoldResult> offsets(3, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(3, rewriter.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes = {
        tensor::getMixedSize(rewriter, loc, rows, 0),
        rewriter.getIndexAttr(cacheType.getNumKvHeads()),
        rewriter.getIndexAttr(cacheType.getHeadDim())};
    rows = tensor::ExtractSliceOp::create(rewriter, loc, rows, offsets, sizes,
                                          strides);
  }
  return rows;
}

namespace {

struct DecomposeAttention : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto queryType = op.getQuery().getType();
    CacheType keysType = op.getKeys().getType();
    auto logitsType = RankedTensorType::get(
        {queryType.getDimSize(0), queryType.getDimSize(1),
         keysType.getNumTokens()},
        rewriter.getF32Type());

    Value keys = buildDequantizedRows(rewriter, loc, op.getKeys());
    Value logits =
        QKOp::create(rewriter, loc, logitsType, op.getQuery(), keys);
    // The softmax's lse is the attention's (the same denominators).
    Type lseType = op.getLse() ? op.getLse().getType() : Type();
    auto softmax = SoftmaxOp::create(
        rewriter, loc, logitsType, lseType, logits, op.getMask(),
        op.getSlopes(), op.getSinks(),
        rewriter.getF32FloatAttr(op.getScaleOrDefault()), op.getCausalAttr(),
        op.getWindowAttr(), op.getSoftcapAttr());
    Value values = buildDequantizedRows(rewriter, loc, op.getValues());
    Value out = PVOp::create(rewriter, loc, op.getResult().getType(),
                             softmax.getResult(), values);
    SmallVector<Value> results = {out};
    if (op.getLse())
      results.push_back(softmax.getLse());
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct TQDecomposeAttentionPass
    : public mlir::tq::impl::TQDecomposeAttentionBase<TQDecomposeAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeAttentionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tq::populateDecomposeAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeAttention>(patterns.getContext());
}
