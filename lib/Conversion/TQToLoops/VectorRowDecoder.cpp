//===- VectorRowDecoder.cpp - Vector decode of packed rows ----------------===//

#include "VectorRowDecoder.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

namespace {

Value constI32Vector(OpBuilder &b, Location loc, ArrayRef<int32_t> v) {
  auto type = VectorType::get({int64_t(v.size())}, b.getI32Type());
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, v));
}

Value splatI32(OpBuilder &b, Location loc, int64_t lanes, int32_t v) {
  return constI32Vector(b, loc, SmallVector<int32_t>(lanes, v));
}

/// Lanes [first, first + count) of a lane table.
template <typename T>
SmallVector<T> lanesOf(ArrayRef<T> table, int64_t first, int64_t count) {
  return SmallVector<T>(table.slice(first, count));
}

} // namespace

VectorRowDecoder::VectorRowDecoder(const RowDecoder &decoder)
    : decoder_(&decoder) {
  const quant::FormatSpec &spec = decoder.spec();
  width_ = spec.paddedDim;
  rowBytes_ = int64_t(spec.rowBytes());
  for (const quant::BitPlane &plane : spec.indexPlanes) {
    PlaneLanes lanes;
    lanes.mask = (1 << plane.bits) - 1;
    lanes.indexShift = int32_t(plane.shift);
    for (int64_t j = 0; j < width_; ++j) {
      int64_t block = j / spec.blockLen, inBlock = j % spec.blockLen;
      int64_t bit = inBlock * plane.bits;
      lanes.bytes.push_back(block * spec.bytesPerBlock + plane.byteOffset +
                            bit / 8);
      lanes.shifts.push_back(int32_t(bit % 8));
    }
    planes_.push_back(std::move(lanes));
  }
}

bool VectorRowDecoder::supports(const quant::FormatSpec &spec) {
  switch (spec.family) {
  case quant::FormatFamily::Tq3:
  case quant::FormatFamily::Tq3Legacy:
  case quant::FormatFamily::Turbo:
  case quant::FormatFamily::Polar:
    return spec.codebook && spec.codebook->centroids.size() <= 16 &&
           spec.scaleType == quant::ScalarType::F16;
  case quant::FormatFamily::Q8_0:
  case quant::FormatFamily::F16:
    return true;
  default:
    return false;
  }
}

FailureOr<VectorRowDecoder> VectorRowDecoder::get(const RowDecoder &decoder) {
  if (!supports(decoder.spec()))
    return failure();
  return VectorRowDecoder(decoder);
}

Value VectorRowDecoder::loadRow(OpBuilder &b, Location loc, Value t,
                                Value kvHead) const {
  auto [page, slot] = decoder_->rowAddress(b, loc, t);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value zeroByte = arith::ConstantIntOp::create(b, loc, b.getI8Type(), 0);
  return vector::TransferReadOp::create(
      b, loc, VectorType::get({rowBytes_}, b.getI8Type()),
      decoder_->access().pages, ValueRange{page, slot, kvHead, c0}, zeroByte,
      ArrayRef<bool>{true});
}

Value VectorRowDecoder::stageRows(OpBuilder &b, Location loc,
                                  int64_t kvHeads) const {
  const CacheAccess &access = decoder_->access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{access.numTokens, b.getIndexAttr(kvHeads),
                                b.getIndexAttr(rowBytes_)},
      b.getI8Type());
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value heads = arith::ConstantIndexOp::create(b, loc, kvHeads);
  auto loop = scf::ForOp::create(
      b, loc, c0, tokens, c1, ValueRange{init},
      [&](OpBuilder &b, Location loc, Value t, ValueRange outer) {
        auto perHead = scf::ForOp::create(
            b, loc, c0, heads, c1, ValueRange{outer[0]},
            [&](OpBuilder &b, Location loc, Value h, ValueRange inner) {
              Value row = loadRow(b, loc, t, h);
              Value written = vector::TransferWriteOp::create(
                                  b, loc, row, inner[0], ValueRange{t, h, c0},
                                  ArrayRef<bool>{true})
                                  .getResult();
              scf::YieldOp::create(b, loc, written);
            });
        scf::YieldOp::create(b, loc, perHead.getResult(0));
      });
  return loop.getResult(0);
}

Value VectorRowDecoder::loadStagedRow(OpBuilder &b, Location loc, Value staged,
                                      Value t, Value kvHead) const {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value zeroByte = arith::ConstantIntOp::create(b, loc, b.getI8Type(), 0);
  return vector::TransferReadOp::create(
      b, loc, VectorType::get({rowBytes_}, b.getI8Type()), staged,
      ValueRange{t, kvHead, c0}, zeroByte, ArrayRef<bool>{true});
}

Value VectorRowDecoder::blockScales(OpBuilder &b, Location loc, Value t,
                                    Value kvHead, int64_t first,
                                    int64_t count) const {
  const int64_t blockLen = decoder_->spec().blockLen;
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  auto scaleOf = [&](int64_t block) -> Value {
    Value j = arith::ConstantIndexOp::create(b, loc, block * blockLen);
    return vector::BroadcastOp::create(b, loc, f32Vec,
                                       decoder_->scale(b, loc, t, kvHead, j));
  };
  const int64_t firstBlock = first / blockLen;
  const int64_t lastBlock = (first + count - 1) / blockLen;
  Value scale = scaleOf(firstBlock);
  // Lanes of later blocks take their own scale.
  for (int64_t blk = firstBlock + 1; blk <= lastBlock; ++blk) {
    SmallVector<bool> inBlock(count);
    for (int64_t j = 0; j < count; ++j)
      inBlock[j] = (first + j) / blockLen == blk;
    Value mask = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(VectorType::get({count}, b.getI1Type()),
                               ArrayRef<bool>(inBlock)));
    scale = arith::SelectOp::create(b, loc, mask, scaleOf(blk), scale);
  }
  return scale;
}

Value VectorRowDecoder::decode(OpBuilder &b, Location loc, Value row, Value t,
                               Value kvHead, int64_t first,
                               int64_t count) const {
  const quant::FormatSpec &spec = decoder_->spec();
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  auto i32Vec = VectorType::get({count}, b.getI32Type());
  auto i8Lanes = VectorType::get({count}, b.getI8Type());
  if (spec.family == quant::FormatFamily::F16) {
    // The row is `width` little-endian halves.
    Value halves = vector::BitCastOp::create(
        b, loc, VectorType::get({width_}, b.getF16Type()), row);
    if (count != width_)
      halves = vector::ExtractStridedSliceOp::create(
          b, loc, halves, ArrayRef<int64_t>{first}, ArrayRef<int64_t>{count},
          ArrayRef<int64_t>{1});
    return arith::ExtFOp::create(b, loc, f32Vec, halves);
  }
  if (spec.family == quant::FormatFamily::Q8_0) {
    // Lane j reads the int8 at its block's value offset.
    Value spread = vector::ShuffleOp::create(
        b, loc, i8Lanes, row, row,
        b.getDenseI64ArrayAttr(
            lanesOf<int64_t>(planes_.front().bytes, first, count)));
    Value values = arith::SIToFPOp::create(b, loc, f32Vec, spread);
    return arith::MulFOp::create(
        b, loc, blockScales(b, loc, t, kvHead, first, count), values);
  }
  Value index = splatI32(b, loc, count, 0);
  for (const PlaneLanes &lanes : planes_) {
    // One lane per value: the byte holding its bits.
    Value spread = vector::ShuffleOp::create(
        b, loc, i8Lanes, row, row,
        b.getDenseI64ArrayAttr(lanesOf<int64_t>(lanes.bytes, first, count)));
    Value wide = arith::ExtUIOp::create(b, loc, i32Vec, spread);
    Value field = arith::ShRUIOp::create(
        b, loc, wide,
        constI32Vector(b, loc, lanesOf<int32_t>(lanes.shifts, first, count)));
    field = arith::AndIOp::create(b, loc, field,
                                  splatI32(b, loc, count, lanes.mask));
    if (lanes.indexShift)
      field = arith::ShLIOp::create(b, loc, field,
                                    splatI32(b, loc, count, lanes.indexShift));
    index = arith::OrIOp::create(b, loc, index, field);
  }
  const std::vector<float> &levels = spec.codebook->centroids;
  Value value = LaneLookupOp::create(b, loc, f32Vec, index,
                                     b.getDenseF32ArrayAttr(SmallVector<float>(
                                         levels.begin(), levels.end())));
  return arith::MulFOp::create(
      b, loc, blockScales(b, loc, t, kvHead, first, count), value);
}

FailureOr<Value> mlir::tq::emitVectorGather(OpBuilder &b, Location loc,
                                            const RowDecoder &decoder,
                                            int64_t kvHeads) {
  FailureOr<VectorRowDecoder> rows = VectorRowDecoder::get(decoder);
  if (failed(rows))
    return failure();
  const int64_t p = rows->width();
  const CacheAccess &access = decoder.access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  SmallVector<OpFoldResult> sizes = {access.numTokens, b.getIndexAttr(kvHeads),
                                     b.getIndexAttr(p)};
  Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value heads = arith::ConstantIndexOp::create(b, loc, kvHeads);
  auto loop = scf::ForOp::create(
      b, loc, c0, tokens, c1, ValueRange{init},
      [&](OpBuilder &b, Location loc, Value t, ValueRange outer) {
        auto perHead = scf::ForOp::create(
            b, loc, c0, heads, c1, ValueRange{outer[0]},
            [&](OpBuilder &b, Location loc, Value h, ValueRange inner) {
              Value row = rows->loadRow(b, loc, t, h);
              Value decoded = rows->decode(b, loc, row, t, h, 0, p);
              Value written = vector::TransferWriteOp::create(
                                  b, loc, decoded, inner[0],
                                  ValueRange{t, h, c0}, ArrayRef<bool>{true})
                                  .getResult();
              scf::YieldOp::create(b, loc, written);
            });
        scf::YieldOp::create(b, loc, perHead.getResult(0));
      });
  return loop.getResult(0);
}
