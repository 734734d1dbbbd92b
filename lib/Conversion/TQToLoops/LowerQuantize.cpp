//===- LowerQuantize.cpp - tq.quantize as loop nests ----------------------===//
//
// The encoder of every format, emitted as linalg nests that perform the
// library's arithmetic operation for operation (f32 where it uses float,
// f64 where it uses double, the same reduction orders, exact rotations), so
// the bytes equal Format::encodeRow's for finite inputs in the normal
// range. Three stages:
//   1. pad the rows to the padded dim;
//   2. per family: per-block scales, codebook indices (the count of
//      thresholds <= v, i.e. ties go up), and the extra fields (tqprod's
//      residual norm and QJL signs, tq3_0_legacy's residual signs);
//   3. pack: every output byte is assembled from the field that owns it.
// Not reproduced: the library's fall-backs for inputs whose squares
// overflow f32 (norms of ~1e19 and above) or whose WHT32 overflows.
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

#include <cfloat>

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

namespace {

Value idx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value i32(OpBuilder &b, Location loc, int32_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}

/// The encoder's intermediate tensors, each [tokens x kv_heads x ...].
struct Encoded {
  Value scale;      // [.., blocks] f32: the block scale (or norm)
  Value index;      // [.., padded] i32: codebook index / q8 value byte
  Value rnorm;      // [..] f32: tqprod residual norm (or null)
  Value qjl;        // [.., padded] i32: tqprod sign bits (or null)
  Value residual;   // [.., padded] i32: tq3_0_legacy residual signs
  Value halfBits;   // [.., padded] i32: f16 values (f16 format only)
};

class Encoder {
public:
  Encoder(OpBuilder &b, Location loc, const quant::FormatSpec &spec,
          OpFoldResult tokens, int64_t kvHeads, bool vectorRotations)
      : b(b), loc(loc), spec(spec), ctx(b.getContext()),
        vectorRotations(vectorRotations) {
    rowSizes = {tokens, b.getIndexAttr(kvHeads)};
  }

  /// tensor<tokens x kv_heads x n x type>.
  SmallVector<OpFoldResult> sizes(int64_t n) const {
    SmallVector<OpFoldResult> s(rowSizes);
    s.push_back(b.getIndexAttr(n));
    return s;
  }

  /// out[t, h, j] = body(t, h, j).
  Value map3(int64_t n, Type type,
             function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
    Value init = tensor::EmptyOp::create(b, loc, sizes(n), type);
    return createLoopNest(
        b, loc, init, {}, {}, AffineMap::getMultiDimIdentityMap(3, ctx), 3, 0,
        [&](OpBuilder &nb, Location nloc, ValueRange i, ValueRange, Value) {
          return body(nb, nloc, i);
        });
  }

  /// out[t, h, g] = fold over e < width of combine(acc, elem(t, h, g, e)),
  /// sequential in e, starting from `init` (f32 or f64).
  Value reduceGroups(int64_t groups, int64_t width, TypedAttr init,
                     function_ref<Value(OpBuilder &, Location, ValueRange,
                                        Value)>
                         combine) {
    Value zeros = createFilledTensor(b, loc, sizes(groups), init.getType(),
                                     init);
    Value domain = tensor::EmptyOp::create(
        b, loc, ArrayRef<int64_t>{width}, b.getF32Type());
    return createLoopNest(
        b, loc, zeros, {domain}, {projection(ctx, 4, {3})},
        projection(ctx, 4, {0, 1, 2}), 4, 1,
        [&](OpBuilder &nb, Location nloc, ValueRange i, ValueRange,
            Value acc) { return combine(nb, nloc, i, acc); });
  }

  Value at(OpBuilder &b, Location loc, Value t, ValueRange i, Value j) {
    return tensor::ExtractOp::create(b, loc, t, ValueRange{i[0], i[1], j});
  }

  /// Element index g * width + e.
  Value element(OpBuilder &b, Location loc, ValueRange i, int64_t width) {
    return arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, i[2], idx(b, loc, width)),
        i[3]);
  }

  /// Codebook index: the number of thresholds <= v.
  Value quantize(OpBuilder &b, Location loc, Value v) {
    Value count = i32(b, loc, 0);
    for (float t : spec.codebook->thresholds) {
      Value ge = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, v,
                                       f32Const(b, loc, t));
      count = arith::AddIOp::create(
          b, loc, count, arith::ExtUIOp::create(b, loc, b.getI32Type(), ge));
    }
    return count;
  }

  Value centroid(OpBuilder &b, Location loc, Value index) {
    if (!codebookTable)
      codebookTable =
          createF32Matrix(this->b, this->loc, spec.codebook->centroids, 0,
                          int64_t(spec.codebook->centroids.size()));
    return tensor::ExtractOp::create(
        b, loc, codebookTable,
        ValueRange{arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                                index)});
  }

  /// Sequential f32 sum of squares per group of `width`.
  Value sumOfSquares(Value x, int64_t groups, int64_t width) {
    return reduceGroups(groups, width, b.getF32FloatAttr(0.0f),
                        [&](OpBuilder &b, Location loc, ValueRange i,
                            Value acc) {
                          Value v = at(b, loc, x, i, element(b, loc, i, width));
                          return arith::AddFOp::create(
                                     b, loc, acc,
                                     arith::MulFOp::create(b, loc, v, v))
                              .getResult();
                        });
  }

  Encoded tq3(Value x);
  Encoded turbo(Value x);
  Encoded polar(Value x);
  Encoded haar(Value x);
  Encoded q8(Value x);
  Encoded f16(Value x);

  OpBuilder &b;
  Location loc;
  const quant::FormatSpec &spec;
  MLIRContext *ctx;
  SmallVector<OpFoldResult> rowSizes;
  Value codebookTable;
  /// emitRotation's `vectors` (TQToLoopsOptions::vectorRotations).
  bool vectorRotations;

  /// The format's forward rotation of x.
  Value rotated(Value x) {
    return emitRotation(b, loc, x, *spec.rotation, /*inverse=*/false,
                        vectorRotations);
  }
};

Encoded Encoder::tq3(Value x) {
  const int64_t block = spec.blockLen, blocks = spec.blocksPerRow();
  const float cmax = spec.codebook->centroids.back();
  Value rot = rotated(x);
  Value amax = reduceGroups(
      blocks, block, b.getF32FloatAttr(0.0f),
      [&](OpBuilder &b, Location loc, ValueRange i, Value acc) {
        Value v = at(b, loc, rot, i, element(b, loc, i, block));
        return arith::MaximumFOp::create(b, loc, acc,
                                         math::AbsFOp::create(b, loc, v))
            .getResult();
      });
  Encoded e;
  e.scale = map3(blocks, b.getF32Type(), [&](OpBuilder &b, Location loc,
                                             ValueRange i) -> Value {
    Value a = tensor::ExtractOp::create(b, loc, amax, i);
    return arith::DivFOp::create(b, loc, a, f32Const(b, loc, cmax));
  });
  auto blockOf = [&](OpBuilder &b, Location loc, ValueRange i) {
    return arith::DivUIOp::create(b, loc, i[2], idx(b, loc, block));
  };
  auto scaleOf = [&](OpBuilder &b, Location loc, ValueRange i) {
    return at(b, loc, e.scale, i, blockOf(b, loc, i));
  };
  e.index = map3(spec.paddedDim, b.getI32Type(),
                 [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                   Value d = scaleOf(b, loc, i);
                   Value positive = arith::CmpFOp::create(
                       b, loc, arith::CmpFPredicate::OGT, d,
                       f32Const(b, loc, 0.0f));
                   Value id = arith::SelectOp::create(
                       b, loc, positive,
                       arith::DivFOp::create(b, loc, f32Const(b, loc, 1.0f), d),
                       f32Const(b, loc, 0.0f));
                   Value v = tensor::ExtractOp::create(b, loc, rot, i);
                   return quantize(b, loc, arith::MulFOp::create(b, loc, v, id));
                 });
  if (spec.residualSignPlane)
    e.residual = map3(spec.paddedDim, b.getI32Type(),
                      [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                        Value c = centroid(
                            b, loc, tensor::ExtractOp::create(b, loc, e.index, i));
                        Value d = scaleOf(b, loc, i);
                        Value r = arith::SubFOp::create(
                            b, loc, tensor::ExtractOp::create(b, loc, rot, i),
                            arith::MulFOp::create(b, loc, d, c));
                        Value ge = arith::CmpFOp::create(
                            b, loc, arith::CmpFPredicate::OGE, r,
                            f32Const(b, loc, 0.0f));
                        return arith::ExtUIOp::create(b, loc, b.getI32Type(),
                                                      ge);
                      });
  return e;
}

Encoded Encoder::turbo(Value x) {
  const int64_t group = spec.blockLen, groups = spec.blocksPerRow();
  Value norms = sumOfSquares(x, groups, group);
  norms = map3(groups, b.getF32Type(),
               [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                 return math::SqrtOp::create(
                     b, loc, tensor::ExtractOp::create(b, loc, norms, i));
               });
  // Normalise before rotating: x * (n > 1e-10 ? 1/n : 0).
  Value y = map3(spec.paddedDim, b.getF32Type(),
                 [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                   Value g = arith::DivUIOp::create(b, loc, i[2],
                                                    idx(b, loc, group));
                   Value n = at(b, loc, norms, i, g);
                   Value big = arith::CmpFOp::create(
                       b, loc, arith::CmpFPredicate::OGT, n,
                       f32Const(b, loc, 1e-10f));
                   Value inv = arith::SelectOp::create(
                       b, loc, big,
                       arith::DivFOp::create(b, loc, f32Const(b, loc, 1.0f), n),
                       f32Const(b, loc, 0.0f));
                   return arith::MulFOp::create(
                       b, loc, tensor::ExtractOp::create(b, loc, x, i), inv);
                 });
  Value rot = rotated(y);
  Encoded e;
  e.index = map3(spec.paddedDim, b.getI32Type(),
                 [&](OpBuilder &b, Location loc, ValueRange i) {
                   return quantize(b, loc,
                                   tensor::ExtractOp::create(b, loc, rot, i));
                 });
  Value reconSq = reduceGroups(
      groups, group, b.getF32FloatAttr(0.0f),
      [&](OpBuilder &b, Location loc, ValueRange i, Value acc) {
        Value c =
            centroid(b, loc, at(b, loc, e.index, i, element(b, loc, i, group)));
        return arith::AddFOp::create(b, loc, acc,
                                     arith::MulFOp::create(b, loc, c, c))
            .getResult();
      });
  e.scale = map3(groups, b.getF32Type(),
                 [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                   Value n = tensor::ExtractOp::create(b, loc, norms, i);
                   Value r = math::SqrtOp::create(
                       b, loc, tensor::ExtractOp::create(b, loc, reconSq, i));
                   Value big = arith::CmpFOp::create(
                       b, loc, arith::CmpFPredicate::OGT, r,
                       f32Const(b, loc, 1e-10f));
                   return arith::SelectOp::create(
                       b, loc, big, arith::DivFOp::create(b, loc, n, r), n);
                 });
  return e;
}

/// The unit vector float(double(x) / ||x||) with ||x|| = sqrt(double(f32
/// sum of squares)), and the norm as f64 [.., 1].
std::pair<Value, Value> normalise(Encoder &enc, Value x) {
  OpBuilder &b = enc.b;
  const int64_t n = enc.spec.paddedDim;
  Value sumSq = enc.sumOfSquares(x, 1, n);
  Value norm = enc.map3(1, b.getF64Type(),
                        [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                          Value s = tensor::ExtractOp::create(b, loc, sumSq, i);
                          return math::SqrtOp::create(
                              b, loc,
                              arith::ExtFOp::create(b, loc, b.getF64Type(), s));
                        });
  Value unit = enc.map3(
      n, b.getF32Type(), [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
        Value nn = enc.at(b, loc, norm, i, idx(b, loc, 0));
        Value xv = tensor::ExtractOp::create(b, loc, x, i);
        Value v = arith::ExtFOp::create(b, loc, b.getF64Type(), xv);
        Value q = arith::TruncFOp::create(b, loc, b.getF32Type(),
                                          arith::DivFOp::create(b, loc, v, nn));
        Value positive = arith::CmpFOp::create(
            b, loc, arith::CmpFPredicate::OGT, nn,
            arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0)));
        return arith::SelectOp::create(b, loc, positive, q,
                                       f32Const(b, loc, 0.0f));
      });
  return {unit, norm};
}

/// min(norm, limit) rounded to f32, [.., 1].
Value clampedNorm(Encoder &enc, Value norm, double limit) {
  return enc.map3(1, enc.b.getF32Type(),
                  [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                    Value n = tensor::ExtractOp::create(b, loc, norm, i);
                    Value m = arith::MinimumFOp::create(
                        b, loc, n,
                        arith::ConstantOp::create(b, loc,
                                                  b.getF64FloatAttr(limit)));
                    return arith::TruncFOp::create(b, loc, b.getF32Type(), m);
                  });
}

Encoded Encoder::polar(Value x) {
  const int64_t n = spec.paddedDim;
  auto [unit, norm] = normalise(*this, x);
  Value rot = rotated(unit);
  Encoded e;
  e.index = map3(n, b.getI32Type(), [&](OpBuilder &b, Location loc,
                                        ValueRange i) {
    return quantize(b, loc, tensor::ExtractOp::create(b, loc, rot, i));
  });
  e.scale = clampedNorm(*this, norm, 3.0e38);
  if (!spec.qjl)
    return e;
  // r = y - C[idx]; ||r|| and sign(S r) in f64, as QjlProjection does.
  Value residual = map3(n, b.getF32Type(), [&](OpBuilder &b, Location loc,
                                               ValueRange i) -> Value {
    Value c = centroid(b, loc, tensor::ExtractOp::create(b, loc, e.index, i));
    return arith::SubFOp::create(b, loc,
                                 tensor::ExtractOp::create(b, loc, rot, i), c);
  });
  auto f64 = [](OpBuilder &b, Location loc, Value v) {
    return arith::ExtFOp::create(b, loc, b.getF64Type(), v).getResult();
  };
  Value rnormSq = reduceGroups(
      1, n, b.getF64FloatAttr(0.0),
      [&](OpBuilder &b, Location loc, ValueRange i, Value acc) {
        Value r = f64(b, loc, at(b, loc, residual, i, i[3]));
        return arith::AddFOp::create(b, loc, acc,
                                     arith::MulFOp::create(b, loc, r, r))
            .getResult();
      });
  e.rnorm = map3(1, b.getF32Type(), [&](OpBuilder &b, Location loc,
                                        ValueRange i) -> Value {
    Value s = tensor::ExtractOp::create(b, loc, rnormSq, i);
    return arith::TruncFOp::create(b, loc, b.getF32Type(),
                                   math::SqrtOp::create(b, loc, s));
  });
  const unsigned m = spec.qjl->rows();
  Value s = createF32Matrix(b, loc, spec.qjl->matrix(), m, n);
  // dots[t, h, row] = sum_j double(S[row][j]) * double(r[j]): loops
  // (t, h, row, j).
  Value zeros = createFilledTensor(b, loc, sizes(m), b.getF64Type(),
                                   b.getF64FloatAttr(0.0));
  Value dots = createLoopNest(
      b, loc, zeros, {residual, s},
      {projection(ctx, 4, {0, 1, 3}), projection(ctx, 4, {2, 3})},
      projection(ctx, 4, {0, 1, 2}), 4, 1,
      [&](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
        return arith::AddFOp::create(
                   b, loc, acc,
                   arith::MulFOp::create(b, loc, f64(b, loc, in[1]),
                                         f64(b, loc, in[0])))
            .getResult();
      });
  e.qjl = map3(m, b.getI32Type(), [&](OpBuilder &b, Location loc,
                                      ValueRange i) -> Value {
    Value ge = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::OGE,
        tensor::ExtractOp::create(b, loc, dots, i),
        arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0)));
    return arith::ExtUIOp::create(b, loc, b.getI32Type(), ge);
  });
  return e;
}

Encoded Encoder::haar(Value x) {
  auto [unit, norm] = normalise(*this, x);
  Value rot = rotated(unit);
  Encoded e;
  e.index = map3(spec.paddedDim, b.getI32Type(),
                 [&](OpBuilder &b, Location loc, ValueRange i) {
                   return quantize(b, loc,
                                   tensor::ExtractOp::create(b, loc, rot, i));
                 });
  e.scale = clampedNorm(*this, norm, double(FLT_MAX));
  return e;
}

Encoded Encoder::q8(Value x) {
  const int64_t block = spec.blockLen, blocks = spec.blocksPerRow();
  Value amax = reduceGroups(
      blocks, block, b.getF32FloatAttr(0.0f),
      [&](OpBuilder &b, Location loc, ValueRange i, Value acc) {
        Value v = at(b, loc, x, i, element(b, loc, i, block));
        return arith::MaximumFOp::create(b, loc, acc,
                                         math::AbsFOp::create(b, loc, v))
            .getResult();
      });
  Encoded e;
  e.scale = map3(blocks, b.getF32Type(),
                 [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                   return arith::DivFOp::create(
                       b, loc, tensor::ExtractOp::create(b, loc, amax, i),
                       f32Const(b, loc, 127.0f));
                 });
  e.index = map3(spec.paddedDim, b.getI32Type(),
                 [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                   Value blk = arith::DivUIOp::create(b, loc, i[2],
                                                      idx(b, loc, block));
                   Value d = at(b, loc, e.scale, i, blk);
                   Value nonzero = arith::CmpFOp::create(
                       b, loc, arith::CmpFPredicate::UNE, d,
                       f32Const(b, loc, 0.0f));
                   Value id = arith::SelectOp::create(
                       b, loc, nonzero,
                       arith::DivFOp::create(b, loc, f32Const(b, loc, 1.0f), d),
                       f32Const(b, loc, 0.0f));
                   Value v = arith::MulFOp::create(
                       b, loc, tensor::ExtractOp::create(b, loc, x, i), id);
                   Value r = math::RoundOp::create(b, loc, v);
                   Value q = arith::FPToSIOp::create(b, loc, b.getI32Type(), r);
                   return arith::AndIOp::create(b, loc, q, i32(b, loc, 0xff));
                 });
  return e;
}

/// IEEE half bits of v as i32, saturating finite overflow to +-65504.
Value halfBits(OpBuilder &b, Location loc, Value v, bool saturate) {
  Value h = arith::TruncFOp::create(b, loc, b.getF16Type(), v);
  Value bits = arith::ExtUIOp::create(
      b, loc, b.getI32Type(),
      arith::BitcastOp::create(b, loc, b.getI16Type(), h));
  if (!saturate)
    return bits;
  Value magnitude = arith::AndIOp::create(b, loc, bits, i32(b, loc, 0x7fff));
  Value isInf = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      magnitude, i32(b, loc, 0x7c00));
  Value sign = arith::AndIOp::create(b, loc, bits, i32(b, loc, 0x8000));
  Value largest = arith::OrIOp::create(b, loc, sign, i32(b, loc, 0x7bff));
  return arith::SelectOp::create(b, loc, isInf, largest, bits);
}

Encoded Encoder::f16(Value x) {
  Encoded e;
  e.halfBits = map3(spec.paddedDim, b.getI32Type(),
                    [&](OpBuilder &b, Location loc, ValueRange i) {
                      return halfBits(
                          b, loc, tensor::ExtractOp::create(b, loc, x, i),
                          /*saturate=*/true);
                    });
  return e;
}

/// Byte k (0 = least significant) of a 32-bit word.
Value byteOf(OpBuilder &b, Location loc, Value word, Value k) {
  Value shift = arith::MulIOp::create(
      b, loc, arith::IndexCastUIOp::create(b, loc, b.getI32Type(), k),
      i32(b, loc, 8));
  return arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, word, shift), i32(b, loc, 0xff));
}

/// Stage 3: out[t, h, byte] from the encoded fields.
Value pack(Encoder &enc, const Encoded &e) {
  OpBuilder &b = enc.b;
  const quant::FormatSpec &spec = enc.spec;
  const int64_t rowBytes = int64_t(spec.rowBytes());
  return enc.map3(rowBytes, b.getI8Type(), [&](OpBuilder &b, Location loc,
                                               ValueRange i) -> Value {
    Value byte = i[2];
    if (e.halfBits) {
      Value j = arith::DivUIOp::create(b, loc, byte, idx(b, loc, 2));
      Value k = arith::RemUIOp::create(b, loc, byte, idx(b, loc, 2));
      Value v = byteOf(b, loc, enc.at(b, loc, e.halfBits, i, j), k);
      return arith::TruncIOp::create(b, loc, b.getI8Type(), v);
    }
    Value block =
        arith::DivUIOp::create(b, loc, byte, idx(b, loc, spec.bytesPerBlock));
    Value off =
        arith::RemUIOp::create(b, loc, byte, idx(b, loc, spec.bytesPerBlock));
    Value result = i32(b, loc, 0);
    // Selects the field's byte where off lies in [start, start + size).
    auto field = [&](int64_t start, int64_t size,
                     function_ref<Value(Value)> value) {
      Value lo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, off,
                                       idx(b, loc, start));
      Value hi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, off,
                                       idx(b, loc, start + size));
      Value in = arith::AndIOp::create(b, loc, lo, hi);
      // Clamp so reads for other fields stay in bounds.
      Value k = arith::SubIOp::create(
          b, loc,
          arith::MinUIOp::create(
              b, loc, arith::MaxUIOp::create(b, loc, off, idx(b, loc, start)),
              idx(b, loc, start + size - 1)),
          idx(b, loc, start));
      result = arith::SelectOp::create(b, loc, in, value(k), result);
    };
    // The block scale.
    bool f32Scale = spec.scaleType == quant::ScalarType::F32;
    field(spec.scaleOffset, f32Scale ? 4 : 2, [&](Value k) {
      Value s = enc.at(b, loc, e.scale, i, block);
      Value bits = f32Scale ? arith::BitcastOp::create(b, loc, b.getI32Type(), s)
                                  .getResult()
                            : halfBits(b, loc, s, /*saturate=*/true);
      return byteOf(b, loc, bits, k);
    });
    if (e.rnorm)
      field(*spec.residualNormOffset, 2, [&](Value k) {
        Value r = enc.at(b, loc, e.rnorm, i, idx(b, loc, 0));
        return byteOf(b, loc, halfBits(b, loc, r, /*saturate=*/false), k);
      });
    // Bit planes: byte k of a plane holds elements k * per .. + per - 1.
    auto plane = [&](const quant::BitPlane &p, Value bits, unsigned shift) {
      const int64_t per = 8 / p.bits;
      const int64_t elems = spec.blockLen;
      field(p.byteOffset, elems / per, [&](Value k) -> Value {
        Value packed = i32(b, loc, 0);
        Value base = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, block, idx(b, loc, elems)),
            arith::MulIOp::create(b, loc, k, idx(b, loc, per)));
        for (int64_t el = 0; el < per; ++el) {
          Value j = arith::AddIOp::create(b, loc, base, idx(b, loc, el));
          Value v = enc.at(b, loc, bits, i, j);
          v = arith::ShRUIOp::create(b, loc, v, i32(b, loc, int32_t(shift)));
          v = arith::AndIOp::create(b, loc, v,
                                    i32(b, loc, (1 << p.bits) - 1));
          v = arith::ShLIOp::create(b, loc, v,
                                    i32(b, loc, int32_t(el * p.bits)));
          packed = arith::OrIOp::create(b, loc, packed, v);
        }
        return packed;
      });
    };
    for (const quant::BitPlane &p : spec.indexPlanes)
      plane(p, e.index, p.shift);
    if (e.qjl)
      plane(*spec.qjlPlane, e.qjl, 0);
    if (e.residual)
      plane(*spec.residualSignPlane, e.residual, 0);
    return arith::TruncIOp::create(b, loc, b.getI8Type(), result);
  });
}

struct LowerQuantize : public OpConversionPattern<QuantizeOp> {
  LowerQuantize(const TypeConverter &converter, MLIRContext *context,
                bool vectorRotations)
      : OpConversionPattern(converter, context),
        vectorRotations(vectorRotations) {}
  LogicalResult
  matchAndRewrite(QuantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    CacheType cacheType = op.getCache().getType();
    quant::Format format = cacheType.getQuantFormat();
    const quant::FormatSpec &spec = format.spec();
    Value input = adaptor.getInput();
    Encoder enc(rewriter, loc, spec, sizeOf(rewriter, loc, input, 0),
                cacheType.getNumKvHeads(), vectorRotations);
    // 1. Zero-pad to the padded dim.
    const int64_t d = cacheType.getHeadDim();
    Value x = enc.map3(spec.paddedDim, rewriter.getF32Type(),
                       [&](OpBuilder &b, Location loc, ValueRange i) -> Value {
                         Value inside = arith::CmpIOp::create(
                             b, loc, arith::CmpIPredicate::ult, i[2],
                             idx(b, loc, d));
                         Value j = arith::MinUIOp::create(b, loc, i[2],
                                                          idx(b, loc, d - 1));
                         Value v = enc.at(b, loc, input, i, j);
                         return arith::SelectOp::create(b, loc, inside, v,
                                                        f32Const(b, loc, 0.0f));
                       });
    // 2. Fields.
    Encoded e;
    switch (spec.family) {
    case quant::FormatFamily::Tq3:
    case quant::FormatFamily::Tq3Legacy:
      e = enc.tq3(x);
      break;
    case quant::FormatFamily::Turbo:
      e = enc.turbo(x);
      break;
    case quant::FormatFamily::Polar:
    case quant::FormatFamily::TqProd:
      e = enc.polar(x);
      break;
    case quant::FormatFamily::Haar:
      e = enc.haar(x);
      break;
    case quant::FormatFamily::Q8_0:
      e = enc.q8(x);
      break;
    case quant::FormatFamily::F16:
      e = enc.f16(x);
      break;
    }
    // 3. Bytes, as a pool of one page.
    Value bytes = pack(enc, e);
    rewriter.replaceOp(op, createSinglePagePool(
                               rewriter, loc, bytes,
                               getTypeConverter()->convertType(op.getType())));
    return success();
  }

  bool vectorRotations;
};

} // namespace

void mlir::tq::populateQuantizeLoweringPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns,
    const TQToLoopsOptions &options) {
  patterns.add<LowerQuantize>(converter, patterns.getContext(),
                              options.vectorRotations);
}
