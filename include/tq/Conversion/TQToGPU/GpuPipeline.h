//===- GpuPipeline.h - gpu.module to PTX / AMDGCN ---------------*- C++ -*-===//
//
// Lowers the gpu.modules built by buildGpuKernels: tensor-level kernel
// bodies to loops, then upstream passes only: arith expansion, scf -> cf, the vendor's gpu -> NVVM / ROCDL
// conversion, then gpu-module-to-binary (format = isa) with the target's
// #nvvm.target / #rocdl.target, and returns the assembly it serialised.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_CONVERSION_TQTOGPU_GPUPIPELINE_H
#define TQ_CONVERSION_TQTOGPU_GPUPIPELINE_H

#include "tq/Conversion/TQToGPU/GpuTarget.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::tq {

/// Kernel bodies written on tensors (the append kernels' tq.quantize) to
/// loops over memrefs: tq-lower-to-loops, tq-gpu-bufferize (per-thread
/// private temporaries), copies and linalg as loops. Kernels already at loop level pass through unchanged.
void buildGpuKernelBodiesPipeline(OpPassManager &pm);

/// The passes from gpu dialect kernels to serialised assembly (starting
/// with buildGpuKernelBodiesPipeline).
void buildGpuToAssemblyPipeline(OpPassManager &pm, const GpuTarget &target);

/// Runs the pipeline on `module` (whose gpu.modules carry no target yet)
/// and returns the assembly of its single gpu.module. Diagnostics go to the
/// context's handlers.
FailureOr<std::string> compileGpuModuleToAssembly(ModuleOp module,
                                                  const GpuTarget &target);

} // namespace mlir::tq

#endif // TQ_CONVERSION_TQTOGPU_GPUPIPELINE_H
