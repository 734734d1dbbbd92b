//===- GpuKernelLibrary.h - Writing GPU kernel libraries --------*- C++ -*-===//
//
// The GPU flavour of a kernel library directory (see KernelLibrary.h):
//   kernels.json        target, chip, warp size and one entry per kernel
//                       (name, role, block size, workgroup bytes, spec)
//   tq_kernels.gpu.mlir the kernels at gpu-dialect level, before lowering
//   tq_kernels.ptx      nvptx: the module's PTX (loaded by the CUDA driver)
//   tq_kernels.s        amdgcn: the module's AMDGCN assembly, and
//   tq_kernels.hsaco    the code object (llvm-mc + ld.lld of the LLVM tqc was
//                       built with; see LLVMTools.h)
// Each attention kernel also exports `<name>_info`, the same int64 array
// the CPU kernels carry, as a device global the runtime checks.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_TARGET_GPUKERNELLIBRARY_H
#define TQ_TARGET_GPUKERNELLIBRARY_H

#include "tq/Conversion/TQToGPU/GpuTarget.h"
#include "tq/Target/KernelLibrary.h"

namespace mlir::tq {

/// Builds every spec's GPU kernels into one module, lowers it and writes
/// the library into options.outputDir. On failure returns false with
/// `error` naming the kernel and the reason.
bool writeGpuKernelLibrary(MLIRContext &context,
                           const std::vector<RuntimeKernelSpec> &specs,
                           const GpuTarget &target,
                           const KernelLibraryOptions &options,
                           const KernelProgress &progress, std::string &error);

} // namespace mlir::tq

#endif // TQ_TARGET_GPUKERNELLIBRARY_H
