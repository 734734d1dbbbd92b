//===- RowDecoding.cpp - IR that reads one element of a packed row --------===//

#include "RowDecoding.h"

#include "LoopBuilders.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

namespace {
Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value i32Const(OpBuilder &b, Location loc, int32_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}
} // namespace

Value mlir::tq::createF32Matrix(OpBuilder &b, Location loc,
                                ArrayRef<float> values, int64_t rows,
                                int64_t cols) {
  SmallVector<int64_t, 2> shape;
  if (rows > 0)
    shape.push_back(rows);
  shape.push_back(cols);
  auto type = RankedTensorType::get(shape, b.getF32Type());
  return arith::ConstantOp::create(b, loc,
                                   DenseElementsAttr::get(type, values));
}

Value mlir::tq::createSinglePagePool(OpBuilder &b, Location loc, Value bytes,
                                     Type poolType) {
  auto type = cast<RankedTensorType>(bytes.getType());
  SmallVector<int64_t> shape = {1};
  shape.append(type.getShape().begin(), type.getShape().end());
  SmallVector<OpFoldResult> outputShape = {b.getIndexAttr(1)};
  for (unsigned i = 0; i < 3; ++i)
    outputShape.push_back(tensor::getMixedSize(b, loc, bytes, i));
  Value pool = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), bytes,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}}, outputShape);
  return tensor::CastOp::create(b, loc, poolType, pool);
}

CacheAccess mlir::tq::resolveCacheAccess(OpBuilder &b, Location loc,
                                         Value cache, Value pages) {
  CacheAccess access;
  access.pages = pages;
  auto cacheType = cast<CacheType>(cache.getType());
  if (!ShapedType::isDynamic(cacheType.getNumTokens()))
    access.numTokens = b.getIndexAttr(cacheType.getNumTokens());
  access.tokenOffset = indexConst(b, loc, 0);
  Value v = cache;
  while (auto slice = v.getDefiningOp<SliceTokensOp>()) {
    if (!access.numTokens)
      access.numTokens = slice.getSize();
    access.tokenOffset =
        arith::AddIOp::create(b, loc, access.tokenOffset, slice.getOffset());
    v = slice.getCache();
  }
  if (auto fromPages = v.getDefiningOp<FromPagesOp>()) {
    access.table = fromPages.getTable();
    access.sequenceTokens = fromPages.getNumTokens();
  } else {
    // Contiguous: one page holding every token.
    access.sequenceTokens = tensor::DimOp::create(b, loc, pages, 1);
  }
  if (!access.numTokens)
    access.numTokens = access.sequenceTokens;
  return access;
}

RowDecoder::RowDecoder(OpBuilder &b, Location loc, quant::Format format,
                       CacheAccess access)
    : format_(std::move(format)), access_(access) {
  pageSize_ = tensor::DimOp::create(b, loc, access_.pages, 1);
  if (spec().codebook) {
    const std::vector<float> &c = spec().codebook->centroids;
    codebook_ = createF32Matrix(b, loc, c, 0, int64_t(c.size()));
  }
}

std::pair<Value, Value> RowDecoder::rowAddress(OpBuilder &b, Location loc,
                                               Value t) const {
  if (pages_)
    return addressAt(b, loc, t);
  assert(!access_.table && "a paged cache's addresses are precomputed");
  return {indexConst(b, loc, 0),
          arith::AddIOp::create(b, loc, access_.tokenOffset, t)};
}

std::pair<Value, Value>
RowDecoder::nextRangeRowAddress(OpBuilder &b, Location loc, Value t) const {
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access_.numTokens);
  Value at = arith::AddIOp::create(b, loc, tokens, t);
  if (!access_.table)
    return {indexConst(b, loc, 0),
            arith::AddIOp::create(b, loc, access_.tokenOffset, at)};
  assert(addressesNextRange_ &&
         "precompute(..., DecodeUse::VectorRows) addresses the next range");
  return addressAt(b, loc, at);
}

std::pair<Value, Value> RowDecoder::addressAt(OpBuilder &b, Location loc,
                                              Value at) const {
  auto read = [&](Value table) -> Value {
    return arith::IndexCastUIOp::create(
        b, loc, b.getIndexType(),
        tensor::ExtractOp::create(b, loc, table, ValueRange{at}));
  };
  return {read(pages_), read(slots_)};
}

std::tuple<Value, Value, Value>
RowDecoder::rowsInOnePage(OpBuilder &b, Location loc, Value t, int64_t count,
                          bool nextRange) const {
  assert(count >= 1 && "rows in one page: at least one row");
  return rowsInOnePageTo(b, loc, t, indexConst(b, loc, count - 1), nextRange);
}

std::tuple<Value, Value, Value>
RowDecoder::rowsInOnePage(OpBuilder &b, Location loc, Value t, Value count,
                          bool nextRange) const {
  return rowsInOnePageTo(
      b, loc, t, arith::SubIOp::create(b, loc, count, indexConst(b, loc, 1)),
      nextRange);
}

std::tuple<Value, Value, Value>
RowDecoder::rowsInOnePageTo(OpBuilder &b, Location loc, Value t,
                            Value lastOffset, bool nextRange) const {
  auto [page, slot] =
      nextRange ? nextRangeRowAddress(b, loc, t) : rowAddress(b, loc, t);
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access_.numTokens);
  // The last row: inside the cache (this range), or the sequence (next).
  Value last = arith::AddIOp::create(b, loc, t, lastOffset);
  Value inside =
      nextRange
          ? arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::ult,
                arith::AddIOp::create(
                    b, loc,
                    arith::AddIOp::create(b, loc, access_.tokenOffset, tokens),
                    last),
                access_.sequenceTokens)
          : arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, last,
                                  tokens);
  Value samePage = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ult,
      arith::AddIOp::create(b, loc, slot, lastOffset), pageSize_);
  return {arith::AndIOp::create(b, loc, inside, samePage), page, slot};
}

Value RowDecoder::byteAt(OpBuilder &b, Location loc, Value t, Value kvHead,
                         Value offset) const {
  auto [page, slot] = rowAddress(b, loc, t);
  Value byte = tensor::ExtractOp::create(
      b, loc, access_.pages, ValueRange{page, slot, kvHead, offset});
  return arith::ExtUIOp::create(b, loc, b.getI32Type(), byte);
}

Value RowDecoder::halfAt(OpBuilder &b, Location loc, Value t, Value kvHead,
                         Value offset) const {
  Value lo = byteAt(b, loc, t, kvHead, offset);
  Value next = arith::AddIOp::create(b, loc, offset, indexConst(b, loc, 1));
  Value hi = byteAt(b, loc, t, kvHead, next);
  hi = arith::ShLIOp::create(b, loc, hi, i32Const(b, loc, 8));
  Value bits = arith::OrIOp::create(b, loc, lo, hi);
  bits = arith::TruncIOp::create(b, loc, b.getI16Type(), bits);
  Value half = arith::BitcastOp::create(b, loc, b.getF16Type(), bits);
  return arith::ExtFOp::create(b, loc, b.getF32Type(), half);
}

Value RowDecoder::f32At(OpBuilder &b, Location loc, Value t, Value kvHead,
                        Value offset) const {
  Value word = i32Const(b, loc, 0);
  for (int k = 0; k < 4; ++k) {
    Value at = arith::AddIOp::create(b, loc, offset, indexConst(b, loc, k));
    Value byte = byteAt(b, loc, t, kvHead, at);
    byte = arith::ShLIOp::create(b, loc, byte, i32Const(b, loc, 8 * k));
    word = arith::OrIOp::create(b, loc, word, byte);
  }
  return arith::BitcastOp::create(b, loc, b.getF32Type(), word);
}

Value RowDecoder::bitsAt(OpBuilder &b, Location loc, Value t, Value kvHead,
                         Value offset, Value bit, unsigned width) const {
  // Plane widths divide 8, so a field never straddles a byte.
  Value byteIndex = arith::DivUIOp::create(b, loc, bit, indexConst(b, loc, 8));
  Value at = arith::AddIOp::create(b, loc, offset, byteIndex);
  Value byte = byteAt(b, loc, t, kvHead, at);
  Value shift = arith::RemUIOp::create(b, loc, bit, indexConst(b, loc, 8));
  shift = arith::IndexCastUIOp::create(b, loc, b.getI32Type(), shift);
  Value field = arith::ShRUIOp::create(b, loc, byte, shift);
  return arith::AndIOp::create(b, loc, field,
                               i32Const(b, loc, (1 << width) - 1));
}

Value RowDecoder::blockBase(OpBuilder &b, Location loc, Value j) const {
  Value block =
      arith::DivUIOp::create(b, loc, j, indexConst(b, loc, spec().blockLen));
  return arith::MulIOp::create(b, loc, block,
                               indexConst(b, loc, spec().bytesPerBlock));
}

Value RowDecoder::scale(OpBuilder &b, Location loc, Value t, Value kvHead,
                        Value j) const {
  const quant::FormatSpec &s = spec();
  if (scales_) {
    Value block =
        arith::DivUIOp::create(b, loc, j, indexConst(b, loc, s.blockLen));
    return tensor::ExtractOp::create(b, loc, scales_,
                                     ValueRange{t, kvHead, block});
  }
  Value at = arith::AddIOp::create(b, loc, blockBase(b, loc, j),
                                   indexConst(b, loc, s.scaleOffset));
  return s.scaleType == quant::ScalarType::F16 ? halfAt(b, loc, t, kvHead, at)
                                               : f32At(b, loc, t, kvHead, at);
}

Value RowDecoder::index(OpBuilder &b, Location loc, Value t, Value kvHead,
                        Value j) const {
  const quant::FormatSpec &s = spec();
  Value base = blockBase(b, loc, j);
  Value inBlock =
      arith::RemUIOp::create(b, loc, j, indexConst(b, loc, s.blockLen));
  Value index = i32Const(b, loc, 0);
  for (const quant::BitPlane &plane : s.indexPlanes) {
    Value bit = arith::MulIOp::create(b, loc, inBlock,
                                      indexConst(b, loc, plane.bits));
    Value offset = arith::AddIOp::create(b, loc, base,
                                         indexConst(b, loc, plane.byteOffset));
    Value field = bitsAt(b, loc, t, kvHead, offset, bit, plane.bits);
    field = arith::ShLIOp::create(b, loc, field,
                                  i32Const(b, loc, int32_t(plane.shift)));
    index = arith::OrIOp::create(b, loc, index, field);
  }
  return index;
}

Value RowDecoder::codebookIndex(OpBuilder &b, Location loc,
                                Value index) const {
  const quant::FormatSpec &s = spec();
  if (!s.codebook)
    return index;
  const uint64_t levels = s.codebook->centroids.size();
  unsigned bits = 0;
  for (const quant::BitPlane &plane : s.indexPlanes)
    bits = std::max(bits, plane.shift + plane.bits);
  if (bits < 32 && (uint64_t(1) << bits) <= levels)
    return index;
  if (llvm::isPowerOf2_64(levels))
    return arith::AndIOp::create(b, loc, index,
                                 i32Const(b, loc, int32_t(levels - 1)));
  return arith::RemUIOp::create(b, loc, index,
                                i32Const(b, loc, int32_t(levels)));
}

Value RowDecoder::centroid(OpBuilder &b, Location loc, Value index) const {
  Value i = arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                         codebookIndex(b, loc, index));
  return tensor::ExtractOp::create(b, loc, codebook_, ValueRange{i});
}

Value RowDecoder::element(OpBuilder &b, Location loc, Value t, Value kvHead,
                          Value j) const {
  const quant::FormatSpec &s = spec();
  switch (s.family) {
  case quant::FormatFamily::F16: {
    Value at = arith::MulIOp::create(b, loc, j, indexConst(b, loc, 2));
    return halfAt(b, loc, t, kvHead, at);
  }
  case quant::FormatFamily::Q8_0: {
    // The "index" plane holds the two's-complement int8 value.
    Value raw = index(b, loc, t, kvHead, j);
    Value narrow = arith::TruncIOp::create(b, loc, b.getI8Type(), raw);
    Value value = arith::SIToFPOp::create(b, loc, b.getF32Type(), narrow);
    return arith::MulFOp::create(b, loc, scale(b, loc, t, kvHead, j), value);
  }
  case quant::FormatFamily::Haar:
    return centroid(b, loc, index(b, loc, t, kvHead, j));
  default:
    return arith::MulFOp::create(b, loc, scale(b, loc, t, kvHead, j),
                                 centroid(b, loc, index(b, loc, t, kvHead, j)));
  }
}

void RowDecoder::precompute(OpBuilder &b, Location loc, int64_t kvHeads,
                            DecodeUse use) {
  // Without a table the address is plain arithmetic on t; with one, the
  // table lookups move out of the element loops.
  if (access_.table)
    precomputeAddresses(b, loc, use == DecodeUse::VectorRows);
  if (use == DecodeUse::Elements)
    precomputeScales(b, loc, kvHeads);
}

void RowDecoder::precomputeAddresses(OpBuilder &b, Location loc,
                                     bool withNextRange) {
  // Rows offset, offset + 1, ... fill the pages in order, so the rows are
  // written page by page: an outer loop over the table entries they touch
  // (two divisions in all), an inner one over the entry's slots that only
  // stores (the slot counts up, the page is loop-invariant). With the next
  // range the rows cover twice the tokens: the second half addresses the
  // range that follows (nextRangeRowAddress). The entry is clamped to the
  // sequence's last one so no lookup leaves the table.
  Value c1 = indexConst(b, loc, 1);
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access_.numTokens);
  Value rows = withNextRange ? arith::AddIOp::create(b, loc, tokens, tokens)
                             : tokens;
  addressesNextRange_ = withNextRange;
  // Pages and slots as 32-bit words (the table's pages are i32, a page's
  // slots fewer than 2^32 by the runtime's and ggml's layouts): half the
  // stores of index words, per tile and cache.
  SmallVector<OpFoldResult> sizes = {rows};
  Type word = b.getI32Type();
  Value pagesInit = tensor::EmptyOp::create(b, loc, sizes, word);
  Value slotsInit = tensor::EmptyOp::create(b, loc, sizes, word);
  Value first = access_.tokenOffset;
  Value end = arith::AddIOp::create(b, loc, first, rows);
  Value firstEntry = arith::DivUIOp::create(b, loc, first, pageSize_);
  Value endEntry = arith::CeilDivUIOp::create(b, loc, end, pageSize_);
  // (Unused, and unsigned garbage, when the sequence is empty: then there
  // are no rows.)
  Value lastEntry = arith::DivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, access_.sequenceTokens, c1),
      pageSize_);
  auto walk = scf::ForOp::create(
      b, loc, firstEntry, endEntry, c1, ValueRange{pagesInit, slotsInit},
      [&](OpBuilder &b, Location loc, Value entry, ValueRange state) {
        Value inTable = arith::MinUIOp::create(b, loc, entry, lastEntry);
        Value page = tensor::ExtractOp::create(b, loc, access_.table,
                                               ValueRange{inTable});
        // Rows [pageStart, pageStart + page_size) of the sequence live in
        // this entry; of them, those in [first, end).
        Value pageStart = arith::MulIOp::create(b, loc, entry, pageSize_);
        Value from = arith::SubIOp::create(
            b, loc, arith::MaxUIOp::create(b, loc, pageStart, first), first);
        Value to = arith::SubIOp::create(
            b, loc,
            arith::MinUIOp::create(
                b, loc, arith::AddIOp::create(b, loc, pageStart, pageSize_),
                end),
            first);
        // Row first + t sits at slot first + t - pageStart.
        Value slotBase = arith::SubIOp::create(b, loc, first, pageStart);
        auto fill = scf::ForOp::create(
            b, loc, from, to, c1, ValueRange{state[0], state[1]},
            [&](OpBuilder &b, Location loc, Value t, ValueRange inner) {
              Value slot = arith::IndexCastUIOp::create(
                  b, loc, word, arith::AddIOp::create(b, loc, slotBase, t));
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{tensor::InsertOp::create(b, loc, page, inner[0],
                                                      ValueRange{t}),
                             tensor::InsertOp::create(b, loc, slot, inner[1],
                                                      ValueRange{t})});
            });
        scf::YieldOp::create(b, loc, fill.getResults());
      });
  pages_ = walk.getResult(0);
  slots_ = walk.getResult(1);
}

void RowDecoder::precomputeScales(OpBuilder &b, Location loc,
                                  int64_t kvHeads) {
  MLIRContext *ctx = b.getContext();
  const quant::FormatSpec &s = spec();
  if (s.scaleRule == quant::ScaleRule::None)
    return;
  SmallVector<OpFoldResult> sizes = {access_.numTokens,
                                     b.getIndexAttr(kvHeads),
                                     b.getIndexAttr(s.blocksPerRow())};
  Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  // Computed with the page tensors in place, before scales_ is set.
  Value scales = createLoopNest(
      b, loc, init, {}, {}, AffineMap::getMultiDimIdentityMap(3, ctx), 3, 0,
      [&](OpBuilder &nb, Location nloc, ValueRange idx, ValueRange,
          Value) -> Value {
        Value j = arith::MulIOp::create(nb, nloc, idx[2],
                                        indexConst(nb, nloc, s.blockLen));
        return scale(nb, nloc, idx[0], idx[1], j);
      });
  scales_ = scales;
}

Value RowDecoder::residualNorm(OpBuilder &b, Location loc, Value t,
                               Value kvHead) const {
  return halfAt(b, loc, t, kvHead,
                indexConst(b, loc, *spec().residualNormOffset));
}

Value RowDecoder::qjlSign(OpBuilder &b, Location loc, Value t, Value kvHead,
                          Value i) const {
  Value offset = indexConst(b, loc, spec().qjlPlane->byteOffset);
  Value bit = bitsAt(b, loc, t, kvHead, offset, i, 1);
  Value isSet = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, bit,
                                      i32Const(b, loc, 0));
  Value plus = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
  Value minus = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(-1.0f));
  return arith::SelectOp::create(b, loc, isSet, plus, minus);
}
