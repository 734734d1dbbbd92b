//===- VectorRowDecoder.cpp - Vector decode of packed rows ----------------===//

#include "VectorRowDecoder.h"

#include "QjlLowering.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <map>
#include <numeric>
#include <set>

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

/// table[v] for every v of `values`.
template <typename T>
SmallVector<T> gather(ArrayRef<T> table, ArrayRef<int64_t> values) {
  SmallVector<T> out;
  for (int64_t v : values)
    out.push_back(table[v]);
  return out;
}

/// Fills `init` (tensor<tokens x kv_heads x n x T>) row by row: row (t, h)
/// is the vector `rowOf` returns for it.
Value writeEveryRow(OpBuilder &b, Location loc, Value init, Value tokens,
                    int64_t kvHeads,
                    function_ref<Value(OpBuilder &, Location, Value, Value)>
                        rowOf) {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value heads = arith::ConstantIndexOp::create(b, loc, kvHeads);
  auto loop = scf::ForOp::create(
      b, loc, c0, tokens, c1, ValueRange{init},
      [&](OpBuilder &b, Location loc, Value t, ValueRange outer) {
        auto perHead = scf::ForOp::create(
            b, loc, c0, heads, c1, ValueRange{outer[0]},
            [&](OpBuilder &b, Location loc, Value h, ValueRange inner) {
              Value written = vector::TransferWriteOp::create(
                                  b, loc, rowOf(b, loc, t, h), inner[0],
                                  ValueRange{t, h, c0}, ArrayRef<bool>{true})
                                  .getResult();
              scf::YieldOp::create(b, loc, written);
            });
        scf::YieldOp::create(b, loc, perHead.getResult(0));
      });
  return loop.getResult(0);
}

} // namespace

VectorRowDecoder::VectorRowDecoder(const RowDecoder &decoder,
                                   int64_t chunkLanes)
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
  order_.resize(width_);
  std::iota(order_.begin(), order_.end(), 0);
  // The widest plane sets the order (q8_0 and f16 have one value per byte
  // or wider: nothing to gain).
  const quant::BitPlane *widest = nullptr;
  for (const quant::BitPlane &plane : spec.indexPlanes)
    if (!widest || plane.bits > widest->bits)
      widest = &plane;
  if (chunkLanes <= 0 || !widest || widest->bits >= 8 ||
      spec.family == quant::FormatFamily::Q8_0 ||
      spec.family == quant::FormatFamily::F16)
    return;
  const int64_t perByte = 8 / widest->bits;
  const PlaneLanes &lanes = planes_[widest - spec.indexPlanes.data()];
  // Values of each byte of the plane, by position within the byte.
  std::map<int64_t, SmallVector<int64_t>> byByte;
  for (int64_t j = 0; j < width_; ++j)
    byByte[lanes.bytes[j]].push_back(j);
  SmallVector<SmallVector<int64_t>> bytes;
  for (auto &entry : byByte) {
    if (int64_t(entry.second.size()) != perByte)
      return;
    bytes.push_back(entry.second);
  }
  if (bytes.size() % chunkLanes != 0)
    return;
  SmallVector<int64_t> order;
  for (size_t group = 0; group < bytes.size(); group += chunkLanes)
    for (int64_t k = 0; k < perByte; ++k)
      for (int64_t byte = 0; byte < chunkLanes; ++byte)
        order.push_back(bytes[group + byte][k]);
  order_ = std::move(order);
  reordered_ = true;
}

bool VectorRowDecoder::supports(const quant::FormatSpec &spec) {
  switch (spec.family) {
  case quant::FormatFamily::Tq3:
  case quant::FormatFamily::Tq3Legacy:
  case quant::FormatFamily::Turbo:
  case quant::FormatFamily::Polar:
  case quant::FormatFamily::TqProd:
  case quant::FormatFamily::Haar:
    return spec.codebook && spec.codebook->centroids.size() <= 16;
  case quant::FormatFamily::Q8_0:
  case quant::FormatFamily::F16:
    return true;
  }
  return false;
}

FailureOr<VectorRowDecoder> VectorRowDecoder::get(const RowDecoder &decoder,
                                                  int64_t chunkLanes) {
  if (!supports(decoder.spec()))
    return failure();
  return VectorRowDecoder(decoder, chunkLanes);
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

bool VectorRowDecoder::renormalises() const {
  return decoder_->spec().family == quant::FormatFamily::Haar;
}

Value VectorRowDecoder::stageRows(OpBuilder &b, Location loc,
                                  int64_t kvHeads) {
  const CacheAccess &access = decoder_->access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{access.numTokens, b.getIndexAttr(kvHeads),
                                b.getIndexAttr(rowBytes_)},
      b.getI8Type());
  Value staged =
      writeEveryRow(b, loc, init, tokens, kvHeads,
                    [&](OpBuilder &b, Location loc, Value t, Value h) {
                      return loadRow(b, loc, t, h);
                    });
  if (renormalises()) {
    // scale / ||C[idx]|| per row (0 for an all-zero row), as a 1-lane row.
    Value factors = tensor::EmptyOp::create(
        b, loc,
        SmallVector<OpFoldResult>{access.numTokens, b.getIndexAttr(kvHeads),
                                  b.getIndexAttr(1)},
        b.getF32Type());
    rowFactors_ = writeEveryRow(
        b, loc, factors, tokens, kvHeads,
        [&](OpBuilder &b, Location loc, Value t, Value h) -> Value {
          Value row = loadStagedRow(b, loc, staged, t, h);
          Value c = decode(b, loc, row, t, h, 0, width_, /*applyScale=*/false);
          Value normSq = vector::ReductionOp::create(
              b, loc, vector::CombiningKind::ADD,
              arith::MulFOp::create(b, loc, c, c),
              arith::FastMathFlags::reassoc);
          Value norm = math::SqrtOp::create(b, loc, normSq);
          Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
          Value positive = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OGT, norm, zero);
          Value scale = decoder_->scale(
              b, loc, t, h, arith::ConstantIndexOp::create(b, loc, 0));
          Value factor = arith::SelectOp::create(
              b, loc, positive, arith::DivFOp::create(b, loc, scale, norm),
              zero);
          return vector::BroadcastOp::create(
              b, loc, VectorType::get({1}, b.getF32Type()), factor);
        });
  }
  return staged;
}

Value VectorRowDecoder::prefetchBuffer(OpBuilder &b, Location loc) const {
  auto poolType = cast<RankedTensorType>(decoder_->access().pages.getType());
  return bufferization::ToBufferOp::create(
      b, loc,
      MemRefType::get(poolType.getShape(), poolType.getElementType(),
                      StridedLayoutAttr::get(
                          b.getContext(), ShapedType::kDynamic,
                          SmallVector<int64_t>(4, ShapedType::kDynamic))),
      decoder_->access().pages, /*readOnly=*/true);
}

void VectorRowDecoder::prefetchNextRange(OpBuilder &b, Location loc,
                                         Value buffer, Value t,
                                         Value kvHead) const {
  const CacheAccess &access = decoder_->access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  Value next = arith::AddIOp::create(
      b, loc, arith::AddIOp::create(b, loc, access.tokenOffset, tokens), t);
  Value inSequence = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           next, access.sequenceTokens);
  scf::IfOp::create(b, loc, inSequence, [&](OpBuilder &b, Location loc) {
    auto [page, slot] = decoder_->sequenceRowAddress(b, loc, next);
    // A row may straddle two cache lines: touch both ends.
    for (int64_t at : {int64_t(0), rowBytes_ - 1})
      memref::PrefetchOp::create(
          b, loc, buffer,
          ValueRange{page, slot, kvHead,
                     arith::ConstantIndexOp::create(b, loc, at)},
          /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
    scf::YieldOp::create(b, loc);
  });
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
                                    Value kvHead,
                                    ArrayRef<int64_t> values) const {
  const int64_t blockLen = decoder_->spec().blockLen;
  const int64_t count = values.size();
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  auto scaleOf = [&](int64_t block) -> Value {
    Value j = arith::ConstantIndexOp::create(b, loc, block * blockLen);
    return vector::BroadcastOp::create(b, loc, f32Vec,
                                       decoder_->scale(b, loc, t, kvHead, j));
  };
  std::set<int64_t> blocks;
  for (int64_t v : values)
    blocks.insert(v / blockLen);
  Value scale = scaleOf(*blocks.begin());
  // Lanes of the other blocks take their own scale.
  for (int64_t blk : llvm::drop_begin(blocks)) {
    SmallVector<bool> inBlock;
    for (int64_t v : values)
      inBlock.push_back(v / blockLen == blk);
    Value mask = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(VectorType::get({count}, b.getI1Type()),
                               ArrayRef<bool>(inBlock)));
    scale = arith::SelectOp::create(b, loc, mask, scaleOf(blk), scale);
  }
  return scale;
}

bool VectorRowDecoder::hasQjl() const {
  return decoder_->spec().qjl != nullptr;
}

int64_t VectorRowDecoder::qjlRows() const {
  return hasQjl() ? int64_t(decoder_->spec().qjl->rows()) : 0;
}

Value VectorRowDecoder::decodeSigns(OpBuilder &b, Location loc, Value row,
                                    int64_t first, int64_t count) const {
  const quant::BitPlane &plane = *decoder_->spec().qjlPlane;
  SmallVector<int64_t> bytes;
  SmallVector<int32_t> shifts;
  for (int64_t r = first; r < first + count; ++r) {
    bytes.push_back(plane.byteOffset + r / 8);
    shifts.push_back(int32_t(r % 8));
  }
  auto i32Vec = VectorType::get({count}, b.getI32Type());
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  Value spread = vector::ShuffleOp::create(
      b, loc, VectorType::get({count}, b.getI8Type()), row, row, bytes);
  Value bit = arith::ShRUIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, i32Vec, spread),
      constI32Vector(b, loc, shifts));
  bit = arith::AndIOp::create(b, loc, bit, splatI32(b, loc, count, 1));
  // 2 * bit - 1: a set bit is +1.
  Value twice = arith::UIToFPOp::create(
      b, loc, f32Vec, arith::ShLIOp::create(b, loc, bit,
                                            splatI32(b, loc, count, 1)));
  Value one = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f32Vec, 1.0f));
  return arith::SubFOp::create(b, loc, twice, one);
}

Value VectorRowDecoder::qjlWeight(OpBuilder &b, Location loc, Value t,
                                  Value kvHead) const {
  return arith::MulFOp::create(
      b, loc, decoder_->residualNorm(b, loc, t, kvHead),
      arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(qjlConstant(decoder_->spec()))));
}

bool VectorRowDecoder::hasRowScale() const {
  const quant::FormatSpec &spec = decoder_->spec();
  return spec.family != quant::FormatFamily::F16 &&
         spec.scaleRule != quant::ScaleRule::None && spec.blocksPerRow() == 1;
}

Value VectorRowDecoder::rowScale(OpBuilder &b, Location loc, Value t,
                                 Value kvHead) const {
  assert(hasRowScale() && "the row has no single scale");
  if (renormalises()) {
    assert(rowFactors_ && "stageRows computes the renormalised scales");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    return tensor::ExtractOp::create(b, loc, rowFactors_,
                                     ValueRange{t, kvHead, c0});
  }
  return decoder_->scale(b, loc, t, kvHead,
                         arith::ConstantIndexOp::create(b, loc, 0));
}

Value VectorRowDecoder::decode(OpBuilder &b, Location loc, Value row, Value t,
                               Value kvHead, int64_t first, int64_t count,
                               bool applyScale) const {
  assert((applyScale || hasRowScale()) && "only a row scale can be deferred");
  const quant::FormatSpec &spec = decoder_->spec();
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  auto i32Vec = VectorType::get({count}, b.getI32Type());
  auto i8Lanes = VectorType::get({count}, b.getI8Type());
  ArrayRef<int64_t> values = ArrayRef<int64_t>(order_).slice(first, count);
  if (spec.family == quant::FormatFamily::F16) {
    // (Never reordered.)
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
            gather<int64_t>(planes_.front().bytes, values)));
    Value ints = arith::SIToFPOp::create(b, loc, f32Vec, spread);
    if (!applyScale)
      return ints;
    return arith::MulFOp::create(
        b, loc, blockScales(b, loc, t, kvHead, values), ints);
  }
  Value index = splatI32(b, loc, count, 0);
  for (const PlaneLanes &lanes : planes_) {
    // One lane per value: the byte holding its bits.
    Value spread = vector::ShuffleOp::create(
        b, loc, i8Lanes, row, row,
        b.getDenseI64ArrayAttr(gather<int64_t>(lanes.bytes, values)));
    Value wide = arith::ExtUIOp::create(b, loc, i32Vec, spread);
    Value field = arith::ShRUIOp::create(
        b, loc, wide,
        constI32Vector(b, loc, gather<int32_t>(lanes.shifts, values)));
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
  if (!applyScale)
    return value;
  return arith::MulFOp::create(
      b, loc, blockScales(b, loc, t, kvHead, values), value);
}

FailureOr<Value> mlir::tq::emitVectorGather(OpBuilder &b, Location loc,
                                            const RowDecoder &decoder,
                                            int64_t kvHeads) {
  FailureOr<VectorRowDecoder> rows = VectorRowDecoder::get(decoder);
  // (A tqprod row's values also need its QJL correction, a haar4 row its
  // norm.)
  if (failed(rows) || rows->hasQjl() || rows->renormalises())
    return failure();
  const int64_t p = rows->width();
  const CacheAccess &access = decoder.access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  SmallVector<OpFoldResult> sizes = {access.numTokens, b.getIndexAttr(kvHeads),
                                     b.getIndexAttr(p)};
  Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  return writeEveryRow(b, loc, init, tokens, kvHeads,
                       [&](OpBuilder &b, Location loc, Value t, Value h) {
                         Value row = rows->loadRow(b, loc, t, h);
                         return rows->decode(b, loc, row, t, h, 0, p);
                       });
}
