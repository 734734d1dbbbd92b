//===- AttentionKernel.h - Kernel entry points over buffers -----*- C++ -*-===//
//
// A kernel is a function over caller-owned buffers (destination passing):
//
//   func.func @name(%q: memref<Q x H x D x f32>,
//                   %k: memref<N x KH x RowBytesK x i8>,
//                   %v: memref<N x KH x RowBytesV x i8>,
//                  [%mask: memref<Q x N x f32 (or f16)>,]
//                  [%slopes: memref<H x f32>,] [%sinks: memref<H x f32>,]
//                   %out: memref<Q x H x D x f32>
//                  [, %lse: memref<Q x H x f32>])
//       attributes {llvm.emit_c_interface}
//
// or, for a paged cache (pageSize > 0), K and V as page pools shared by all
// sequences plus this sequence's page table and token count:
//
//   func.func @name(%q, %k: memref<? x P x KH x RowBytesK x i8>,
//                   %v: memref<? x P x KH x RowBytesV x i8>,
//                   %table: memref<? x i32>, %tokens: index, [%mask,] %out)
//
// whose body views the buffers as tensors and caches and states one
// tq.attention; the pipelines derive the rest.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_PIPELINES_ATTENTIONKERNEL_H
#define TQ_PIPELINES_ATTENTIONKERNEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <optional>
#include <string>

namespace mlir::tq {

struct AttentionKernelSpec {
  std::string name = "attention";
  std::string keyFormat;
  std::string valueFormat;
  unsigned headDim = 0;
  unsigned queryHeads = 0;
  unsigned kvHeads = 0;
  int64_t numQueries = 1;
  /// ShapedType::kDynamic for a kernel that takes any context length.
  int64_t numKeys = 0;
  bool causal = false;
  int64_t window = 0;
  float softcap = 0.0f;
  std::optional<float> scale;
  bool mask = false;
  /// The mask's element type is f16 (as llama.cpp stores it), else f32.
  bool maskF16 = false;
  /// ALiBi slopes (one per query head) scale the mask.
  bool slopes = false;
  /// One attention-sink logit per query head.
  bool sinks = false;
  /// A second output after the result: memref<Q x H x f32>, each row's
  /// log-sum-exp (tq.attention's lse).
  bool lse = false;
  /// Tokens per page of a paged cache; 0 for contiguous buffers.
  int64_t pageSize = 0;
};

/// An encoder kernel: rows of K or V values into packed rows,
///
///   func.func @name(%rows: memref<N x KH x D x f32>,
///                   %out: memref<N x KH x RowBytes x i8>)
struct QuantizeKernelSpec {
  std::string name = "quantize";
  std::string format;
  unsigned headDim = 0;
  unsigned kvHeads = 1;
  /// ShapedType::kDynamic for any number of rows.
  int64_t numRows = 0;
};

FailureOr<func::FuncOp>
buildQuantizeKernel(OpBuilder &builder, Location loc,
                    const QuantizeKernelSpec &spec,
                    function_ref<InFlightDiagnostic()> emitError);

/// Builds the kernel at the builder's insertion point (inside a module).
/// Fails, emitting through emitError, when the spec names an unknown format
/// or shapes the formats cannot take.
FailureOr<func::FuncOp>
buildAttentionKernel(OpBuilder &builder, Location loc,
                     const AttentionKernelSpec &spec,
                     function_ref<InFlightDiagnostic()> emitError);

} // namespace mlir::tq

#endif // TQ_PIPELINES_ATTENTIONKERNEL_H
