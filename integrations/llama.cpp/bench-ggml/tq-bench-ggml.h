/* tq-bench-ggml: ggml's CPU flash attention (GGML_OP_FLASH_ATTN_EXT) as a
 * baseline tq-bench times beside the tqc kernels. A shared library linked
 * against the llama.cpp integration's ggml (integrations/llama.cpp/build.sh
 * builds it to ${TQC_LLAMA_DIR}/lib/libtq_bench_ggml.so); tq-bench dlopens
 * it (--ggml-bench) and so never links ggml. Only the tqbg_* symbols below
 * are exported (ggml's own stay local to the library).
 *
 * One handle is one attention call at one shape, built once: K and V caches
 * of `context` cells of `kv_heads` heads in a ggml type, filled with 1,024
 * distinct encoded Gaussian tokens tiled over the context (as tq-bench's
 * pools), an f32 query of `rows` rows x `q_heads` heads, an f16 mask (all
 * cells visible; with rows > 1 causal, the rows at the last positions),
 * scale 1/sqrt(head_dim), f32 accumulation as llama.cpp's build_attn_mha,
 * and a ggml threadpool of `threads` threads (the calling thread is one).
 *
 * Layouts:
 *   "contiguous"  K/V tensors [D, context, kv_heads]: each head's rows
 *                 consecutive
 *   "cache"       llama.cpp's KV cache: [D*kv_heads, context] (the rows of
 *                 all heads of a cell consecutive) viewed as [D, kv_heads,
 *                 context] and permuted (0, 2, 1, 3), as
 *                 llama_kv_cache::get_k / get_v and build_attn_mha do
 */
#ifndef TQ_BENCH_GGML_H
#define TQ_BENCH_GGML_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQBG_ABI_VERSION 1

typedef struct tqbg tqbg;

/* TQBG_ABI_VERSION of the library. */
int tqbg_abi_version(void);

/* A description of the ggml build ("ggml <commit>, CPU backend"). */
const char *tqbg_describe(void);

/* Builds a case; NULL on failure, with tqbg_error() saying why. `type`:
 * f16, bf16, q4_0, q4_1, q5_0, q5_1 or q8_0 (K and V alike). */
tqbg *tqbg_create(const char *type, const char *layout, int head_dim,
                  int q_heads, int kv_heads, int64_t context, int rows,
                  int threads);

/* Computes the graph once (the threadpool wakes if paused). 0 on success;
 * otherwise non-zero with tqbg_error() saying why. */
int tqbg_run(tqbg *h);

/* Pauses the handle's threadpool so its workers sleep instead of polling
 * for the next graph (call it outside the timed region). */
void tqbg_idle(tqbg *h);

/* Bytes of K and V the call reads (every cell of both caches). */
uint64_t tqbg_bytes(const tqbg *h);

void tqbg_destroy(tqbg *h);

/* The last error of this thread ("" if none). */
const char *tqbg_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TQ_BENCH_GGML_H */
