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

/// The first of `bytes` where they are consecutive (b, b + 1, ...).
std::optional<int64_t> firstOfConsecutive(ArrayRef<int64_t> bytes) {
  for (size_t l = 1; l < bytes.size(); ++l)
    if (bytes[l] != bytes[0] + int64_t(l))
      return std::nullopt;
  return bytes.front();
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
                                   int64_t chunkLanes, bool wordReads)
    : decoder_(&decoder) {
  const quant::FormatSpec &spec = decoder.spec();
  width_ = spec.paddedDim;
  rowBytes_ = int64_t(spec.rowBytes());
  for (const quant::BitPlane &plane : spec.indexPlanes)
    planes_.push_back(PlaneLanes::of(plane, width_, spec.blockLen,
                                     spec.bytesPerBlock));
  // The sign plane: one block of m one-bit fields.
  if (spec.qjlPlane) {
    const int64_t m = int64_t(spec.qjl->rows());
    signLanes_ = PlaneLanes::of(*spec.qjlPlane, m, m, 0);
  }
  order_.resize(width_);
  std::iota(order_.begin(), order_.end(), 0);
  if (wordReads && chunkLanes > 0 && width_ % chunkLanes == 0 &&
      spec.codebook && allChunksReadWords(chunkLanes))
    return; // The row's order, fields read by words.
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

VectorRowDecoder::PlaneLanes
VectorRowDecoder::PlaneLanes::of(const quant::BitPlane &plane, int64_t count,
                                 int64_t blockLen, int64_t bytesPerBlock) {
  PlaneLanes lanes;
  lanes.mask = (1 << plane.bits) - 1;
  lanes.indexShift = int32_t(plane.shift);
  for (int64_t j = 0; j < count; ++j) {
    int64_t block = j / blockLen, bit = (j % blockLen) * plane.bits;
    lanes.bytes.push_back(block * bytesPerBlock + plane.byteOffset + bit / 8);
    lanes.shifts.push_back(int32_t(bit % 8));
  }
  return lanes;
}

bool VectorRowDecoder::allChunksReadWords(int64_t chunkLanes) const {
  for (int64_t first = 0; first < width_; first += chunkLanes)
    for (const PlaneLanes &lanes : planes_)
      if (!planWordReads(lanes, ArrayRef<int64_t>(order_).slice(first,
                                                               chunkLanes)))
        return false;
  return true;
}

std::optional<VectorRowDecoder::WordReads>
VectorRowDecoder::planWordReads(const PlaneLanes &lanes,
                                ArrayRef<int64_t> values) const {
  constexpr int64_t kMaxWords = 4;
  const int64_t bits = llvm::countr_one(uint32_t(lanes.mask));
  const int64_t indexShift = lanes.indexShift;
  SmallVector<int64_t> position;
  for (int64_t v : values)
    position.push_back(8 * lanes.bytes[v] + lanes.shifts[v]);
  SmallVector<int64_t> byPosition(values.size());
  std::iota(byPosition.begin(), byPosition.end(), 0);
  // (Fields of distinct values never share a position.)
  llvm::sort(byPosition, [&](int64_t x, int64_t y) {
    return position[x] < position[y];
  });
  WordReads reads;
  reads.lanesWord.resize(values.size());
  reads.lanesShift.resize(values.size());
  // A field fits word w when it lies inside it at or above the index
  // position (a right shift then lands it there).
  auto fits = [&](int64_t p, int64_t wordByte) {
    return p - 8 * wordByte >= indexShift && p + bits <= 8 * wordByte + 32;
  };
  for (int64_t l : byPosition) {
    const int64_t p = position[l];
    if (reads.wordBytes.empty() || !fits(p, reads.wordBytes.back())) {
      // The lowest word start that keeps this field above indexShift,
      // inside the row.
      const int64_t start = std::min<int64_t>(
          std::max<int64_t>((p - indexShift) / 8, 0), rowBytes_ - 4);
      if (start < 0 || !fits(p, start) ||
          int64_t(reads.wordBytes.size()) == kMaxWords)
        return std::nullopt;
      reads.wordBytes.push_back(start);
    }
    reads.lanesWord[l] = int64_t(reads.wordBytes.size()) - 1;
    reads.lanesShift[l] =
        int32_t(p - 8 * reads.wordBytes.back() - indexShift);
  }
  return reads;
}

Value VectorRowDecoder::readFields(OpBuilder &b, Location loc,
                                   const RowBytes &row, const PlaneLanes &lanes,
                                   const WordReads &reads, bool exact) const {
  const int64_t count = reads.lanesWord.size();
  auto i32Vec = VectorType::get({count}, b.getI32Type());
  SmallVector<Value> words;
  for (int64_t byte : reads.wordBytes) {
    Value bytes = row.read(b, loc, byte, 4);
    words.push_back(vector::ExtractOp::create(
        b, loc,
        vector::BitCastOp::create(
            b, loc, VectorType::get({1}, b.getI32Type()), bytes),
        int64_t(0)));
  }
  Value spread;
  if (words.size() == 1) {
    spread = vector::BroadcastOp::create(b, loc, i32Vec, words.front());
  } else {
    Value packed = vector::FromElementsOp::create(
        b, loc, VectorType::get({int64_t(words.size())}, b.getI32Type()),
        words);
    spread = vector::ShuffleOp::create(b, loc, i32Vec, packed, packed,
                                       reads.lanesWord);
  }
  Value field = arith::ShRUIOp::create(
      b, loc, spread, constI32Vector(b, loc, reads.lanesShift));
  if (!exact)
    return field;
  return arith::AndIOp::create(
      b, loc, field,
      splatI32(b, loc, count, lanes.mask << lanes.indexShift));
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

FailureOr<VectorRowDecoder>
VectorRowDecoder::getForCodes(const RowDecoder &decoder) {
  if (!supports(decoder.spec()))
    return failure();
  for (int64_t lanes : {64, 32, 16}) {
    VectorRowDecoder codes(decoder, lanes, /*wordReads=*/false);
    if (!codes.hasCodes())
      return failure();
    if (codes.isReordered() && codes.chunksInBlocks(lanes))
      return codes;
  }
  return VectorRowDecoder(decoder, /*chunkLanes=*/0, /*wordReads=*/false);
}

FailureOr<VectorRowDecoder>
VectorRowDecoder::getForScaledCodes(const RowDecoder &decoder,
                                    bool selectFields) {
  FailureOr<VectorRowDecoder> codes = getForCodes(decoder);
  if (failed(codes) || !codes->hasScaledCodes() || !codes->blockChunkLanes())
    return failure();
  if (!selectFields || codes->groupBlockChunkLanes() != 64)
    return codes;
  std::optional<int64_t> permutes = codes->selectPermutes(64);
  VectorRowDecoder rowOrder(decoder, /*chunkLanes=*/0, /*wordReads=*/false);
  std::optional<int64_t> rowPermutes = rowOrder.selectPermutes(64);
  if (permutes && rowPermutes && *rowPermutes < *permutes &&
      rowOrder.groupBlockChunkLanes() == 64)
    return rowOrder;
  return codes;
}

bool VectorRowDecoder::chunksInBlocks(int64_t lanes, int64_t group) const {
  if (width_ % lanes != 0)
    return false;
  const int64_t blockLen = this->blockLen();
  const int64_t step = group ? group : lanes;
  for (int64_t first = 0; first < width_; first += step)
    for (int64_t l = first; l < first + step; ++l)
      if (order_[l] / blockLen != order_[first] / blockLen)
        return false;
  return true;
}

int64_t VectorRowDecoder::blockChunkLanes() const {
  for (int64_t lanes : {64, 32, 16})
    if (chunksInBlocks(lanes))
      return lanes;
  return 0;
}

int64_t VectorRowDecoder::groupBlockChunkLanes() const {
  for (int64_t lanes : {64, 32, 16})
    if (chunksInBlocks(lanes, 16))
      return lanes;
  return 0;
}

int64_t VectorRowDecoder::blockLen() const {
  return decoder_->spec().blockLen;
}

int64_t VectorRowDecoder::scaleBlocks() const {
  return decoder_->spec().blocksPerRow();
}

bool VectorRowDecoder::hasScaledCodes() const {
  return hasCodes() && !hasQjl() && decoder_->spec().isScaledCodesRow();
}

bool VectorRowDecoder::hasCodes() const {
  const quant::FormatSpec &spec = decoder_->spec();
  return spec.family != quant::FormatFamily::Q8_0 &&
         spec.family != quant::FormatFamily::F16 && spec.codebook &&
         spec.codebook->centroids.size() <= 16;
}

Value RowBytes::read(OpBuilder &b, Location loc, int64_t offset,
                     int64_t count, bool inRow) const {
  SmallVector<Value> indices(at.begin(), at.end());
  Value byte = arith::ConstantIndexOp::create(b, loc, offset);
  indices.push_back(base ? arith::AddIOp::create(b, loc, base, byte).getResult()
                         : byte);
  Value zeroByte = arith::ConstantIntOp::create(b, loc, b.getI8Type(), 0);
  return vector::TransferReadOp::create(
      b, loc, VectorType::get({count}, b.getI8Type()), source, indices,
      zeroByte, ArrayRef<bool>{inRow});
}

RowBytes RowBytes::movedBy(OpBuilder &b, Location loc, Value bytes,
                           ArrayRef<Value> planeBytes) const {
  auto add = [&](Value x, Value y) {
    return x ? arith::AddIOp::create(b, loc, x, y).getResult() : y;
  };
  RowBytes moved = *this;
  moved.base = add(base, bytes);
  moved.planeBase.clear();
  for (auto [p, delta] : llvm::enumerate(planeBytes))
    moved.planeBase.push_back(
        add(p < planeBase.size() ? planeBase[p] : base, delta));
  return moved;
}

RowBytes VectorRowDecoder::planeRow(const RowBytes &row,
                                    const PlaneLanes &lanes) const {
  const PlaneLanes *first = planes_.data();
  if (row.planeBase.empty() || &lanes < first ||
      &lanes >= first + planes_.size())
    return row;
  RowBytes moved = row;
  moved.base = row.planeBase[&lanes - first];
  moved.planeBase.clear();
  return moved;
}

bool VectorRowDecoder::readsRepeat(const PlaneLanes &lanes,
                                   ArrayRef<int64_t> ours,
                                   ArrayRef<int64_t> theirs, int64_t bytes,
                                   bool wholeBytes) const {
  for (auto [o, t] : llvm::zip_equal(ours, theirs))
    if (lanes.bytes[t] != lanes.bytes[o] + bytes ||
        lanes.shifts[t] != lanes.shifts[o])
      return false;
  // (Their bytes are ours moved: consecutive where ours are, and inside
  // the row.)
  if (lanes.mask == 0xff &&
      firstOfConsecutive(gather<int64_t>(lanes.bytes, ours)))
    return true;
  if (wholeBytes)
    return false;
  std::optional<WordReads> reads = planWordReads(lanes, ours);
  if (!reads)
    return false;
  // Fields keep their place in the moved words; the words must stay in
  // the row.
  return llvm::all_of(reads->wordBytes, [&](int64_t word) {
    return word + bytes >= 0 && word + bytes + 4 <= rowBytes_;
  });
}

std::optional<VectorRowDecoder::DecodePeriod>
VectorRowDecoder::periodOf(ArrayRef<const PlaneLanes *> planes,
                           ArrayRef<int64_t> order, int64_t lanes,
                           int64_t minValues, bool scales,
                           bool wholeBytes) const {
  const int64_t width = order.size();
  const quant::FormatSpec &spec = decoder_->spec();
  if (planes.empty() || lanes <= 0)
    return std::nullopt;
  for (int64_t values = llvm::alignTo(std::max(minValues, lanes), lanes);
       values < width; values += lanes) {
    if (width % values != 0)
      continue;
    const int64_t periods = width / values;
    // Each plane's stride; block scales move by the block's.
    SmallVector<int64_t, 2> strides;
    for (const PlaneLanes *plane : planes)
      strides.push_back(plane->bytes[order[values]] -
                        plane->bytes[order[0]]);
    if (llvm::any_of(strides, [](int64_t s) { return s <= 0; }))
      continue;
    int64_t bytes = strides.front();
    if (scales) {
      if (values % spec.blockLen != 0)
        continue;
      bytes = values / spec.blockLen * spec.bytesPerBlock;
    }
    // The first period's code, or where its word reads would leave the
    // row when moved on (a plane at the row's end reads its last word
    // from further back), the last one's.
    for (int64_t reference : {int64_t(0), periods - 1}) {
      bool repeats = true;
      for (int64_t k = 0; repeats && k < periods; ++k)
        for (int64_t first = 0; repeats && first < values; first += lanes) {
          ArrayRef<int64_t> ours =
              order.slice(reference * values + first, lanes);
          ArrayRef<int64_t> theirs = order.slice(k * values + first, lanes);
          for (auto [o, t] : llvm::zip_equal(ours, theirs))
            repeats &= t == o + (k - reference) * values;
          for (auto [plane, stride] : llvm::zip_equal(planes, strides))
            repeats = repeats &&
                      readsRepeat(*plane, ours, theirs,
                                  (k - reference) * stride, wholeBytes);
        }
      if (repeats)
        return DecodePeriod{values, bytes, reference, strides};
    }
  }
  return std::nullopt;
}

std::optional<VectorRowDecoder::DecodePeriod>
VectorRowDecoder::valuePeriod(int64_t lanes, int64_t minValues) const {
  const quant::FormatSpec &spec = decoder_->spec();
  if (spec.family == quant::FormatFamily::F16) {
    // Halves in the row's order.
    for (int64_t values = llvm::alignTo(std::max(minValues, lanes), lanes);
         values < width_; values += lanes)
      if (width_ % values == 0)
        return DecodePeriod{values, 2 * values, 0, {}};
    return std::nullopt;
  }
  SmallVector<const PlaneLanes *> planes;
  for (const PlaneLanes &plane : planes_)
    planes.push_back(&plane);
  return periodOf(planes, order_, lanes, minValues,
                  /*scales=*/!hasRowScale(),
                  /*wholeBytes=*/spec.family == quant::FormatFamily::Q8_0);
}

std::optional<VectorRowDecoder::DecodePeriod>
VectorRowDecoder::signPeriod(int64_t lanes, int64_t minValues) const {
  if (!hasQjl())
    return std::nullopt;
  SmallVector<int64_t> order(qjlRows());
  std::iota(order.begin(), order.end(), 0);
  return periodOf({&signLanes_}, order, lanes, minValues, /*scales=*/false,
                  /*wholeBytes=*/false);
}

RowBytes VectorRowDecoder::rowBytes(OpBuilder &b, Location loc, Value t,
                                    Value kvHead) const {
  auto [page, slot] = decoder_->rowAddress(b, loc, t);
  return RowBytes{decoder_->access().pages, {page, slot, kvHead}, Value()};
}

RowBytes VectorRowDecoder::rowBytesAt(Value page, Value slot,
                                     Value kvHead) const {
  return RowBytes{decoder_->access().pages, {page, slot, kvHead}, Value()};
}

Value VectorRowDecoder::loadRow(OpBuilder &b, Location loc,
                                const RowBytes &row) const {
  // (A moved row has no whole row from its base on; periods never take
  // the reads that load it.)
  assert(!row.base && "loadRow of a moved row");
  return row.read(b, loc, 0, rowBytes_);
}

bool VectorRowDecoder::renormalises() const {
  return decoder_->spec().family == quant::FormatFamily::Haar;
}

void VectorRowDecoder::computeRowFactors(OpBuilder &b, Location loc,
                                         int64_t kvHeads) {
  if (!renormalises())
    return;
  const CacheAccess &access = decoder_->access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  // scale / ||C[idx]|| per row (0 for an all-zero row), as a 1-lane row.
  Value factors = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{access.numTokens, b.getIndexAttr(kvHeads),
                                b.getIndexAttr(1)},
      b.getF32Type());
  rowFactors_ = writeEveryRow(
      b, loc, factors, tokens, kvHeads,
      [&](OpBuilder &b, Location loc, Value t, Value h) -> Value {
        RowBytes row = rowBytes(b, loc, t, h);
        Value c = decode(b, loc, row, 0, width_, /*applyScale=*/false);
        Value normSq = vector::ReductionOp::create(
            b, loc, vector::CombiningKind::ADD,
            arith::MulFOp::create(b, loc, c, c),
            arith::FastMathFlags::reassoc);
        Value norm = math::SqrtOp::create(b, loc, normSq);
        Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
        Value positive = arith::CmpFOp::create(
            b, loc, arith::CmpFPredicate::OGT, norm, zero);
        Value scale = blockScale(b, loc, row, 0);
        Value factor = arith::SelectOp::create(
            b, loc, positive, arith::DivFOp::create(b, loc, scale, norm),
            zero);
        return vector::BroadcastOp::create(
            b, loc, VectorType::get({1}, b.getF32Type()), factor);
      });
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
    auto [page, slot] = decoder_->nextRangeRowAddress(b, loc, t);
    prefetchRowAt(b, loc, buffer, page, slot, kvHead);
    scf::YieldOp::create(b, loc);
  });
}

/// Bytes of a cache line (x86 and AArch64 CPUs).
constexpr int64_t kCacheLineBytes = 64;

void VectorRowDecoder::prefetchRowAt(OpBuilder &b, Location loc, Value buffer,
                                     Value page, Value slot,
                                     Value kvHead) const {
  auto prefetchAt = [&](OpBuilder &b, Location loc, int64_t at) {
    memref::PrefetchOp::create(
        b, loc, buffer,
        ValueRange{page, slot, kvHead,
                   arith::ConstantIndexOp::create(b, loc, at)},
        /*isWrite=*/false, decoder_->prefetchLocality(),
        /*isDataCache=*/true);
  };
  prefetchAt(b, loc, 0);
  if (rowBytes_ == 1)
    return;
  if (rowBytes_ > kCacheLineBytes) {
    prefetchAt(b, loc, rowBytes_ - 1);
    return;
  }
  // Rows of at most a line that follow each other (the slot stride is the
  // row's bytes) inside a page put a row's start in every line: the end's
  // line is the next row's start's.
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  Value slotStride = metadata.getStrides()[1];
  Value lastSlot =
      arith::SubIOp::create(b, loc, metadata.getSizes()[1],
                            arith::ConstantIndexOp::create(b, loc, 1));
  Value apart =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, slotStride,
                            arith::ConstantIndexOp::create(b, loc, rowBytes_));
  Value last =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, slot, lastSlot);
  scf::IfOp::create(b, loc, arith::OrIOp::create(b, loc, apart, last),
                    [&](OpBuilder &b, Location loc) {
                      prefetchAt(b, loc, rowBytes_ - 1);
                      scf::YieldOp::create(b, loc);
                    });
}

Value VectorRowDecoder::scalarInRow(OpBuilder &b, Location loc,
                                    const RowBytes &row, int64_t offset,
                                    quant::ScalarType type) const {
  const bool half = type == quant::ScalarType::F16;
  const int64_t bytes = half ? 2 : 4;
  Value slice = row.read(b, loc, offset, bytes);
  Type element = half ? Type(b.getF16Type()) : Type(b.getF32Type());
  Value value = vector::ExtractOp::create(
      b, loc,
      vector::BitCastOp::create(b, loc, VectorType::get({1}, element), slice),
      int64_t(0));
  return half ? arith::ExtFOp::create(b, loc, b.getF32Type(), value)
              : value;
}

Value VectorRowDecoder::blockScale(OpBuilder &b, Location loc,
                                   const RowBytes &row, int64_t block) const {
  const quant::FormatSpec &spec = decoder_->spec();
  return scalarInRow(b, loc, row,
                     block * spec.bytesPerBlock + spec.scaleOffset,
                     spec.scaleType);
}

Value VectorRowDecoder::blockScales(OpBuilder &b, Location loc,
                                    const RowBytes &row,
                                    ArrayRef<int64_t> values) const {
  const int64_t blockLen = decoder_->spec().blockLen;
  const int64_t count = values.size();
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  const quant::FormatSpec &spec = decoder_->spec();
  auto scaleOf = [&](int64_t block) -> Value {
    if (spec.scaleType == quant::ScalarType::F32)
      return vector::BroadcastOp::create(b, loc, f32Vec,
                                         blockScale(b, loc, row, block));
    // The half is broadcast before it is widened: one broadcast load and
    // one vector conversion, no scalar conversion.
    Value half = vector::BitCastOp::create(
        b, loc, VectorType::get({1}, b.getF16Type()),
        row.read(b, loc, block * spec.bytesPerBlock + spec.scaleOffset, 2));
    Value halves = vector::BroadcastOp::create(
        b, loc, VectorType::get({count}, b.getF16Type()),
        vector::ExtractOp::create(b, loc, half, int64_t(0)));
    return arith::ExtFOp::create(b, loc, f32Vec, halves);
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

Value VectorRowDecoder::decodeSigns(OpBuilder &b, Location loc,
                                    const RowBytes &row, int64_t first,
                                    int64_t count) const {
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  SmallVector<int64_t> signs(count);
  std::iota(signs.begin(), signs.end(), first);
  Value bit = planeFields(b, loc, row, signLanes_, signs, /*exact=*/true);
  // 2 * bit - 1: a set bit is +1.
  Value twice = arith::UIToFPOp::create(
      b, loc, f32Vec, arith::ShLIOp::create(b, loc, bit,
                                            splatI32(b, loc, count, 1)));
  Value one = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f32Vec, 1.0f));
  return arith::SubFOp::create(b, loc, twice, one);
}

Value VectorRowDecoder::qjlWeight(OpBuilder &b, Location loc,
                                  const RowBytes &row) const {
  return arith::MulFOp::create(
      b, loc,
      scalarInRow(b, loc, row, *decoder_->spec().residualNormOffset,
                  quant::ScalarType::F16),
      arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(qjlConstant(decoder_->spec()))));
}

bool VectorRowDecoder::hasRowScale() const {
  const quant::FormatSpec &spec = decoder_->spec();
  return spec.family != quant::FormatFamily::F16 &&
         spec.scaleRule != quant::ScaleRule::None && spec.blocksPerRow() == 1;
}

Value VectorRowDecoder::rowScale(OpBuilder &b, Location loc,
                                 const RowBytes &row, Value t,
                                 Value kvHead) const {
  assert(hasRowScale() && "the row has no single scale");
  if (renormalises()) {
    assert(rowFactors_ && "computeRowFactors computes the renormalised "
                          "scales");
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    return tensor::ExtractOp::create(b, loc, rowFactors_,
                                     ValueRange{t, kvHead, c0});
  }
  return blockScale(b, loc, row, 0);
}

Value VectorRowDecoder::scaleOfBlock(OpBuilder &b, Location loc,
                                     const RowBytes &row, Value t,
                                     Value kvHead, int64_t block) const {
  assert(decoder_->spec().scaleRule != quant::ScaleRule::None &&
         block < scaleBlocks() && "no such scale");
  if (hasRowScale())
    return rowScale(b, loc, row, t, kvHead);
  return blockScale(b, loc, row, block);
}

bool VectorRowDecoder::hasHalfBlockScales() const {
  const quant::FormatSpec &spec = decoder_->spec();
  return spec.scaleRule != quant::ScaleRule::None &&
         spec.scaleType == quant::ScalarType::F16 && !hasRowScale();
}

bool VectorRowDecoder::hasHalfScaleBits() const {
  const quant::FormatSpec &spec = decoder_->spec();
  return spec.family != quant::FormatFamily::F16 &&
         spec.scaleRule != quant::ScaleRule::None &&
         spec.scaleType == quant::ScalarType::F16 && !renormalises();
}

Value VectorRowDecoder::scaleBitsOfBlock(OpBuilder &b, Location loc,
                                         const RowBytes &row,
                                         int64_t block) const {
  assert(hasHalfScaleBits() && block < scaleBlocks() && "no such scale");
  const quant::FormatSpec &spec = decoder_->spec();
  Value bits = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI16Type()),
      row.read(b, loc, block * spec.bytesPerBlock + spec.scaleOffset, 2));
  return vector::ExtractOp::create(b, loc, bits, int64_t(0));
}

Value VectorRowDecoder::planeFields(OpBuilder &b, Location loc,
                                    const RowBytes &rowBytes,
                                    const PlaneLanes &lanes,
                                    ArrayRef<int64_t> values,
                                    bool exact) const {
  const RowBytes row = planeRow(rowBytes, lanes);
  const int64_t count = values.size();
  auto i32Vec = VectorType::get({count}, b.getI32Type());
  auto shiftToIndex = [&](Value field) -> Value {
    if (!lanes.indexShift)
      return field;
    return arith::ShLIOp::create(b, loc, field,
                                 splatI32(b, loc, count, lanes.indexShift));
  };
  SmallVector<int64_t> at = gather<int64_t>(lanes.bytes, values);
  // Whole, consecutive bytes (haar4's uint8 indices): one read and a
  // zero-extension.
  std::optional<int64_t> firstByte = firstOfConsecutive(at);
  if (lanes.mask == 0xff && firstByte)
    return shiftToIndex(arith::ExtUIOp::create(
        b, loc, i32Vec, row.read(b, loc, *firstByte, count)));
  if (std::optional<WordReads> reads = planWordReads(lanes, values))
    return readFields(b, loc, row, lanes, *reads, exact);
  // One lane per value: the byte holding its bits.
  Value bytes = loadRow(b, loc, row);
  Value spread = vector::ShuffleOp::create(
      b, loc, VectorType::get({count}, b.getI8Type()), bytes, bytes,
      b.getDenseI64ArrayAttr(at));
  Value field = arith::ShRUIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, i32Vec, spread),
      constI32Vector(b, loc, gather<int32_t>(lanes.shifts, values)));
  if (exact)
    field = arith::AndIOp::create(b, loc, field,
                                  splatI32(b, loc, count, lanes.mask));
  return shiftToIndex(field);
}

Value VectorRowDecoder::decode(OpBuilder &b, Location loc, const RowBytes &row,
                               int64_t first, int64_t count,
                               bool applyScale) const {
  assert((applyScale || hasRowScale()) && "only a row scale can be deferred");
  const quant::FormatSpec &spec = decoder_->spec();
  auto f32Vec = VectorType::get({count}, b.getF32Type());
  auto i8Lanes = VectorType::get({count}, b.getI8Type());
  ArrayRef<int64_t> values = ArrayRef<int64_t>(order_).slice(first, count);
  if (spec.family == quant::FormatFamily::F16) {
    // (Never reordered.)
    // The row is `width` little-endian halves.
    Value halves = vector::BitCastOp::create(
        b, loc, VectorType::get({count}, b.getF16Type()),
        row.read(b, loc, 2 * first, 2 * count));
    return arith::ExtFOp::create(b, loc, f32Vec, halves);
  }
  if (spec.family == quant::FormatFamily::Q8_0) {
    // Lane j reads the int8 at its block's value offset: one read where
    // the lanes' bytes are consecutive (a chunk inside one block).
    SmallVector<int64_t> at = gather<int64_t>(planes_.front().bytes, values);
    Value spread;
    if (std::optional<int64_t> first = firstOfConsecutive(at)) {
      spread = row.read(b, loc, *first, count);
    } else {
      Value bytes = loadRow(b, loc, row);
      spread = vector::ShuffleOp::create(b, loc, i8Lanes, bytes, bytes,
                                         b.getDenseI64ArrayAttr(at));
    }
    Value ints = arith::SIToFPOp::create(b, loc, f32Vec, spread);
    if (!applyScale)
      return ints;
    return arith::MulFOp::create(
        b, loc, blockScales(b, loc, row, values), ints);
  }
  // The top plane keeps the bits above it (tq.lane_lookup reads the low
  // bits only); the planes below are ORed, and the top one replaces
  // their bits from its position up: top ^ ((top ^ low) & (2^shift - 1)),
  // one bit-select. A single plane below the top that fills all of those
  // bits may keep its garbage too (the select drops it).
  const PlaneLanes *top = &*llvm::max_element(
      planes_, [](const PlaneLanes &x, const PlaneLanes &y) {
        return x.indexShift < y.indexShift;
      });
  const bool loneLow = planes_.size() == 2 &&
                       llvm::all_of(planes_, [&](const PlaneLanes &p) {
                         return &p == top || (p.indexShift == 0 &&
                                              p.mask + 1 ==
                                                  (1 << top->indexShift));
                       });
  Value low;
  for (const PlaneLanes &lanes : planes_) {
    if (&lanes == top)
      continue;
    Value field =
        planeFields(b, loc, row, lanes, values, /*exact=*/!loneLow);
    low = low ? arith::OrIOp::create(b, loc, low, field).getResult() : field;
  }
  Value index = planeFields(b, loc, row, *top, values, /*exact=*/false);
  if (low) {
    Value lowBits = splatI32(b, loc, count, (1 << top->indexShift) - 1);
    Value mixed = arith::AndIOp::create(
        b, loc, arith::XOrIOp::create(b, loc, index, low), lowBits);
    index = arith::XOrIOp::create(b, loc, index, mixed);
  }
  const std::vector<float> &levels = spec.codebook->centroids;
  Value value = LaneLookupOp::create(b, loc, f32Vec, index,
                                     b.getDenseF32ArrayAttr(SmallVector<float>(
                                         levels.begin(), levels.end())));
  if (!applyScale)
    return value;
  return arith::MulFOp::create(
      b, loc, blockScales(b, loc, row, values), value);
}

Value VectorRowDecoder::planeCodes(OpBuilder &b, Location loc,
                                   const RowBytes &rowBytes,
                                   const PlaneLanes &lanes,
                                   ArrayRef<int64_t> values) const {
  const RowBytes row = planeRow(rowBytes, lanes);
  const int64_t count = values.size();
  auto bytesType = VectorType::get({count}, b.getI8Type());
  auto splat = [&](VectorType type, int64_t v) -> Value {
    if (type.getElementType().isInteger(8))
      v = int8_t(v); // (a bit pattern: 0x80 and up as negative bytes)
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type,
                               b.getIntegerAttr(type.getElementType(), v)));
  };
  auto constBytes = [&](ArrayRef<int32_t> v) -> Value {
    SmallVector<int8_t> bytes(v.begin(), v.end());
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(bytesType, ArrayRef<int8_t>(bytes)));
  };
  SmallVector<int64_t> at = gather<int64_t>(lanes.bytes, values);
  SmallVector<int32_t> shifts = gather<int32_t>(lanes.shifts, values);
  // One read of the bytes the lanes need; a shuffle where they are not
  // consecutive (LLVM: vpermb / vpshufb).
  Value spread;
  if (std::optional<int64_t> first = firstOfConsecutive(at)) {
    spread = row.read(b, loc, *first, count);
  } else {
    const int64_t lo = *llvm::min_element(at), hi = *llvm::max_element(at);
    Value bytes = row.read(b, loc, lo, hi - lo + 1);
    SmallVector<int64_t> mask;
    for (int64_t byte : at)
      mask.push_back(byte - lo);
    spread = vector::ShuffleOp::create(b, loc, bytesType, bytes, bytes,
                                       b.getDenseI64ArrayAttr(mask));
  }
  const int32_t indexMask = lanes.mask << lanes.indexShift;
  Value field;
  if (lanes.mask == 0xff) {
    field = spread;
  } else if (llvm::all_equal(shifts)) {
    field = shifts.front() ? arith::ShRUIOp::create(
                                 b, loc, spread,
                                 splat(bytesType, shifts.front()))
                                 .getResult()
                           : spread;
  } else if (lanes.mask == 1) {
    // One bit per lane: test it and pick the index bit (vptestmb and a
    // masked move), no shift.
    SmallVector<int32_t> bits;
    for (int32_t shift : shifts)
      bits.push_back(int32_t(int8_t(1u << shift)));
    Value set = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, loc, spread, constBytes(bits)),
        splat(bytesType, 0));
    return arith::SelectOp::create(b, loc, set, splat(bytesType, indexMask),
                                   splat(bytesType, 0));
  } else {
    // Per-lane shifts: as 16-bit lanes (vpsrlvw), pairs of bytes together
    // where both shift alike, else each byte widened.
    bool pairs = count % 2 == 0;
    for (int64_t l = 0; pairs && l < count; l += 2)
      pairs = shifts[l] == shifts[l + 1];
    // v >> amounts, lane by lane, on 16-bit lanes.
    auto shiftWords = [&](Value v, ArrayRef<int16_t> amounts) -> Value {
      auto type = cast<VectorType>(v.getType());
      return arith::ShRUIOp::create(
          b, loc, v,
          arith::ConstantOp::create(b, loc,
                                    DenseElementsAttr::get(type, amounts)));
    };
    if (pairs) {
      SmallVector<int16_t> wordShifts;
      for (int64_t l = 0; l < count; l += 2)
        wordShifts.push_back(int16_t(shifts[l]));
      Value words = vector::BitCastOp::create(
          b, loc, VectorType::get({count / 2}, b.getI16Type()), spread);
      field = vector::BitCastOp::create(b, loc, bytesType,
                                        shiftWords(words, wordShifts));
    } else {
      SmallVector<int16_t> wideShifts(shifts.begin(), shifts.end());
      Value wide = arith::ExtUIOp::create(
          b, loc, VectorType::get({count}, b.getI16Type()), spread);
      field = arith::TruncIOp::create(b, loc, bytesType,
                                      shiftWords(wide, wideShifts));
    }
  }
  if (lanes.indexShift)
    field = arith::ShLIOp::create(b, loc, field,
                                  splat(bytesType, lanes.indexShift));
  if (indexMask != 0xff)
    field = arith::AndIOp::create(b, loc, field, splat(bytesType, indexMask));
  return field;
}

bool VectorRowDecoder::selectsPlanes() const {
  if (planes_.empty() || rowBytes_ < 8)
    return false;
  int64_t indexBits = 0;
  for (const PlaneLanes &plane : planes_) {
    const int64_t bits = llvm::popcount(uint32_t(plane.mask));
    if ((bits != 1 && bits != 2 && bits != 4) ||
        plane.indexShift != indexBits)
      return false;
    indexBits += bits;
  }
  const auto &codebook = decoder_->spec().codebook;
  return codebook && int64_t(codebook->centroids.size()) == (1 << indexBits);
}

std::optional<VectorRowDecoder::PlaneRead>
VectorRowDecoder::planeRead(ArrayRef<int64_t> at) const {
  const int64_t count = at.size();
  PlaneRead read;
  for (int64_t m = 0; m < count; m += 8) {
    ArrayRef<int64_t> lane = at.slice(m, 8);
    const int64_t lo = *llvm::min_element(lane);
    if (*llvm::max_element(lane) - lo >= 8)
      return std::nullopt;
    read.window.push_back(std::min(lo, rowBytes_ - 8));
  }
  // Where every lane's fields lie in one 8-byte span, every lane reads
  // it: one 8-byte read broadcast to the 64-bit lanes, which x86 loads
  // with vpbroadcastq (a load alone, or the select's memory operand),
  // where a wider read and a permute cost a shuffle uop. (Two spans
  // joined by a select became vinserti64x4, a shuffle again: not faster
  // than the permute on Zen 4.)
  const int64_t shared = std::min(*llvm::min_element(at), rowBytes_ - 8);
  if (shared >= 0 && *llvm::max_element(at) < shared + 8) {
    read.window.assign(read.window.size(), shared);
    read.first = shared;
    read.span = 8;
    read.broadcast = true;
    return read;
  }
  const int64_t lo = *llvm::min_element(read.window);
  read.first = lo;
  read.span = *llvm::max_element(read.window) + 8 - lo;
  // One read of a power-of-two size, moved back to stay in the row where
  // it must: a 16-, 32- or 64-byte load and one permute, where an odd
  // size (tq3_0's two blocks' windows: 22 bytes) loads in pieces.
  const int64_t whole = int64_t(llvm::PowerOf2Ceil(uint64_t(read.span)));
  if (whole <= rowBytes_ && whole <= count) {
    read.first = std::min(lo, rowBytes_ - whole);
    read.span = whole;
  }
  // Windows at whole 8-byte steps of the read, where every lane's fields
  // fit one: the spread is then a permute of 64-bit lanes (vpermq, one
  // uop) where windows at 2-byte steps take a word permute (vpermw: two
  // uops on Intel's AVX-512 cores). The selects read their fields at
  // other bit offsets; the fields are the same.
  SmallVector<int64_t> aligned;
  for (int64_t m = 0; m < count; m += 8) {
    ArrayRef<int64_t> lane = at.slice(m, 8);
    const int64_t w =
        read.first + (*llvm::min_element(lane) - read.first) / 8 * 8;
    if (*llvm::max_element(lane) >= w + 8 || w + 8 > read.first + read.span) {
      aligned.clear(); // some lane's fields straddle: keep the windows
      break;
    }
    aligned.push_back(w);
  }
  if (!aligned.empty())
    read.window = std::move(aligned);
  // In order (whichever windows were taken): the read needs no permute.
  read.inOrder = read.span == count;
  for (int64_t l = 0; l < count && read.inOrder; ++l)
    read.inOrder = read.window[l / 8] - read.first + l % 8 == l;
  return read;
}

std::optional<int64_t>
VectorRowDecoder::selectPermutes(int64_t lanes) const {
  if (lanes % 8 != 0 || width_ % lanes != 0 || !selectsPlanes())
    return std::nullopt;
  int64_t permutes = 0;
  for (int64_t first = 0; first < width_; first += lanes)
    for (const PlaneLanes &plane : planes_) {
      std::optional<PlaneRead> read = planeRead(gather<int64_t>(
          plane.bytes, ArrayRef<int64_t>(order_).slice(first, lanes)));
      if (!read)
        return std::nullopt;
      permutes += read->broadcast || read->inOrder ? 0 : 1;
    }
  return permutes;
}

Value VectorRowDecoder::selectCodes(OpBuilder &b, Location loc,
                                    const RowBytes &row,
                                    ArrayRef<int64_t> values) const {
  const int64_t count = values.size();
  // Whole rows (no decode period's moved planes), 64-bit lanes of values;
  // planes of 1, 2 or 4 bits (a field never straddles a byte), each above
  // the previous ones' bits, and a table of exactly 2^bits levels: the
  // lookups then ignore the bits above the index.
  if (row.base || !row.planeBase.empty() || count % 8 != 0 ||
      !selectsPlanes())
    return {};
  auto bytesType = VectorType::get({count}, b.getI8Type());
  auto splat = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(bytesType, b.getI8IntegerAttr(v)));
  };
  // Per plane: each 64-bit lane of the result reads an 8-byte window of
  // the row that holds its 8 values' fields (inside the row), and every
  // byte selects its field to the plane's index position.
  SmallVector<Value> fields;
  for (const PlaneLanes &lanes : planes_) {
    SmallVector<int64_t> at = gather<int64_t>(lanes.bytes, values);
    SmallVector<int32_t> shifts = gather<int32_t>(lanes.shifts, values);
    std::optional<PlaneRead> read = planeRead(at);
    if (!read)
      return {};
    RowBytes plane = planeRow(row, lanes);
    Value data;
    if (read->broadcast) {
      Value word = vector::BitCastOp::create(
          b, loc, VectorType::get({1}, b.getI64Type()),
          plane.read(b, loc, read->first, 8));
      data = vector::BitCastOp::create(
          b, loc, bytesType,
          vector::BroadcastOp::create(
              b, loc, VectorType::get({count / 8}, b.getI64Type()),
              vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0})));
    } else {
      data = plane.read(b, loc, read->first, read->span);
      if (!read->inOrder) {
        SmallVector<int64_t> spread;
        for (int64_t l = 0; l < count; ++l)
          spread.push_back(read->window[l / 8] - read->first + l % 8);
        data = vector::ShuffleOp::create(b, loc, bytesType, data, data,
                                         b.getDenseI64ArrayAttr(spread));
      }
    }
    SmallVector<int8_t> offsets;
    for (int64_t l = 0; l < count; ++l) {
      const int64_t bit = 8 * (at[l] - read->window[l / 8]) + shifts[l] -
                          lanes.indexShift;
      offsets.push_back(int8_t(((bit % 64) + 64) % 64));
    }
    fields.push_back(SelectBitsOp::create(b, loc, bytesType, data,
                                          b.getDenseI8ArrayAttr(offsets)));
  }
  // index = (below & m) | (field & ~m), m the bits below each plane's.
  Value index = fields.front();
  for (auto [lanes, field] :
       llvm::zip(ArrayRef<PlaneLanes>(planes_).drop_front(),
                 ArrayRef<Value>(fields).drop_front())) {
    const int64_t below = (1 << lanes.indexShift) - 1;
    index = arith::OrIOp::create(
        b, loc, arith::AndIOp::create(b, loc, index, splat(below)),
        arith::AndIOp::create(b, loc, field, splat(int8_t(~below))));
  }
  return index;
}

Value VectorRowDecoder::decodeCodes(OpBuilder &b, Location loc,
                                    const RowBytes &row, int64_t first,
                                    int64_t count) const {
  assert(hasCodes() && "decodeCodes of a format without codes");
  ArrayRef<int64_t> values = ArrayRef<int64_t>(order_).slice(first, count);
  if (selectFields_)
    if (Value index = selectCodes(b, loc, row, values))
      return index;
  Value index;
  for (const PlaneLanes &lanes : planes_) {
    Value field = planeCodes(b, loc, row, lanes, values);
    index =
        index ? arith::OrIOp::create(b, loc, index, field).getResult() : field;
  }
  return index;
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
                         RowBytes row = rows->rowBytes(b, loc, t, h);
                         return rows->decode(b, loc, row, 0, p);
                       });
}
