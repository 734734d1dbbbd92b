/*===- tq_runtime.h - The tqc runtime's C ABI ---------------------------===*
 *
 * An engine (llama.cpp, a vLLM-style server) keeps its KV cache in a
 * TurboQuant format and calls this runtime to append new K/V rows and to run
 * attention over them. The runtime loads a kernel library written by
 * tq-aot, plans the grid (sequence x kv head) and launches the kernels on a
 * thread pool it owns. It has no global state: several runtimes (one per
 * device, one per model) can live in one process.
 *
 * ABI rules: every fallible call returns a tq_status; results come back
 * through out-parameters; structs start with (version, size) and their
 * sizes are pinned; memory comes from the caller's allocator.
 *
 *===--------------------------------------------------------------------===*/

#ifndef TQ_RUNTIME_H
#define TQ_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_RUNTIME_ABI_VERSION 1u

typedef enum tq_status {
  TQ_STATUS_OK = 0,
  TQ_STATUS_INVALID_ARGUMENT = 1, /* null pointer, bad size, inconsistent */
  TQ_STATUS_VERSION_MISMATCH = 2, /* unknown struct version or size */
  TQ_STATUS_NOT_FOUND = 3,        /* no kernel for this configuration */
  TQ_STATUS_OUT_OF_RANGE = 4,     /* page index, capacity or token range */
  TQ_STATUS_OVERFLOW = 5,         /* a size computation overflows */
  TQ_STATUS_OUT_OF_MEMORY = 6,
  TQ_STATUS_UNAVAILABLE = 7,      /* the kernel library or driver cannot be
                                     loaded */
  TQ_STATUS_DEVICE_ERROR = 8,     /* the GPU driver reported an error */
} tq_status;

/* A static, human-readable name of a status. */
const char *tq_status_string(tq_status status);

/* What went wrong in the most recent call of this runtime (CPU or GPU) on
 * this thread that failed: every failing call sets it, naming the argument
 * or field refused and why, the kernel looked for and the library it was
 * looked for in (TQ_STATUS_NOT_FOUND), the library path and the loader's
 * message (TQ_STATUS_UNAVAILABLE), the kernel whose calling convention
 * differs (TQ_STATUS_VERSION_MISMATCH), what could not be allocated or
 * started (TQ_STATUS_OUT_OF_MEMORY), the driver step that failed
 * (TQ_STATUS_DEVICE_ERROR). "" before any failure; a later successful call
 * leaves it (like errno). The string is valid until the next call on this
 * thread. (tq_ggml.h's calls report through their own error buffers.) */
const char *tq_last_error(void);

/* The ABI version this library implements (TQ_RUNTIME_ABI_VERSION). */
uint32_t tq_runtime_abi_version(void);

/*--- Allocator ---------------------------------------------------------*/

#define TQ_ALLOCATOR_VERSION_0 0u
typedef struct tq_allocator_v0 {
  uint32_t version; /* TQ_ALLOCATOR_VERSION_0 */
  uint32_t size;    /* sizeof(tq_allocator_v0) */
  void *user;
  /* Returns null on failure. alignment is a power of two. */
  void *(*allocate)(void *user, size_t bytes, size_t alignment);
  void (*release)(void *user, void *pointer);
} tq_allocator_v0;

/*--- Runtime -----------------------------------------------------------*/

#define TQ_RUNTIME_OPTIONS_VERSION_0 0u
typedef struct tq_runtime_options_v0 {
  uint32_t version;          /* TQ_RUNTIME_OPTIONS_VERSION_0 */
  uint32_t size;             /* sizeof(tq_runtime_options_v0) */
  const char *library_path;  /* libtqkernels.so written by tq-aot */
  uint32_t num_threads;      /* 0: one per online CPU (at most
                                TQ_RUNTIME_MAX_THREADS); more than
                                TQ_RUNTIME_MAX_THREADS is refused */
  uint32_t reserved;
} tq_runtime_options_v0;

/* The most threads a runtime starts. */
#define TQ_RUNTIME_MAX_THREADS 4096u

typedef struct tq_runtime tq_runtime;

/* Loads the kernel library and starts the thread pool. allocator may be
 * null (the C library's aligned_alloc/free). */
tq_status tq_runtime_create(const tq_runtime_options_v0 *options,
                            const tq_allocator_v0 *allocator,
                            tq_runtime **out_runtime);
void tq_runtime_destroy(tq_runtime *runtime);

/*--- KV cache ----------------------------------------------------------*/

#define TQ_LAYOUT_PAGED 0u
#define TQ_LAYOUT_CONTIGUOUS 1u
/* Or-ed into either: pages hold each kv head's rows one head after the
 * other, [num_pages][num_kv_heads][page_size][row_bytes] (FlashInfer's
 * "HND"), so the rows a decode of one head reads are consecutive bytes;
 * without it a token's heads are adjacent (measured in docs/perf/cpu.md:
 * 12-15% faster decode over 8 kv heads from memory with the flag). */
#define TQ_LAYOUT_HEAD_MAJOR 0x100u

#define TQ_KV_CACHE_VERSION_0 0u
/* Pools are [num_pages][page_size][num_kv_heads][row_bytes] bytes, or
 * [num_pages][num_kv_heads][page_size][row_bytes] with
 * TQ_LAYOUT_HEAD_MAJOR.
 * Paged: sequence s owns pages indices[indptr[s] .. indptr[s+1]) in order;
 * its last page holds last_page_len[s] tokens (a CSR page table).
 * Contiguous: sequence s owns page s (num_pages >= num_seqs) and holds
 * seq_lens[s] tokens; page_size is the per-sequence capacity. */
typedef struct tq_kv_cache_v0 {
  uint32_t version; /* TQ_KV_CACHE_VERSION_0 */
  uint32_t size;    /* sizeof(tq_kv_cache_v0) */
  const char *k_format;
  const char *v_format;
  uint32_t head_dim;
  uint32_t num_kv_heads;
  uint32_t page_size;
  uint32_t layout; /* TQ_LAYOUT_PAGED or TQ_LAYOUT_CONTIGUOUS, either
                      optionally | TQ_LAYOUT_HEAD_MAJOR */
  uint32_t k_row_bytes;
  uint32_t v_row_bytes;
  uint64_t num_pages;
  uint8_t *k_pages;
  uint8_t *v_pages;
  uint32_t num_seqs;
  uint32_t reserved;
  const int32_t *indptr;        /* paged: num_seqs + 1 */
  const int32_t *indices;       /* paged: indptr[num_seqs] page ids */
  const int32_t *last_page_len; /* paged: num_seqs */
  const int32_t *seq_lens;      /* contiguous: num_seqs */
} tq_kv_cache_v0;

/* Where the row of (page, slot, kv_head) starts in a pool, in rows of
 * that pool's row bytes: the one definition of the two orders above, for
 * callers that read or fill pools themselves. */
static inline uint64_t tq_kv_cache_row_index(const tq_kv_cache_v0 *cache,
                                             uint64_t page, uint32_t slot,
                                             uint32_t kv_head) {
  return (cache->layout & TQ_LAYOUT_HEAD_MAJOR)
             ? (page * cache->num_kv_heads + kv_head) * cache->page_size +
                   slot
             : (page * cache->page_size + slot) * cache->num_kv_heads +
                   kv_head;
}

/* The number of tokens sequence seq holds. */
tq_status tq_kv_cache_tokens(const tq_kv_cache_v0 *cache, uint32_t seq,
                             uint64_t *out_tokens);

/*--- Entry points ------------------------------------------------------*/

/* Encodes num_rows new K and V rows of sequence seq (each
 * [num_rows][num_kv_heads][head_dim] float) into token slots
 * start .. start + num_rows - 1 of its pages (which must exist). */
tq_status tq_append(tq_runtime *runtime, const tq_kv_cache_v0 *cache,
                    uint32_t seq, uint64_t start, uint32_t num_rows,
                    const float *k_rows, const float *v_rows);

#define TQ_ATTENTION_PARAMS_VERSION_0 0u
typedef struct tq_attention_params_v0 {
  uint32_t version; /* TQ_ATTENTION_PARAMS_VERSION_0 */
  uint32_t size;    /* sizeof(tq_attention_params_v0) */
  uint32_t num_q_heads;
  uint32_t causal;  /* queries aligned to the last positions */
  uint32_t window;  /* 0: none */
  float softcap;    /* 0: none */
  float scale;      /* logit scale; 0: 1/sqrt(head_dim) */
  uint32_t reserved;
  /* Queries of sequence s are rows q_indptr[s] .. q_indptr[s+1] of q and
   * out ([rows][num_q_heads][head_dim] float). */
  const int32_t *q_indptr; /* num_seqs + 1 */
} tq_attention_params_v0;

/* Attention of every sequence's queries over its cache: one query per
 * sequence runs the decode kernels, more the prefill kernels. A call with
 * no queries (or no sequences) runs nothing but still looks its kernels up:
 * the configuration's decode or prefill kernel must be in the library
 * (TQ_STATUS_NOT_FOUND otherwise) and match the cache. */
tq_status tq_attention(tq_runtime *runtime, const tq_kv_cache_v0 *cache,
                       const tq_attention_params_v0 *params, const float *q,
                       float *out);

#define TQ_ATTENTION_PARAMS_VERSION_1 1u
/* Engine-grade attention (GGML_OP_FLASH_ATTN_EXT's semantics) over the
 * same paged or contiguous caches: no causal or window option, an additive
 * f16 mask says what each query sees. For query row r (of q, of sequence
 * s holding n tokens), the logit of token t is
 *   x = scale * q.k                       (scale 0: 1/sqrt(head_dim))
 *   x = softcap * tanh(x / softcap)       (softcap > 0)
 *   x += slopes[h] * mask[r * mask_row_stride + t]   (mask given)
 * and sinks[h], when given, is one more logit with a zero value row. A
 * row whose every logit is -inf (and that has no sink) gets zeros. */
typedef struct tq_attention_params_v1 {
  uint32_t version; /* TQ_ATTENTION_PARAMS_VERSION_1 */
  uint32_t size;    /* sizeof(tq_attention_params_v1) */
  uint32_t num_q_heads;
  float scale;      /* logit scale; 0: 1/sqrt(head_dim) */
  float softcap;    /* 0: none; at most 1e6 */
  uint32_t mask_row_stride; /* mask elements between rows; >= every
                               sequence's tokens when mask is given */
  const int32_t *q_indptr;  /* as in tq_attention_params_v0 */
  const uint16_t *mask;     /* f16 bits [q rows][mask_row_stride]; null:
                               every token visible */
  const float *slopes;      /* [num_q_heads] mask multipliers (ALiBi);
                               null: 1 */
  const float *sinks;       /* [num_q_heads] sink logits (-inf: none);
                               null: none */
} tq_attention_params_v1;

/* tq_attention with tq_attention_params_v1. Runs the ggml attention
 * kernels of the runtime's library (tq_ggml_decode_* / tq_ggml_prefill_*:
 * build it with tq-aot --abi=ggml, which also writes the append kernels
 * tq_append uses); a kernel the library lacks is TQ_STATUS_NOT_FOUND, also
 * for a call with no queries (as in tq_attention). */
tq_status tq_attention_v1(tq_runtime *runtime, const tq_kv_cache_v0 *cache,
                          const tq_attention_params_v1 *params,
                          const float *q, float *out);

/*--- GPU runtime (CUDA, HIP) ------------------------------------------*/

/* A GPU runtime loads a kernel library written by tq-aot --target=nvptx
 * (tq_kernels.ptx, JIT-compiled by the CUDA driver) or --target=amdgcn
 * (tq_kernels.hsaco), and the vendor's driver with dlopen: nothing links
 * against CUDA or HIP, and creating one where no driver is installed
 * returns TQ_STATUS_UNAVAILABLE.
 *
 * Pointers: the pools in the cache descriptor, q and out are device
 * pointers; the page table (indptr, indices, last_page_len, seq_lens) and
 * q_indptr are host arrays, uploaded by each call. Calls are synchronous. */

#define TQ_BACKEND_CUDA 1u
#define TQ_BACKEND_HIP 2u

#define TQ_GPU_OPTIONS_VERSION_0 0u
typedef struct tq_gpu_options_v0 {
  uint32_t version;        /* TQ_GPU_OPTIONS_VERSION_0 */
  uint32_t size;           /* sizeof(tq_gpu_options_v0) */
  uint32_t backend;        /* TQ_BACKEND_CUDA or TQ_BACKEND_HIP */
  int32_t device;          /* device ordinal */
  const char *library_dir; /* the tq-aot output directory */
  const char *driver_path; /* null: libcuda.so.1 / libamdhip64.so */
  uint32_t splits;         /* split-KV chunks; 0: chosen per call */
  uint32_t reserved;
} tq_gpu_options_v0;

typedef struct tq_gpu_runtime tq_gpu_runtime;

tq_status tq_gpu_runtime_create(const tq_gpu_options_v0 *options,
                                const tq_allocator_v0 *allocator,
                                tq_gpu_runtime **out_runtime);
void tq_gpu_runtime_destroy(tq_gpu_runtime *runtime);

/* The name of the runtime's device as its driver reports it ("NVIDIA H100
 * 80GB HBM3"), NUL-terminated in name[0..bytes) (truncated to fit): the
 * device part of a GPU tuning database key (docs/autotune.md). */
tq_status tq_gpu_device_name(const tq_gpu_runtime *runtime, char *name,
                             size_t bytes);

/* Device memory, for engines and tools that do not manage their own. */
tq_status tq_gpu_malloc(tq_gpu_runtime *runtime, size_t bytes,
                        void **out_device_pointer);
tq_status tq_gpu_free(tq_gpu_runtime *runtime, void *device_pointer);
tq_status tq_gpu_copy_to_device(tq_gpu_runtime *runtime, void *device_dst,
                                const void *host_src, size_t bytes);
tq_status tq_gpu_copy_to_host(tq_gpu_runtime *runtime, void *host_dst,
                              const void *device_src, size_t bytes);

/* tq_append on the GPU: k_rows and v_rows are device pointers to
 * [num_rows][num_kv_heads][head_dim] floats; the library's
 * tq_append_<format>_d<D> kernels (one thread per row, the same bytes as
 * the CPU encoders) write them into their slots. Validation and statuses
 * as tq_append (kernels looked up even for zero rows); rows must be finite
 * (the kernels do not check). */
tq_status tq_gpu_append(tq_gpu_runtime *runtime, const tq_kv_cache_v0 *cache,
                        uint32_t seq, uint64_t start, uint32_t num_rows,
                        const float *k_rows, const float *v_rows);

/* tq_attention on the GPU: the decode kernels when every sequence has at
 * most one query, else the prefill kernels (a split-KV launch and a
 * combine launch either way). A call with no queries launches nothing but
 * looks its decode (or else prefill) kernel up, as tq_attention does. */
tq_status tq_gpu_attention(tq_gpu_runtime *runtime,
                           const tq_kv_cache_v0 *cache,
                           const tq_attention_params_v0 *params,
                           const float *q, float *out);

#ifdef __cplusplus
}
#endif

#endif /* TQ_RUNTIME_H */
