//===- RuntimeKernels.h - Kernels with the runtime's signatures -*- C++ -*-===//
//
// The kernels tq-aot compiles and the runtime launches. One call handles
// one sequence and one KV head; the runtime's grid is
// (sequence, kv head). All buffers are strided memrefs, so the runtime
// passes views into the engine's arrays without copying:
//
//   attention: func.func @<name>(
//       %q:     memref<? x G x D x f32, strided>    queries of this head group
//       %k:     memref<? x ? x 1 x RK x i8, strided> pages x slots x (this
//       %v:     memref<? x ? x 1 x RV x i8, strided>   kv head) x row bytes
//       %table: memref<? x i32, strided>           this sequence's pages
//       %tokens: index                              tokens in the cache
//       %scale: f32                                 logit scale (0: 1/sqrt(D))
//       %out:   memref<? x G x D x f32, strided>)
//
//   append:    func.func @<name>(
//       %rows:  memref<? x 1 x D x f32, strided>    new rows of this kv head
//       %pool:  memref<? x ? x 1 x R x i8, strided>
//       %table: memref<? x i32, strided>, %start: index)
//     encodes the rows into tokens start .. start + rows - 1.
//
// The page size is the pool's second dimension; a contiguous cache is one
// page whose size is the capacity, with table = [0].
//
//===----------------------------------------------------------------------===//

#ifndef TQ_PIPELINES_RUNTIMEKERNELS_H
#define TQ_PIPELINES_RUNTIMEKERNELS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace mlir::tq {

//   ggml attention (tq-aot --abi=ggml; GGML_OP_FLASH_ATTN_EXT's semantics):
//     func.func @<name>(%q, %k, %v, %table, %tokens, %scale,
//       %mask:   memref<? x ? x f16, strided>   additive, [rows x tokens]
//       %slopes: memref<G x f32, strided>       ALiBi slope per head (x mask)
//       %sinks:  memref<G x f32, strided>       sink logit per head (-inf:
//                                               none)
//       %out,
//       %lse:    memref<1 x G x f32, strided>   decode kernels only: log of
//                                               each head's softmax
//                                               denominator (-inf: nothing
//                                               visible), to merge partial
//                                               attentions over key ranges
//       )
//     no causal or window option: the mask says what each query sees.
//     Info version 2 (decode kernels with %lse; version 1 had none).
//
//   dequantize: func.func @<name>(
//       %rows: memref<? x 1 x R x i8, strided>  encoded rows
//       %out:  memref<? x 1 x D x f32, strided>) the original-domain values
//
//   centred row kernels (<name>_centred) take one more argument, last:
//       %centre: memref<D x f32, strided>        subtracted before encoding,
//                                                added after decoding
//
// The info kinds (the enum's values) are part of the runtime's ABI.
enum class RuntimeKernelKind {
  Append = 0,
  Decode = 1,
  Prefill = 2,
  GgmlDecode = 3,
  GgmlPrefill = 4,
  Dequantize = 5,
};

/// Whether the kind has a K and a V format (attention) or one (rows).
bool isAttentionKind(RuntimeKernelKind kind);

/// One kernel of a library.
struct RuntimeKernelSpec {
  RuntimeKernelKind kind = RuntimeKernelKind::Decode;
  std::string keyFormat;   // append, dequantize: the rows' format
  std::string valueFormat; // unused by append and dequantize
  unsigned headDim = 0;
  /// V's head dim when it differs from K's (0: the same), e.g. DeepSeek's
  /// MLA with K 576 and V 512.
  unsigned valueHeadDim = 0;
  unsigned vDim() const { return valueHeadDim ? valueHeadDim : headDim; }
  /// Row kernels (append, dequantize) of centred rows: the encoder takes a
  /// centre vector c (memref<D x f32>) and encodes x - c; the decoder adds
  /// c back. Keys centred by one vector per head give the same attention
  /// (softmax is invariant to adding q.c to every logit of a query), so
  /// attention kernels read centred K rows as they are.
  bool centred = false;
  unsigned group = 1; // query heads per kv head
  bool causal = false;
  int64_t window = 0;
  /// Logit soft-cap: 0 (none) or finite in (0, kMaxSoftcap].
  float softcap = 0.0f;

  /// The symbol name the runtime looks up, e.g.
  /// "tq_decode_turbo3_0_turbo3_0_d128_g4" or "tq_append_polar3_d96".
  std::string name() const;
};

/// The largest logit soft-cap a kernel takes (models use 30-50).
constexpr float kMaxSoftcap = 1.0e6f;

/// The name suffix of soft-cap `softcap` (finite, in (0, kMaxSoftcap]):
/// its hundredths ("3000" for 30) where they give the value back exactly,
/// else "x" and its IEEE bits in hex ("x3dcccccd"), so no two values share
/// a name and no value overflows. runtime/src/common.c spells it the same.
std::string softcapSuffix(float softcap);

/// "append", "decode", "prefill", "ggml_decode", "ggml_prefill" or
/// "dequantize".
const char *kindName(RuntimeKernelKind kind);

/// Builds the kernel at the builder's insertion point (inside a module).
FailureOr<func::FuncOp>
buildRuntimeKernel(OpBuilder &builder, Location loc,
                   const RuntimeKernelSpec &spec,
                   function_ref<InFlightDiagnostic()> emitError);

} // namespace mlir::tq

#endif // TQ_PIPELINES_RUNTIMEKERNELS_H
