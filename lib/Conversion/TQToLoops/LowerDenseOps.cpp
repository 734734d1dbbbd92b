//===- LowerDenseOps.cpp - tq.rotate, tq.qk, tq.softmax, tq.pv ------------===//
//
// The dense steps of attention as linalg loop nests over f32 tensors.
// Grouped-query attention is an affine map: query head h reads kv head
// h floordiv (q_heads / kv_heads).
//
//===----------------------------------------------------------------------===//

#include "LoopBuilders.h"
#include "LoweringPatterns.h"
#include "RotationLowering.h"
#include "RowDecoding.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::tq;

namespace {

struct LowerRotate : public OpConversionPattern<RotateOp> {
  LowerRotate(const TypeConverter &converter, MLIRContext *context,
              bool vectors)
      : OpConversionPattern(converter, context), vectors(vectors) {}
  LogicalResult
  matchAndRewrite(RotateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    if (op.getRotation().isIdentity()) {
      rewriter.replaceOp(op, input);
      return success();
    }
    Value result = emitRotation(rewriter, loc, input,
                                op.getRotation().materialize(),
                                op.getInverse(), vectors);
    rewriter.replaceOp(op, result);
    return success();
  }

  bool vectors;
};

/// Static query-heads / kv-heads, or failure.
FailureOr<int64_t> groupSize(int64_t qHeads, int64_t kvHeads) {
  if (ShapedType::isDynamic(qHeads) || ShapedType::isDynamic(kvHeads))
    return failure();
  return qHeads / kvHeads;
}

struct LowerQK : public OpConversionPattern<QKOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(QKOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value q = adaptor.getQuery(), k = adaptor.getKeys();
    FailureOr<int64_t> g = groupSize(op.getQuery().getType().getDimSize(1),
                                     op.getKeys().getType().getDimSize(1));
    if (failed(g))
      return rewriter.notifyMatchFailure(op, "dynamic head counts");
    Value init = createFilledTensor(
        rewriter, loc,
        {sizeOf(rewriter, loc, q, 0), sizeOf(rewriter, loc, q, 1),
         sizeOf(rewriter, loc, k, 0)},
        rewriter.getF32Type(), rewriter.getF32FloatAttr(0.0f));
    MLIRContext *ctx = rewriter.getContext();
    // Loops (i, h, t, d).
    AffineExpr i, h, t, d;
    bindDims(ctx, i, h, t, d);
    auto qMap = AffineMap::get(4, 0, {i, h, d}, ctx);
    auto kMap = AffineMap::get(4, 0, {t, h.floorDiv(*g), d}, ctx);
    Value result = createLoopNest(
        rewriter, loc, init, {q, k}, {qMap, kMap},
        AffineMap::get(4, 0, {i, h, t}, ctx), 4, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          return multiplyAdd(b, loc, acc, in[0], in[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LowerPV : public OpConversionPattern<PVOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PVOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value p = adaptor.getProbs(), v = adaptor.getValues();
    FailureOr<int64_t> g = groupSize(op.getProbs().getType().getDimSize(1),
                                     op.getValues().getType().getDimSize(1));
    if (failed(g))
      return rewriter.notifyMatchFailure(op, "dynamic head counts");
    Value init = createFilledTensor(
        rewriter, loc,
        {sizeOf(rewriter, loc, p, 0), sizeOf(rewriter, loc, p, 1),
         sizeOf(rewriter, loc, v, 2)},
        rewriter.getF32Type(), rewriter.getF32FloatAttr(0.0f));
    MLIRContext *ctx = rewriter.getContext();
    // Loops (i, h, t, d): the reduction over tokens sits outside the head
    // dim, so the innermost loop streams contiguous rows (out[.., d] +=
    // p * v[t, .., d]) and vectorises.
    AffineExpr i, h, t, d;
    bindDims(ctx, i, h, t, d);
    using utils::IteratorType;
    Value result = createLoopNest(
        rewriter, loc, init, {p, v},
        {AffineMap::get(4, 0, {i, h, t}, ctx),
         AffineMap::get(4, 0, {t, h.floorDiv(*g), d}, ctx)},
        AffineMap::get(4, 0, {i, h, d}, ctx),
        {IteratorType::parallel, IteratorType::parallel,
         IteratorType::reduction, IteratorType::parallel},
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          return multiplyAdd(b, loc, acc, in[0], in[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

Value mlir::tq::createMaskedLogits(OpBuilder &rewriter, Location loc,
                                   Value logits, Value mask, Value slopes,
                                   Value offset,
                                   Value numTokens,
                                   const MaskingParams &params) {
  MLIRContext *ctx = rewriter.getContext();
  const float negInf = -std::numeric_limits<float>::infinity();
  SmallVector<OpFoldResult> sizes3 = {sizeOf(rewriter, loc, logits, 0),
                                      sizeOf(rewriter, loc, logits, 1),
                                      sizeOf(rewriter, loc, logits, 2)};
  Value numQueries = tensor::DimOp::create(rewriter, loc, logits, 0);
  // Query i sits at position tokens - queries + i; key t at offset + t.
  Value firstPosition =
      arith::SubIOp::create(rewriter, loc, numTokens, numQueries);
  auto id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
  SmallVector<Value> inputs = {logits};
  SmallVector<AffineMap> maps = {id3};
  if (mask) {
    inputs.push_back(mask);
    maps.push_back(projection(ctx, 3, {0, 2}));
  }
  if (slopes) {
    inputs.push_back(slopes);
    maps.push_back(projection(ctx, 3, {1}));
  }
  Value init3 =
      tensor::EmptyOp::create(rewriter, loc, sizes3, rewriter.getF32Type());
  return createLoopNest(
      rewriter, loc, init3, inputs, maps, id3, 3, 0,
      [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
          Value) -> Value {
        Value x =
            arith::MulFOp::create(b, loc, in[0], f32Const(b, loc, params.scale));
        if (params.softcap > 0.0f) {
          Value c = f32Const(b, loc, params.softcap);
          x = arith::DivFOp::create(b, loc, x, c);
          x = math::TanhOp::create(b, loc, x);
          x = arith::MulFOp::create(b, loc, x, c);
        }
        if (mask) {
          Value m = in[1];
          if (!m.getType().isF32())
            m = arith::ExtFOp::create(b, loc, b.getF32Type(), m);
          // A key the mask hides is -inf whatever its logit: an engine's
          // masked cells may hold stale or never-written rows.
          Value hidden = arith::CmpFOp::create(b, loc,
                                               arith::CmpFPredicate::OEQ, m,
                                               f32Const(b, loc, negInf));
          if (slopes)
            m = arith::MulFOp::create(b, loc, m, in[2]);
          x = arith::SelectOp::create(b, loc, hidden, f32Const(b, loc, negInf),
                                      arith::AddFOp::create(b, loc, x, m));
        }
        Value position = arith::AddIOp::create(b, loc, firstPosition, idx[0]);
        Value key = arith::AddIOp::create(b, loc, offset, idx[2]);
        Value visible = arith::ConstantIntOp::create(b, loc, 1, 1);
        if (params.causal)
          visible = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                          key, position);
        if (params.window > 0) {
          Value distance = arith::SubIOp::create(b, loc, position, key);
          Value inWindow = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::slt, distance,
              arith::ConstantIndexOp::create(b, loc, params.window));
          visible = arith::AndIOp::create(b, loc, visible, inWindow);
        }
        return arith::SelectOp::create(b, loc, visible, x,
                                       f32Const(b, loc, negInf));
      });
}

namespace {

struct LowerSoftmax : public OpConversionPattern<SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value logits = adaptor.getLogits();
    Value mask = adaptor.getMask();
    SmallVector<OpFoldResult> sizes3 = {sizeOf(rewriter, loc, logits, 0),
                                        sizeOf(rewriter, loc, logits, 1),
                                        sizeOf(rewriter, loc, logits, 2)};
    SmallVector<OpFoldResult> sizes2 = {sizes3[0], sizes3[1]};
    Value numTokens = tensor::DimOp::create(rewriter, loc, logits, 2);
    const float scale = op.getScale().convertToFloat();
    const float softcap = op.getSoftcap().convertToFloat();
    const bool causal = op.getCausal();
    const int64_t window = op.getWindow();
    const float negInf = -std::numeric_limits<float>::infinity();

    auto id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
    auto rows = projection(ctx, 3, {0, 1});

    // 1. Scaled, capped, masked logits; hidden keys become -inf.
    Value init3 = tensor::EmptyOp::create(rewriter, loc, sizes3,
                                          rewriter.getF32Type());
    Value zeroIndex = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value masked = createMaskedLogits(
        rewriter, loc, logits, mask, adaptor.getSlopes(), zeroIndex,
        numTokens,
        MaskingParams{scale, softcap, causal, window});
    // 2. Row maxima (a sink is one more logit of its head).
    Value sinks = adaptor.getSinks();
    Value maxInit = createFilledTensor(rewriter, loc, sizes2,
                                       rewriter.getF32Type(),
                                       rewriter.getF32FloatAttr(negInf));
    if (sinks)
      maxInit = createLoopNest(
          rewriter, loc, maxInit, {sinks}, {projection(ctx, 2, {1})},
          AffineMap::getMultiDimIdentityMap(2, ctx), 2, 0,
          [](OpBuilder &, Location, ValueRange, ValueRange in, Value) {
            return in[0];
          });
    Value maxima = createLoopNest(
        rewriter, loc, maxInit, {masked}, {id3}, rows, 3, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          return arith::MaximumFOp::create(b, loc, acc, in[0]);
        });
    // 3. exp(x - max); rows that see no key (max = -inf) give zeros.
    Value exps = createLoopNest(
        rewriter, loc, init3, {masked, maxima}, {id3, rows}, id3, 3, 0,
        [&](OpBuilder &b, Location loc, ValueRange, ValueRange in,
            Value) -> Value {
          Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                              in[1], f32Const(b, loc, negInf));
          Value e = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, in[0], in[1]));
          return arith::SelectOp::create(b, loc, empty, f32Const(b, loc, 0.0f),
                                         e);
        });
    // 4. Row sums and 5. normalisation.
    Value sumInit = createFilledTensor(rewriter, loc, sizes2,
                                       rewriter.getF32Type(),
                                       rewriter.getF32FloatAttr(0.0f));
    if (sinks) // The sink's exp(sink - max), 0 for a sink of -inf.
      sumInit = createLoopNest(
          rewriter, loc, sumInit, {sinks, maxima},
          {projection(ctx, 2, {1}), AffineMap::getMultiDimIdentityMap(2, ctx)},
          AffineMap::getMultiDimIdentityMap(2, ctx), 2, 0,
          [&](OpBuilder &b, Location loc, ValueRange, ValueRange in,
              Value) -> Value {
            Value none = arith::CmpFOp::create(
                b, loc, arith::CmpFPredicate::OEQ, in[0],
                f32Const(b, loc, negInf));
            Value e = math::ExpOp::create(
                b, loc, arith::SubFOp::create(b, loc, in[0], in[1]));
            return arith::SelectOp::create(b, loc, none,
                                           f32Const(b, loc, 0.0f), e);
          });
    Value sums = createLoopNest(
        rewriter, loc, sumInit, {exps}, {id3}, rows, 3, 1,
        [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
          return arith::AddFOp::create(b, loc, acc, in[0]);
        });
    Value probs = createLoopNest(
        rewriter, loc, init3, {exps, sums}, {id3, rows}, id3, 3, 0,
        [&](OpBuilder &b, Location loc, ValueRange, ValueRange in,
            Value) -> Value {
          Value positive = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OGT, in[1], f32Const(b, loc, 0.0f));
          Value p = arith::DivFOp::create(b, loc, in[0], in[1]);
          return arith::SelectOp::create(b, loc, positive, p,
                                         f32Const(b, loc, 0.0f));
        });
    if (!op.getLse()) {
      rewriter.replaceOp(op, probs);
      return success();
    }
    // 6. log of the denominator: max + log(sum), -inf where nothing shows.
    auto id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
    Value lse = createLoopNest(
        rewriter, loc,
        tensor::EmptyOp::create(rewriter, loc, sizes2, rewriter.getF32Type()),
        {maxima, sums}, {id2, id2}, id2, 2, 0,
        [&](OpBuilder &b, Location loc, ValueRange, ValueRange in,
            Value) -> Value {
          Value positive = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OGT, in[1], f32Const(b, loc, 0.0f));
          Value l = arith::AddFOp::create(b, loc, in[0],
                                          math::LogOp::create(b, loc, in[1]));
          return arith::SelectOp::create(b, loc, positive, l,
                                         f32Const(b, loc, negInf));
        });
    rewriter.replaceOp(op, ValueRange{probs, lse});
    return success();
  }
};

} // namespace

void mlir::tq::populateDenseLoweringPatterns(const TypeConverter &converter,
                                             RewritePatternSet &patterns,
                                             const TQToLoopsOptions &options) {
  patterns.add<LowerQK, LowerPV, LowerSoftmax>(converter, patterns.getContext());
  patterns.add<LowerRotate>(converter, patterns.getContext(),
                            options.vectorRotations);
}

LogicalResult mlir::tq::checkStaticHeadCounts(Operation *op) {
  // (operand, what its dim 1 counts) pairs whose head count must be static.
  SmallVector<std::pair<Value, StringRef>, 2> operands;
  if (auto qk = dyn_cast<QKOp>(op))
    operands = {{qk.getQuery(), "query heads of the query"},
                {qk.getKeys(), "kv heads of the keys"}};
  else if (auto pv = dyn_cast<PVOp>(op))
    operands = {{pv.getProbs(), "query heads of the probabilities"},
                {pv.getValues(), "kv heads of the values"}};
  else if (auto score = dyn_cast<ScoreOp>(op))
    operands = {{score.getQuery(), "query heads of the query"}};
  else if (auto accumulate = dyn_cast<AccumulateOp>(op))
    operands = {{accumulate.getProbs(), "query heads of the probabilities"}};
  for (auto [value, what] : operands) {
    auto type = cast<ShapedType>(value.getType());
    if (!type.isDynamicDim(1))
      continue;
    return op->emitOpError()
           << "cannot be lowered to loops: dim 1 (the " << what << ") of "
           << type
           << " is dynamic; it must be static, since the GQA group (query "
              "heads per kv head) is a constant of the lowered loops";
  }
  return success();
}
