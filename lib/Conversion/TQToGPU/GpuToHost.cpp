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

/// True for a memref in a gpu address space (workgroup or private): the
/// host has one memory.
bool inGpuAddressSpace(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && isa_and_nonnull<gpu::AddressSpaceAttr>(
                       memref.getMemorySpace());
}

/// `type` with memrefs in gpu address spaces moved to the default space.
Type hostTypeOf(Type type) {
  return inGpuAddressSpace(type) ? hostType(cast<MemRefType>(type)) : type;
}

/// Rewrites the gpu ops of a host function: block and thread ids become
/// `blockIds` / `threadId` (y and z: `zero`), barriers and shuffles calls
/// to the emulator, memory spaces the default one. A device function (no
/// ids passed: empty `blockIds`) must not read ids, which only kernels
/// receive.
LogicalResult rewriteDeviceOps(func::FuncOp func, ModuleOp parent,
                               ArrayRef<Value> blockIds, Value threadId,
                               Value zero) {
  OpBuilder b(func.getContext());
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  WalkResult ids = func.walk([&](Operation *op) {
    if (blockIds.empty() && isa<gpu::BlockIdOp, gpu::ThreadIdOp>(op))
      return op->emitOpError()
                 << "in device function '" << func.getName()
                 << "': the host emulation passes block and thread ids to "
                    "kernels only (pass the id as an argument)",
             WalkResult::interrupt();
    if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
      if (!shuffle.getValue().getType().isF32())
        return shuffle.emitOpError("host emulation shuffles only f32"),
               WalkResult::interrupt();
      if (!shuffle.getValid().use_empty())
        return shuffle.emitOpError("host emulation has no `valid` result"),
               WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (ids.wasInterrupted())
    return failure();
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

/// Moves device function `func` (a func.func of a gpu.module, called by its
/// kernels) to `parent`: its workgroup or private memref arguments and
/// results (views of a kernel's arena or its stack on the host) take the
/// default memory space, and its gpu ops are rewritten as in a kernel.
LogicalResult moveDeviceFunction(func::FuncOp func, gpu::GPUModuleOp gm,
                                 ModuleOp parent) {
  if (Operation *clash = SymbolTable::lookupSymbolIn(parent, func.getName()))
    return func.emitOpError()
           << "is a device function of gpu.module '" << gm.getName()
           << "' whose name is taken in the host module (by '"
           << clash->getName() << "'); the host emulation moves device "
              "functions there and cannot rename their callers' symbols";
  func->moveBefore(gm);
  FunctionType type = func.getFunctionType();
  SmallVector<Type> inputs, results;
  for (Type t : type.getInputs())
    inputs.push_back(hostTypeOf(t));
  for (Type t : type.getResults())
    results.push_back(hostTypeOf(t));
  func.setFunctionType(FunctionType::get(func.getContext(), inputs, results));
  if (!func.isExternal())
    for (BlockArgument arg : func.getArguments())
      arg.setType(hostTypeOf(arg.getType()));
  return rewriteDeviceOps(func, parent, {}, Value(), Value());
}

LogicalResult convertKernel(gpu::GPUFuncOp kernel, ModuleOp parent) {
  MLIRContext *ctx = kernel.getContext();
  Location loc = kernel.getLoc();
  if (!kernel.isKernel())
    return kernel.emitOpError()
           << "is not a kernel: the host emulation converts kernels (one "
              "call per GPU thread) and func.func device functions; write "
              "a device function as a func.func";
  if (!kernel.getBody().hasOneBlock())
    return kernel.emitOpError("expected a single-block kernel body");

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

  return rewriteDeviceOps(func, parent, blockIds, threadId, zero);
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
      // Device functions the kernels call move out with them (they used to
      // be erased with the gpu.module, leaving the calls dangling).
      for (auto func :
           llvm::make_early_inc_range(gm.getOps<func::FuncOp>()))
        if (failed(moveDeviceFunction(func, gm, module)))
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
