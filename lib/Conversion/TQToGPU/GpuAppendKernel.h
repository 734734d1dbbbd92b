//===- GpuAppendKernel.h - The append kernel in the gpu dialect -*- C++ -*-===//
//
// One thread encodes one (token, KV head) row with the same tq.quantize the
// CPU append kernels run, so the bytes equal Format::encodeRow's. The
// kernel body stays on tensors until buildGpuKernelBodiesPipeline lowers
// and bufferizes it (see GpuKernels.h for the signature).
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOGPU_GPUAPPENDKERNEL_H
#define TQ_LIB_CONVERSION_TQTOGPU_GPUAPPENDKERNEL_H

#include "tq/Conversion/TQToGPU/GpuKernels.h"

namespace mlir::tq {

/// Creates the append kernel of `spec` (spec.keyFormat at spec.headDim)
/// at the builder's point, named spec.name(), with `blockSize` threads per
/// block.
gpu::GPUFuncOp buildGpuAppendKernel(OpBuilder &b, Location loc,
                                    const RuntimeKernelSpec &spec,
                                    unsigned blockSize);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOGPU_GPUAPPENDKERNEL_H
