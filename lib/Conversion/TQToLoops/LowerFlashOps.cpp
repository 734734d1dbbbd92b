//===- LowerFlashOps.cpp - Online softmax, tile merging, split combine ----===//
//
// Loop nests for the ops tq-tile-flash-attention introduces. Rows that have
// seen no visible key keep max = -inf; every exp() of a difference is
// guarded so such rows produce zeros, never NaN.
//
//===----------------------------------------------------------------------===//

#include "LoopBuilders.h"
#include "LoweringPatterns.h"
#include "RowDecoding.h"
#include "VectorSoftmax.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::tq;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// x / d, or 0 where d is not positive.
Value guardedDiv(OpBuilder &b, Location loc, Value x, Value d) {
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, d,
                                         f32Const(b, loc, 0.0f));
  return arith::SelectOp::create(b, loc, positive,
                                 arith::DivFOp::create(b, loc, x, d),
                                 f32Const(b, loc, 0.0f));
}

struct LowerNumTokens : public OpConversionPattern<NumTokensOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(NumTokensOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CacheAccess access = resolveCacheAccess(rewriter, op.getLoc(),
                                            op.getCache(), adaptor.getCache());
    rewriter.replaceOp(op, getValueOrCreateConstantIndexOp(
                               rewriter, op.getLoc(), access.numTokens));
    return success();
  }
};

/// A token range is addressed by its consumers (resolveCacheAccess adds
/// the offset); the pool itself is unchanged.
struct LowerSliceTokens : public OpConversionPattern<SliceTokensOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SliceTokensOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getCache());
    return success();
  }
};

struct LowerOnlineSoftmax : public OpConversionPattern<OnlineSoftmaxOp> {
  LowerOnlineSoftmax(const TypeConverter &converter, MLIRContext *context,
                     bool vectorLoops)
      : OpConversionPattern(converter, context), vectorLoops(vectorLoops) {}

  LogicalResult
  matchAndRewrite(OnlineSoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value logits = adaptor.getLogits();
    Value oldMax = adaptor.getMax(), oldSum = adaptor.getSum();
    Value masked = createMaskedLogits(
        rewriter, loc, logits, adaptor.getMask(), adaptor.getSlopes(),
        adaptor.getOffset(),
        adaptor.getTokens(),
        MaskingParams{op.getScale().convertToFloat(),
                      op.getSoftcap().convertToFloat(), op.getCausal(),
                      int64_t(op.getWindow())});
    if (vectorLoops) {
      FailureOr<OnlineSoftmaxValues> values =
          vectorOnlineSoftmax(rewriter, loc, masked, oldMax, oldSum);
      if (succeeded(values)) {
        rewriter.replaceOp(op, {values->probs, values->max, values->sum,
                                values->correction});
        return success();
      }
    }
    auto id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
    auto rows3 = projection(ctx, 3, {0, 1});
    auto id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
    SmallVector<OpFoldResult> rowSizes = sizesOf(rewriter, loc, oldMax);
    Type f32 = rewriter.getF32Type();

    // The running max and sum are updated in place (their loop-carried
    // buffers), so the tiled loop bufferizes without copies.
    Value rowInit = tensor::EmptyOp::create(rewriter, loc, rowSizes, f32);
    Value tileMax = createLoopNest(
        rewriter, loc,
        createFilledTensor(rewriter, loc, rowSizes, f32,
                           rewriter.getF32FloatAttr(kNegInf)),
        {masked}, {id3}, rows3, 3, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          return arith::MaximumFOp::create(b, loc, acc, in[0]).getResult();
        });
    // correction = exp(max - new_max); 1 while nothing was visible.
    Value correction = createLoopNest(
        rewriter, loc, rowInit, {oldMax, tileMax}, {id2, id2}, id2, 2, 0,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value) {
          Value newMax = arith::MaximumFOp::create(b, loc, in[0], in[1]);
          return guardedExp(b, loc, in[0], newMax, 1.0f);
        });
    Value newMax = createLoopNest(
        rewriter, loc, oldMax, {tileMax}, {id2}, id2, 2, 0,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value out) {
          return arith::MaximumFOp::create(b, loc, out, in[0]).getResult();
        });
    Value probsInit =
        tensor::EmptyOp::create(rewriter, loc, sizesOf(rewriter, loc, logits),
                                f32);
    Value probs = createLoopNest(
        rewriter, loc, probsInit, {masked, newMax}, {id3, rows3}, id3, 3, 0,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value) {
          return guardedExp(b, loc, in[0], in[1], 0.0f);
        });
    // new_sum = sum * correction + rowsum(probs).
    Value scaledSum = createLoopNest(
        rewriter, loc, oldSum, {correction}, {id2}, id2, 2, 0,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value out) {
          return arith::MulFOp::create(b, loc, out, in[0]).getResult();
        });
    Value newSum = createLoopNest(
        rewriter, loc, scaledSum, {probs}, {id3}, rows3, 3, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          return arith::AddFOp::create(b, loc, acc, in[0],
                                       arith::FastMathFlags::reassoc)
              .getResult();
        });
    rewriter.replaceOp(op, {probs, newMax, newSum, correction});
    return success();
  }

  /// The CPU's 16-lane vector loops (VectorSoftmax.cpp) where the shape
  /// allows; else linalg loop nests.
  bool vectorLoops;
};

struct LowerMergeTile : public OpConversionPattern<MergeTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MergeTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    // In place on the loop-carried accumulator.
    auto id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
    Value result = createLoopNest(
        rewriter, loc, adaptor.getAcc(),
        {adaptor.getCorrection(), adaptor.getTile()},
        {projection(ctx, 3, {0, 1}), id3}, id3, 3, 0,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value out) {
          Value scaled = arith::MulFOp::create(b, loc, out, in[0]);
          return arith::AddFOp::create(b, loc, scaled, in[1]).getResult();
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LowerNormalize : public OpConversionPattern<NormalizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(NormalizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value acc = adaptor.getAcc();
    auto id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
    Value init = tensor::EmptyOp::create(rewriter, loc,
                                         sizesOf(rewriter, loc, acc),
                                         rewriter.getF32Type());
    Value result = createLoopNest(
        rewriter, loc, init, {acc, adaptor.getSum()},
        {id3, projection(ctx, 3, {0, 1})}, id3, 3, 0,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value) {
          return guardedDiv(b, loc, in[0], in[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s.
struct LowerCombine : public OpConversionPattern<CombineOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CombineOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value maxes = adaptor.getMax(), sums = adaptor.getSum();
    Value accs = adaptor.getAcc();
    Type f32 = rewriter.getF32Type();
    SmallVector<OpFoldResult> rowSizes = {sizeOf(rewriter, loc, maxes, 1),
                                          sizeOf(rewriter, loc, maxes, 2)};
    // Loops (i, h, s): M and L reduce over the splits.
    auto parts = projection(ctx, 3, {2, 0, 1});
    auto rows = projection(ctx, 3, {0, 1});
    Value globalMax = createLoopNest(
        rewriter, loc,
        createFilledTensor(rewriter, loc, rowSizes, f32,
                           rewriter.getF32FloatAttr(kNegInf)),
        {maxes}, {parts}, rows, 3, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          return arith::MaximumFOp::create(b, loc, acc, in[0]).getResult();
        });
    Value total = createLoopNest(
        rewriter, loc,
        createFilledTensor(rewriter, loc, rowSizes, f32,
                           rewriter.getF32FloatAttr(0.0f)),
        {maxes, sums, globalMax}, {parts, parts, rows}, rows, 3, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          Value w = guardedExp(b, loc, in[0], in[2], 0.0f);
          return arith::AddFOp::create(
                     b, loc, acc, arith::MulFOp::create(b, loc, w, in[1]))
              .getResult();
        });
    // Loops (i, h, j, s): the weighted accumulators.
    SmallVector<OpFoldResult> outSizes = {rowSizes[0], rowSizes[1],
                                          sizeOf(rewriter, loc, accs, 3)};
    Value weighted = createLoopNest(
        rewriter, loc,
        createFilledTensor(rewriter, loc, outSizes, f32,
                           rewriter.getF32FloatAttr(0.0f)),
        {maxes, globalMax, accs},
        {projection(ctx, 4, {3, 0, 1}), projection(ctx, 4, {0, 1}),
         projection(ctx, 4, {3, 0, 1, 2})},
        projection(ctx, 4, {0, 1, 2}), 4, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          Value w = guardedExp(b, loc, in[0], in[1], 0.0f);
          return arith::AddFOp::create(
                     b, loc, acc, arith::MulFOp::create(b, loc, w, in[2]))
              .getResult();
        });
    auto id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
    Value result = createLoopNest(
        rewriter, loc, tensor::EmptyOp::create(rewriter, loc, outSizes, f32),
        {weighted, total}, {id3, projection(ctx, 3, {0, 1})}, id3, 3, 0,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value) {
          return guardedDiv(b, loc, in[0], in[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::tq::populateFlashLoweringPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns,
    const TQToLoopsOptions &options) {
  patterns.add<LowerNumTokens, LowerSliceTokens, LowerMergeTile,
               LowerNormalize, LowerCombine>(converter, patterns.getContext());
  patterns.add<LowerOnlineSoftmax>(converter, patterns.getContext(),
                                   options.vectorSoftmax);
}
