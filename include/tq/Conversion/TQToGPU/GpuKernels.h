//===- GpuKernels.h - Attention kernels in the gpu dialect ------*- C++ -*-===//
//
// Decode and prefill attention over a paged TurboQuant cache as gpu.func
// kernels, flash-decoding style (split-KV, then a combine kernel). One
// kernel library module holds every kernel as a gpu.module; the runtime
// launches them by name. All buffers are 1-D memrefs, passed as MLIR's
// expanded descriptors (allocated ptr, aligned ptr, offset, size, stride);
// scalars follow.
//
//   <name>(q f32[rows][H][D], k i8[pages][P][KH][RK], v i8[..][RV],
//          indptr i32[seqs+1], indices i32[], seq_lens i32[seqs],
//          row_seq i32[rows], row_pos i32[rows],
//          partial f32[rows][KH][splits][G][PS],
//          page_size i32, kv_heads i32, splits i32, scale f32)
//     grid (rows, KH, splits), block known_block_size.
//     Row r is a query of sequence row_seq[r] at position row_pos[r]; it
//     reads tokens [lo, hi) with hi = seq_len (causal: min(seq_len, pos+1))
//     and lo = max(0, pos - window + 1) with a window; split s of S takes
//     the s-th of S equal chunks. partial holds, per query head of the
//     group, PS = gpuPartialStride(V) floats: the rotated-domain
//     accumulator (DV = the V format's padded dim), the running max m
//     (base 2) and the sum l; for a QJL V (tqprod) then the DV weighted
//     sums of the residual signs (S^T applies once, in combine).
//   <name>_combine(partial, out f32[rows][H][D], splits i32, kv_heads i32)
//     grid (rows, KH): merges the splits, divides by the sum, adds a QJL
//     V's residual S^T sgn and rotates the result back (V's inverse
//     rotation); rows with no visible token get zeros.
//
// K's rotation is applied to the queries once per block (a warp-shuffle
// butterfly for Hadamard kinds), keys are scored in the rotated domain by
// decoding each packed element in registers (centroids by select tree),
// and one K/V row load serves the whole GQA group. A QJL K adds
// ||x|| ||r|| sqrt(pi/2)/m <S q, sign> to each score, with S q computed
// once per block.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_CONVERSION_TQTOGPU_GPUKERNELS_H
#define TQ_CONVERSION_TQTOGPU_GPUKERNELS_H

#include "tq/Conversion/TQToGPU/GpuTarget.h"
#include "tq/Pipelines/RuntimeKernels.h"
#include "tq/Quant/Format.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::tq {

/// Launch facts of one GPU kernel, for metadata and the runtime.
struct GpuKernelInfo {
  std::string name;
  std::string role; // "attention" or "combine"
  unsigned blockSize = 0;
  int64_t workgroupBytes = 0;
};

/// Floats of one query head's split partial for V format `values`:
/// DV + 2, plus DV for a QJL residual.
inline unsigned gpuPartialStride(const ::tq::quant::FormatSpec &values) {
  return values.paddedDim + 2 + (values.qjl ? values.paddedDim : 0);
}

/// Adds the kernels of `spec` to `module`. Fails (with a diagnostic) for
/// specs the GPU path does not lower.
FailureOr<SmallVector<GpuKernelInfo>>
buildGpuKernels(gpu::GPUModuleOp module, const RuntimeKernelSpec &spec,
                const GpuTarget &target,
                function_ref<InFlightDiagnostic()> emitError);

} // namespace mlir::tq

#endif // TQ_CONVERSION_TQTOGPU_GPUKERNELS_H
