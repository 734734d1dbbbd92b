//===- AttentionKernel.cpp - Kernel entry points over buffers -------------===//

#include "tq/Pipelines/AttentionKernel.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::tq;

FailureOr<func::FuncOp>
mlir::tq::buildAttentionKernel(OpBuilder &b, Location loc,
                               const AttentionKernelSpec &spec,
                               function_ref<InFlightDiagnostic()> emitError) {
  MLIRContext *ctx = b.getContext();
  auto keyFormat = FormatAttr::getChecked(emitError, ctx, StringRef(spec.keyFormat));
  auto valueFormat = FormatAttr::getChecked(emitError, ctx, StringRef(spec.valueFormat));
  if (!keyFormat || !valueFormat)
    return failure();
  if (spec.kvHeads == 0 || spec.queryHeads % spec.kvHeads != 0)
    return emitError() << "query heads (" << spec.queryHeads
                       << ") must be a positive multiple of kv heads ("
                       << spec.kvHeads << ")",
           failure();
  const int64_t n = spec.numKeys, kvh = spec.kvHeads, d = spec.headDim;
  auto keyType = CacheType::getChecked(emitError, ctx, ArrayRef<int64_t>{n, kvh, d}, keyFormat);
  auto valueType =
      CacheType::getChecked(emitError, ctx, ArrayRef<int64_t>{n, kvh, d}, valueFormat);
  if (!keyType || !valueType)
    return failure();

  Type f32 = b.getF32Type();
  SmallVector<int64_t> qShape = {spec.numQueries, int64_t(spec.queryHeads), d};
  auto qTensor = RankedTensorType::get(qShape, f32);
  auto qMemref = MemRefType::get(qShape, f32);
  const bool paged = spec.pageSize > 0;
  auto poolType = [&](CacheType cache) -> MemRefType {
    if (!paged)
      return MemRefType::get(cache.getBytesType().getShape(),
                             b.getIntegerType(8));
    return MemRefType::get({ShapedType::kDynamic, spec.pageSize, kvh,
                            cache.getRowBytes()},
                           b.getIntegerType(8));
  };
  auto maskShape = SmallVector<int64_t>{spec.numQueries, n};
  SmallVector<Type> args = {qMemref, poolType(keyType), poolType(valueType)};
  if (paged) {
    args.push_back(MemRefType::get({ShapedType::kDynamic}, b.getI32Type()));
    args.push_back(b.getIndexType());
  }
  if (spec.mask)
    args.push_back(
        MemRefType::get(maskShape, spec.maskF16 ? b.getF16Type() : f32));
  auto headsMemref = MemRefType::get({int64_t(spec.queryHeads)}, f32);
  if (spec.slopes)
    args.push_back(headsMemref);
  if (spec.sinks)
    args.push_back(headsMemref);
  args.push_back(qMemref);
  auto lseShape = SmallVector<int64_t>{spec.numQueries,
                                       int64_t(spec.queryHeads)};
  if (spec.lse)
    args.push_back(MemRefType::get(lseShape, f32));

  auto func = func::FuncOp::create(b, loc, spec.name,
                                   b.getFunctionType(args, {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);

  auto toTensor = [&](Value memref) -> Value {
    auto type = cast<MemRefType>(memref.getType());
    auto tensorType =
        RankedTensorType::get(type.getShape(), type.getElementType());
    return bufferization::ToTensorOp::create(b, loc, tensorType, memref,
                                             /*restrict=*/true,
                                             /*writable=*/false);
  };
  Value q = toTensor(entry->getArgument(0));
  Value k, v;
  unsigned next = 3;
  if (paged) {
    Value table = toTensor(entry->getArgument(3));
    Value tokens = entry->getArgument(4);
    k = FromPagesOp::create(b, loc, keyType, toTensor(entry->getArgument(1)),
                            table, tokens);
    v = FromPagesOp::create(b, loc, valueType,
                            toTensor(entry->getArgument(2)), table, tokens);
    next = 5;
  } else {
    k = FromBytesOp::create(b, loc, keyType, toTensor(entry->getArgument(1)));
    v = FromBytesOp::create(b, loc, valueType,
                            toTensor(entry->getArgument(2)));
  }
  auto optionalArg = [&](bool present) -> Value {
    return present ? toTensor(entry->getArgument(next++)) : Value();
  };
  Value mask = optionalArg(spec.mask);
  Value slopes = optionalArg(spec.slopes);
  Value sinks = optionalArg(spec.sinks);
  FloatAttr scale = spec.scale ? b.getF32FloatAttr(*spec.scale) : FloatAttr();
  Type lseType =
      spec.lse ? RankedTensorType::get(lseShape, f32) : Type();
  auto attention = AttentionOp::create(
      b, loc, qTensor, lseType, q, k, v, mask, slopes, sinks, scale,
      spec.causal ? b.getUnitAttr() : UnitAttr(),
      b.getI64IntegerAttr(spec.window), b.getF32FloatAttr(spec.softcap));
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, attention.getResult(), entry->getArgument(next),
      /*restrict=*/true, /*writable=*/true);
  if (spec.lse)
    bufferization::MaterializeInDestinationOp::create(
        b, loc, TypeRange{}, attention.getLse(), entry->getArguments().back(),
        /*restrict=*/true, /*writable=*/true);
  func::ReturnOp::create(b, loc);
  if (failed(func.verify()))
    return failure();
  return func;
}

FailureOr<func::FuncOp>
mlir::tq::buildQuantizeKernel(OpBuilder &b, Location loc,
                              const QuantizeKernelSpec &spec,
                              function_ref<InFlightDiagnostic()> emitError) {
  MLIRContext *ctx = b.getContext();
  auto format = FormatAttr::getChecked(emitError, ctx, StringRef(spec.format));
  if (!format)
    return failure();
  auto cacheType = CacheType::getChecked(
      emitError, ctx,
      ArrayRef<int64_t>{spec.numRows, int64_t(spec.kvHeads),
                        int64_t(spec.headDim)},
      format);
  if (!cacheType)
    return failure();
  auto rowsType = cacheType.getValuesType();
  auto bytesType = cacheType.getBytesType();
  auto func = func::FuncOp::create(
      b, loc, spec.name,
      b.getFunctionType({MemRefType::get(rowsType.getShape(), b.getF32Type()),
                         MemRefType::get(bytesType.getShape(),
                                         b.getIntegerType(8))},
                        {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Value rows = bufferization::ToTensorOp::create(
      b, loc, rowsType, entry->getArgument(0), /*restrict=*/true,
      /*writable=*/false);
  Value cache = QuantizeOp::create(b, loc, cacheType, rows);
  Value bytes = ToBytesOp::create(b, loc, bytesType, cache);
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, bytes, entry->getArgument(1), /*restrict=*/true,
      /*writable=*/true);
  func::ReturnOp::create(b, loc);
  if (failed(func.verify()))
    return failure();
  return func;
}
