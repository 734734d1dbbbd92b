/*===- gpu_runtime.c - Append and attention on CUDA and HIP devices -----===*
 *
 * Plans a call on the host (validating the descriptor exactly as the CPU
 * runtime does), uploads the per-row metadata to a device workspace, and
 * launches the library's append kernels, or its split-KV kernel and its
 * combine kernel (see
 * include/tq/Conversion/TQToGPU/GpuKernels.h for their arguments). Memref
 * arguments travel as MLIR's expanded descriptors: allocated pointer,
 * aligned pointer, offset, size, stride.
 *
 *===--------------------------------------------------------------------===*/

#include "tq/tq_runtime.h"

#include "common.h"
#include "gpu_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(tq_gpu_options_v0) == 40,
               "tq_gpu_options_v0 is pinned");

struct tq_gpu_runtime {
  tq_allocator_v0 allocator;
  tq_gpu_driver driver;
  void *module;
  uint32_t splits;
  int multiprocessors;
  /* Device workspace for row metadata and split partials, grown on use. */
  tq_device_ptr workspace;
  size_t workspace_bytes;
};

/* A driver call that failed during a call: the status and its message. */
static tq_status device_failed(const char *call, const char *step) {
  return tq_fail(TQ_STATUS_DEVICE_ERROR, "%s: %s failed on the device", call,
                 step);
}

/* Reads a whole file into memory from the runtime's allocator, NUL
 * terminated (PTX is text). */
static void *read_file(const tq_allocator_v0 *a, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *data = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long size = ftell(f);
    if (size > 0 && fseek(f, 0, SEEK_SET) == 0) {
      data = a->allocate(a->user, (size_t)size + 1, 16);
      if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
        a->release(a->user, data);
        data = NULL;
      } else if (data) {
        data[size] = '\0';
      }
    }
  }
  fclose(f);
  return data;
}

tq_status tq_gpu_runtime_create(const tq_gpu_options_v0 *options,
                                const tq_allocator_v0 *allocator,
                                tq_gpu_runtime **out_runtime) {
  if (!options || !out_runtime)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_runtime_create: options and out_runtime must be "
                   "set");
  *out_runtime = NULL;
  if (options->version != TQ_GPU_OPTIONS_VERSION_0 ||
      options->size != sizeof(*options))
    return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                   "GPU options: version %u size %u, this runtime reads "
                   "version %u size %u",
                   options->version, options->size, TQ_GPU_OPTIONS_VERSION_0,
                   (unsigned)sizeof(*options));
  if (options->backend != TQ_BACKEND_CUDA &&
      options->backend != TQ_BACKEND_HIP)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "GPU options: backend %u is neither TQ_BACKEND_CUDA nor "
                   "TQ_BACKEND_HIP",
                   options->backend);
  if (!options->library_dir)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "GPU options: library_dir must be set (a tq-aot GPU "
                   "library directory)");
  if (options->device < 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "GPU options: device %d is negative", options->device);
  tq_allocator_v0 a;
  tq_status checked = tq_resolve_allocator(allocator, &a);
  if (checked != TQ_STATUS_OK)
    return checked;
  const int cuda = options->backend == TQ_BACKEND_CUDA;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", options->library_dir,
               cuda ? "tq_kernels.ptx" : "tq_kernels.hsaco") >=
      (int)sizeof path)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "GPU options: library_dir is too long (%zu bytes)",
                   strlen(options->library_dir));

  tq_gpu_runtime *rt = a.allocate(a.user, sizeof *rt, _Alignof(tq_gpu_runtime));
  if (!rt)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "tq_gpu_runtime_create: cannot allocate the runtime (%zu "
                   "bytes)",
                   sizeof *rt);
  memset(rt, 0, sizeof *rt);
  rt->allocator = a;
  rt->splits = options->splits;
  int status = tq_gpu_driver_open(&rt->driver, cuda, options->driver_path,
                                  options->device);
  if (status != 0) {
    a.release(a.user, rt);
    if (status < 0)
      return tq_fail(TQ_STATUS_UNAVAILABLE,
                     "no %s driver: cannot load '%s' or one of its entry "
                     "points",
                     cuda ? "CUDA" : "HIP",
                     tq_gpu_driver_name(cuda, options->driver_path));
    return tq_fail(TQ_STATUS_DEVICE_ERROR,
                   "%s driver error %d initialising device %d",
                   cuda ? "CUDA" : "HIP", status, (int)options->device);
  }
  void *image = read_file(&a, path);
  if (!image) {
    tq_gpu_driver_close(&rt->driver);
    a.release(a.user, rt);
    return tq_fail(TQ_STATUS_UNAVAILABLE, "cannot read kernel library '%s'",
                   path);
  }
  status = tq_gpu_module_load(&rt->driver, &rt->module, image);
  a.release(a.user, image);
  if (status == 0)
    status = tq_gpu_multiprocessors(&rt->driver, &rt->multiprocessors);
  if (status != 0) {
    tq_gpu_runtime_destroy(rt);
    return tq_fail(TQ_STATUS_DEVICE_ERROR,
                   "%s driver error %d loading '%s'", cuda ? "CUDA" : "HIP",
                   status, path);
  }
  *out_runtime = rt;
  return TQ_STATUS_OK;
}

void tq_gpu_runtime_destroy(tq_gpu_runtime *rt) {
  if (!rt)
    return;
  if (rt->workspace)
    tq_gpu_free_raw(&rt->driver, rt->workspace);
  if (rt->module)
    tq_gpu_module_unload(&rt->driver, rt->module);
  tq_gpu_driver_close(&rt->driver);
  tq_allocator_v0 a = rt->allocator;
  a.release(a.user, rt);
}

tq_status tq_gpu_device_name(const tq_gpu_runtime *rt, char *name,
                             size_t bytes) {
  if (!rt || !name || bytes == 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_device_name: null runtime or empty buffer");
  const int capacity = bytes > 4096 ? 4096 : (int)bytes;
  name[0] = '\0';
  if (tq_gpu_device_name_raw(&rt->driver, name, capacity) != 0)
    return tq_fail(TQ_STATUS_DEVICE_ERROR,
                   "the driver did not name device %d", rt->driver.device);
  name[capacity - 1] = '\0';
  return TQ_STATUS_OK;
}

tq_status tq_gpu_malloc(tq_gpu_runtime *rt, size_t bytes, void **out) {
  if (!rt || !out || bytes == 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_malloc: runtime and out must be set and bytes "
                   "positive");
  tq_device_ptr p = 0;
  if (tq_gpu_malloc_raw(&rt->driver, &p, bytes) != 0)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "tq_gpu_malloc: the device could not allocate %zu bytes",
                   bytes);
  *out = (void *)(uintptr_t)p;
  return TQ_STATUS_OK;
}

tq_status tq_gpu_free(tq_gpu_runtime *rt, void *p) {
  if (!rt)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_free: runtime must be set");
  if (!p)
    return TQ_STATUS_OK;
  if (tq_gpu_free_raw(&rt->driver, (tq_device_ptr)(uintptr_t)p) != 0)
    return tq_fail(TQ_STATUS_DEVICE_ERROR,
                   "tq_gpu_free: the driver refused to free %p", p);
  return TQ_STATUS_OK;
}

tq_status tq_gpu_copy_to_device(tq_gpu_runtime *rt, void *dst,
                                const void *src, size_t bytes) {
  if (!rt || (bytes && (!dst || !src)))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_copy_to_device: runtime, dst and src must be set");
  if (bytes == 0)
    return TQ_STATUS_OK;
  if (tq_gpu_htod(&rt->driver, (tq_device_ptr)(uintptr_t)dst, src, bytes))
    return tq_fail(TQ_STATUS_DEVICE_ERROR,
                   "tq_gpu_copy_to_device: copying %zu bytes failed", bytes);
  return TQ_STATUS_OK;
}

tq_status tq_gpu_copy_to_host(tq_gpu_runtime *rt, void *dst, const void *src,
                              size_t bytes) {
  if (!rt || (bytes && (!dst || !src)))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_copy_to_host: runtime, dst and src must be set");
  if (bytes == 0)
    return TQ_STATUS_OK;
  if (tq_gpu_dtoh(&rt->driver, dst, (tq_device_ptr)(uintptr_t)src, bytes))
    return tq_fail(TQ_STATUS_DEVICE_ERROR,
                   "tq_gpu_copy_to_host: copying %zu bytes failed", bytes);
  return TQ_STATUS_OK;
}

/*--- Launch helpers ----------------------------------------------------*/

/* One 1-D memref argument, expanded. */
typedef struct {
  tq_device_ptr allocated, aligned;
  int64_t offset, size, stride;
} memref_arg;

static memref_arg buffer(tq_device_ptr base, int64_t elements) {
  memref_arg m = {base, base, 0, elements, 1};
  return m;
}

/* The five kernel parameters of one expanded memref argument. */
static void memref_params(memref_arg *m, void **params) {
  params[0] = &m->allocated;
  params[1] = &m->aligned;
  params[2] = &m->offset;
  params[3] = &m->size;
  params[4] = &m->stride;
}

static tq_status ensure_workspace(tq_gpu_runtime *rt, size_t bytes) {
  if (bytes <= rt->workspace_bytes)
    return TQ_STATUS_OK;
  if (rt->workspace)
    tq_gpu_free_raw(&rt->driver, rt->workspace);
  rt->workspace = 0;
  rt->workspace_bytes = 0;
  if (tq_gpu_malloc_raw(&rt->driver, &rt->workspace, bytes) != 0)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "the device could not allocate a %zu-byte workspace",
                   bytes);
  rt->workspace_bytes = bytes;
  return TQ_STATUS_OK;
}

/* Reads kernel `name`'s <name>_info from the device (version checked). */
static tq_status read_info(tq_gpu_runtime *rt, const char *name,
                           int64_t info[INFO_GPU_ENTRIES]) {
  char symbol[512];
  if (snprintf(symbol, sizeof symbol, "%s_info", name) >= (int)sizeof symbol)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT, "kernel name too long: %s",
                   name);
  tq_device_ptr ptr = 0;
  size_t bytes = 0;
  if (tq_gpu_module_global(&rt->driver, &ptr, &bytes, rt->module, symbol) !=
      0)
    return tq_fail(TQ_STATUS_NOT_FOUND,
                   "no kernel '%s' in the GPU library (build it with tq-aot; "
                   "see docs/tq-aot.md)",
                   name);
  if (bytes != sizeof(int64_t) * INFO_GPU_ENTRIES)
    return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                   "kernel '%s' has a %zu-byte info table, this runtime "
                   "reads %zu: rebuild the library",
                   name, bytes, sizeof(int64_t) * INFO_GPU_ENTRIES);
  if (tq_gpu_dtoh(&rt->driver, info, ptr, bytes) != 0)
    return tq_fail(TQ_STATUS_DEVICE_ERROR,
                   "reading kernel '%s''s info from the device failed", name);
  if (info[INFO_VERSION] != 1)
    return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                   "kernel '%s' has calling convention %lld, this runtime "
                   "needs 1: rebuild the library",
                   name, (long long)info[INFO_VERSION]);
  return TQ_STATUS_OK;
}

/* Reads an attention kernel's info and checks it against the call; the V
 * padded dim and the block size come back in info. */
static tq_status check_info(tq_gpu_runtime *rt, const char *name, int kind,
                            const tq_kv_cache_v0 *c, uint32_t group,
                            int64_t info[INFO_GPU_ENTRIES]) {
  tq_status status = read_info(rt, name, info);
  if (status != TQ_STATUS_OK)
    return status;
  if (info[INFO_KIND] != kind || info[INFO_HEAD_DIM] != c->head_dim ||
      info[INFO_GROUP] != group ||
      info[INFO_K_ROW_BYTES] != (int64_t)c->k_row_bytes ||
      info[INFO_V_ROW_BYTES] != (int64_t)c->v_row_bytes ||
      info[INFO_GPU_PARTIAL_STRIDE] <= 0 || info[INFO_GPU_BLOCK_THREADS] <= 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "kernel '%s' was built for another cache (its info "
                   "names kind %lld, head dim %lld, group %lld, K/V rows of "
                   "%lld/%lld bytes)",
                   name, (long long)info[INFO_KIND],
                   (long long)info[INFO_HEAD_DIM], (long long)info[INFO_GROUP],
                   (long long)info[INFO_K_ROW_BYTES],
                   (long long)info[INFO_V_ROW_BYTES]);
  return TQ_STATUS_OK;
}

/*--- Append ------------------------------------------------------------*/

/* A K or V pool as a kernel buffer (tq_check_cache bounds its size). */
static memref_arg pool_buffer(const tq_kv_cache_v0 *c, const uint8_t *pool,
                              uint32_t row_bytes) {
  return buffer((tq_device_ptr)(uintptr_t)pool,
                (int64_t)(c->num_pages * c->page_size * c->num_kv_heads *
                          row_bytes));
}

/* Looks up tq_append_<format>_d<D> and checks its info against the
 * cache (the current context must be set). */
static tq_status find_append(tq_gpu_runtime *rt, const tq_kv_cache_v0 *c,
                             const char *format, uint32_t row_bytes,
                             int64_t info[INFO_GPU_ENTRIES], void **out_fn) {
  char name[256];
  if (!tq_append_kernel_name(format, c->head_dim, name, sizeof name))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "append: no kernel name for format '%s' at head dim %u",
                   format, c->head_dim);
  tq_status status = read_info(rt, name, info);
  if (status != TQ_STATUS_OK)
    return status;
  if (!tq_append_info_matches(info, c->head_dim, row_bytes) ||
      info[INFO_GPU_BLOCK_THREADS] <= 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "kernel '%s' was built for another cache (rows of %u "
                   "bytes at head dim %u expected)",
                   name, row_bytes, c->head_dim);
  if (tq_gpu_module_function(&rt->driver, out_fn, rt->module, name) != 0)
    return tq_fail(TQ_STATUS_NOT_FOUND,
                   "the GPU library has info for '%s' but no such function",
                   name);
  return TQ_STATUS_OK;
}

static tq_status launch_append(tq_gpu_runtime *rt, const tq_kv_cache_v0 *c,
                               const char *format, uint32_t row_bytes,
                               uint8_t *pool, const float *rows,
                               tq_device_ptr pages, int64_t num_pages_of_seq,
                               int32_t start, int32_t count) {
  int64_t info[INFO_GPU_ENTRIES];
  void *fn = NULL;
  tq_status status = find_append(rt, c, format, row_bytes, info, &fn);
  if (status != TQ_STATUS_OK)
    return status;
  const uint64_t rows_total = (uint64_t)count * c->num_kv_heads;
  memref_arg args[3] = {
      buffer((tq_device_ptr)(uintptr_t)rows,
             (int64_t)(rows_total * c->head_dim)),
      pool_buffer(c, pool, row_bytes),
      buffer(pages, num_pages_of_seq)};
  int32_t page_size = (int32_t)c->page_size,
          kv_heads = (int32_t)c->num_kv_heads;
  /* rows, pool, pages (3 memrefs x 5 fields), start, count, page_size,
   * kv_heads. */
  void *params[3 * 5 + 4];
  for (int m = 0; m < 3; ++m)
    memref_params(&args[m], &params[5 * m]);
  params[15] = &start;
  params[16] = &count;
  params[17] = &page_size;
  params[18] = &kv_heads;
  const uint64_t block = (uint64_t)info[INFO_GPU_BLOCK_THREADS];
  const uint64_t blocks = (rows_total + block - 1) / block;
  if (blocks > (uint64_t)INT32_MAX)
    return tq_fail(TQ_STATUS_OVERFLOW,
                   "append: %llu rows need more than 2^31 thread blocks",
                   (unsigned long long)rows_total);
  if (tq_gpu_launch(&rt->driver, fn, (unsigned)blocks, 1, 1, (unsigned)block,
                    params) != 0)
    return device_failed("append", "launching the append kernel");
  return TQ_STATUS_OK;
}

/* The GPU kernels index pools token-major: a head-major cache is refused
 * by name rather than read wrong. */
static tq_status check_token_major(const tq_kv_cache_v0 *c) {
  if (c && (c->layout & TQ_LAYOUT_HEAD_MAJOR))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "cache: TQ_LAYOUT_HEAD_MAJOR is a CPU runtime layout; the "
                   "GPU kernels read [page][slot][kv head] pools");
  return TQ_STATUS_OK;
}

tq_status tq_gpu_append(tq_gpu_runtime *rt, const tq_kv_cache_v0 *c,
                        uint32_t seq, uint64_t start, uint32_t num_rows,
                        const float *k_rows, const float *v_rows) {
  if (!rt)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_append: runtime must be set");
  tq_status status =
      tq_check_append_call(c, seq, start, num_rows, k_rows, v_rows);
  if (status == TQ_STATUS_OK)
    status = check_token_major(c);
  if (status != TQ_STATUS_OK)
    return status;
  if (num_rows == 0) {
    /* As tq_append: a cache the library cannot serve fails on its first
     * call, not on its first row. */
    if (tq_gpu_set_current(&rt->driver) != 0)
      return device_failed("append", "making the device current");
    int64_t info[INFO_GPU_ENTRIES];
    void *fn = NULL;
    status = find_append(rt, c, c->k_format, c->k_row_bytes, info, &fn);
    if (status == TQ_STATUS_OK)
      status = find_append(rt, c, c->v_format, c->v_row_bytes, info, &fn);
    return status;
  }
  if (start + num_rows > (uint64_t)INT32_MAX)
    return tq_fail(TQ_STATUS_OVERFLOW,
                   "append: rows [%llu, %llu) go past the GPU kernels' "
                   "int32 positions",
                   (unsigned long long)start,
                   (unsigned long long)(start + num_rows));
  /* The sequence's page table (contiguous: the one page it owns). */
  int32_t own = (int32_t)seq;
  const int32_t *pages = &own;
  int64_t num_pages = 1;
  if (tq_layout_kind(c) == TQ_LAYOUT_PAGED) {
    pages = c->indices + c->indptr[seq];
    num_pages = c->indptr[seq + 1] - c->indptr[seq];
  }
  if (tq_gpu_set_current(&rt->driver) != 0)
    return device_failed("append", "making the device current");
  status = ensure_workspace(rt, (size_t)num_pages * sizeof(int32_t));
  if (status != TQ_STATUS_OK)
    return status;
  if (tq_gpu_htod(&rt->driver, rt->workspace, pages,
                  (size_t)num_pages * sizeof(int32_t)) != 0)
    return device_failed("append", "copying the page table");
  status = launch_append(rt, c, c->k_format, c->k_row_bytes, c->k_pages,
                         k_rows, rt->workspace, num_pages, (int32_t)start,
                         (int32_t)num_rows);
  if (status == TQ_STATUS_OK)
    status = launch_append(rt, c, c->v_format, c->v_row_bytes, c->v_pages,
                           v_rows, rt->workspace, num_pages, (int32_t)start,
                           (int32_t)num_rows);
  if (status != TQ_STATUS_OK)
    return status;
  if (tq_gpu_synchronize(&rt->driver) != 0)
    return device_failed("append", "running the append kernels");
  return TQ_STATUS_OK;
}

/*--- Attention ---------------------------------------------------------*/

/* Split-KV chunks: enough blocks to fill the device twice over, chunks of
 * at least 256 tokens. */
static uint32_t choose_splits(const tq_gpu_runtime *rt, uint64_t blocks,
                              uint64_t max_tokens) {
  if (rt->splits)
    return rt->splits;
  uint64_t target = rt->multiprocessors > 0 ? 2u * (uint64_t)rt->multiprocessors
                                            : 216u;
  uint64_t splits = (target + blocks - 1) / blocks;
  uint64_t by_length = (max_tokens + 255) / 256;
  if (splits > by_length)
    splits = by_length;
  if (splits < 1)
    splits = 1;
  if (splits > 64)
    splits = 64;
  return (uint32_t)splits;
}

/* Looks up the attention kernel of `kind` and its combine kernel and
 * checks the info against the call (the current context must be set). */
static tq_status find_attention(tq_gpu_runtime *rt, const tq_kv_cache_v0 *c,
                                const tq_attention_params_v0 *p, int kind,
                                uint32_t group,
                                int64_t info[INFO_GPU_ENTRIES],
                                void **attention_fn, void **combine_fn) {
  char name[384], combine[400];
  if (!tq_attention_kernel_name(c, p, kind, group, name, sizeof name))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: no kernel name for K '%s', V '%s' at head dim "
                   "%u",
                   c->k_format, c->v_format, c->head_dim);
  snprintf(combine, sizeof combine, "%s_combine", name);
  tq_status status = check_info(rt, name, kind, c, group, info);
  if (status != TQ_STATUS_OK)
    return status;
  if (tq_gpu_module_function(&rt->driver, attention_fn, rt->module, name) ||
      tq_gpu_module_function(&rt->driver, combine_fn, rt->module, combine))
    return tq_fail(TQ_STATUS_NOT_FOUND,
                   "the GPU library has info for '%s' but not its functions "
                   "'%s' and '%s'",
                   name, name, combine);
  return TQ_STATUS_OK;
}

tq_status tq_gpu_attention(tq_gpu_runtime *rt, const tq_kv_cache_v0 *c,
                           const tq_attention_params_v0 *p, const float *q,
                           float *out) {
  if (!rt || !p)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_gpu_attention: runtime and params must be set");
  tq_status status = tq_check_attention_call(c, p, q, out);
  if (status == TQ_STATUS_OK)
    status = check_token_major(c);
  if (status != TQ_STATUS_OK)
    return status;
  const uint32_t group = p->num_q_heads / c->num_kv_heads;

  /* Plan on the host: rows, their sequence and position, lengths. */
  uint64_t rows = 0, max_tokens = 0;
  int kind = KIND_DECODE;
  for (uint32_t s = 0; s < c->num_seqs; ++s) {
    int32_t n;
    uint64_t tokens;
    status = tq_query_rows(p->q_indptr, s, &n);
    if (status == TQ_STATUS_OK)
      status = tq_kv_cache_tokens(c, s, &tokens);
    if (status == TQ_STATUS_OK)
      status = tq_check_causal_rows(p->causal, s, n, tokens);
    if (status != TQ_STATUS_OK)
      return status;
    if (tokens > (uint64_t)INT32_MAX)
      return tq_fail(TQ_STATUS_OVERFLOW,
                     "attention: sequence %u holds %llu tokens, more than "
                     "the GPU kernels' int32 positions",
                     s, (unsigned long long)tokens);
    if (n > 1)
      kind = KIND_PREFILL;
    rows += (uint64_t)n;
    if (tokens > max_tokens)
      max_tokens = tokens;
  }
  if (rows > (uint64_t)INT32_MAX)
    return tq_fail(TQ_STATUS_OVERFLOW,
                   "attention: %llu query rows, more than the GPU kernels' "
                   "int32 rows",
                   (unsigned long long)rows);

  if (tq_gpu_set_current(&rt->driver) != 0)
    return device_failed("attention", "making the device current");
  int64_t info[INFO_GPU_ENTRIES];
  void *attention_fn = NULL, *combine_fn = NULL;
  status = find_attention(rt, c, p, kind, group, info, &attention_fn,
                          &combine_fn);
  /* No queries: nothing runs, but the configuration must be one the
   * library serves (its decode kernels, or else its prefill kernels), as
   * with tq_attention. */
  if (rows == 0 && status == TQ_STATUS_NOT_FOUND)
    status = find_attention(rt, c, p, KIND_PREFILL, group, info,
                            &attention_fn, &combine_fn);
  if (status != TQ_STATUS_OK || rows == 0)
    return status;

  const uint32_t splits =
      choose_splits(rt, rows * c->num_kv_heads, max_tokens);
  /* Host metadata: indptr, indices, seq_lens, row_seq, row_pos (int32). */
  const uint32_t seqs = c->num_seqs;
  const uint64_t num_indices =
      tq_layout_kind(c) == TQ_LAYOUT_PAGED ? (uint64_t)c->indptr[seqs] : seqs;
  const uint64_t ints = (seqs + 1) + (num_indices ? num_indices : 1) + seqs +
                        2 * rows;
  uint64_t partial_floats;
  if (!tq_mul_ok(rows * c->num_kv_heads, (uint64_t)splits * group,
                 &partial_floats) ||
      !tq_mul_ok(partial_floats, (uint64_t)info[INFO_GPU_PARTIAL_STRIDE],
                 &partial_floats))
    return tq_fail(TQ_STATUS_OVERFLOW,
                   "attention: the split partial sums of %llu rows overflow",
                   (unsigned long long)rows);
  const size_t int_bytes = (size_t)ints * sizeof(int32_t);
  const size_t partial_offset = (int_bytes + 255) / 256 * 256;
  status = ensure_workspace(rt, partial_offset +
                                    (size_t)partial_floats * sizeof(float));
  if (status != TQ_STATUS_OK)
    return status;
  int32_t *host = rt->allocator.allocate(rt->allocator.user, int_bytes, 16);
  if (!host)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "attention: cannot allocate the %zu-byte row plan",
                   int_bytes);
  int32_t *indptr = host, *indices = indptr + seqs + 1,
          *seq_lens = indices + (num_indices ? num_indices : 1),
          *row_seq = seq_lens + seqs, *row_pos = row_seq + rows;
  indices[0] = 0;
  uint64_t r = 0;
  for (uint32_t s = 0; s < seqs; ++s) {
    uint64_t tokens = 0;
    tq_kv_cache_tokens(c, s, &tokens);
    seq_lens[s] = (int32_t)tokens;
    if (tq_layout_kind(c) == TQ_LAYOUT_PAGED) {
      indptr[s] = c->indptr[s];
    } else {
      indptr[s] = (int32_t)s;
      indices[s] = (int32_t)s; /* contiguous: sequence s owns page s */
    }
    int32_t n = p->q_indptr[s + 1] - p->q_indptr[s];
    for (int32_t i = 0; i < n; ++i, ++r) {
      row_seq[r] = (int32_t)s;
      /* Queries are the last n positions of the sequence. */
      row_pos[r] = (int32_t)tokens - n + i;
    }
  }
  indptr[seqs] =
      tq_layout_kind(c) == TQ_LAYOUT_PAGED ? c->indptr[seqs] : (int32_t)seqs;
  if (tq_layout_kind(c) == TQ_LAYOUT_PAGED && num_indices)
    memcpy(indices, c->indices, (size_t)num_indices * sizeof(int32_t));
  int failed = tq_gpu_htod(&rt->driver, rt->workspace, host, int_bytes);
  rt->allocator.release(rt->allocator.user, host);
  if (failed)
    return device_failed("attention", "copying the row plan");

  const tq_device_ptr ws = rt->workspace;
  const int64_t H = p->num_q_heads, D = c->head_dim;
  memref_arg args[10] = {
      buffer((tq_device_ptr)(uintptr_t)q, (int64_t)rows * H * D),
      pool_buffer(c, c->k_pages, c->k_row_bytes),
      pool_buffer(c, c->v_pages, c->v_row_bytes),
      buffer(ws, seqs + 1),
      buffer(ws + (seqs + 1) * sizeof(int32_t), (int64_t)num_indices),
      buffer(ws + (uint64_t)(seq_lens - host) * sizeof(int32_t), seqs),
      buffer(ws + (uint64_t)(row_seq - host) * sizeof(int32_t), (int64_t)rows),
      buffer(ws + (uint64_t)(row_pos - host) * sizeof(int32_t), (int64_t)rows),
      buffer(ws + partial_offset, (int64_t)partial_floats),
      buffer((tq_device_ptr)(uintptr_t)out, (int64_t)rows * H * D)};
  int32_t page_size = (int32_t)c->page_size, kv_heads = (int32_t)c->num_kv_heads,
          num_splits = (int32_t)splits;
  float scale = p->scale;
  /* The attention kernel: 9 memrefs x 5 fields, then 4 scalars. */
  void *params[9 * 5 + 4];
  for (int m = 0; m < 9; ++m)
    memref_params(&args[m], &params[5 * m]);
  params[45] = &page_size;
  params[46] = &kv_heads;
  params[47] = &num_splits;
  params[48] = &scale;
  const unsigned block = (unsigned)info[INFO_GPU_BLOCK_THREADS];
  if (tq_gpu_launch(&rt->driver, attention_fn, (unsigned)rows,
                    c->num_kv_heads, splits, block, params) != 0)
    return device_failed("attention", "launching the attention kernel");
  /* The combine kernel: partial, out, splits, kv_heads. */
  void *combine_params[2 * 5 + 2];
  memref_params(&args[8], &combine_params[0]);
  memref_params(&args[9], &combine_params[5]);
  combine_params[10] = &num_splits;
  combine_params[11] = &kv_heads;
  if (tq_gpu_launch(&rt->driver, combine_fn, (unsigned)rows, c->num_kv_heads,
                    1, block, combine_params) != 0)
    return device_failed("attention", "launching the combine kernel");
  if (tq_gpu_synchronize(&rt->driver) != 0)
    return device_failed("attention", "running the kernels");
  return TQ_STATUS_OK;
}
