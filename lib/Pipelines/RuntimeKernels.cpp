//===- RuntimeKernels.cpp - Kernels with the runtime's signatures ---------===//

#include "tq/Pipelines/RuntimeKernels.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Dialect/TQ/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace mlir;
using namespace mlir::tq;

const char *mlir::tq::kindName(RuntimeKernelKind kind) {
  switch (kind) {
  case RuntimeKernelKind::Append:
    return "append";
  case RuntimeKernelKind::Decode:
    return "decode";
  case RuntimeKernelKind::Prefill:
    return "prefill";
  case RuntimeKernelKind::GgmlDecode:
    return "ggml_decode";
  case RuntimeKernelKind::GgmlPrefill:
    return "ggml_prefill";
  case RuntimeKernelKind::Dequantize:
    return "dequantize";
  }
  return "unknown";
}

bool mlir::tq::isAttentionKind(RuntimeKernelKind kind) {
  return kind != RuntimeKernelKind::Append &&
         kind != RuntimeKernelKind::Dequantize;
}

std::string RuntimeKernelSpec::name() const {
  std::string n = std::string("tq_") + kindName(kind) + "_" + keyFormat;
  if (!isAttentionKind(kind))
    return n + "_d" + std::to_string(headDim) + (centred ? "_centred" : "");
  n += "_" + valueFormat + "_d" + std::to_string(headDim);
  if (vDim() != headDim)
    n += "_dv" + std::to_string(vDim());
  n += "_g" + std::to_string(group);
  if (causal)
    n += "_causal";
  if (window > 0)
    n += "_w" + std::to_string(window);
  if (softcap > 0.0f)
    n += "_sc" + softcapSuffix(softcap);
  return n;
}

std::string mlir::tq::softcapSuffix(float softcap) {
  assert(softcap > 0.0f && softcap <= kMaxSoftcap && "soft-cap out of range");
  const long long hundredths = std::llround(double(softcap) * 100.0);
  if (float(double(hundredths) / 100.0) == softcap)
    return std::to_string(hundredths);
  uint32_t bits;
  std::memcpy(&bits, &softcap, sizeof bits);
  char hex[16];
  std::snprintf(hex, sizeof hex, "x%08x", unsigned(bits));
  return hex;
}

namespace {

/// memref<shape x type> with a fully dynamic strided layout.
MemRefType stridedMemRef(ArrayRef<int64_t> shape, Type type) {
  SmallVector<int64_t> strides(shape.size(), ShapedType::kDynamic);
  strides.back() = 1;
  auto layout = StridedLayoutAttr::get(type.getContext(),
                                       ShapedType::kDynamic, strides);
  return MemRefType::get(shape, type, layout);
}

/// memref<shape x type> whose every stride is dynamic (a stride may be 0:
/// one row broadcast to all).
MemRefType anyStridedMemRef(ArrayRef<int64_t> shape, Type type) {
  SmallVector<int64_t> strides(shape.size(), ShapedType::kDynamic);
  auto layout = StridedLayoutAttr::get(type.getContext(),
                                       ShapedType::kDynamic, strides);
  return MemRefType::get(shape, type, layout);
}

Value toTensor(OpBuilder &b, Location loc, Value memref, bool writable) {
  auto type = cast<MemRefType>(memref.getType());
  auto tensorType =
      RankedTensorType::get(type.getShape(), type.getElementType());
  return bufferization::ToTensorOp::create(b, loc, tensorType, memref,
                                           /*restrict=*/true, writable);
}

CacheType cacheType(MLIRContext *ctx, StringRef format, unsigned headDim) {
  return CacheType::get(
      ctx, {ShapedType::kDynamic, 1, int64_t(headDim)},
      FormatAttr::get(ctx, format));
}

LogicalResult checkFormat(MLIRContext *ctx, StringRef format, unsigned dim,
                          function_ref<InFlightDiagnostic()> emitError) {
  auto attr = FormatAttr::getChecked(emitError, ctx, format);
  if (!attr)
    return failure();
  if (!CacheType::getChecked(emitError, ctx,
                             ArrayRef<int64_t>{ShapedType::kDynamic, 1,
                                               int64_t(dim)},
                             attr))
    return failure();
  return success();
}

func::FuncOp buildAttention(OpBuilder &b, Location loc,
                            const RuntimeKernelSpec &spec) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i8 = b.getIntegerType(8);
  const int64_t dyn = ShapedType::kDynamic, g = spec.group, d = spec.headDim;
  CacheType keys = cacheType(ctx, spec.keyFormat, spec.headDim);
  CacheType values = cacheType(ctx, spec.valueFormat, spec.vDim());
  // Decode kernels take exactly one query row (the runtime picks them for
  // one-row sequences), which lets the lowering keep the output in
  // registers.
  const bool ggml = spec.kind == RuntimeKernelKind::GgmlDecode ||
                    spec.kind == RuntimeKernelKind::GgmlPrefill;
  const bool decode = spec.kind == RuntimeKernelKind::Decode ||
                      spec.kind == RuntimeKernelKind::GgmlDecode;
  const int64_t rows = decode ? 1 : dyn;
  auto qType = stridedMemRef({rows, g, d}, f32);
  auto outType = stridedMemRef({rows, g, int64_t(spec.vDim())}, f32);
  auto kType = stridedMemRef({dyn, dyn, 1, keys.getRowBytes()}, i8);
  auto vType = stridedMemRef({dyn, dyn, 1, values.getRowBytes()}, i8);
  auto tableType = stridedMemRef({dyn}, b.getI32Type());
  SmallVector<Type> args = {qType,           kType,        vType, tableType,
                            b.getIndexType(), b.getF32Type()};
  if (ggml) {
    args.push_back(anyStridedMemRef({rows, dyn}, b.getF16Type()));
    args.push_back(stridedMemRef({g}, f32));
    args.push_back(stridedMemRef({g}, f32));
  }
  args.push_back(outType);
  // Decode kernels also write each head's log-sum-exp, so that a caller
  // can split one head's keys over its threads and merge the parts.
  const bool withLse = decode;
  auto lseType = stridedMemRef({rows, g}, f32);
  if (withLse)
    args.push_back(lseType);
  auto func = func::FuncOp::create(b, loc, spec.name(),
                                   b.getFunctionType(args, {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  const unsigned outArg = withLse ? args.size() - 2 : args.size() - 1;
  Value q = toTensor(b, loc, entry->getArgument(0), false);
  Value table = toTensor(b, loc, entry->getArgument(3), false);
  Value tokens = entry->getArgument(4);
  // A logit scale s > 0 replaces the default 1/sqrt(D): the queries are
  // multiplied by s * sqrt(D) (exact for s = 0, the default, factor 1).
  {
    Value s = entry->getArgument(5);
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    Value custom =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, s, zero);
    Value sqrtD = arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(std::sqrt(float(spec.headDim))));
    Value factor = arith::SelectOp::create(
        b, loc, custom, arith::MulFOp::create(b, loc, s, sqrtD),
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)));
    auto qType = cast<RankedTensorType>(q.getType());
    SmallVector<OpFoldResult> sizes;
    for (unsigned i = 0; i < 3; ++i)
      sizes.push_back(tensor::getMixedSize(b, loc, q, i));
    Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
    auto id = AffineMap::getMultiDimIdentityMap(3, b.getContext());
    q = linalg::GenericOp::create(
            b, loc, TypeRange{qType}, ValueRange{q}, ValueRange{init},
            ArrayRef<AffineMap>{id, id},
            SmallVector<utils::IteratorType>(3, utils::IteratorType::parallel),
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              Value scaled = arith::MulFOp::create(nb, nloc, args[0], factor);
              linalg::YieldOp::create(nb, nloc, scaled);
            })
            .getResult(0);
  }
  Value k = FromPagesOp::create(b, loc, keys,
                                toTensor(b, loc, entry->getArgument(1), false),
                                table, tokens);
  Value v = FromPagesOp::create(b, loc, values,
                                toTensor(b, loc, entry->getArgument(2), false),
                                table, tokens);
  Value mask, slopes, sinks;
  if (ggml) {
    mask = toTensor(b, loc, entry->getArgument(6), false);
    slopes = toTensor(b, loc, entry->getArgument(7), false);
    sinks = toTensor(b, loc, entry->getArgument(8), false);
  }
  auto qTensorType = cast<RankedTensorType>(q.getType());
  auto outTensorType = RankedTensorType::get(
      {qTensorType.getDimSize(0), g, int64_t(spec.vDim())}, f32);
  Type lseTensorType;
  if (withLse)
    lseTensorType = RankedTensorType::get({qTensorType.getDimSize(0), g}, f32);
  auto attention = AttentionOp::create(
      b, loc, outTensorType, lseTensorType, q, k, v, mask, slopes, sinks,
      FloatAttr(), spec.causal ? b.getUnitAttr() : UnitAttr(),
      b.getI64IntegerAttr(spec.window), b.getF32FloatAttr(spec.softcap));
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, attention.getResult(), entry->getArgument(outArg),
      /*restrict=*/true, /*writable=*/true);
  if (withLse)
    bufferization::MaterializeInDestinationOp::create(
        b, loc, TypeRange{}, attention.getLse(), entry->getArguments().back(),
        /*restrict=*/true, /*writable=*/true);
  func::ReturnOp::create(b, loc);
  return func;
}

/// rows[t, 0, d] + sign * centre[d] over [tokens x 1 x D] rows.
Value shiftRows(OpBuilder &b, Location loc, Value rows, Value centre,
                bool subtract) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(rows.getType());
  SmallVector<OpFoldResult> sizes;
  for (unsigned i = 0; i < 3; ++i)
    sizes.push_back(tensor::getMixedSize(b, loc, rows, i));
  Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  AffineExpr t, h, d;
  bindDims(ctx, t, h, d);
  auto id = AffineMap::getMultiDimIdentityMap(3, ctx);
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{rows, centre},
             ValueRange{init},
             ArrayRef<AffineMap>{id, AffineMap::get(3, 0, {d}, ctx), id},
             SmallVector<utils::IteratorType>(3,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value r;
               if (subtract)
                 r = arith::SubFOp::create(nb, nloc, args[0], args[1]);
               else
                 r = arith::AddFOp::create(nb, nloc, args[0], args[1]);
               linalg::YieldOp::create(nb, nloc, r);
             })
      .getResult(0);
}

func::FuncOp buildAppend(OpBuilder &b, Location loc,
                         const RuntimeKernelSpec &spec) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i8 = b.getIntegerType(8);
  const int64_t dyn = ShapedType::kDynamic, d = spec.headDim;
  CacheType cache = cacheType(ctx, spec.keyFormat, spec.headDim);
  const int64_t rowBytes = cache.getRowBytes();
  auto rowsType = stridedMemRef({dyn, 1, d}, f32);
  auto poolType = stridedMemRef({dyn, dyn, 1, rowBytes}, i8);
  auto tableType = stridedMemRef({dyn}, b.getI32Type());
  SmallVector<Type> args = {rowsType, poolType, tableType, b.getIndexType()};
  if (spec.centred)
    args.push_back(stridedMemRef({d}, f32));
  auto func = func::FuncOp::create(b, loc, spec.name(),
                                   b.getFunctionType(args, {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Value rows = toTensor(b, loc, entry->getArgument(0), false);
  Value pool = toTensor(b, loc, entry->getArgument(1), true);
  Value table = toTensor(b, loc, entry->getArgument(2), false);
  Value start = entry->getArgument(3);
  if (spec.centred)
    rows = shiftRows(b, loc, rows, toTensor(b, loc, entry->getArgument(4),
                                            false),
                     /*subtract=*/true);
  Value encoded = QuantizeOp::create(b, loc, cache, rows);
  Value bytes = ToBytesOp::create(b, loc, cache.getBytesType(), encoded);
  // Scatter row t to page table[(start + t) / page_size], slot
  // (start + t) % page_size.
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value n = tensor::DimOp::create(b, loc, bytes, 0);
  Value pageSize = tensor::DimOp::create(b, loc, pool, 1);
  auto loop = scf::ForOp::create(
      b, loc, c0, n, c1, ValueRange{pool},
      [&](OpBuilder &b, Location loc, Value t, ValueRange state) {
        Value position = arith::AddIOp::create(b, loc, start, t);
        Value entryIndex = arith::DivUIOp::create(b, loc, position, pageSize);
        Value page = tensor::ExtractOp::create(b, loc, table, entryIndex);
        page = arith::IndexCastOp::create(b, loc, b.getIndexType(), page);
        Value slot = arith::RemUIOp::create(b, loc, position, pageSize);
        auto rowType = RankedTensorType::get({1, 1, 1, rowBytes}, i8);
        SmallVector<OpFoldResult> srcOffsets = {t, b.getIndexAttr(0),
                                                b.getIndexAttr(0)};
        SmallVector<OpFoldResult> srcSizes = {b.getIndexAttr(1),
                                              b.getIndexAttr(1),
                                              b.getIndexAttr(rowBytes)};
        SmallVector<OpFoldResult> ones3(3, b.getIndexAttr(1));
        Value row = tensor::ExtractSliceOp::create(
            b, loc, RankedTensorType::get({1, 1, rowBytes}, i8), bytes,
            srcOffsets, srcSizes, ones3);
        Value row4 = tensor::ExpandShapeOp::create(
            b, loc, rowType, row,
            ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
        SmallVector<OpFoldResult> offsets = {page, slot, b.getIndexAttr(0),
                                             b.getIndexAttr(0)};
        SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1),
                                           b.getIndexAttr(1),
                                           b.getIndexAttr(rowBytes)};
        SmallVector<OpFoldResult> ones4(4, b.getIndexAttr(1));
        Value updated = tensor::InsertSliceOp::create(b, loc, row4, state[0],
                                                      offsets, sizes, ones4);
        scf::YieldOp::create(b, loc, updated);
      });
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, loop.getResult(0), entry->getArgument(1),
      /*restrict=*/true, /*writable=*/true);
  func::ReturnOp::create(b, loc);
  return func;
}

func::FuncOp buildDequantize(OpBuilder &b, Location loc,
                             const RuntimeKernelSpec &spec) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i8 = b.getIntegerType(8);
  const int64_t dyn = ShapedType::kDynamic, d = spec.headDim;
  CacheType cache = cacheType(ctx, spec.keyFormat, spec.headDim);
  auto bytesType = stridedMemRef({dyn, 1, cache.getRowBytes()}, i8);
  auto outType = stridedMemRef({dyn, 1, d}, f32);
  SmallVector<Type> args = {bytesType, outType};
  if (spec.centred)
    args.push_back(stridedMemRef({d}, f32));
  auto func = func::FuncOp::create(b, loc, spec.name(),
                                   b.getFunctionType(args, {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Value bytes = toTensor(b, loc, entry->getArgument(0), false);
  Value rows = buildDequantizedRows(
      b, loc, FromBytesOp::create(b, loc, cache, bytes));
  if (spec.centred)
    rows = shiftRows(b, loc, rows, toTensor(b, loc, entry->getArgument(2),
                                            false),
                     /*subtract=*/false);
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, rows, entry->getArgument(1), /*restrict=*/true,
      /*writable=*/true);
  func::ReturnOp::create(b, loc);
  return func;
}

} // namespace

FailureOr<func::FuncOp>
mlir::tq::buildRuntimeKernel(OpBuilder &b, Location loc,
                             const RuntimeKernelSpec &spec,
                             function_ref<InFlightDiagnostic()> emitError) {
  MLIRContext *ctx = b.getContext();
  if (spec.group == 0)
    return emitError() << "the GQA group must be positive", failure();
  if (failed(checkFormat(ctx, spec.keyFormat, spec.headDim, emitError)))
    return failure();
  func::FuncOp func;
  if (spec.kind == RuntimeKernelKind::Append) {
    func = buildAppend(b, loc, spec);
  } else if (spec.kind == RuntimeKernelKind::Dequantize) {
    func = buildDequantize(b, loc, spec);
  } else {
    if (failed(checkFormat(ctx, spec.valueFormat, spec.vDim(), emitError)))
      return failure();
    if ((spec.kind == RuntimeKernelKind::GgmlDecode ||
         spec.kind == RuntimeKernelKind::GgmlPrefill) &&
        (spec.causal || spec.window != 0))
      return emitError() << "ggml attention kernels take causal and window "
                            "masking from the mask; build them without",
             failure();
    if (spec.window < 0)
      return emitError() << "window must be non-negative, got "
                         << spec.window,
             failure();
    if (!(spec.softcap >= 0.0f && spec.softcap <= kMaxSoftcap))
      return emitError() << "softcap must be finite and in [0, "
                         << kMaxSoftcap << "], got " << spec.softcap,
             failure();
    if (spec.centred)
      return emitError() << "attention kernels read centred keys as they are "
                            "(softmax is shift-invariant); only append and "
                            "dequantize kernels are centred",
             failure();
    func = buildAttention(b, loc, spec);
  }
  if (failed(func.verify()))
    return failure();
  return func;
}
