/*===- common.h - What the CPU and GPU runtimes share -------------------===*
 *
 * Descriptor validation, kernel naming and the kernels' self-description
 * (<name>_info, written by tq-aot), used by runtime.c (CPU) and
 * gpu_runtime.c (CUDA / HIP).
 *
 *===--------------------------------------------------------------------===*/

#ifndef TQ_RUNTIME_COMMON_H
#define TQ_RUNTIME_COMMON_H

#include "tq/tq_runtime.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The cache's page ownership (TQ_LAYOUT_PAGED or TQ_LAYOUT_CONTIGUOUS),
 * without the TQ_LAYOUT_HEAD_MAJOR flag. */
static inline uint32_t tq_layout_kind(const tq_kv_cache_v0 *c) {
  return c->layout & ~TQ_LAYOUT_HEAD_MAJOR;
}

/* <name>_info, written by tq-aot: int64 entries. GPU kernels append the
 * floats of one query head's split partial (attention: V's padded dim + 2,
 * plus the padded dim again for a QJL V; append: the format's padded dim)
 * and the block size. */
/* MLIR's strided memref descriptors, the CPU kernels' calling convention. */
typedef struct {
  void *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
} memref1;
typedef struct {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} memref2;
typedef struct {
  void *allocated, *aligned;
  int64_t offset, sizes[3], strides[3];
} memref3;
typedef struct {
  void *allocated, *aligned;
  int64_t offset, sizes[4], strides[4];
} memref4;

enum {
  INFO_VERSION,
  INFO_KIND,
  INFO_HEAD_DIM,
  INFO_GROUP,
  INFO_K_ROW_BYTES,
  INFO_V_ROW_BYTES,
  INFO_CAUSAL,
  INFO_WINDOW,
  INFO_GPU_PARTIAL_STRIDE,
  INFO_GPU_BLOCK_THREADS,
  INFO_GPU_ENTRIES,
};
enum {
  KIND_APPEND = 0,
  KIND_DECODE = 1,
  KIND_PREFILL = 2,
  KIND_GGML_DECODE = 3,
  KIND_GGML_PREFILL = 4,
  KIND_DEQUANTIZE = 5
};

/* Records the cause of a failure for tq_last_error (printf format) and
 * returns `status`. */
tq_status tq_fail(tq_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Info versions, the kernels' calling conventions: ggml decode kernels
 * gained their %lse output in version 2, runtime decode kernels in 3. */
enum {
  INFO_VERSION_PLAIN = 1,
  INFO_VERSION_GGML_DECODE = 2,
  INFO_VERSION_DECODE = 3
};

/* Merges the parts one query head's keys were split into:
 * out = sum_j exp(lse_j - M) out_j / sum_j exp(lse_j - M), M the largest
 * lse, and zeros when no part saw anything (every lse -inf). Part j's dv
 * floats are at outs + j * stride, its log-sum-exp at lses[j * stride]. */
void tq_merge_parts(const float *outs, const float *lses, int64_t stride,
                    int64_t parts, int64_t dv, float *out);

static inline bool tq_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* The caller's allocator after version and null checks, or the C
 * library's aligned_alloc / free when `allocator` is null. */
tq_status tq_resolve_allocator(const tq_allocator_v0 *allocator,
                               tq_allocator_v0 *out);

/* Checks every field of a cache descriptor (and its page table) before
 * anything is launched. */
tq_status tq_check_cache(const tq_kv_cache_v0 *c);

/* Everything tq_attention and tq_gpu_attention check before planning:
 * the cache, the params' version and size, the pointers, the head counts,
 * softcap / scale, and q_indptr[0] == 0. */
tq_status tq_check_attention_call(const tq_kv_cache_v0 *c,
                                  const tq_attention_params_v0 *p,
                                  const float *q, const float *out);

/* The query rows of sequence `seq` (q_indptr[seq + 1] - q_indptr[seq]) in
 * *out_rows; INVALID_ARGUMENT naming the sequence when q_indptr decreases
 * there. */
tq_status tq_query_rows(const int32_t *q_indptr, uint32_t seq,
                        int32_t *out_rows);

/* OUT_OF_RANGE naming the sequence when a causal call has more query rows
 * than the sequence has tokens (each row needs a token of its own). */
tq_status tq_check_causal_rows(bool causal, uint32_t seq, int32_t rows,
                               uint64_t tokens);

/* The append kernel tq-aot names for a format and head dim, e.g.
 * "tq_append_turbo3_0_d128". False when it does not fit or the format
 * name is not an identifier. */
bool tq_append_kernel_name(const char *format, uint32_t head_dim, char *name,
                           size_t size);

/* True when an append kernel's <name>_info describes rows of head_dim
 * values encoded into row_bytes bytes. */
bool tq_append_info_matches(const int64_t *info, uint32_t head_dim,
                            uint32_t row_bytes);

/* Everything tq_append and tq_gpu_append check: the cache, seq in range,
 * row pointers when num_rows > 0, and slots start .. start + num_rows - 1
 * inside the sequence's pages. OK with num_rows == 0 means nothing to do. */
tq_status tq_check_append_call(const tq_kv_cache_v0 *c, uint32_t seq,
                               uint64_t start, uint32_t num_rows,
                               const float *k_rows, const float *v_rows);

/* OK where kernel `name` of `library` does not use AMX tiles (no
 * `<name>_uses_amx` symbol) or Linux granted this process the tile data
 * (the library's constructor asks: arch_prctl ARCH_REQ_XCOMP_PERM);
 * TQ_STATUS_UNAVAILABLE naming the kernel otherwise: its first tile
 * instruction would fault. */
tq_status tq_check_amx_grant(void *library, const char *name);

/* Format names become part of symbol names: letters, digits, '_'. */
bool tq_is_identifier(const char *s);

/* The kernel tq-aot names for this attention call, e.g.
 * "tq_decode_turbo3_0_turbo3_0_d128_g4_causal". False when it does not fit
 * or a format name is not an identifier. */
/* The largest soft-cap a kernel takes (the compiler's kMaxSoftcap). */
#define TQ_MAX_SOFTCAP 1.0e6f

/* The kernel-name suffix of soft-cap `softcap` in (0, TQ_MAX_SOFTCAP]:
 * "_sc" and its hundredths where they give the value back exactly, else
 * "_scx" and its IEEE bits in hex (the compiler's softcapSuffix). False
 * for a value out of range or a buffer too small. */
bool tq_softcap_suffix(float softcap, char *out, size_t size);

bool tq_attention_kernel_name(const tq_kv_cache_v0 *c,
                              const tq_attention_params_v0 *p, int kind,
                              uint32_t group, char *name, size_t size);

/* The ggml attention kernel tq-aot --abi=ggml names for a pair and shape,
 * e.g. "tq_ggml_decode_turbo3_0_q8_0_d576_dv512_g2_sc5000" (V's head dim
 * only when it differs; the soft-cap in hundredths when positive). False
 * when it does not fit or a format name is not an identifier. */
bool tq_ggml_attention_kernel_name(bool decode, const char *k_format,
                                   const char *v_format, int64_t dk,
                                   int64_t dv, int64_t group, float softcap,
                                   char *name, size_t size);

/* Everything tq_attention_v1 checks before planning (the per-sequence
 * mask bound is checked while planning). */
tq_status tq_check_attention_call_v1(const tq_kv_cache_v0 *c,
                                     const tq_attention_params_v1 *p,
                                     const float *q, const float *out);

#endif /* TQ_RUNTIME_COMMON_H */
