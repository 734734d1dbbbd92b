/*===- tq_ggml.h - tqc kernels behind ggml's operator contracts ---------===*
 *
 * A ggml backend (llama.cpp's CPU backend, patched by
 * integrations/llama.cpp) keeps a KV cache in a tqc format and calls this
 * bridge for the three operators that touch it:
 *
 *   SET_ROWS          -> tq_ggml_quantize   (ggml's from_float contract)
 *   GET_ROWS / CPY    -> tq_ggml_dequantize (ggml's to_float contract)
 *   FLASH_ATTN_EXT    -> tq_ggml_flash_attn_ext
 *
 * The kernels come from a pack written by `tq-aot --abi=ggml`
 * (libtq_ggml_kernels.so), loaded with dlopen. In ggml terms a tqc format
 * is a block type whose block is one head row: blck_size = head_dim and
 * type_size = tq_ggml_row_bytes(format, head_dim).
 *
 * Threads: tq_ggml_flash_attn_ext splits its work over the caller's
 * threads (ggml's ith / nth) and starts none of its own;
 * tq_ggml_flash_attn_ext_threads also splits one head's tokens over them
 * when there are fewer heads than threads. Every call is
 * thread-safe; a pack is immutable once opened.
 *
 * Errors: every fallible call returns a tq_status; calls that take an
 * `error` buffer also write a sentence naming the cause there (for a
 * missing kernel: its symbol and the tq-aot command that builds it).
 *
 *===--------------------------------------------------------------------===*/

#ifndef TQ_GGML_H
#define TQ_GGML_H

#include "tq/tq_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_GGML_ABI_VERSION 1u

typedef struct tq_ggml_pack tq_ggml_pack;

/* Loads a pack. On failure *out_pack is null and `error` says why. */
tq_status tq_ggml_pack_open(const char *library_path, tq_ggml_pack **out_pack,
                            char *error, size_t error_size);
void tq_ggml_pack_close(tq_ggml_pack *pack);

/* Bytes of one head_dim-long row of `format`; NOT_FOUND when the pack has
 * no row kernels for the format at that head dim. */
tq_status tq_ggml_row_bytes(const tq_ggml_pack *pack, const char *format,
                            uint32_t head_dim, uint32_t *out_bytes);

/* from_float: num_values floats (a multiple of head_dim) -> num_values /
 * head_dim encoded rows at y. Non-finite input is encoded as the kernels
 * define it (the caller's values are never checked here). */
tq_status tq_ggml_quantize(const tq_ggml_pack *pack, const char *format,
                           uint32_t head_dim, const float *x, void *y,
                           int64_t num_values);

/* to_float: num_values / head_dim rows at x -> num_values floats at y (the
 * original domain: inverse rotation applied, padding dropped). */
tq_status tq_ggml_dequantize(const tq_ggml_pack *pack, const char *format,
                             uint32_t head_dim, const void *x, float *y,
                             int64_t num_values);

/* Centred rows (tq-aot --centred-k): row r of the call is encoded as
 * x_r - centre[r mod centre_rows] (centre: centre_rows x head_dim floats,
 * e.g. one per KV head when a call holds one token's heads), and decoded
 * with the centre added back. Keys centred by one vector per head and
 * layer attend exactly as the originals (softmax is invariant to adding
 * q.c to every logit of a query), so attention reads them as plain rows
 * of the format; this does not hold with attention sinks or a soft-cap.
 * NOT_FOUND when the pack lacks <kernel>_centred. */
tq_status tq_ggml_quantize_centred(const tq_ggml_pack *pack,
                                   const char *format, uint32_t head_dim,
                                   const float *centre, uint32_t centre_rows,
                                   const float *x, void *y,
                                   int64_t num_values);
tq_status tq_ggml_dequantize_centred(const tq_ggml_pack *pack,
                                     const char *format, uint32_t head_dim,
                                     const float *centre,
                                     uint32_t centre_rows, const void *x,
                                     float *y, int64_t num_values);

/* A ggml tensor as the bridge sees it: data, ne[] (elements) and nb[]
 * (bytes) exactly as in struct ggml_tensor. */
typedef struct tq_ggml_tensor_v0 {
  const void *data;
  int64_t ne[4];
  uint64_t nb[4];
} tq_ggml_tensor_v0;

#define TQ_GGML_ATTENTION_VERSION_0 0u
/* GGML_OP_FLASH_ATTN_EXT with ggml's semantics:
 *   q     f32 [DK, n_queries, n_head, ns]
 *   k         [DK, n_kv, n_head_kv, ns_k] in k_format (rows of one token's
 *   v         [DV, n_kv, n_head_kv, ns_v]  heads sit next to each other)
 *   mask  f16 [n_kv, >= n_queries, 1, ns or 1] additive; data null: none
 *   sinks f32 [n_head]; data null: none
 *   dst   f32 [DV, n_head, n_queries, ns]
 * logit = softcap > 0 ? softcap * tanh(scale * q.k / softcap) : scale * q.k,
 * plus slope(h) * mask, where slope is ggml's ALiBi slope for max_bias > 0
 * and 1 otherwise. A query row whose every logit is -inf (and that has no
 * sink) gets zeros. */
typedef struct tq_ggml_attention_v0 {
  uint32_t version; /* TQ_GGML_ATTENTION_VERSION_0 */
  uint32_t size;    /* sizeof(tq_ggml_attention_v0) */
  const char *k_format; /* "turbo3_0", "q8_0", "f16", ... */
  const char *v_format;
  tq_ggml_tensor_v0 q, k, v, mask, sinks, dst;
  float scale;
  float max_bias;
  float softcap;
  uint32_t reserved;
} tq_ggml_attention_v0;

/* Thread ith of nth computes its share of the call; all nth threads must
 * call with the same arguments. Validation is the same on every thread, so
 * either all return the same error or all do their work. */
tq_status tq_ggml_flash_attn_ext(const tq_ggml_pack *pack,
                                 const tq_ggml_attention_v0 *call,
                                 uint32_t ith, uint32_t nth, char *error,
                                 size_t error_size);

#define TQ_GGML_THREADS_VERSION_0 0u

/* What the caller's nth threads share during one call: a scratch buffer
 * every thread sees and a barrier that returns once all nth threads have
 * reached it (ggml: params->wdata / wsize and ggml_barrier). */
typedef struct tq_ggml_threads_v0 {
  uint32_t version; /* TQ_GGML_THREADS_VERSION_0 */
  uint32_t size;    /* sizeof(tq_ggml_threads_v0) */
  void *scratch;
  uint64_t scratch_bytes;
  void (*barrier)(void *context);
  void *barrier_context;
} tq_ggml_threads_v0;

/* Scratch bytes tq_ggml_flash_attn_ext_threads uses for this call with nth
 * threads; 0 when the call does not split. At most
 * 4 * n_head * nth * (DV + 1) bytes (ggml's own FLASH_ATTN_EXT work size
 * covers it). */
tq_status tq_ggml_flash_attn_ext_scratch(const tq_ggml_pack *pack,
                                         const tq_ggml_attention_v0 *call,
                                         uint32_t nth, uint64_t *out_bytes);

/* tq_ggml_flash_attn_ext, where a decode call (one query row) with fewer
 * (stream, KV head) pairs than threads -- a model with one KV head --
 * splits each head's tokens over the threads: each thread attends over
 * its part, writing the output and log-sum-exp to the scratch, every
 * thread calls threads->barrier exactly once, and the parts are merged by
 * log-sum-exp. Calls that do not split, or whose scratch is smaller than
 * tq_ggml_flash_attn_ext_scratch says, run as tq_ggml_flash_attn_ext does
 * and never call the barrier. The same on every thread, like the checks. */
tq_status tq_ggml_flash_attn_ext_threads(const tq_ggml_pack *pack,
                                         const tq_ggml_attention_v0 *call,
                                         uint32_t ith, uint32_t nth,
                                         const tq_ggml_threads_v0 *threads,
                                         char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* TQ_GGML_H */
