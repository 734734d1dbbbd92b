//===- GpuAppendKernel.cpp - The append kernel in the gpu dialect ---------===//
//
// Thread r of the grid encodes row r of rows[count][kv_heads][D]: token
// t = r / kv_heads of the call, KV head h = r % kv_heads, written to the
// slot of position start + t. Its body is one row's tq.quantize on
// tensors; the loop lowering and bufferization that follow give every
// thread the library's arithmetic and private temporaries.
//
//===----------------------------------------------------------------------===//

#include "GpuAppendKernel.h"

#include "GpuBuilders.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::gpukernel;

namespace {

/// memref<1 x 1 x n x type> with strides [n, n, 1] at a dynamic offset.
MemRefType rowViewType(MLIRContext *ctx, Type element, int64_t n) {
  auto layout =
      StridedLayoutAttr::get(ctx, ShapedType::kDynamic, {n, n, 1});
  return MemRefType::get({1, 1, n}, element, layout);
}

/// The row view of `type` at element `offset` of a 1-D buffer.
Value rowView(OpBuilder &b, Location loc, MemRefType type, Value buffer,
              Value offset) {
  const int64_t n = type.getShape()[2];
  return memref::ReinterpretCastOp::create(
      b, loc, type, buffer, OpFoldResult(offset),
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                             b.getIndexAttr(n)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(n), b.getIndexAttr(n),
                             b.getIndexAttr(1)});
}

} // namespace

gpu::GPUFuncOp mlir::tq::buildGpuAppendKernel(OpBuilder &b, Location loc,
                                              const RuntimeKernelSpec &spec,
                                              unsigned blockSize) {
  MLIRContext *ctx = b.getContext();
  ctx->loadDialect<TQDialect, bufferization::BufferizationDialect>();
  const int64_t d = spec.headDim;
  auto cacheType =
      CacheType::get(ctx, {1, 1, d}, FormatAttr::get(ctx, spec.keyFormat));
  const int64_t rowBytes = cacheType.getRowBytes();
  MemRefType sourceType = rowViewType(ctx, b.getF32Type(), d);
  MemRefType destType = rowViewType(ctx, b.getI8Type(), rowBytes);
  Type i32 = b.getI32Type();
  auto func = createKernel(b, loc, spec.name(),
                           {globalBuffer(b, b.getF32Type()),
                            globalBuffer(b, b.getI8Type()),
                            globalBuffer(b, i32), i32, i32, i32, i32},
                           {}, blockSize);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func.getBody().front());
  auto args = func.getArguments();
  Value rows = args[0], pool = args[1], pages = args[2];
  Value start = toIndex(b, loc, args[3]), count = toIndex(b, loc, args[4]),
        pageSize = toIndex(b, loc, args[5]),
        kvHeads = toIndex(b, loc, args[6]);

  Value r = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc,
                            gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
                            indexConst(b, loc, blockSize)),
      gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value live = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ult, r,
      arith::MulIOp::create(b, loc, count, kvHeads));
  auto ifLive = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&ifLive.getThenRegion().front());
  Value t = arith::DivUIOp::create(b, loc, r, kvHeads);
  Value h = arith::RemUIOp::create(b, loc, r, kvHeads);
  Value position = arith::AddIOp::create(b, loc, start, t);
  Value destRow = pagedRow(b, loc, pages, indexConst(b, loc, 0), position,
                           PageDivisor::direct(b, loc, pageSize), kvHeads,
                           h);
  Value source = rowView(
      b, loc, sourceType, rows,
      arith::MulIOp::create(b, loc, r, indexConst(b, loc, d)));
  Value dest = rowView(
      b, loc, destType, pool,
      arith::MulIOp::create(b, loc, destRow, indexConst(b, loc, rowBytes)));
  Value x = bufferization::ToTensorOp::create(
      b, loc,
      RankedTensorType::get(sourceType.getShape(), b.getF32Type()), source,
      /*restrict=*/true, /*writable=*/false);
  Value encoded = QuantizeOp::create(b, loc, cacheType, x);
  Value bytes = ToBytesOp::create(b, loc, cacheType.getBytesType(), encoded);
  bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange{}, bytes, dest, /*restrict=*/true, /*writable=*/true);
  b.setInsertionPointAfter(ifLive);
  gpu::ReturnOp::create(b, loc);
  return func;
}
