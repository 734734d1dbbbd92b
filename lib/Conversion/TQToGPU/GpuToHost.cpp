//===- GpuToHost.cpp - One-thread-per-block kernels as host functions -----===//

#include "tq/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQGPUTOHOST
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {

/// The same memref type in the default memory space.
MemRefType hostType(MemRefType type) {
  return MemRefType::get(type.getShape(), type.getElementType(),
                         type.getLayout());
}

LogicalResult convertKernel(gpu::GPUFuncOp kernel, ModuleOp parent) {
  MLIRContext *ctx = kernel.getContext();
  Location loc = kernel.getLoc();
  bool shuffles = false;
  kernel.walk([&](gpu::ShuffleOp) { shuffles = true; });
  if (shuffles)
    return kernel.emitOpError("has warp shuffles; only one-thread-per-block "
                              "kernels run on the host");
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(parent.getBody());
  SmallVector<Type> args(kernel.getArgumentTypes());
  args.append(3, b.getIndexType());
  auto func = func::FuncOp::create(b, loc, kernel.getName(),
                                   b.getFunctionType(args, {}));
  func->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping map;
  const unsigned numArgs = kernel.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    map.map(kernel.getArgument(i), entry->getArgument(i));
  for (BlockArgument a : kernel.getWorkgroupAttributions())
    map.map(a, memref::AllocaOp::create(
                   b, loc, hostType(cast<MemRefType>(a.getType()))));
  for (BlockArgument a : kernel.getPrivateAttributions())
    map.map(a, memref::AllocaOp::create(
                   b, loc, hostType(cast<MemRefType>(a.getType()))));
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value blockIds[3] = {entry->getArgument(numArgs),
                       entry->getArgument(numArgs + 1),
                       entry->getArgument(numArgs + 2)};
  if (!kernel.getBody().hasOneBlock())
    return kernel.emitOpError("expected a single-block kernel body");
  for (Operation &op : kernel.getBody().front().getOperations()) {
    if (isa<gpu::ReturnOp>(op)) {
      func::ReturnOp::create(b, loc);
      continue;
    }
    b.clone(op, map);
  }
  // Ids, barriers and memory spaces of the cloned body.
  SmallVector<Operation *> erase;
  func.walk([&](Operation *op) {
    if (auto id = dyn_cast<gpu::BlockIdOp>(op)) {
      id.replaceAllUsesWith(blockIds[unsigned(id.getDimension())]);
      erase.push_back(op);
    } else if (isa<gpu::ThreadIdOp>(op)) {
      op->getResult(0).replaceAllUsesWith(zero);
      erase.push_back(op);
    } else if (isa<gpu::BarrierOp>(op)) {
      erase.push_back(op);
    } else if (auto get = dyn_cast<memref::GetGlobalOp>(op)) {
      get.getResult().setType(hostType(get.getType()));
    } else if (auto alloca = dyn_cast<memref::AllocaOp>(op)) {
      // Private temporaries (tq-gpu-bufferize) live on the stack.
      alloca.getResult().setType(hostType(alloca.getType()));
    } else if (auto cast = dyn_cast<memref::MemorySpaceCastOp>(op)) {
      if (cast.getSource().getType() == cast.getType()) {
        cast.getResult().replaceAllUsesWith(cast.getSource());
        erase.push_back(op);
      }
    }
  });
  for (Operation *op : erase)
    op->erase();
  return success();
}

struct TQGpuToHostPass
    : public mlir::tq::impl::TQGpuToHostBase<TQGpuToHostPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> gpuModules(
        module.getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp gm : gpuModules) {
      for (auto kernel : gm.getOps<gpu::GPUFuncOp>())
        if (failed(convertKernel(kernel, module)))
          return signalPassFailure();
      // Globals move out, in the default memory space.
      for (auto global :
           llvm::make_early_inc_range(gm.getOps<memref::GlobalOp>())) {
        global->moveBefore(gm);
        global.setType(hostType(global.getType()));
      }
      gm.erase();
    }
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }
};

} // namespace
