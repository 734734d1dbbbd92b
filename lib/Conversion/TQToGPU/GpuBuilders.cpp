//===- GpuBuilders.cpp - Scalar and warp-level IR helpers -----------------===//

#include "GpuBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMAttrs.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::gpukernel;
namespace quant = ::tq::quant;

Value gpukernel::indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value gpukernel::toIndex(OpBuilder &b, Location loc, Value i32) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), i32);
}

MemRefType gpukernel::globalBuffer(OpBuilder &b, Type element) {
  return MemRefType::get({ShapedType::kDynamic}, element);
}

PageDivisor PageDivisor::get(OpBuilder &b, Location loc, Value pageSize) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  PageDivisor d;
  d.size = arith::IndexCastUIOp::create(b, loc, i32, pageSize);
  Value wide = arith::ExtUIOp::create(b, loc, i64, d.size);
  d.magic = arith::AddIOp::create(
      b, loc,
      arith::DivUIOp::create(
          b, loc, arith::ConstantIntOp::create(b, loc, i64, int64_t(1) << 32),
          wide),
      arith::ConstantIntOp::create(b, loc, i64, 1));
  return d;
}

PageDivisor PageDivisor::direct(OpBuilder &b, Location loc, Value pageSize) {
  return {arith::IndexCastUIOp::create(b, loc, b.getI32Type(), pageSize),
          Value()};
}

std::pair<Value, Value> PageDivisor::divRem(OpBuilder &b, Location loc,
                                            Value position) const {
  if (!magic)
    return {arith::DivUIOp::create(b, loc, position, size),
            arith::RemUIOp::create(b, loc, position, size)};
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value product = arith::MulIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, i64, position), magic);
  Value q = arith::TruncIOp::create(
      b, loc, i32,
      arith::ShRUIOp::create(b, loc, product,
                             arith::ConstantIntOp::create(b, loc, i64, 32)));
  Value r = arith::SubIOp::create(b, loc, position,
                                  arith::MulIOp::create(b, loc, q, size));
  // One too many where r wrapped below zero.
  Value over =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, r, size);
  Value one = arith::ConstantIntOp::create(b, loc, i32, 1);
  return {arith::SelectOp::create(b, loc, over,
                                  arith::SubIOp::create(b, loc, q, one), q),
          arith::SelectOp::create(b, loc, over,
                                  arith::AddIOp::create(b, loc, r, size), r)};
}

Value gpukernel::pagedRow(OpBuilder &b, Location loc, Value pageTable,
                          Value firstPage, Value position,
                          const PageDivisor &pages, Value kvHeads,
                          Value kvHead) {
  // Positions, page sizes and page numbers are i32 in the ABI: the page
  // walk divides in 32 bits, and the row index widens as it multiplies
  // (32 x 32 -> 64-bit products).
  Type i32 = b.getI32Type(), index = b.getIndexType();
  auto widen = [&](Value v) {
    return arith::IndexCastUIOp::create(b, loc, index, v).getResult();
  };
  auto [q, r] = pages.divRem(
      b, loc, arith::IndexCastUIOp::create(b, loc, i32, position));
  Value entry = arith::AddIOp::create(b, loc, firstPage, widen(q));
  Value page = widen(
      memref::LoadOp::create(b, loc, pageTable, ValueRange{entry}));
  Value token = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, page, widen(pages.size)),
      widen(r));
  return arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, token, kvHeads), kvHead);
}

gpu::GPUFuncOp gpukernel::createKernel(OpBuilder &b, Location loc,
                                       StringRef name, ArrayRef<Type> args,
                                       ArrayRef<Type> workgroup,
                                       unsigned blockSize) {
  auto func = gpu::GPUFuncOp::create(b, loc, name,
                                     b.getFunctionType(args, {}), workgroup);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(blockSize), 1, 1}));
  return func;
}

Value gpukernel::f32Const(OpBuilder &b, Location loc, float v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

Value gpukernel::fusedMultiplyAdd(OpBuilder &b, Location loc, Value x,
                                  Value y, Value z) {
  auto contract = arith::FastMathFlagsAttr::get(
      b.getContext(), arith::FastMathFlags::contract);
  Value product = arith::MulFOp::create(b, loc, x, y, contract);
  return arith::AddFOp::create(b, loc, product, z, contract);
}

Value gpukernel::reciprocalSqrt(OpBuilder &b, Location loc, Value x) {
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), x);
  Value half = arith::ShRUIOp::create(
      b, loc, bits,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), 1));
  Value guess = arith::SubIOp::create(
      b, loc, arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0x5f3759df),
      half);
  Value y = arith::BitcastOp::create(b, loc, b.getF32Type(), guess);
  Value halfX = arith::MulFOp::create(b, loc, x, f32Const(b, loc, 0.5f));
  for (int step = 0; step < 3; ++step) {
    // y <- y * (1.5 - 0.5 x y^2)
    Value yy = arith::MulFOp::create(b, loc, y, y);
    Value t = arith::SubFOp::create(b, loc, f32Const(b, loc, 1.5f),
                                    arith::MulFOp::create(b, loc, halfX, yy));
    y = arith::MulFOp::create(b, loc, y, t);
  }
  return y;
}

namespace {
Value i32Const(OpBuilder &b, Location loc, int32_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}
Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddIOp::create(b, loc, x, y);
}
/// (byte >> shift) & (2^bits - 1), i32.
Value bitField(OpBuilder &b, Location loc, Value byte, Value shift,
               unsigned bits) {
  return arith::AndIOp::create(b, loc,
                               arith::ShRUIOp::create(b, loc, byte, shift),
                               i32Const(b, loc, (1 << bits) - 1));
}
} // namespace

void gpukernel::disableUnrolling(Operation *loop) {
  MLIRContext *ctx = loop->getContext();
  auto noUnroll = LLVM::LoopUnrollAttr::get(ctx, BoolAttr::get(ctx, true), {},
                                            {}, {}, {}, {}, {});
  loop->setAttr("llvm.loop_annotation",
                LLVM::LoopAnnotationAttr::get(ctx, {}, {}, {}, noUnroll, {}, {},
                                              {}, {}, {}, {}, {}, {}, {}, {},
                                              {}));
}

//===----------------------------------------------------------------------===//
// PackedRowReader
//===----------------------------------------------------------------------===//

Value PackedRowReader::byteAt(OpBuilder &b, Location loc, Value offset) const {
  Value byte = memref::LoadOp::create(b, loc, bytes_, ValueRange{offset});
  return arith::ExtUIOp::create(b, loc, b.getI32Type(), byte);
}

Value PackedRowReader::halfAt(OpBuilder &b, Location loc, Value offset) const {
  Value lo = byteAt(b, loc, offset);
  Value hi = byteAt(b, loc, add(b, loc, offset, indexConst(b, loc, 1)));
  hi = arith::ShLIOp::create(b, loc, hi, i32Const(b, loc, 8));
  Value bits = arith::TruncIOp::create(b, loc, b.getI16Type(),
                                       arith::OrIOp::create(b, loc, lo, hi));
  Value half = arith::BitcastOp::create(b, loc, b.getF16Type(), bits);
  return arith::ExtFOp::create(b, loc, b.getF32Type(), half);
}

Value PackedRowReader::f32At(OpBuilder &b, Location loc, Value offset) const {
  Value word = i32Const(b, loc, 0);
  for (int k = 0; k < 4; ++k) {
    Value byte = byteAt(b, loc, add(b, loc, offset, indexConst(b, loc, k)));
    byte = arith::ShLIOp::create(b, loc, byte, i32Const(b, loc, 8 * k));
    word = arith::OrIOp::create(b, loc, word, byte);
  }
  return arith::BitcastOp::create(b, loc, b.getF32Type(), word);
}

Value PackedRowReader::scale(OpBuilder &b, Location loc, Value rowBase,
                             Value j) const {
  Value block = arith::DivUIOp::create(b, loc, j,
                                       indexConst(b, loc, spec_.blockLen));
  Value at = arith::MulIOp::create(b, loc, block,
                                   indexConst(b, loc, spec_.bytesPerBlock));
  return scaleAt(b, loc,
                 add(b, loc, add(b, loc, rowBase, at),
                     indexConst(b, loc, spec_.scaleOffset)));
}

Value PackedRowReader::scaleAt(OpBuilder &b, Location loc,
                               Value offset) const {
  return spec_.scaleType == quant::ScalarType::F16 ? halfAt(b, loc, offset)
                                                   : f32At(b, loc, offset);
}

Value PackedRowReader::residualNorm(OpBuilder &b, Location loc,
                                    Value rowBase) const {
  return halfAt(b, loc,
                add(b, loc, rowBase,
                    indexConst(b, loc, *spec_.residualNormOffset)));
}

Value PackedRowReader::qjlBit(OpBuilder &b, Location loc, Value rowBase,
                              Value j) const {
  // One block per row: element j of the row is element j of its block.
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                               field(b, loc, rowBase, *spec_.qjlPlane, j),
                               i32Const(b, loc, 0));
}

Value PackedRowReader::field(OpBuilder &b, Location loc, Value blockBase,
                             const quant::BitPlane &plane,
                             Value inBlock) const {
  // Plane widths divide 8: a field never straddles a byte.
  Value bit =
      arith::MulIOp::create(b, loc, inBlock, indexConst(b, loc, plane.bits));
  Value at = add(b, loc,
                 add(b, loc, blockBase, indexConst(b, loc, plane.byteOffset)),
                 arith::DivUIOp::create(b, loc, bit, indexConst(b, loc, 8)));
  Value shift = arith::IndexCastUIOp::create(
      b, loc, b.getI32Type(),
      arith::RemUIOp::create(b, loc, bit, indexConst(b, loc, 8)));
  return bitField(b, loc, byteAt(b, loc, at), shift, plane.bits);
}

Value PackedRowReader::index(OpBuilder &b, Location loc, Value rowBase,
                             Value j) const {
  Value block = arith::DivUIOp::create(b, loc, j,
                                       indexConst(b, loc, spec_.blockLen));
  Value base = add(b, loc, rowBase,
                   arith::MulIOp::create(
                       b, loc, block, indexConst(b, loc, spec_.bytesPerBlock)));
  Value inBlock = arith::RemUIOp::create(b, loc, j,
                                         indexConst(b, loc, spec_.blockLen));
  Value index = i32Const(b, loc, 0);
  for (const quant::BitPlane &plane : spec_.indexPlanes)
    index = arith::OrIOp::create(
        b, loc, index,
        arith::ShLIOp::create(b, loc, field(b, loc, base, plane, inBlock),
                              i32Const(b, loc, int32_t(plane.shift))));
  return index;
}

Value PackedRowReader::centroid(OpBuilder &b, Location loc,
                                Value index) const {
  // Where the planes hold more bits than the codebook has entries (haar4:
  // 4-bit indices in whole bytes), the index is read mod the table's size,
  // as lib/Quant's decoder does, so a byte above 15 stays in the table.
  const uint64_t levels = spec_.codebook ? spec_.codebook->centroids.size() : 0;
  unsigned bits = 0;
  for (const quant::BitPlane &plane : spec_.indexPlanes)
    bits = std::max(bits, plane.shift + plane.bits);
  if (levels && (bits >= 32 || (uint64_t(1) << bits) > levels))
    index = llvm::isPowerOf2_64(levels)
                ? Value(arith::AndIOp::create(
                      b, loc, index, i32Const(b, loc, int32_t(levels - 1))))
                : Value(arith::RemUIOp::create(
                      b, loc, index, i32Const(b, loc, int32_t(levels))));
  Value at = add(b, loc, tableBase_,
                 arith::IndexCastUIOp::create(b, loc, b.getIndexType(), index));
  return memref::LoadOp::create(b, loc, table_, ValueRange{at});
}

Value PackedRowReader::element(OpBuilder &b, Location loc, Value rowBase,
                               Value j) const {
  switch (spec_.family) {
  case quant::FormatFamily::F16:
    return halfAt(b, loc,
                  add(b, loc, rowBase,
                      arith::MulIOp::create(b, loc, j, indexConst(b, loc, 2))));
  case quant::FormatFamily::Haar:
    return unscaled(b, loc, index(b, loc, rowBase, j));
  default:
    return arith::MulFOp::create(b, loc, scale(b, loc, rowBase, j),
                                 unscaled(b, loc, index(b, loc, rowBase, j)));
  }
}

Value PackedRowReader::unscaled(OpBuilder &b, Location loc,
                                Value index) const {
  if (spec_.family != quant::FormatFamily::Q8_0)
    return centroid(b, loc, index);
  // The "index" plane holds the two's-complement int8 value.
  Value narrow = arith::TruncIOp::create(b, loc, b.getI8Type(), index);
  return arith::SIToFPOp::create(b, loc, b.getF32Type(), narrow);
}

//===----------------------------------------------------------------------===//
// LaneRowReader
//===----------------------------------------------------------------------===//

std::optional<LaneRowReader>
LaneRowReader::get(OpBuilder &b, Location loc, const PackedRowReader &reader,
                   const LaneRow &row) {
  const quant::FormatSpec &spec = reader.spec();
  const unsigned r = row.regsPerLane();
  const bool halves = spec.family == quant::FormatFamily::F16;
  // (f16 rows are plain halves: blocks of one value, nothing to straddle.)
  if (!row.blocked() || row.dim % r != 0 || spec.paddedDim != row.dim ||
      (!halves && spec.blockLen % r != 0))
    return std::nullopt;
  LaneRowReader lane(reader, r);
  // The lane's first element; lanes past the dim read the last R.
  Value first = arith::MinUIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, row.lane, indexConst(b, loc, r)),
      indexConst(b, loc, row.dim - r));
  if (halves) {
    lane.firstByte_ =
        arith::MulIOp::create(b, loc, first, indexConst(b, loc, 2));
    return lane;
  }
  Value blockByte = arith::MulIOp::create(
      b, loc,
      arith::DivUIOp::create(b, loc, first, indexConst(b, loc, spec.blockLen)),
      indexConst(b, loc, spec.bytesPerBlock));
  Value inBlock =
      arith::RemUIOp::create(b, loc, first, indexConst(b, loc, spec.blockLen));
  for (const quant::BitPlane &plane : spec.indexPlanes) {
    // Plane widths and R are powers of two: a lane's fields start at a
    // byte boundary, or all sit in one byte.
    Value bit =
        arith::MulIOp::create(b, loc, inBlock, indexConst(b, loc, plane.bits));
    lane.planeByte_.push_back(
        add(b, loc,
            add(b, loc, blockByte, indexConst(b, loc, plane.byteOffset)),
            arith::DivUIOp::create(b, loc, bit, indexConst(b, loc, 8))));
    lane.planeShift_.push_back(
        r * plane.bits >= 8
            ? Value()
            : arith::IndexCastUIOp::create(
                  b, loc, b.getI32Type(),
                  arith::RemUIOp::create(b, loc, bit, indexConst(b, loc, 8))));
  }
  if (spec.scaleRule != quant::ScaleRule::None &&
      spec.family != quant::FormatFamily::Haar)
    lane.scaleByte_ =
        add(b, loc, blockByte, indexConst(b, loc, spec.scaleOffset));
  return lane;
}

Value LaneRowReader::field(
    OpBuilder &b, Location loc, Value base, const quant::BitPlane &plane,
    Value laneShift, unsigned c,
    SmallVectorImpl<std::pair<int64_t, Value>> &bytes) const {
  const int64_t offset = laneShift ? 0 : int64_t(c) * plane.bits / 8;
  Value byte;
  for (auto &[at, value] : bytes)
    if (at == offset)
      byte = value;
  if (!byte) {
    byte = reader_->byteAt(b, loc,
                           add(b, loc, base, indexConst(b, loc, offset)));
    bytes.push_back({offset, byte});
  }
  Value shift = i32Const(b, loc, int32_t(c * plane.bits % 8));
  if (laneShift)
    shift = arith::AddIOp::create(b, loc, laneShift, shift);
  return bitField(b, loc, byte, shift, plane.bits);
}

SmallVector<Value> LaneRowReader::values(OpBuilder &b, Location loc,
                                         Value rowBase) const {
  const quant::FormatSpec &spec = reader_->spec();
  SmallVector<Value> out;
  if (spec.family == quant::FormatFamily::F16) {
    Value base = add(b, loc, rowBase, firstByte_);
    for (unsigned c = 0; c < regs_; ++c)
      out.push_back(reader_->halfAt(
          b, loc, add(b, loc, base, indexConst(b, loc, 2 * c))));
    return out;
  }
  SmallVector<Value> bases;
  SmallVector<SmallVector<std::pair<int64_t, Value>>> bytes(
      spec.indexPlanes.size());
  for (Value planeByte : planeByte_)
    bases.push_back(add(b, loc, rowBase, planeByte));
  for (unsigned c = 0; c < regs_; ++c) {
    Value index = i32Const(b, loc, 0);
    for (auto [p, plane] : llvm::enumerate(spec.indexPlanes))
      index = arith::OrIOp::create(
          b, loc, index,
          arith::ShLIOp::create(
              b, loc,
              field(b, loc, bases[p], plane, planeShift_[p], c, bytes[p]),
              i32Const(b, loc, int32_t(plane.shift))));
    out.push_back(reader_->unscaled(b, loc, index));
  }
  return out;
}

Value LaneRowReader::scale(OpBuilder &b, Location loc, Value rowBase) const {
  if (!scaleByte_)
    return Value();
  return reader_->scaleAt(b, loc, add(b, loc, rowBase, scaleByte_));
}

//===----------------------------------------------------------------------===//
// Warp-level helpers
//===----------------------------------------------------------------------===//

Value gpukernel::warpAllReduceSum(OpBuilder &b, Location loc, Value x,
                                  unsigned lanes, unsigned warpSize) {
  for (unsigned offset = lanes / 2; offset >= 1; offset /= 2) {
    auto shuffle = gpu::ShuffleOp::create(b, loc, x, int32_t(offset),
                                          int32_t(warpSize),
                                          gpu::ShuffleMode::XOR);
    x = arith::AddFOp::create(b, loc, x, shuffle.getShuffleResult());
  }
  return x;
}

Value LaneRow::element(OpBuilder &b, Location loc, unsigned c) const {
  if (blocked())
    return add(b, loc,
               arith::MulIOp::create(b, loc, lane,
                                     indexConst(b, loc, regsPerLane())),
               indexConst(b, loc, c));
  return add(b, loc, indexConst(b, loc, int64_t(c) * warpSize), lane);
}

Value LaneRow::valid(OpBuilder &b, Location loc, unsigned c) const {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                               element(b, loc, c), indexConst(b, loc, dim));
}

bool gpukernel::rotationNeedsScratch(const quant::FormatSpec &spec) {
  return spec.rotation && spec.rotation->kind() == quant::RotationKind::Haar;
}

namespace {
/// A constant f32 array `name` of `shape` in global memory (address space
/// 1 on both vendors), created once in `symbolTable` from `values()`, read
/// at the builder's point.
Value getConstantGlobal(OpBuilder &b, Location loc, Operation *symbolTable,
                        const std::string &name, ArrayRef<int64_t> shape,
                        function_ref<std::vector<float>()> values) {
  auto type = MemRefType::get(shape, b.getF32Type(), AffineMap(),
                              b.getI64IntegerAttr(1));
  if (!SymbolTable::lookupSymbolIn(symbolTable, name)) {
    std::vector<float> v = values();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&symbolTable->getRegion(0).front());
    auto tensorType = RankedTensorType::get(shape, b.getF32Type());
    memref::GlobalOp::create(
        b, loc, name, b.getStringAttr("private"), type,
        DenseElementsAttr::get(tensorType, ArrayRef<float>(v)),
        /*constant=*/true, /*alignment=*/b.getI64IntegerAttr(16));
  }
  return memref::GetGlobalOp::create(b, loc, type, name);
}
} // namespace

Value gpukernel::getRotationMatrix(OpBuilder &b, Location loc,
                                   Operation *symbolTable,
                                   const quant::FormatSpec &spec) {
  const quant::Rotation &rotation = *spec.rotation;
  const int64_t n = rotation.dim();
  return getConstantGlobal(
      b, loc, symbolTable, "tq_rotation_" + spec.name + "_" + std::to_string(n),
      {n, n}, [&] {
        std::vector<double> m = rotation.matrix();
        return std::vector<float>(m.begin(), m.end());
      });
}

unsigned gpukernel::codebookTableSize(const quant::FormatSpec &spec) {
  return spec.codebook ? 1u << spec.indexBits : 0u;
}

Value gpukernel::getCodebookTable(OpBuilder &b, Location loc,
                                  Operation *symbolTable,
                                  const quant::FormatSpec &spec) {
  const int64_t n = codebookTableSize(spec);
  return getConstantGlobal(
      b, loc, symbolTable,
      "tq_codebook_" + spec.name + "_" + std::to_string(spec.headDim), {n},
      [&] {
        const std::vector<float> &c = spec.codebook->centroids;
        std::vector<float> values;
        for (int64_t i = 0; i < n; ++i)
          values.push_back(c[std::min<size_t>(i, c.size() - 1)]);
        return values;
      });
}

Value gpukernel::getQjlMatrix(OpBuilder &b, Location loc,
                              Operation *symbolTable,
                              const quant::FormatSpec &spec) {
  const quant::QjlProjection &qjl = *spec.qjl;
  assert(qjl.rows() == qjl.dim() && "QJL projection must be square");
  const int64_t n = qjl.dim();
  return getConstantGlobal(b, loc, symbolTable,
                           "tq_qjl_" + spec.name + "_" + std::to_string(n),
                           {n, n}, [&] { return qjl.matrix(); });
}

float gpukernel::qjlScale(const quant::FormatSpec &spec) {
  // sqrt(pi / 2), as lib/Quant's QJL estimator uses it.
  constexpr double kSqrtHalfPi = 1.2533141373155002512078826424055;
  return float(kSqrtHalfPi / double(spec.qjl->rows()));
}

namespace {

/// One sign vector applied to a lane row: x[e] *= signs[e % n].
void applySigns(OpBuilder &b, Location loc, LaneRow &row,
                const std::vector<int8_t> &signs) {
  if (signs.empty())
    return;
  const unsigned n = signs.size();
  // The signs as 32-bit masks (bit set: negative), picked by e % n.
  SmallVector<uint32_t> words((n + 31) / 32, 0);
  for (unsigned i = 0; i < n; ++i)
    if (signs[i] < 0)
      words[i / 32] |= 1u << (i % 32);
  for (unsigned c = 0; c < row.regs.size(); ++c) {
    Value s = arith::RemUIOp::create(b, loc, row.element(b, loc, c),
                                     indexConst(b, loc, n));
    Value word = i32Const(b, loc, int32_t(words[0]));
    Value wordIndex =
        arith::DivUIOp::create(b, loc, s, indexConst(b, loc, 32));
    for (unsigned w = 1; w < words.size(); ++w) {
      Value isW = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        wordIndex, indexConst(b, loc, w));
      word = arith::SelectOp::create(b, loc, isW,
                                     i32Const(b, loc, int32_t(words[w])), word);
    }
    Value bit = arith::IndexCastUIOp::create(
        b, loc, b.getI32Type(),
        arith::RemUIOp::create(b, loc, s, indexConst(b, loc, 32)));
    Value negative = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, loc,
                              arith::ShRUIOp::create(b, loc, word, bit),
                              i32Const(b, loc, 1)),
        i32Const(b, loc, 0));
    row.regs[c] = arith::SelectOp::create(
        b, loc, negative, arith::NegFOp::create(b, loc, row.regs[c]),
        row.regs[c]);
  }
}

/// Unnormalised Walsh-Hadamard butterflies on every block of n elements:
/// stage h pairs e with e ^ h, (a, b) -> (a + b, a - b). Partners in other
/// lanes come by xor shuffle, partners in other registers of the same
/// lane are plain values. Blocked layout: e ^ h is register c ^ h for
/// h < R, else lane l ^ (h / R); cyclic: lane l ^ h for h < warp, else
/// register c ^ (h / warp).
void hadamardButterflies(OpBuilder &b, Location loc, LaneRow &row,
                         unsigned n) {
  const unsigned w = row.warpSize, r = row.regsPerLane();
  const bool blocked = row.blocked();
  Value laneI32 =
      arith::IndexCastUIOp::create(b, loc, b.getI32Type(), row.lane);
  for (unsigned h = 1; h < n; h *= 2) {
    const bool acrossLanes = blocked ? h >= r : h < w;
    if (acrossLanes) {
      const unsigned offset = blocked ? h / r : h;
      Value upper = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne,
          arith::AndIOp::create(b, loc, laneI32, i32Const(b, loc, offset)),
          i32Const(b, loc, 0));
      for (Value &x : row.regs) {
        Value partner = gpu::ShuffleOp::create(b, loc, x, int32_t(offset),
                                               int32_t(row.width()),
                                               gpu::ShuffleMode::XOR)
                            .getShuffleResult();
        Value sum = arith::AddFOp::create(b, loc, x, partner);
        Value diff = arith::SubFOp::create(b, loc, partner, x);
        x = arith::SelectOp::create(b, loc, upper, diff, sum);
      }
      continue;
    }
    const unsigned hc = blocked ? h : h / w;
    for (unsigned c = 0; c < row.regs.size(); ++c) {
      if ((c & hc) || (c | hc) >= row.regs.size())
        continue;
      Value lo = row.regs[c], hi = row.regs[c | hc];
      row.regs[c] = arith::AddFOp::create(b, loc, lo, hi);
      row.regs[c | hc] = arith::SubFOp::create(b, loc, lo, hi);
    }
  }
  Value norm = f32Const(b, loc, float(1.0 / std::sqrt(double(n))));
  for (Value &x : row.regs)
    x = arith::MulFOp::create(b, loc, x, norm);
}

} // namespace

void gpukernel::denseProductLaneRow(OpBuilder &b, Location loc, LaneRow &row,
                                    unsigned n, bool transpose, Value matrix,
                                    Value scratch, Value scratchBase) {
  for (unsigned c = 0; c < row.regs.size(); ++c) {
    auto ifValid = scf::IfOp::create(b, loc, row.valid(b, loc, c), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifValid.getThenRegion().front());
    memref::StoreOp::create(b, loc, row.regs[c], scratch,
                            add(b, loc, scratchBase, row.element(b, loc, c)));
  }
  gpu::BarrierOp::create(b, loc);
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value nConst = indexConst(b, loc, n);
  // Per register: its row i of the block and the block's first element.
  // Lanes past the row use element 0 (in bounds) and stay invalid.
  SmallVector<Value> rowInBlock, blockStart;
  for (unsigned c = 0; c < row.regs.size(); ++c) {
    Value e = arith::SelectOp::create(b, loc, row.valid(b, loc, c),
                                      row.element(b, loc, c), c0);
    Value i = arith::RemUIOp::create(b, loc, e, nConst);
    rowInBlock.push_back(i);
    blockStart.push_back(arith::SubIOp::create(b, loc, e, i));
  }
  // One loop over j updates every register's sum, so the live state is
  // one accumulator per register whatever the unrolling.
  SmallVector<Value> init(row.regs.size(), f32Const(b, loc, 0.0f));
  auto loop = scf::ForOp::create(
      b, loc, c0, nConst, c1, init,
      [&](OpBuilder &nb, Location nloc, Value j, ValueRange acc) {
        SmallVector<Value> next;
        for (unsigned c = 0; c < row.regs.size(); ++c) {
          Value i = rowInBlock[c];
          Value m = transpose ? memref::LoadOp::create(nb, nloc, matrix,
                                                       ValueRange{j, i})
                              : memref::LoadOp::create(nb, nloc, matrix,
                                                       ValueRange{i, j});
          Value x = memref::LoadOp::create(
              nb, nloc, scratch,
              ValueRange{add(nb, nloc, scratchBase,
                             add(nb, nloc, blockStart[c], j))});
          next.push_back(fusedMultiplyAdd(nb, nloc, m, x, acc[c]));
        }
        scf::YieldOp::create(nb, nloc, next);
      });
  disableUnrolling(loop);
  for (unsigned c = 0; c < row.regs.size(); ++c)
    row.regs[c] = loop.getResult(c);
  // The scratch row may be reused right after.
  gpu::BarrierOp::create(b, loc);
}

void gpukernel::denseProductRows(OpBuilder &b, Location loc, unsigned dim,
                                 unsigned n, bool transpose, Value matrix,
                                 Value src, Value dst, unsigned rows,
                                 unsigned blockSize) {
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  Value dimConst = indexConst(b, loc, dim), nConst = indexConst(b, loc, n);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  auto outer = scf::ForOp::create(
      b, loc, tid, indexConst(b, loc, int64_t(rows) * dim),
      indexConst(b, loc, blockSize), ValueRange{},
      [&](OpBuilder &b, Location loc, Value at, ValueRange) {
        Value e = arith::RemUIOp::create(b, loc, at, dimConst);
        Value i = arith::RemUIOp::create(b, loc, e, nConst);
        Value rowStart = arith::SubIOp::create(b, loc, at, i);
        auto dot = scf::ForOp::create(
            b, loc, c0, nConst, c1, ValueRange{f32Const(b, loc, 0.0f)},
            [&](OpBuilder &nb, Location nloc, Value j, ValueRange acc) {
              Value m = transpose ? memref::LoadOp::create(nb, nloc, matrix,
                                                           ValueRange{j, i})
                                  : memref::LoadOp::create(nb, nloc, matrix,
                                                           ValueRange{i, j});
              Value x = memref::LoadOp::create(
                  nb, nloc, src, ValueRange{add(nb, nloc, rowStart, j)});
              scf::YieldOp::create(
                  nb, nloc, ValueRange{fusedMultiplyAdd(nb, nloc, m, x,
                                                           acc[0])});
            });
        disableUnrolling(dot);
        memref::StoreOp::create(b, loc, dot.getResult(0), dst, at);
        scf::YieldOp::create(b, loc);
      });
  disableUnrolling(outer);
  gpu::BarrierOp::create(b, loc);
}

void gpukernel::rotateLaneRow(OpBuilder &b, Location loc, LaneRow &row,
                              const quant::FormatSpec &spec, bool inverse,
                              Value matrix, Value scratch, Value scratchBase) {
  if (!spec.rotation)
    return;
  const quant::Rotation &rotation = *spec.rotation;
  switch (rotation.kind()) {
  case quant::RotationKind::Identity:
    return;
  case quant::RotationKind::Hadamard:
  case quant::RotationKind::BlockHadamard:
    // forward = diag(s2) H diag(s1) / sqrt(n); inverse swaps the signs.
    applySigns(b, loc, row, inverse ? rotation.signs2() : rotation.signs1());
    hadamardButterflies(b, loc, row, rotation.blockSize());
    applySigns(b, loc, row, inverse ? rotation.signs1() : rotation.signs2());
    return;
  case quant::RotationKind::Haar:
    denseProductLaneRow(b, loc, row, rotation.dim(), inverse, matrix, scratch,
                        scratchBase);
    return;
  }
}
