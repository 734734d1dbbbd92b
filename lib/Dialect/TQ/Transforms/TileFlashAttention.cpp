//===- TileFlashAttention.cpp - KV tiles with an online softmax -----------===//
//
// The fused chain score -> softmax -> accumulate materialises a full row of
// logits per query. Tiling it over the tokens with a running maximum, sum
// and accumulator (flash attention) keeps one tile live at a time; cutting
// the tokens into independent chunks merged by log-sum-exp (split-KV,
// flash-decoding) exposes parallelism when there are few queries.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

namespace mlir::tq {
#define GEN_PASS_DEF_TQTILEFLASHATTENTION
#include "tq/Dialect/TQ/Transforms/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;
using namespace mlir::tq;

namespace {

Value filled(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
             float value) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  Value v = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  return linalg::FillOp::create(b, loc, v, empty).getResult(0);
}

/// The running state of an online softmax.
struct FlashState {
  Value max, sum, acc;
};

/// The state before any key when each head has an attention sink: the
/// sink is the running maximum and contributes exp(0) = 1 to the sum (0
/// for a sink of -inf, which hides nothing).
std::pair<Value, Value> sinkState(OpBuilder &b, Location loc, Value sinks,
                                  ArrayRef<OpFoldResult> rowSizes) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  Value maxInit = tensor::EmptyOp::create(b, loc, rowSizes, f32);
  Value sumInit = tensor::EmptyOp::create(b, loc, rowSizes, f32);
  AffineExpr i, h;
  bindDims(ctx, i, h);
  auto rows = AffineMap::getMultiDimIdentityMap(2, ctx);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{maxInit.getType(), sumInit.getType()},
      ValueRange{sinks}, ValueRange{maxInit, sumInit},
      ArrayRef<AffineMap>{AffineMap::get(2, 0, {h}, ctx), rows, rows},
      SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value negInf = arith::ConstantOp::create(
            nb, nloc,
            nb.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
        Value none = arith::CmpFOp::create(
            nb, nloc, arith::CmpFPredicate::OEQ, args[0], negInf);
        Value sum = arith::SelectOp::create(
            nb, nloc, none,
            arith::ConstantOp::create(nb, nloc, nb.getF32FloatAttr(0.0f)),
            arith::ConstantOp::create(nb, nloc, nb.getF32FloatAttr(1.0f)));
        linalg::YieldOp::create(nb, nloc, ValueRange{args[0], sum});
      });
  return {generic.getResult(0), generic.getResult(1)};
}

/// True when some entry of a mask tile is above -inf: a tile whose every
/// logit the mask hides changes nothing and is skipped.
Value anyVisible(OpBuilder &b, Location loc, Value maskTile) {
  MLIRContext *ctx = b.getContext();
  const float negInf = -std::numeric_limits<float>::infinity();
  Value init = tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{},
                                       b.getF32Type());
  Value lowest =
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(negInf));
  init = linalg::FillOp::create(b, loc, lowest, init).getResult(0);
  auto reduced = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{maskTile},
      ValueRange{init},
      ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(2, ctx),
                          AffineMap::get(2, 0, {}, ctx)},
      SmallVector<utils::IteratorType>(2, utils::IteratorType::reduction),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value m = args[0];
        if (!m.getType().isF32())
          m = arith::ExtFOp::create(nb, nloc, nb.getF32Type(), m);
        linalg::YieldOp::create(
            nb, nloc, ValueRange{arith::MaximumFOp::create(nb, nloc, args[1],
                                                           m)});
      });
  Value max = tensor::ExtractOp::create(b, loc, reduced.getResult(0),
                                        ValueRange{});
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, max,
                               lowest);
}

/// max + log(sum) per row, -inf where the sum is 0 (nothing visible): the
/// log of the softmax denominator.
Value logSumExp(OpBuilder &b, Location loc, Value max, Value sum) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(max.getType());
  SmallVector<OpFoldResult> sizes = {tensor::getMixedSize(b, loc, max, 0),
                                     tensor::getMixedSize(b, loc, max, 1)};
  Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  auto id = AffineMap::getMultiDimIdentityMap(2, ctx);
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{max, sum}, ValueRange{init},
             ArrayRef<AffineMap>{id, id, id},
             SmallVector<utils::IteratorType>(2,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value zero =
                   arith::ConstantOp::create(nb, nloc, nb.getF32FloatAttr(0));
               Value negInf = arith::ConstantOp::create(
                   nb, nloc,
                   nb.getF32FloatAttr(
                       -std::numeric_limits<float>::infinity()));
               Value seen = arith::CmpFOp::create(
                   nb, nloc, arith::CmpFPredicate::OGT, args[1], zero);
               Value lse = arith::AddFOp::create(
                   nb, nloc, args[0], math::LogOp::create(nb, nloc, args[1]));
               linalg::YieldOp::create(
                   nb, nloc,
                   ValueRange{arith::SelectOp::create(nb, nloc, seen, lse,
                                                      negInf)});
             })
      .getResult(0);
}

/// The log-sum-exp of split-KV partials: with M = max_s max[s],
/// M + log(sum_s exp(max[s] - M) sum[s]) per row.
Value logSumExpOfSplits(OpBuilder &b, Location loc, Value maxes, Value sums) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  const float negInf = -std::numeric_limits<float>::infinity();
  SmallVector<OpFoldResult> rowSizes = {tensor::getMixedSize(b, loc, maxes, 1),
                                        tensor::getMixedSize(b, loc, maxes, 2)};
  auto rowType = RankedTensorType::get(
      {cast<RankedTensorType>(maxes.getType()).getDimSize(1),
       cast<RankedTensorType>(maxes.getType()).getDimSize(2)},
      f32);
  // Loops (i, h, s), reducing s.
  auto parts = AffineMap::get(3, 0,
                              {getAffineDimExpr(2, ctx),
                               getAffineDimExpr(0, ctx),
                               getAffineDimExpr(1, ctx)},
                              ctx);
  auto rows = AffineMap::get(
      3, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx)}, ctx);
  SmallVector<utils::IteratorType> iterators = {
      utils::IteratorType::parallel, utils::IteratorType::parallel,
      utils::IteratorType::reduction};
  Value global = linalg::GenericOp::create(
                     b, loc, TypeRange{rowType}, ValueRange{maxes},
                     ValueRange{filled(b, loc, rowSizes, negInf)},
                     ArrayRef<AffineMap>{parts, rows}, iterators,
                     [&](OpBuilder &nb, Location nloc, ValueRange args) {
                       linalg::YieldOp::create(
                           nb, nloc,
                           ValueRange{arith::MaximumFOp::create(
                               nb, nloc, args[0], args[1])});
                     })
                     .getResult(0);
  Value total =
      linalg::GenericOp::create(
          b, loc, TypeRange{rowType}, ValueRange{maxes, sums, global},
          ValueRange{filled(b, loc, rowSizes, 0.0f)},
          ArrayRef<AffineMap>{parts, parts, rows, rows}, iterators,
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            // A split that saw nothing (max -inf) adds nothing.
            Value none = arith::CmpFOp::create(
                nb, nloc, arith::CmpFPredicate::OEQ, args[0],
                arith::ConstantOp::create(nb, nloc,
                                          nb.getF32FloatAttr(negInf)));
            Value w = math::ExpOp::create(
                nb, nloc, arith::SubFOp::create(nb, nloc, args[0], args[2]));
            Value part = arith::MulFOp::create(nb, nloc, w, args[1]);
            part = arith::SelectOp::create(
                nb, nloc, none,
                arith::ConstantOp::create(nb, nloc, nb.getF32FloatAttr(0)),
                part);
            linalg::YieldOp::create(
                nb, nloc,
                ValueRange{arith::AddFOp::create(nb, nloc, args[3], part)});
          })
          .getResult(0);
  return logSumExp(b, loc, global, total);
}

struct TileFlashAttention : public OpRewritePattern<AccumulateOp> {
  TileFlashAttention(MLIRContext *context, int64_t tileSize, int64_t splits)
      : OpRewritePattern(context), tileSize(tileSize), splits(splits) {}

  LogicalResult matchAndRewrite(AccumulateOp accumulate,
                                PatternRewriter &rewriter) const override {
    auto softmax = accumulate.getProbs().getDefiningOp<SoftmaxOp>();
    if (!softmax || !softmax.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(accumulate,
                                         "probs are not a single-use softmax");
    auto score = softmax.getLogits().getDefiningOp<ScoreOp>();
    if (!score || !score->hasOneUse())
      return rewriter.notifyMatchFailure(accumulate,
                                         "logits are not a single-use score");
    Location loc = accumulate.getLoc();
    Value query = score.getQuery();
    auto accType = accumulate.getType();
    SmallVector<OpFoldResult> rowSizes = {
        tensor::getMixedSize(rewriter, loc, query, 0),
        tensor::getMixedSize(rewriter, loc, query, 1)};
    SmallVector<OpFoldResult> accSizes = {
        rowSizes[0], rowSizes[1], rewriter.getIndexAttr(accType.getDimSize(2))};
    const float negInf = -std::numeric_limits<float>::infinity();
    FlashState empty{filled(rewriter, loc, rowSizes, negInf),
                     filled(rewriter, loc, rowSizes, 0.0f),
                     filled(rewriter, loc, accSizes, 0.0f)};
    // Sinks enter once: as the state before the first key (of the first
    // split).
    FlashState first = empty;
    if (Value sinks = softmax.getSinks())
      std::tie(first.max, first.sum) =
          sinkState(rewriter, loc, sinks, rowSizes);
    Value tokens = NumTokensOp::create(rewriter, loc, score.getKeys());

    auto tiles = [&](OpBuilder &b, Location loc, FlashState init, Value begin,
                     Value end) {
      return tileLoop(b, loc, score, softmax, accumulate, init, begin, end,
                      tokens);
    };
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value result, lse;
    const bool wantsLse = softmax.getLse() && !softmax.getLse().use_empty();
    if (splits <= 1) {
      FlashState s = tiles(rewriter, loc, first, zero, tokens);
      result = NormalizeOp::create(rewriter, loc, accType, s.acc, s.sum);
      if (wantsLse)
        lse = logSumExp(rewriter, loc, s.max, s.sum);
    } else {
      auto forall = splitKV(rewriter, loc, rowSizes, accSizes, tokens, first,
                            empty, tiles);
      result = CombineOp::create(rewriter, loc, accType, forall.getResult(0),
                                 forall.getResult(1), forall.getResult(2));
      if (wantsLse)
        lse = logSumExpOfSplits(rewriter, loc, forall.getResult(0),
                                forall.getResult(1));
    }
    rewriter.replaceOp(accumulate, result);
    if (wantsLse)
      rewriter.replaceAllUsesWith(softmax.getLse(), lse);
    rewriter.eraseOp(softmax);
    rewriter.eraseOp(score);
    return success();
  }

private:
  /// scf.for over tiles of [begin, end); returns the final state.
  FlashState tileLoop(OpBuilder &b, Location loc, ScoreOp score,
                      SoftmaxOp softmax, AccumulateOp accumulate,
                      FlashState init, Value begin, Value end,
                      Value tokens) const {
    Value step = arith::ConstantIndexOp::create(b, loc, tileSize);
    auto loop = scf::ForOp::create(
        b, loc, begin, end, step, ValueRange{init.max, init.sum, init.acc},
        [&](OpBuilder &b, Location loc, Value t0, ValueRange state) {
          Value remaining = arith::SubIOp::create(b, loc, end, t0);
          // end > t0 in the loop: unsigned, the minimum bounds every tile
          // buffer's size by the tile size (tq-hoist-tile-buffers).
          Value size = arith::MinUIOp::create(b, loc, step, remaining);
          auto keysType = score.getKeys().getType();
          auto valuesType = accumulate.getValues().getType();
          auto dynamicTokens = [](CacheType t) {
            return CacheType::get(t.getContext(),
                                  {ShapedType::kDynamic, t.getNumKvHeads(),
                                   int64_t(t.getHeadDim())},
                                  t.getFormat());
          };
          Value keys = SliceTokensOp::create(b, loc, dynamicTokens(keysType),
                                             score.getKeys(), t0, size);
          Value values = SliceTokensOp::create(
              b, loc, dynamicTokens(valuesType), accumulate.getValues(), t0,
              size);
          auto queryType = score.getQuery().getType();
          auto logitsType = RankedTensorType::get(
              {queryType.getDimSize(0), queryType.getDimSize(1),
               ShapedType::kDynamic},
              b.getF32Type());
          Value mask;
          if (Value full = softmax.getMask()) {
            SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), t0};
            SmallVector<OpFoldResult> sizes = {
                tensor::getMixedSize(b, loc, full, 0), size};
            SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
            mask = tensor::ExtractSliceOp::create(b, loc, full, offsets, sizes,
                                                  strides);
          }
          auto step = [&](OpBuilder &b, Location loc) {
            Value logits =
                ScoreOp::create(b, loc, logitsType, score.getQuery(), keys,
                                score.getLookupAttr());
            Type rows = state[0].getType();
            auto online = OnlineSoftmaxOp::create(
                b, loc, logitsType, rows, rows, rows, logits, state[0],
                state[1], t0, tokens, mask, softmax.getSlopes(),
                softmax.getScaleAttr(), softmax.getCausalAttr(),
                softmax.getWindowAttr(), softmax.getSoftcapAttr());
            Value tile =
                AccumulateOp::create(b, loc, accumulate.getType(),
                                     online.getProbs(), values,
                                     accumulate.getLookupAttr());
            Value acc = MergeTileOp::create(b, loc, state[2].getType(),
                                            state[2], online.getCorrection(),
                                            tile);
            scf::YieldOp::create(b, loc,
                                 ValueRange{online.getNewMax(),
                                            online.getNewSum(), acc});
          };
          if (!mask)
            return step(b, loc);
          auto skip = scf::IfOp::create(
              b, loc, anyVisible(b, loc, mask), step,
              [&](OpBuilder &b, Location loc) {
                scf::YieldOp::create(b, loc, state);
              });
          scf::YieldOp::create(b, loc, skip.getResults());
        });
    return {loop.getResult(0), loop.getResult(1), loop.getResult(2)};
  }

  /// scf.forall over `splits` chunks, each tiled; its results are the
  /// chunks' (max, sum, acc) stacked, for tq.combine to merge.
  scf::ForallOp
  splitKV(PatternRewriter &rewriter, Location loc,
                ArrayRef<OpFoldResult> rowSizes,
                ArrayRef<OpFoldResult> accSizes, Value tokens,
                FlashState first, FlashState empty,
                function_ref<FlashState(OpBuilder &, Location, FlashState,
                                        Value, Value)>
                    tiles) const {
    SmallVector<OpFoldResult> partRows = {rewriter.getIndexAttr(splits)};
    partRows.append(rowSizes.begin(), rowSizes.end());
    SmallVector<OpFoldResult> partAcc = {rewriter.getIndexAttr(splits)};
    partAcc.append(accSizes.begin(), accSizes.end());
    Type f32 = rewriter.getF32Type();
    Value maxes = tensor::EmptyOp::create(rewriter, loc, partRows, f32);
    Value sums = tensor::EmptyOp::create(rewriter, loc, partRows, f32);
    Value accs = tensor::EmptyOp::create(rewriter, loc, partAcc, f32);
    Value numSplits = arith::ConstantIndexOp::create(rewriter, loc, splits);
    Value chunk = arith::CeilDivUIOp::create(rewriter, loc, tokens, numSplits);

    auto forall = scf::ForallOp::create(
        rewriter, loc, ArrayRef<OpFoldResult>{rewriter.getIndexAttr(splits)},
        ValueRange{maxes, sums, accs}, std::nullopt);
    Block *body = forall.getBody();
    Value split = body->getArgument(0);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(forall.getTerminator());
      Value start = arith::MulIOp::create(rewriter, loc, split, chunk);
      Value begin = arith::MinUIOp::create(rewriter, loc, start, tokens);
      Value stop = arith::AddIOp::create(rewriter, loc, begin, chunk);
      Value end = arith::MinUIOp::create(rewriter, loc, stop, tokens);
      // Split 0 starts from the sinks' state, the others from nothing.
      FlashState init = empty;
      if (first.max != empty.max) {
        Value isFirst = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::eq, split,
            arith::ConstantIndexOp::create(rewriter, loc, 0));
        init.max = arith::SelectOp::create(rewriter, loc, isFirst, first.max,
                                           empty.max);
        init.sum = arith::SelectOp::create(rewriter, loc, isFirst, first.sum,
                                           empty.sum);
      }
      FlashState s = tiles(rewriter, loc, init, begin, end);
      rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
      auto insert = [&](Value part, Value dest,
                        ArrayRef<OpFoldResult> partSizes) {
        SmallVector<OpFoldResult> offsets(partSizes.size() + 1,
                                          rewriter.getIndexAttr(0));
        offsets[0] = split;
        SmallVector<OpFoldResult> sizes = {rewriter.getIndexAttr(1)};
        sizes.append(partSizes.begin(), partSizes.end());
        SmallVector<OpFoldResult> strides(sizes.size(),
                                          rewriter.getIndexAttr(1));
        tensor::ParallelInsertSliceOp::create(rewriter, loc, part, dest,
                                              offsets, sizes, strides);
      };
      insert(s.max, body->getArgument(1), rowSizes);
      insert(s.sum, body->getArgument(2), rowSizes);
      insert(s.acc, body->getArgument(3), accSizes);
    }
    return forall;
  }

  int64_t tileSize;
  int64_t splits;
};

struct TQTileFlashAttentionPass
    : public mlir::tq::impl::TQTileFlashAttentionBase<
          TQTileFlashAttentionPass> {
  using Base::Base;
  void runOnOperation() override {
    if (tileSize <= 0 || splits <= 0) {
      getOperation()->emitError()
          << "tq-tile-flash-attention needs tile-size > 0 and splits > 0, got "
          << int64_t(tileSize) << " and " << int64_t(splits);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    populateTileFlashAttentionPatterns(patterns, tileSize, splits);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tq::populateTileFlashAttentionPatterns(RewritePatternSet &patterns,
                                                  int64_t tileSize,
                                                  int64_t splits) {
  patterns.add<TileFlashAttention>(patterns.getContext(), tileSize, splits);
}
