//===- GpuBufferize.cpp - One-shot bufferization of gpu kernels -----------===//
//
// One-shot bufferization writes constant globals into the builtin module
// and temporaries as heap allocations; inside a gpu.module the globals
// must be the module's own and a temporary is per-thread private memory.
// Both are fixed before the IR is verified again.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

#include "tq/Conversion/Passes.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQGPUBUFFERIZE
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {

/// Clones every outer global that `gm` reads into it.
void importGlobals(gpu::GPUModuleOp gm, SymbolTable &outer) {
  SymbolTable inner(gm);
  gm.walk([&](memref::GetGlobalOp get) {
    if (inner.lookup(get.getName()))
      return;
    if (auto global = outer.lookup<memref::GlobalOp>(get.getName())) {
      OpBuilder b = OpBuilder::atBlockBegin(gm.getBody());
      inner.insert(b.clone(*global.getOperation()));
    }
  });
}

/// Gives every destination operand in `gm` whose value has other uses a
/// tensor of its own: a fresh tensor.empty when the value is one, else a
/// copy (bufferization.alloc_tensor). Afterwards no two writes share a
/// destination value, so in-place bufferization cannot overwrite a tensor
/// that is still read.
void giveDestinationsOwnTensors(gpu::GPUModuleOp gm) {
  SmallVector<OpOperand *> shared;
  gm.walk([&](DestinationStyleOpInterface op) {
    for (OpOperand &init : op.getDpsInitsMutable())
      if (isa<RankedTensorType>(init.get().getType()) &&
          !init.get().hasOneUse())
        shared.push_back(&init);
  });
  for (OpOperand *init : shared) {
    Value value = init->get();
    auto type = cast<RankedTensorType>(value.getType());
    // Dynamic shapes are rejected later (privatiseAllocations).
    if (!type.hasStaticShape())
      continue;
    OpBuilder b(init->getOwner());
    Location loc = init->getOwner()->getLoc();
    if (auto empty = value.getDefiningOp<tensor::EmptyOp>())
      init->set(b.clone(*empty.getOperation())->getResult(0));
    else
      init->set(bufferization::AllocTensorOp::create(b, loc, type,
                                                     ValueRange{}, value));
  }
}

/// Static allocations of `function` (a kernel or a device function)
/// become private allocas at its entry.
LogicalResult privatiseAllocations(FunctionOpInterface function) {
  SmallVector<memref::AllocOp> allocs;
  function.walk([&](memref::AllocOp a) { allocs.push_back(a); });
  auto privateSpace = gpu::AddressSpaceAttr::get(function.getContext(),
                                                 gpu::AddressSpace::Private);
  OpBuilder b = OpBuilder::atBlockBegin(&function.getFunctionBody().front());
  for (memref::AllocOp alloc : allocs) {
    MemRefType type = alloc.getType();
    if (!type.hasStaticShape())
      return alloc.emitOpError(
          "has a dynamic shape; a GPU kernel's temporaries must be static");
    auto privateType =
        MemRefType::get(type.getShape(), type.getElementType(),
                        type.getLayout(), privateSpace);
    auto alloca = memref::AllocaOp::create(b, alloc.getLoc(), privateType,
                                           alloc.getAlignmentAttr());
    Value generic = memref::MemorySpaceCastOp::create(b, alloc.getLoc(), type,
                                                      alloca.getResult());
    for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
      if (isa<memref::DeallocOp>(user))
        user->erase();
    alloc.replaceAllUsesWith(generic);
    alloc.erase();
  }
  return success();
}

struct TQGpuBufferizePass
    : public mlir::tq::impl::TQGpuBufferizeBase<TQGpuBufferizePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Inside gpu.modules, one-shot bufferization lets writes share the
    // buffer of a destination value that has several uses (a CSE'd
    // tensor.empty or zero fill), where in a builtin module the same IR
    // gets one buffer per use: the encoders' Hadamard stages overwrote the
    // stage they were still reading. Destinations are made unshared first.
    for (auto gm : module.getOps<gpu::GPUModuleOp>())
      giveDestinationsOwnTensors(gm);
    bufferization::OneShotBufferizationOptions options;
    bufferization::BufferizationState state;
    if (failed(bufferization::runOneShotBufferize(module, options, state)))
      return signalPassFailure();
    SymbolTable outer(module);
    for (auto gm : module.getOps<gpu::GPUModuleOp>()) {
      importGlobals(gm, outer);
      for (auto function : gm.getOps<FunctionOpInterface>())
        if (failed(privatiseAllocations(function)))
          return signalPassFailure();
    }
    // Outer globals only the gpu.modules read are now dead.
    for (auto global :
         llvm::make_early_inc_range(module.getOps<memref::GlobalOp>()))
      if (global.isPrivate() &&
          SymbolTable::symbolKnownUseEmpty(global, module))
        global.erase();
  }
};

} // namespace
