//===- LowerCacheOps.cpp - tq ops that read the packed cache --------------===//
//
// tq.gather, tq.score and tq.accumulate become loop nests that decode each
// element in place (RowDecoder). Format-specific terms:
//   haar4   the row's 1/||C[idx]|| renormalisation, one reduction per row;
//   tqprod  the QJL residual: gather adds scale * ||r|| c (S^T sign)_j,
//           score adds scale * ||r|| c <S q, sign>, accumulate adds
//           c S^T (sum_t p_t scale_t ||r_t|| sign_t), with c = sqrt(pi/2)/m.
//
//===----------------------------------------------------------------------===//

#include "LoopBuilders.h"
#include "LoweringPatterns.h"
#include "QjlLowering.h"
#include "RowDecoding.h"
#include "FusedTileProducts.h"
#include "VectorRowDecoder.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

namespace {

Value zeroIndex(OpBuilder &b, Location loc) {
  return arith::ConstantIndexOp::create(b, loc, 0);
}

/// tqprod: the weight of row (t, kvHead)'s QJL term, scale * ||r|| * c,
/// with the scale of the block holding element j and c = qjlConstant.
Value qjlRowWeight(OpBuilder &b, Location loc, const RowDecoder &dec,
                   Value t, Value kvHead, Value j) {
  Value scale = dec.scale(b, loc, t, kvHead, j);
  Value rnorm = dec.residualNorm(b, loc, t, kvHead);
  return arith::MulFOp::create(b, loc,
                               arith::MulFOp::create(b, loc, scale, rnorm),
                               f32Const(b, loc, qjlConstant(dec.spec())));
}

/// What the codebook score / accumulate lowerings share: the decoder of the
/// cache operand (page lookups and what `use` needs precomputed outside
/// the loop nests) and the GQA group size (query heads per kv head).
struct GroupedCacheDecode {
  RowDecoder dec;
  int64_t group;
  Value groupConst;
};

FailureOr<GroupedCacheDecode>
prepareGroupedDecode(ConversionPatternRewriter &rewriter, Operation *op,
                     ShapedType perQueryHead, Value cache,
                     Value convertedCache,
                     RowDecoder::DecodeUse use =
                         RowDecoder::DecodeUse::Elements) {
  Location loc = op->getLoc();
  const int64_t qHeads = perQueryHead.getDimSize(1);
  if (ShapedType::isDynamic(qHeads))
    return rewriter.notifyMatchFailure(op, "dynamic query heads");
  auto cacheType = cast<CacheType>(cache.getType());
  CacheAccess access = resolveCacheAccess(rewriter, loc, cache, convertedCache);
  RowDecoder dec(rewriter, loc, cacheType.getQuantFormat(), access);
  dec.precompute(rewriter, loc, cacheType.getNumKvHeads(), use);
  const int64_t group = qHeads / cacheType.getNumKvHeads();
  Value groupConst = arith::ConstantIndexOp::create(rewriter, loc, group);
  return GroupedCacheDecode{std::move(dec), group, groupConst};
}

/// The `tile` lookup with every row decoded into registers
/// (FusedTileProducts), where the format has a vector row decoder; failure
/// (nothing created) otherwise.
FailureOr<Value> lowerTileInRegisters(
    ConversionPatternRewriter &rewriter, Operation *op,
    ShapedType perQueryHead, Value cache, Value convertedCache,
    Value operand, const TQToLoopsOptions &options,
    function_ref<Value(OpBuilder &, Location, Value, VectorRowDecoder &,
                       int64_t, int64_t)>
        emit) {
  auto cacheType = cast<CacheType>(cache.getType());
  if (!VectorRowDecoder::supports(cacheType.getQuantFormat().spec()))
    return failure();
  FailureOr<GroupedCacheDecode> prepared =
      prepareGroupedDecode(rewriter, op, perQueryHead, cache, convertedCache,
                           RowDecoder::DecodeUse::VectorRows);
  if (failed(prepared))
    return failure();
  prepared->dec.setPrefetchLocality(options.prefetchToL2 ? 2 : 3);
  // Lanes in the row's order where fields are read as words; otherwise in
  // bit-plane order, and the products permute the query and the output
  // instead (once per tile, not per row).
  FailureOr<VectorRowDecoder> rows = VectorRowDecoder::get(
      prepared->dec, fusedChunkLanes(cacheType.getPaddedDim()));
  return emit(rewriter, op->getLoc(), operand, *rows,
              cacheType.getNumKvHeads(), prepared->group);
}

/// haar4: scale / ||C[idx]|| of every row, tensor<tokens x kv_heads>.
Value haarRowFactors(OpBuilder &b, Location loc, const RowDecoder &dec,
                     const CacheAccess &access, int64_t kvHeads) {
  MLIRContext *ctx = b.getContext();
  SmallVector<OpFoldResult> sizes = {access.numTokens,
                                     b.getIndexAttr(kvHeads)};
  Value zeros = createFilledTensor(b, loc, sizes, b.getF32Type(),
                                   b.getF32FloatAttr(0.0f));
  // Loops (t, kvh, j): sum of squared centroids. The j loop's extent comes
  // from an (unread) row-sized operand.
  Value row = tensor::EmptyOp::create(
      b, loc, ArrayRef<int64_t>{int64_t(dec.spec().paddedDim)},
      b.getF32Type());
  Value normSq = createLoopNest(
      b, loc, zeros, {row}, {projection(ctx, 3, {2})},
      projection(ctx, 3, {0, 1}), 3, 1,
      [&](OpBuilder &nb, Location nloc, ValueRange idx, ValueRange,
          Value acc) {
        Value c = dec.centroid(nb, nloc, dec.index(nb, nloc, idx[0], idx[1],
                                                    idx[2]));
        return multiplyAdd(nb, nloc, acc, c, c);
      });
  return createLoopNest(
      b, loc, zeros, {normSq}, {projection(ctx, 2, {0, 1})},
      projection(ctx, 2, {0, 1}), 2, 0,
      [&](OpBuilder &nb, Location nloc, ValueRange idx, ValueRange in,
          Value) -> Value {
        Value scale =
            dec.scale(nb, nloc, idx[0], idx[1], zeroIndex(nb, nloc));
        Value norm = math::SqrtOp::create(nb, nloc, in[0]);
        Value positive =
            arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::OGT, norm,
                                  f32Const(nb, nloc, 0.0f));
        Value factor = arith::DivFOp::create(nb, nloc, scale, norm);
        return arith::SelectOp::create(nb, nloc, positive, factor,
                                       f32Const(nb, nloc, 0.0f));
      });
}


//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

/// Contiguous bytes [tokens, kv_heads, row_bytes] become a pool of one page.
struct LowerFromBytes : public OpConversionPattern<FromBytesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FromBytesOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, createSinglePagePool(
                               rewriter, op.getLoc(), adaptor.getBytes(),
                               getTypeConverter()->convertType(op.getType())));
    return success();
  }
};

/// The bytes of a contiguous cache (its single page).
struct LowerToBytes : public OpConversionPattern<ToBytesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ToBytesOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value pool = adaptor.getCache();
    auto poolType = cast<RankedTensorType>(pool.getType());
    auto flat = RankedTensorType::get(
        {ShapedType::kDynamic, poolType.getDimSize(2), poolType.getDimSize(3)},
        poolType.getElementType());
    Value bytes = tensor::CollapseShapeOp::create(
        rewriter, loc, flat, pool,
        ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
    rewriter.replaceOpWithNewOp<tensor::CastOp>(op, op.getType(), bytes);
    return success();
  }
};

struct LowerFromPages : public OpConversionPattern<FromPagesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FromPagesOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<tensor::CastOp>(
        op, getTypeConverter()->convertType(op.getType()),
        adaptor.getPages());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tq.gather
//===----------------------------------------------------------------------===//

struct LowerGather : public OpConversionPattern<GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    CacheType cacheType = op.getCache().getType();
    CacheAccess access =
        resolveCacheAccess(rewriter, loc, op.getCache(), adaptor.getCache());
    RowDecoder dec(rewriter, loc, cacheType.getQuantFormat(), access);
    dec.precompute(rewriter, loc, cacheType.getNumKvHeads());
    const quant::FormatSpec &spec = dec.spec();
    const int64_t width = cacheType.getPaddedDim();
    const int64_t kvHeads = cacheType.getNumKvHeads();
    // Formats whose values are scale * C[idx] decode a whole row at a time
    // with vector ops.
    FailureOr<Value> vectorised =
        emitVectorGather(rewriter, loc, dec, kvHeads);
    if (succeeded(vectorised)) {
      rewriter.replaceOp(op, *vectorised);
      return success();
    }
    SmallVector<OpFoldResult> sizes = {access.numTokens,
                                       rewriter.getIndexAttr(kvHeads),
                                       rewriter.getIndexAttr(width)};
    auto id3 = AffineMap::getMultiDimIdentityMap(3, ctx);

    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    if (spec.family == quant::FormatFamily::Haar) {
      inputs.push_back(haarRowFactors(rewriter, loc, dec, access, kvHeads));
      maps.push_back(projection(ctx, 3, {0, 1}));
    }
    if (spec.qjl) {
      // corr[t, kvh, j] = sum_i S[i, j] sign_i(t, kvh): loops (t, kvh, j, i).
      Value zeros = createFilledTensor(rewriter, loc, sizes,
                                       rewriter.getF32Type(),
                                       rewriter.getF32FloatAttr(0.0f));
      Value corr = createLoopNest(
          rewriter, loc, zeros, {qjlMatrix(rewriter, loc, spec)},
          {projection(ctx, 4, {3, 2})}, projection(ctx, 4, {0, 1, 2}), 4, 1,
          [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
              Value acc) {
            Value sign = dec.qjlSign(b, loc, idx[0], idx[1], idx[3]);
            return multiplyAdd(b, loc, acc, in[0], sign);
          });
      inputs.push_back(corr);
      maps.push_back(id3);
    }
    Value init =
        tensor::EmptyOp::create(rewriter, loc, sizes, rewriter.getF32Type());
    Value result = createLoopNest(
        rewriter, loc, init, inputs, maps, id3, 3, 0,
        [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
            Value) -> Value {
          Value value = dec.element(b, loc, idx[0], idx[1], idx[2]);
          if (spec.family == quant::FormatFamily::Haar)
            return arith::MulFOp::create(b, loc, value, in[0]);
          if (spec.qjl) {
            Value k = qjlRowWeight(b, loc, dec, idx[0], idx[1], idx[2]);
            return multiplyAdd(b, loc, value, k, in[0]);
          }
          return value;
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tq.score
//===----------------------------------------------------------------------===//

struct LowerScore : public OpConversionPattern<ScoreOp> {
  LowerScore(const TypeConverter &converter, MLIRContext *context,
             const TQToLoopsOptions &options)
      : OpConversionPattern(converter, context), options(options) {}
  TQToLoopsOptions options;
  LogicalResult
  matchAndRewrite(ScoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (op.getLookup() == LookupStrategy::tile) {
      // Each row decoded once, in registers, for the whole GQA group.
      // (The query's width is the padded one once tq.pad ran.)
      FailureOr<Value> fused = failure();
      if (op.getQuery().getType().getDimSize(2) ==
          op.getKeys().getType().getPaddedDim())
        fused = lowerTileInRegisters(rewriter, op, op.getQuery().getType(),
                                     op.getKeys(), adaptor.getKeys(),
                                     adaptor.getQuery(), options,
                                     [&](OpBuilder &b, Location loc,
                                         Value query, VectorRowDecoder &keys,
                                         int64_t kvHeads, int64_t group) {
                                       return emitFusedScore(
                                           b, loc, query, keys, kvHeads, group,
                                           options);
                                     });
      if (succeeded(fused)) {
        rewriter.replaceOp(op, *fused);
        return success();
      }
      // (Every format has a vector row decoder; a query of dynamic width
      // takes the element-wise lowering below.)
    }
    MLIRContext *ctx = rewriter.getContext();
    CacheType cacheType = op.getKeys().getType();
    FailureOr<GroupedCacheDecode> prepared =
        prepareGroupedDecode(rewriter, op, op.getQuery().getType(),
                             op.getKeys(), adaptor.getKeys());
    if (failed(prepared))
      return failure();
    const RowDecoder &dec = prepared->dec;
    const CacheAccess &access = dec.access();
    const int64_t group = prepared->group;
    Value groupConst = prepared->groupConst;
    Value q = adaptor.getQuery();
    const quant::FormatSpec &spec = dec.spec();
    const int64_t width = cacheType.getPaddedDim();
    const bool useLut = op.getLookup() == LookupStrategy::lut &&
                        dec.codebook() && spec.codebook;
    SmallVector<OpFoldResult> outSizes = {sizeOf(rewriter, loc, q, 0),
                                          sizeOf(rewriter, loc, q, 1),
                                          access.numTokens};
    AffineExpr i, h, t, d;
    bindDims(ctx, i, h, t, d);
    auto outMap = AffineMap::get(4, 0, {i, h, t}, ctx);

    // Per-query table lut[i, h, d, c] = q[i, h, d] * C[c].
    Value lut;
    if (useLut) {
      int64_t levels = int64_t(spec.codebook->centroids.size());
      SmallVector<OpFoldResult> lutSizes = {outSizes[0], outSizes[1],
                                            rewriter.getIndexAttr(width),
                                            rewriter.getIndexAttr(levels)};
      Value init = tensor::EmptyOp::create(rewriter, loc, lutSizes,
                                           rewriter.getF32Type());
      lut = createLoopNest(
          rewriter, loc, init, {q, dec.codebook()},
          {projection(ctx, 4, {0, 1, 2}), projection(ctx, 4, {3})},
          AffineMap::getMultiDimIdentityMap(4, ctx), 4, 0,
          [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value) {
            return arith::MulFOp::create(b, loc, in[0], in[1]).getResult();
          });
    }

    // base[i, h, t] = sum_d q[i, h, d] * element(t, h / g, d).
    Value zeros = createFilledTensor(rewriter, loc, outSizes,
                                     rewriter.getF32Type(),
                                     rewriter.getF32FloatAttr(0.0f));
    Value base = createLoopNest(
        rewriter, loc, zeros, {q}, {AffineMap::get(4, 0, {i, h, d}, ctx)},
        outMap, 4, 1,
        [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
            Value acc) -> Value {
          Value kvh = arith::DivUIOp::create(b, loc, idx[1], groupConst);
          if (!useLut)
            return multiplyAdd(b, loc, acc, in[0],
                               dec.element(b, loc, idx[2], kvh, idx[3]));
          // The table has a column per codebook entry: an index byte
          // beyond them (haar4) reads its entry mod the size, as lib/Quant.
          Value index = dec.codebookIndex(
              b, loc, dec.index(b, loc, idx[2], kvh, idx[3]));
          Value c = arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                                 index);
          Value entry = tensor::ExtractOp::create(
              b, loc, lut, ValueRange{idx[0], idx[1], idx[3], c});
          if (spec.family == quant::FormatFamily::Haar)
            return arith::AddFOp::create(b, loc, acc, entry);
          return multiplyAdd(b, loc, acc, entry,
                             dec.scale(b, loc, idx[2], kvh, idx[3]));
        });

    Value result = base;
    if (spec.family == quant::FormatFamily::Haar) {
      Value factors = haarRowFactors(rewriter, loc, dec, access,
                                     cacheType.getNumKvHeads());
      result = createLoopNest(
          rewriter, loc, zeros, {base, factors},
          {projection(ctx, 3, {0, 1, 2}),
           AffineMap::get(3, 0,
                          {getAffineDimExpr(2, ctx),
                           getAffineDimExpr(1, ctx).floorDiv(group)},
                          ctx)},
          projection(ctx, 3, {0, 1, 2}), 3, 0,
          [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value) {
            return arith::MulFOp::create(b, loc, in[0], in[1]).getResult();
          });
    }
    if (spec.qjl) {
      Value sq = projectQueriesByQjl(rewriter, loc, q, spec);
      // corr[i, h, t] = sum_r sq[i, h, r] * sign_r(t, h / g): (i, h, t, r).
      Value corr = createLoopNest(
          rewriter, loc, zeros, {sq}, {projection(ctx, 4, {0, 1, 3})},
          outMap, 4, 1,
          [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
              Value acc) {
            Value kvh = arith::DivUIOp::create(b, loc, idx[1], groupConst);
            return multiplyAdd(b, loc, acc, in[0],
                               dec.qjlSign(b, loc, idx[2], kvh, idx[3]));
          });
      result = createLoopNest(
          rewriter, loc, zeros, {result, corr},
          {projection(ctx, 3, {0, 1, 2}), projection(ctx, 3, {0, 1, 2})},
          projection(ctx, 3, {0, 1, 2}), 3, 0,
          [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
              Value) -> Value {
            Value kvh = arith::DivUIOp::create(b, loc, idx[1], groupConst);
            Value k =
                qjlRowWeight(b, loc, dec, idx[2], kvh, zeroIndex(b, loc));
            return multiplyAdd(b, loc, in[0], k, in[1]);
          });
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tq.accumulate
//===----------------------------------------------------------------------===//

struct LowerAccumulate : public OpConversionPattern<AccumulateOp> {
  LowerAccumulate(const TypeConverter &converter, MLIRContext *context,
                  const TQToLoopsOptions &options)
      : OpConversionPattern(converter, context), options(options) {}
  TQToLoopsOptions options;
  LogicalResult
  matchAndRewrite(AccumulateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (op.getLookup() == LookupStrategy::tile) {
      FailureOr<Value> fused = lowerTileInRegisters(
          rewriter, op, op.getProbs().getType(), op.getValues(),
          adaptor.getValues(), adaptor.getProbs(), options,
          [&](OpBuilder &b, Location loc, Value probs,
              VectorRowDecoder &values, int64_t kvHeads, int64_t group) {
            return emitFusedAccumulate(b, loc, probs, values, kvHeads, group,
                                       options);
          });
      if (succeeded(fused)) {
        rewriter.replaceOp(op, *fused);
        return success();
      }
    }
    MLIRContext *ctx = rewriter.getContext();
    CacheType cacheType = op.getValues().getType();
    FailureOr<GroupedCacheDecode> prepared =
        prepareGroupedDecode(rewriter, op, op.getProbs().getType(),
                             op.getValues(), adaptor.getValues());
    if (failed(prepared))
      return failure();
    const RowDecoder &dec = prepared->dec;
    const CacheAccess &access = dec.access();
    const int64_t group = prepared->group;
    Value groupConst = prepared->groupConst;
    Value p = adaptor.getProbs();
    const quant::FormatSpec &spec = dec.spec();
    const int64_t width = cacheType.getPaddedDim();
    SmallVector<OpFoldResult> outSizes = {sizeOf(rewriter, loc, p, 0),
                                          sizeOf(rewriter, loc, p, 1),
                                          rewriter.getIndexAttr(width)};
    Value zeros = createFilledTensor(rewriter, loc, outSizes,
                                     rewriter.getF32Type(),
                                     rewriter.getF32FloatAttr(0.0f));
    AffineExpr i, h, j, t;
    bindDims(ctx, i, h, j, t);
    auto outMap = AffineMap::get(4, 0, {i, h, j}, ctx);

    // Centroids are selected per element either way: a per-query table of
    // p * C would have to be rebuilt for every token.
    SmallVector<Value> inputs = {p};
    SmallVector<AffineMap> maps = {AffineMap::get(4, 0, {i, h, t}, ctx)};
    if (spec.family == quant::FormatFamily::Haar) {
      inputs.push_back(haarRowFactors(rewriter, loc, dec, access,
                                      cacheType.getNumKvHeads()));
      maps.push_back(AffineMap::get(4, 0, {t, h.floorDiv(group)}, ctx));
    }
    Value result = createLoopNest(
        rewriter, loc, zeros, inputs, maps, outMap, 4, 1,
        [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
            Value acc) {
          Value kvh = arith::DivUIOp::create(b, loc, idx[1], groupConst);
          Value value = dec.element(b, loc, idx[3], kvh, idx[2]);
          if (spec.family == quant::FormatFamily::Haar)
            value = arith::MulFOp::create(b, loc, value, in[1]);
          return multiplyAdd(b, loc, acc, in[0], value);
        });

    if (spec.qjl) {
      const unsigned m = spec.qjl->rows();
      // w[i, h, r] = sum_t p * scale * ||r|| * sign_r: loops (i, h, r, t).
      SmallVector<OpFoldResult> wSizes = {outSizes[0], outSizes[1],
                                          rewriter.getIndexAttr(m)};
      Value wZeros = createFilledTensor(rewriter, loc, wSizes,
                                        rewriter.getF32Type(),
                                        rewriter.getF32FloatAttr(0.0f));
      Value w = createLoopNest(
          rewriter, loc, wZeros, {p}, {AffineMap::get(4, 0, {i, h, t}, ctx)},
          outMap, 4, 1,
          [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange in,
              Value acc) {
            Value kvh = arith::DivUIOp::create(b, loc, idx[1], groupConst);
            Value norm = dec.scale(b, loc, idx[3], kvh, zeroIndex(b, loc));
            Value rnorm = dec.residualNorm(b, loc, idx[3], kvh);
            Value weight = arith::MulFOp::create(
                b, loc, in[0], arith::MulFOp::create(b, loc, norm, rnorm));
            return multiplyAdd(b, loc, acc, weight,
                               dec.qjlSign(b, loc, idx[3], kvh, idx[2]));
          });
      // out[i, h, j] += c * sum_r S[r, j] w[i, h, r]: loops (i, h, j, r).
      float c = qjlConstant(spec);
      result = createLoopNest(
          rewriter, loc, result, {w, qjlMatrix(rewriter, loc, spec)},
          {projection(ctx, 4, {0, 1, 3}), projection(ctx, 4, {3, 2})}, outMap,
          4, 1,
          [&](OpBuilder &b, Location loc, ValueRange, ValueRange in,
              Value acc) {
            Value term = arith::MulFOp::create(b, loc, in[0], in[1]);
            return multiplyAdd(b, loc, acc, term, f32Const(b, loc, c));
          });
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::tq::populateCacheLoweringPatterns(const TypeConverter &converter,
                                             RewritePatternSet &patterns,
                                             const TQToLoopsOptions &options) {
  patterns.add<LowerFromBytes, LowerFromPages, LowerToBytes, LowerGather>(
      converter, patterns.getContext());
  patterns.add<LowerScore, LowerAccumulate>(converter, patterns.getContext(),
                                            options);
}
