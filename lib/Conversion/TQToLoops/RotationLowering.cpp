//===- RotationLowering.cpp - Rotations as loop nests ---------------------===//

#include "RotationLowering.h"

#include "LoopBuilders.h"
#include "RowDecoding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

namespace {

/// out[.., j] = body(indices, j) over the shape of `like`.
Value elementwise(OpBuilder &b, Location loc, Value like, Type elementType,
                  function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  unsigned rank = cast<ShapedType>(like.getType()).getRank();
  Value init =
      tensor::EmptyOp::create(b, loc, sizesOf(b, loc, like), elementType);
  return createLoopNest(
      b, loc, init, {}, {},
      AffineMap::getMultiDimIdentityMap(rank, b.getContext()), rank, 0,
      [&](OpBuilder &nb, Location nloc, ValueRange idx, ValueRange, Value) {
        return body(nb, nloc, idx);
      });
}

/// Reads x[idx[0..r-2], j].
Value readAt(OpBuilder &b, Location loc, Value x, ValueRange idx, Value j) {
  SmallVector<Value> at(idx.drop_back());
  at.push_back(j);
  return tensor::ExtractOp::create(b, loc, x, at);
}

/// x[.., j] * signs[j mod n] (exact: the signs are +1/-1).
Value multiplySigns(OpBuilder &b, Location loc, Value x,
                    const std::vector<int8_t> &signs, unsigned dim) {
  if (signs.empty())
    return x;
  std::vector<float> full(dim);
  for (unsigned j = 0; j < dim; ++j)
    full[j] = float(signs[j % signs.size()]);
  Value table = createF32Matrix(b, loc, full, 0, dim);
  return elementwise(b, loc, x, b.getF32Type(),
                     [&](OpBuilder &b, Location loc, ValueRange idx) {
                       Value v = tensor::ExtractOp::create(b, loc, x, idx);
                       Value s = tensor::ExtractOp::create(
                           b, loc, table, ValueRange{idx.back()});
                       return arith::MulFOp::create(b, loc, v, s).getResult();
                     });
}

/// One butterfly stage of distance h: x[j] + x[j + h] where bit h of j is
/// clear, x[j - h] - x[j] where it is set (blocks are aligned powers of
/// two, so the bit test works on the global index).
Value butterflyStage(OpBuilder &b, Location loc, Value x, unsigned h) {
  return elementwise(
      b, loc, x, b.getF32Type(),
      [&](OpBuilder &b, Location loc, ValueRange idx) -> Value {
        Value j = idx.back();
        Value hv = arith::ConstantIndexOp::create(b, loc, h);
        Value bit = arith::AndIOp::create(b, loc, j, hv);
        Value low = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::eq, bit,
            arith::ConstantIndexOp::create(b, loc, 0));
        Value partner = arith::XOrIOp::create(b, loc, j, hv);
        Value mine = readAt(b, loc, x, idx, j);
        Value other = readAt(b, loc, x, idx, partner);
        Value sum = arith::AddFOp::create(b, loc, mine, other);
        Value diff = arith::SubFOp::create(b, loc, other, mine);
        return arith::SelectOp::create(b, loc, low, sum, diff);
      });
}

/// Lanes of the vector form of the Hadamard rotation.
constexpr int64_t kLanes = 16;

/// The Hadamard rotation of every row held as 16-lane vectors (the row's
/// length a multiple of 16): the sign flips and the scale as vector
/// multiplies, a butterfly stage of distance h < 16 as a lane shuffle
/// (partner l ^ h) and a select of the sum or the difference, one of
/// distance h >= 16 as adds and subtracts of whole vectors. Per element
/// the operations and their order are the scalar stages', so the bits
/// are the same; the scalar form is a select and two extracts per
/// element and stage.
Value hadamardVectors(OpBuilder &b, Location loc, Value x,
                      const quant::Rotation &r,
                      const std::vector<int8_t> &first,
                      const std::vector<int8_t> &second, float invSqrt) {
  const int64_t dim = r.dim(), vectors = dim / kLanes;
  auto f32s = VectorType::get({kLanes}, b.getF32Type());
  auto signsOf = [&](const std::vector<int8_t> &signs, int64_t k) -> Value {
    SmallVector<float> lanes;
    for (int64_t l = 0; l < kLanes; ++l)
      lanes.push_back(float(signs[(k * kLanes + l) % signs.size()]));
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(f32s, ArrayRef<float>(lanes)));
  };
  Value scale = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f32s, invSqrt));
  Value out = tensor::EmptyOp::create(b, loc, sizesOf(b, loc, x),
                                      b.getF32Type());
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  // A loop over every leading dim (all but the row's).
  SmallVector<Value> lbs, ubs, steps;
  for (unsigned d = 0; d + 1 < cast<ShapedType>(x.getType()).getRank(); ++d) {
    lbs.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    ubs.push_back(getValueOrCreateConstantIndexOp(b, loc, sizeOf(b, loc, x, d)));
    steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
  }
  return scf::buildLoopNest(
      b, loc, lbs, ubs, steps, ValueRange{out},
      [&](OpBuilder &b, Location loc, ValueRange row,
          ValueRange state) -> scf::ValueVector {
        Value out = state[0];
        auto at = [&](int64_t k) {
          SmallVector<Value> indices(row);
          indices.push_back(arith::ConstantIndexOp::create(b, loc, k * kLanes));
          return indices;
        };
        SmallVector<Value> v;
        for (int64_t k = 0; k < vectors; ++k) {
          Value read = vector::TransferReadOp::create(
              b, loc, f32s, x, at(k), zero, ArrayRef<bool>{true});
          v.push_back(first.empty() ? read
                                    : arith::MulFOp::create(
                                          b, loc, read, signsOf(first, k))
                                          .getResult());
        }
        for (int64_t h = 1; h < int64_t(r.blockSize()); h *= 2) {
          if (h < kLanes) {
            SmallVector<int64_t> partner;
            SmallVector<bool> low;
            for (int64_t l = 0; l < kLanes; ++l) {
              partner.push_back(l ^ h);
              low.push_back((l & h) == 0);
            }
            Value isLow = arith::ConstantOp::create(
                b, loc,
                DenseElementsAttr::get(
                    VectorType::get({kLanes}, b.getI1Type()),
                    ArrayRef<bool>(low)));
            for (Value &mine : v) {
              Value other =
                  vector::ShuffleOp::create(b, loc, mine, mine, partner);
              mine = arith::SelectOp::create(
                  b, loc, isLow, arith::AddFOp::create(b, loc, mine, other),
                  arith::SubFOp::create(b, loc, other, mine));
            }
            continue;
          }
          const int64_t apart = h / kLanes;
          for (int64_t k = 0; k < vectors; ++k) {
            if (k & apart)
              continue;
            Value lowHalf = v[k], highHalf = v[k + apart];
            v[k] = arith::AddFOp::create(b, loc, lowHalf, highHalf);
            v[k + apart] = arith::SubFOp::create(b, loc, lowHalf, highHalf);
          }
        }
        for (int64_t k = 0; k < vectors; ++k) {
          Value y = arith::MulFOp::create(b, loc, v[k], scale);
          if (!second.empty())
            y = arith::MulFOp::create(b, loc, y, signsOf(second, k));
          out = vector::TransferWriteOp::create(b, loc, y, out, at(k),
                                                ArrayRef<bool>{true})
                    .getResult();
        }
        return {out};
      })
      .results[0];
}

Value hadamard(OpBuilder &b, Location loc, Value x,
               const quant::Rotation &r, bool inverse, bool vectors) {
  const std::vector<int8_t> &first = inverse ? r.signs2() : r.signs1();
  const std::vector<int8_t> &second = inverse ? r.signs1() : r.signs2();
  const float invSqrt = float(1.0 / std::sqrt(double(r.blockSize())));
  if (vectors && r.dim() % kLanes == 0)
    return hadamardVectors(b, loc, x, r, first, second, invSqrt);
  x = multiplySigns(b, loc, x, first, r.dim());
  for (unsigned h = 1; h < r.blockSize(); h *= 2)
    x = butterflyStage(b, loc, x, h);
  Value scale = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(invSqrt));
  x = elementwise(b, loc, x, b.getF32Type(),
                  [&](OpBuilder &b, Location loc, ValueRange idx) {
                    Value v = tensor::ExtractOp::create(b, loc, x, idx);
                    return arith::MulFOp::create(b, loc, v, scale).getResult();
                  });
  return multiplySigns(b, loc, x, second, r.dim());
}

/// y[i] = sum_j M[i][j] x[j] in f64 (forward: M = Q^T; inverse: M = Q).
Value haar(OpBuilder &b, Location loc, Value x, const quant::Rotation &r,
           bool inverse) {
  const unsigned n = r.dim();
  const std::vector<double> &q = r.haarQ();
  std::vector<double> m(size_t(n) * n);
  for (unsigned i = 0; i < n; ++i)
    for (unsigned j = 0; j < n; ++j)
      m[size_t(i) * n + j] = inverse ? q[size_t(i) * n + j] : q[size_t(j) * n + i];
  auto matType = RankedTensorType::get({n, n}, b.getF64Type());
  Value mat = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(matType, ArrayRef<double>(m)));
  unsigned rank = cast<ShapedType>(x.getType()).getRank();
  Value zeros = createFilledTensor(b, loc, sizesOf(b, loc, x), b.getF64Type(),
                                   b.getF64FloatAttr(0.0));
  SmallVector<unsigned> xDims, outDims;
  for (unsigned i = 0; i + 1 < rank; ++i)
    xDims.push_back(i);
  xDims.push_back(rank);
  for (unsigned i = 0; i < rank; ++i)
    outDims.push_back(i);
  MLIRContext *ctx = b.getContext();
  Value acc = createLoopNest(
      b, loc, zeros, {x, mat},
      {projection(ctx, rank + 1, xDims),
       projection(ctx, rank + 1, {rank - 1, rank})},
      projection(ctx, rank + 1, outDims), rank + 1, 1,
      [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
        Value xv = arith::ExtFOp::create(b, loc, b.getF64Type(), in[0]);
        return arith::AddFOp::create(b, loc, acc,
                                     arith::MulFOp::create(b, loc, in[1], xv))
            .getResult();
      });
  return elementwise(b, loc, acc, b.getF32Type(),
                     [&](OpBuilder &b, Location loc, ValueRange idx) {
                       Value v = tensor::ExtractOp::create(b, loc, acc, idx);
                       return arith::TruncFOp::create(b, loc, b.getF32Type(),
                                                      v)
                           .getResult();
                     });
}

} // namespace

Value mlir::tq::emitRotation(OpBuilder &b, Location loc, Value input,
                             const quant::Rotation &rotation, bool inverse,
                             bool vectors) {
  switch (rotation.kind()) {
  case quant::RotationKind::Identity:
    return input;
  case quant::RotationKind::Hadamard:
  case quant::RotationKind::BlockHadamard:
    return hadamard(b, loc, input, rotation, inverse, vectors);
  case quant::RotationKind::Haar:
    return haar(b, loc, input, rotation, inverse);
  }
  return input;
}
