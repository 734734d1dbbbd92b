//===- GpuPipeline.cpp - gpu.module to PTX / AMDGCN -----------------------===//

#include "tq/Conversion/TQToGPU/GpuPipeline.h"

#include "tq/Conversion/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tq;

void mlir::tq::buildGpuKernelBodiesPipeline(OpPassManager &pm) {
  pm.addPass(createTQLowerToLoops());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createTQGpuBufferize());
  pm.addNestedPass<gpu::GPUModuleOp>(createTQMemRefCopyToLinalg());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertLinalgToLoopsPass());
}

void mlir::tq::buildGpuToAssemblyPipeline(OpPassManager &pm,
                                          const GpuTarget &target) {
  buildGpuKernelBodiesPipeline(pm);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(arith::createArithExpandOpsPass());
  pm.addNestedPass<gpu::GPUModuleOp>(memref::createExpandStridedMetadataPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createLowerAffinePass());
  pm.addNestedPass<gpu::GPUModuleOp>(createSCFToControlFlowPass());
  target.addConversionPasses(pm);
  // The kernels' "do not unroll" loop hints, into !llvm.loop metadata.
  pm.addNestedPass<gpu::GPUModuleOp>(createTQAttachLoopAnnotations());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

FailureOr<std::string>
mlir::tq::compileGpuModuleToAssembly(ModuleOp module,
                                     const GpuTarget &target) {
  MLIRContext *context = module.getContext();
  module.walk([&](gpu::GPUModuleOp m) {
    m.setTargetsAttr(ArrayAttr::get(context, {target.targetAttr(context)}));
  });
  PassManager pm(context);
  buildGpuToAssemblyPipeline(pm, target);
  if (failed(pm.run(module)))
    return failure();
  std::string assembly;
  unsigned binaries = 0;
  module.walk([&](gpu::BinaryOp binary) {
    ++binaries;
    for (Attribute a : binary.getObjects())
      if (auto object = dyn_cast<gpu::ObjectAttr>(a))
        assembly = object.getObject().getValue().str();
  });
  if (binaries != 1 || assembly.empty())
    return emitError(module.getLoc())
               << "expected one serialised gpu.module, found " << binaries,
           failure();
  return assembly;
}
