//===- VectorGather.cpp - Whole-row vector decode of packed rows ----------===//

#include "VectorGather.h"

#include "LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

namespace {

Value splatI32(OpBuilder &b, Location loc, VectorType type,
               ArrayRef<int32_t> v) {
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, ArrayRef<int32_t>(v)));
}

/// Centroid of every lane of `index` (vector<p x i32>, values below
/// centroids.size()) by a binary select tree: bit k of the index picks
/// between pairs of the previous level, so 2^bits - 1 selects need only
/// `bits` bit tests (instead of one compare per level). A codebook whose
/// size is not a power of two is padded with its last centroid (indices
/// never reach the padding).
Value selectCentroids(OpBuilder &b, Location loc,
                      const std::vector<float> &centroids, Value index,
                      int64_t p) {
  auto f32Vec = VectorType::get({p}, b.getF32Type());
  auto i32Vec = VectorType::get({p}, b.getI32Type());
  SmallVector<Value> level;
  for (float c : centroids)
    level.push_back(vector::BroadcastOp::create(
        b, loc, f32Vec,
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(c))));
  while (!llvm::isPowerOf2_64(level.size()))
    level.push_back(level.back());
  Value zero = splatI32(b, loc, i32Vec, SmallVector<int32_t>(p, 0));
  for (int32_t bit = 1; level.size() > 1; bit <<= 1) {
    Value masked = arith::AndIOp::create(
        b, loc, index, splatI32(b, loc, i32Vec, SmallVector<int32_t>(p, bit)));
    Value isSet =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, masked, zero);
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2)
      next.push_back(
          arith::SelectOp::create(b, loc, isSet, level[i + 1], level[i]));
    level = std::move(next);
  }
  return level.front();
}

} // namespace

FailureOr<Value> mlir::tq::emitVectorGather(OpBuilder &b, Location loc,
                                            const RowDecoder &decoder,
                                            int64_t kvHeads) {
  const quant::FormatSpec &spec = decoder.spec();
  const bool linear = spec.family == quant::FormatFamily::Q8_0 ||
                      spec.family == quant::FormatFamily::F16;
  switch (spec.family) {
  case quant::FormatFamily::Tq3:
  case quant::FormatFamily::Tq3Legacy:
  case quant::FormatFamily::Turbo:
  case quant::FormatFamily::Polar:
    if (!spec.codebook || spec.codebook->centroids.size() > 16 ||
        spec.scaleType != quant::ScalarType::F16)
      return failure();
    break;
  case quant::FormatFamily::Q8_0:
  case quant::FormatFamily::F16:
    break;
  default:
    return failure();
  }
  const int64_t p = spec.paddedDim, rowBytes = int64_t(spec.rowBytes());
  const int64_t blocks = spec.blocksPerRow();
  const CacheAccess &access = decoder.access();
  auto i8Row = VectorType::get({rowBytes}, b.getI8Type());
  auto i32Vec = VectorType::get({p}, b.getI32Type());
  auto f32Vec = VectorType::get({p}, b.getF32Type());

  // Constant per-lane byte positions and shifts of every plane.
  struct PlaneLanes {
    SmallVector<int64_t> bytes;
    SmallVector<int32_t> shifts;
    int32_t mask, indexShift;
  };
  SmallVector<PlaneLanes> planes;
  for (const quant::BitPlane &plane : spec.indexPlanes) {
    PlaneLanes lanes;
    lanes.mask = (1 << plane.bits) - 1;
    lanes.indexShift = int32_t(plane.shift);
    for (int64_t j = 0; j < p; ++j) {
      int64_t block = j / spec.blockLen, inBlock = j % spec.blockLen;
      int64_t bit = inBlock * plane.bits;
      lanes.bytes.push_back(block * spec.bytesPerBlock + plane.byteOffset +
                            bit / 8);
      lanes.shifts.push_back(int32_t(bit % 8));
    }
    planes.push_back(std::move(lanes));
  }
  // Which block each lane belongs to, for per-block scales.
  SmallVector<Value> blockMasks;
  if (blocks > 1 && spec.family != quant::FormatFamily::F16)
    for (int64_t blk = 1; blk < blocks; ++blk) {
      SmallVector<bool> m(p);
      for (int64_t j = 0; j < p; ++j)
        m[j] = j / spec.blockLen == blk;
      blockMasks.push_back(arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(VectorType::get({p}, b.getI1Type()),
                                 ArrayRef<bool>(m))));
    }

  // Per-block scales (precomputed), spread over their lanes.
  auto blockScales = [&](OpBuilder &b, Location loc, Value t,
                         Value h) -> Value {
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value scale = vector::BroadcastOp::create(b, loc, f32Vec,
                                              decoder.scale(b, loc, t, h, c0));
    for (int64_t blk = 1; blk < blocks; ++blk) {
      Value j = arith::ConstantIndexOp::create(b, loc, blk * spec.blockLen);
      Value s = vector::BroadcastOp::create(b, loc, f32Vec,
                                            decoder.scale(b, loc, t, h, j));
      scale = arith::SelectOp::create(b, loc, blockMasks[blk - 1], s, scale);
    }
    return scale;
  };

  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  SmallVector<OpFoldResult> sizes = {access.numTokens, b.getIndexAttr(kvHeads),
                                     b.getIndexAttr(p)};
  Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value heads = arith::ConstantIndexOp::create(b, loc, kvHeads);
  Value zeroByte = arith::ConstantIntOp::create(b, loc, b.getI8Type(), 0);

  auto rows = scf::ForOp::create(
      b, loc, c0, tokens, c1, ValueRange{init},
      [&](OpBuilder &b, Location loc, Value t, ValueRange outer) {
        auto perHead = scf::ForOp::create(
            b, loc, c0, heads, c1, ValueRange{outer[0]},
            [&](OpBuilder &b, Location loc, Value h, ValueRange inner) {
              auto [page, slot] = decoder.rowAddress(b, loc, t);
              Value row = vector::TransferReadOp::create(
                  b, loc, i8Row, access.pages, ValueRange{page, slot, h, c0},
                  zeroByte, ArrayRef<bool>{true});
              Value decoded;
              if (spec.family == quant::FormatFamily::F16) {
                // The row is p little-endian halves.
                Value halves = vector::BitCastOp::create(
                    b, loc, VectorType::get({p}, b.getF16Type()), row);
                decoded = arith::ExtFOp::create(b, loc, f32Vec, halves);
              } else if (spec.family == quant::FormatFamily::Q8_0) {
                // Lane j reads the int8 at its block's value offset.
                Value spread = vector::ShuffleOp::create(
                    b, loc, VectorType::get({p}, b.getI8Type()), row, row,
                    b.getDenseI64ArrayAttr(planes.front().bytes));
                decoded = arith::SIToFPOp::create(b, loc, f32Vec, spread);
              }
              if (linear) {
                if (spec.family == quant::FormatFamily::Q8_0)
                  decoded = arith::MulFOp::create(
                      b, loc, blockScales(b, loc, t, h), decoded);
                Value written = vector::TransferWriteOp::create(
                                    b, loc, decoded, inner[0],
                                    ValueRange{t, h, c0}, ArrayRef<bool>{true})
                                    .getResult();
                scf::YieldOp::create(b, loc, written);
                return;
              }
              Value index =
                  splatI32(b, loc, i32Vec, SmallVector<int32_t>(p, 0));
              for (const PlaneLanes &lanes : planes) {
                // One lane per value: the byte holding its bits.
                Value spread = vector::ShuffleOp::create(
                    b, loc, VectorType::get({p}, b.getI8Type()), row, row,
                    b.getDenseI64ArrayAttr(lanes.bytes));
                Value wide = arith::ExtUIOp::create(b, loc, i32Vec, spread);
                Value field = arith::ShRUIOp::create(
                    b, loc, wide, splatI32(b, loc, i32Vec, lanes.shifts));
                field = arith::AndIOp::create(
                    b, loc, field,
                    splatI32(b, loc, i32Vec,
                             SmallVector<int32_t>(p, lanes.mask)));
                if (lanes.indexShift)
                  field = arith::ShLIOp::create(
                      b, loc, field,
                      splatI32(b, loc, i32Vec,
                               SmallVector<int32_t>(p, lanes.indexShift)));
                index = arith::OrIOp::create(b, loc, index, field);
              }
              Value value =
                  selectCentroids(b, loc, spec.codebook->centroids, index, p);
              decoded = arith::MulFOp::create(b, loc, blockScales(b, loc, t, h),
                                              value);
              Value written = vector::TransferWriteOp::create(
                                  b, loc, decoded, inner[0],
                                  ValueRange{t, h, c0}, ArrayRef<bool>{true})
                                  .getResult();
              scf::YieldOp::create(b, loc, written);
            });
        scf::YieldOp::create(b, loc, perHead.getResult(0));
      });
  return rows.getResult(0);
}
