//===- GpuToHost.cpp - GPU kernels as host functions, one call a thread ---===//
//
// The host function of a kernel runs one GPU thread. Its contract with the
// caller (see the pass description): trailing arguments block x, y, z,
// thread id, workgroup arena; tq_emu_barrier() waits for every thread of
// the block; tq_emu_shuffle_<mode>_f32 exchanges values within the warp.
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

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

/// The private declaration of an emulator function in `parent`.
func::FuncOp declareRuntime(ModuleOp parent, StringRef name,
                            FunctionType type) {
  if (auto existing = parent.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b(parent.getContext());
  b.setInsertionPointToStart(parent.getBody());
  auto func = func::FuncOp::create(b, parent.getLoc(), name, type);
  func.setPrivate();
  return func;
}

StringRef shuffleFunction(gpu::ShuffleMode mode) {
  switch (mode) {
  case gpu::ShuffleMode::XOR:
    return "tq_emu_shuffle_xor_f32";
  case gpu::ShuffleMode::UP:
    return "tq_emu_shuffle_up_f32";
  case gpu::ShuffleMode::DOWN:
    return "tq_emu_shuffle_down_f32";
  case gpu::ShuffleMode::IDX:
    return "tq_emu_shuffle_idx_f32";
  }
  llvm_unreachable("unknown shuffle mode");
}

LogicalResult convertKernel(gpu::GPUFuncOp kernel, ModuleOp parent) {
  MLIRContext *ctx = kernel.getContext();
  Location loc = kernel.getLoc();
  if (!kernel.getBody().hasOneBlock())
    return kernel.emitOpError("expected a single-block kernel body");
  WalkResult checked = kernel.walk([&](gpu::ShuffleOp shuffle) {
    if (!shuffle.getValue().getType().isF32())
      return shuffle.emitOpError("host emulation shuffles only f32"),
             WalkResult::interrupt();
    if (!shuffle.getValid().use_empty())
      return shuffle.emitOpError("host emulation has no `valid` result"),
             WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (checked.wasInterrupted())
    return failure();

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(parent.getBody());
  Type index = b.getIndexType();
  auto arenaType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
  SmallVector<Type> args(kernel.getArgumentTypes());
  args.append(4, index);
  args.push_back(arenaType);
  auto func = func::FuncOp::create(b, loc, kernel.getName(),
                                   b.getFunctionType(args, {}));
  func->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping map;
  const unsigned numArgs = kernel.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    map.map(kernel.getArgument(i), entry->getArgument(i));
  Value blockIds[3] = {entry->getArgument(numArgs),
                       entry->getArgument(numArgs + 1),
                       entry->getArgument(numArgs + 2)};
  Value threadId = entry->getArgument(numArgs + 3);
  Value arena = entry->getArgument(numArgs + 4);
  // Workgroup buffers: consecutive 16-byte aligned views of the arena.
  int64_t offset = 0;
  for (BlockArgument a : kernel.getWorkgroupAttributions()) {
    auto type = hostType(cast<MemRefType>(a.getType()));
    Value at = arith::ConstantIndexOp::create(b, loc, offset);
    map.map(a, memref::ViewOp::create(b, loc, type, arena, at, ValueRange{}));
    offset += (type.getNumElements() *
                   type.getElementType().getIntOrFloatBitWidth() / 8 +
               15) /
              16 * 16;
  }
  for (BlockArgument a : kernel.getPrivateAttributions())
    map.map(a, memref::AllocaOp::create(
                   b, loc, hostType(cast<MemRefType>(a.getType()))));
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  for (Operation &op : kernel.getBody().front().getOperations()) {
    if (isa<gpu::ReturnOp>(op)) {
      func::ReturnOp::create(b, loc);
      continue;
    }
    b.clone(op, map);
  }

  // Ids, barriers, shuffles and memory spaces of the cloned body.
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  func::FuncOp barrier =
      declareRuntime(parent, "tq_emu_barrier", b.getFunctionType({}, {}));
  SmallVector<Operation *> erase;
  func.walk([&](Operation *op) {
    OpBuilder at(op);
    if (auto id = dyn_cast<gpu::BlockIdOp>(op)) {
      id.replaceAllUsesWith(blockIds[unsigned(id.getDimension())]);
      erase.push_back(op);
    } else if (auto id = dyn_cast<gpu::ThreadIdOp>(op)) {
      id.replaceAllUsesWith(id.getDimension() == gpu::Dimension::x ? threadId
                                                                   : zero);
      erase.push_back(op);
    } else if (isa<gpu::BarrierOp>(op)) {
      func::CallOp::create(at, op->getLoc(), barrier, ValueRange{});
      erase.push_back(op);
    } else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
      func::FuncOp callee =
          declareRuntime(parent, shuffleFunction(shuffle.getMode()),
                         at.getFunctionType({f32, i32, i32}, {f32}));
      auto call = func::CallOp::create(
          at, op->getLoc(), callee,
          ValueRange{shuffle.getValue(), shuffle.getOffset(),
                     shuffle.getWidth()});
      shuffle.getShuffleResult().replaceAllUsesWith(call.getResult(0));
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
