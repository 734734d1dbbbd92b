/*===- runtime.c - The tqc runtime: validation, planning, launch --------===*
 *
 * Plans each call as a grid of (sequence, kv head) kernel invocations, each
 * given strided views into the caller's buffers, and runs it on the
 * runtime's thread pool. When that grid has fewer items than the pool has
 * threads, each decode's tokens are split into parts whose outputs are
 * merged by their log-sum-exp. Every descriptor field is checked before
 * anything is launched, so a malformed call returns a status and touches
 * nothing.
 *
 *===--------------------------------------------------------------------===*/

#include "tq/tq_runtime.h"

#include "common.h"
#include "thread_pool.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(tq_allocator_v0) == 32, "tq_allocator_v0 is pinned");
_Static_assert(sizeof(tq_runtime_options_v0) == 24,
               "tq_runtime_options_v0 is pinned");
_Static_assert(sizeof(tq_kv_cache_v0) == 112, "tq_kv_cache_v0 is pinned");
_Static_assert(sizeof(tq_attention_params_v0) == 40,
               "tq_attention_params_v0 is pinned");
_Static_assert(sizeof(tq_attention_params_v1) == 56,
               "tq_attention_params_v1 is pinned");


typedef void (*attention_fn)(memref3 *q, memref4 *k, memref4 *v,
                             memref1 *table, int64_t tokens, float scale,
                             memref3 *out);
/* Runtime decode kernels (info version 3) also write each head's
 * log-sum-exp. */
typedef void (*decode_fn)(memref3 *q, memref4 *k, memref4 *v, memref1 *table,
                          int64_t tokens, float scale, memref3 *out,
                          memref2 *lse);
typedef void (*append_fn)(memref3 *rows, memref4 *pool, memref1 *table,
                          int64_t start);
/* ggml attention kernels (tq-aot --abi=ggml); decode ones (info version
 * 2) also write each head's log-sum-exp. */
typedef void (*engine_prefill_fn)(memref3 *q, memref4 *k, memref4 *v,
                                  memref1 *table, int64_t tokens, float scale,
                                  memref2 *mask, memref1 *slopes,
                                  memref1 *sinks, memref3 *out);
typedef void (*engine_decode_fn)(memref3 *q, memref4 *k, memref4 *v,
                                 memref1 *table, int64_t tokens, float scale,
                                 memref2 *mask, memref1 *slopes,
                                 memref1 *sinks, memref3 *out, memref2 *lse);

struct tq_runtime {
  tq_allocator_v0 allocator;
  void *library;
  tq_thread_pool *pool;
  uint32_t threads;
  char library_path[1024]; /* for messages (truncated) */
};

const char *tq_status_string(tq_status status) {
  switch (status) {
  case TQ_STATUS_OK:
    return "ok";
  case TQ_STATUS_INVALID_ARGUMENT:
    return "invalid argument";
  case TQ_STATUS_VERSION_MISMATCH:
    return "version mismatch";
  case TQ_STATUS_NOT_FOUND:
    return "no kernel for this configuration";
  case TQ_STATUS_OUT_OF_RANGE:
    return "out of range";
  case TQ_STATUS_OVERFLOW:
    return "size overflow";
  case TQ_STATUS_OUT_OF_MEMORY:
    return "out of memory";
  case TQ_STATUS_UNAVAILABLE:
    return "kernel library or driver unavailable";
  case TQ_STATUS_DEVICE_ERROR:
    return "GPU driver error";
  }
  return "unknown status";
}

uint32_t tq_runtime_abi_version(void) { return TQ_RUNTIME_ABI_VERSION; }

tq_status tq_runtime_create(const tq_runtime_options_v0 *options,
                            const tq_allocator_v0 *allocator,
                            tq_runtime **out_runtime) {
  if (!options || !out_runtime)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_runtime_create: options and out_runtime must be set");
  *out_runtime = NULL;
  if (options->version != TQ_RUNTIME_OPTIONS_VERSION_0 ||
      options->size != sizeof(tq_runtime_options_v0))
    return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                   "runtime options: version %u, size %u; this runtime "
                   "takes version %u, size %zu",
                   options->version, options->size,
                   TQ_RUNTIME_OPTIONS_VERSION_0,
                   sizeof(tq_runtime_options_v0));
  tq_allocator_v0 alloc;
  tq_status status = tq_resolve_allocator(allocator, &alloc);
  if (status != TQ_STATUS_OK)
    return status;
  if (!options->library_path)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "runtime options: library_path must be set");
  if (options->num_threads > TQ_RUNTIME_MAX_THREADS)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "runtime options: num_threads %u is above the limit of %u "
                   "(0: one per online CPU)",
                   options->num_threads, TQ_RUNTIME_MAX_THREADS);
  tq_runtime *rt = alloc.allocate(alloc.user, sizeof(*rt), _Alignof(tq_runtime));
  if (!rt)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "tq_runtime_create: the allocator returned no memory");
  *rt = (tq_runtime){0};
  rt->allocator = alloc;
  rt->library = dlopen(options->library_path, RTLD_NOW | RTLD_LOCAL);
  if (!rt->library) {
    const char *why = dlerror();
    alloc.release(alloc.user, rt);
    return tq_fail(TQ_STATUS_UNAVAILABLE, "cannot load kernel library '%s': %s",
                   options->library_path, why ? why : "unknown error");
  }
  snprintf(rt->library_path, sizeof rt->library_path, "%s",
           options->library_path);
  uint32_t threads = options->num_threads;
  if (threads == 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    threads = online > 0 ? (uint32_t)online : 1;
    if (threads > TQ_RUNTIME_MAX_THREADS)
      threads = TQ_RUNTIME_MAX_THREADS;
  }
  rt->threads = threads;
  status = tq_thread_pool_create(threads, &alloc, &rt->pool);
  if (status != TQ_STATUS_OK) {
    dlclose(rt->library);
    alloc.release(alloc.user, rt);
    return status;
  }
  *out_runtime = rt;
  return TQ_STATUS_OK;
}

void tq_runtime_destroy(tq_runtime *runtime) {
  if (!runtime)
    return;
  tq_thread_pool_destroy(runtime->pool);
  if (runtime->library)
    dlclose(runtime->library);
  tq_allocator_v0 alloc = runtime->allocator;
  alloc.release(alloc.user, runtime);
}

tq_status tq_kv_cache_tokens(const tq_kv_cache_v0 *cache, uint32_t seq,
                             uint64_t *out_tokens) {
  tq_status status = tq_check_cache(cache);
  if (status != TQ_STATUS_OK)
    return status;
  if (!out_tokens)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_kv_cache_tokens: out_tokens must be set");
  if (seq >= cache->num_seqs)
    return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                   "tq_kv_cache_tokens: sequence %u of a cache of %u", seq,
                   cache->num_seqs);
  if (tq_layout_kind(cache) == TQ_LAYOUT_CONTIGUOUS) {
    *out_tokens = (uint64_t)cache->seq_lens[seq];
    return TQ_STATUS_OK;
  }
  int32_t pages = cache->indptr[seq + 1] - cache->indptr[seq];
  *out_tokens = pages == 0 ? 0
                           : (uint64_t)(pages - 1) * cache->page_size +
                                 (uint64_t)cache->last_page_len[seq];
  return TQ_STATUS_OK;
}

/*--- Kernel lookup -----------------------------------------------------*/

typedef struct {
  void *entry;
  const int64_t *info;
} kernel;

static tq_status lookup(tq_runtime *rt, const char *name, int64_t version,
                        kernel *out) {
  char symbol[512];
  if (snprintf(symbol, sizeof symbol, "_mlir_ciface_%s", name) >=
      (int)sizeof symbol)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT, "kernel name too long: %s",
                   name);
  out->entry = dlsym(rt->library, symbol);
  if (snprintf(symbol, sizeof symbol, "%s_info", name) >= (int)sizeof symbol)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT, "kernel name too long: %s",
                   name);
  out->info = dlsym(rt->library, symbol);
  if (!out->entry || !out->info)
    return tq_fail(TQ_STATUS_NOT_FOUND,
                   "no kernel '%s' in '%s' (build it with tq-aot; see "
                   "docs/tq-aot.md)",
                   name, rt->library_path);
  if (out->info[INFO_VERSION] != version)
    return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                   "kernel '%s' in '%s' has calling convention %lld, this "
                   "runtime needs %lld: rebuild the library",
                   name, rt->library_path, (long long)out->info[INFO_VERSION],
                   (long long)version);
  return tq_check_amx_grant(rt->library, name);
}

/*--- Views -------------------------------------------------------------*/

/* Pool view of one kv head: [pages][page_size][1][row_bytes], its slots
 * num_kv_heads rows apart, or (TQ_LAYOUT_HEAD_MAJOR) one row apart in the
 * head's part of each page. */
static memref4 pool_view(const tq_kv_cache_v0 *c, uint8_t *base,
                         uint32_t row_bytes, uint32_t kv_head) {
  const bool head_major = (c->layout & TQ_LAYOUT_HEAD_MAJOR) != 0;
  memref4 m;
  m.allocated = m.aligned = base;
  m.sizes[0] = (int64_t)c->num_pages;
  m.sizes[1] = c->page_size;
  m.sizes[2] = 1;
  m.sizes[3] = row_bytes;
  m.strides[3] = 1;
  m.strides[2] = row_bytes;
  m.strides[0] = (int64_t)c->num_kv_heads * row_bytes * c->page_size;
  if (head_major) {
    m.offset = (int64_t)kv_head * row_bytes * c->page_size;
    m.strides[1] = row_bytes;
  } else {
    m.offset = (int64_t)kv_head * row_bytes;
    m.strides[1] = (int64_t)c->num_kv_heads * row_bytes;
  }
  return m;
}

/* [rows][group][head_dim] view of the heads of one group. */
static memref3 rows_view(const float *base, uint64_t first_row,
                         uint64_t rows, uint32_t heads, uint32_t first_head,
                         uint32_t group, uint32_t head_dim) {
  memref3 m;
  m.allocated = m.aligned = (void *)(uintptr_t)base;
  m.offset = (int64_t)((first_row * heads + first_head) * head_dim);
  m.sizes[0] = (int64_t)rows;
  m.sizes[1] = group;
  m.sizes[2] = head_dim;
  m.strides[0] = (int64_t)heads * head_dim;
  m.strides[1] = head_dim;
  m.strides[2] = 1;
  return m;
}

/* The page table of one sequence (contiguous: the one page it owns). */
static memref1 table_view(const tq_kv_cache_v0 *c, const int32_t *identity,
                          uint32_t seq) {
  memref1 m;
  m.strides[0] = 1;
  if (tq_layout_kind(c) == TQ_LAYOUT_CONTIGUOUS) {
    m.allocated = m.aligned = (void *)(uintptr_t)identity;
    m.offset = seq;
    m.sizes[0] = 1;
  } else {
    m.allocated = m.aligned = (void *)(uintptr_t)c->indices;
    m.offset = c->indptr[seq];
    m.sizes[0] = c->indptr[seq + 1] - c->indptr[seq];
  }
  return m;
}

/* 0, 1, 2, ... for contiguous tables. */
static int32_t *identity_table(tq_runtime *rt, uint32_t n) {
  int32_t *t = rt->allocator.allocate(rt->allocator.user,
                                      sizeof(int32_t) * (n ? n : 1),
                                      _Alignof(int32_t));
  if (t)
    for (uint32_t i = 0; i < n; ++i)
      t[i] = (int32_t)i;
  return t;
}

/*--- Append ------------------------------------------------------------*/

typedef struct {
  const tq_kv_cache_v0 *cache;
  const int32_t *identity;
  append_fn k_fn, v_fn;
  uint32_t seq;
  uint64_t start;
  uint32_t num_rows;
  const float *k_rows, *v_rows;
} append_job;

static void append_item(void *ctx, uint64_t index) {
  const append_job *job = ctx;
  const tq_kv_cache_v0 *c = job->cache;
  bool is_v = index >= c->num_kv_heads;
  uint32_t kvh = (uint32_t)(is_v ? index - c->num_kv_heads : index);
  memref3 rows = rows_view(is_v ? job->v_rows : job->k_rows, 0, job->num_rows,
                           c->num_kv_heads, kvh, 1, c->head_dim);
  memref4 pool = pool_view(c, is_v ? c->v_pages : c->k_pages,
                           is_v ? c->v_row_bytes : c->k_row_bytes, kvh);
  memref1 table = table_view(c, job->identity, job->seq);
  (is_v ? job->v_fn : job->k_fn)(&rows, &pool, &table, (int64_t)job->start);
}

static tq_status find_append(tq_runtime *rt, const char *format,
                             uint32_t head_dim, uint32_t row_bytes,
                             append_fn *out) {
  char name[256];
  if (!tq_append_kernel_name(format, head_dim, name, sizeof name))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "append: format '%s' is no format name", format);
  kernel k;
  tq_status status = lookup(rt, name, INFO_VERSION_PLAIN, &k);
  if (status != TQ_STATUS_OK)
    return status;
  if (!tq_append_info_matches(k.info, head_dim, row_bytes))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "kernel '%s' does not match the cache's head dim %u and "
                   "row bytes %u",
                   name, head_dim, row_bytes);
  *out = (append_fn)k.entry;
  return TQ_STATUS_OK;
}

tq_status tq_append(tq_runtime *rt, const tq_kv_cache_v0 *cache, uint32_t seq,
                    uint64_t start, uint32_t num_rows, const float *k_rows,
                    const float *v_rows) {
  if (!rt)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_append: the runtime is NULL");
  tq_status status =
      tq_check_append_call(cache, seq, start, num_rows, k_rows, v_rows);
  if (status != TQ_STATUS_OK)
    return status;
  append_job job = {cache, NULL, NULL, NULL, seq, start, num_rows,
                    k_rows, v_rows};
  /* The kernels are looked up even for zero rows: a cache the library
   * cannot serve fails on its first call, not on its first row. */
  if ((status = find_append(rt, cache->k_format, cache->head_dim,
                            cache->k_row_bytes, &job.k_fn)) != TQ_STATUS_OK ||
      (status = find_append(rt, cache->v_format, cache->head_dim,
                            cache->v_row_bytes, &job.v_fn)) != TQ_STATUS_OK)
    return status;
  if (num_rows == 0)
    return TQ_STATUS_OK;
  int32_t *identity = identity_table(rt, cache->num_seqs);
  if (!identity)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "append: cannot allocate the table of %u sequences",
                   cache->num_seqs);
  job.identity = identity;
  tq_thread_pool_run(rt->pool, 2ull * cache->num_kv_heads, append_item, &job);
  rt->allocator.release(rt->allocator.user, identity);
  return TQ_STATUS_OK;
}

/*--- Attention ---------------------------------------------------------*/

/* One attention call, planned: per sequence its kernel (null: no queries)
 * and token count. `params` is the caller's tq_attention_params_v0 or _v1;
 * q_indptr and num_q_heads are read from it. */
typedef struct {
  const tq_kv_cache_v0 *cache;
  const void *params;
  const int32_t *q_indptr;
  uint32_t num_q_heads;
  uint32_t group;
  const int32_t *identity;
  const float *q;
  float *out;
  void **fns;
  uint64_t *tokens;
  /* Whether a decode's tokens may be split (no sliding window). */
  bool can_split;
  /* Grid units per (sequence, kv head): the most parts any decode's tokens
   * are split into (1: none). Per sequence its parts and tokens per part;
   * the split parts' outputs and log-sum-exps (part_floats each). */
  uint32_t parts;
  uint32_t *seq_parts;
  uint64_t *part_tokens;
  float *partials;
} attention_job;

/* Tokens per part when a decode splits one head's tokens over threads:
 * below this the merge and the thread hand-off cost more than they save. */
enum { MIN_TOKENS_PER_PART = 256 };

/* Floats of one split part: the group's output rows, then their lse. */
static uint64_t part_floats(const attention_job *job) {
  return (uint64_t)job->group * (job->cache->head_dim + 1);
}

/* One grid unit: tokens [t0, t0 + n) of (seq, kvh); a part of a split
 * decode writes to `partial` (else to the caller's out). */
typedef struct {
  uint32_t seq, kvh, part;
  uint64_t t0, n;
  float *partial;
} grid_unit;

/* Grid index -> unit; false when it has nothing to do (no queries, or a
 * part past the sequence's parts). */
static bool unit_of(const attention_job *job, uint64_t index, grid_unit *u) {
  const uint32_t heads = job->cache->num_kv_heads;
  u->part = (uint32_t)(index % job->parts);
  index /= job->parts;
  u->seq = (uint32_t)(index / heads);
  u->kvh = (uint32_t)(index % heads);
  if (!job->fns[u->seq])
    return false;
  const uint32_t parts = job->parts > 1 ? job->seq_parts[u->seq] : 1;
  const uint64_t tokens = job->tokens[u->seq];
  if (parts == 1) {
    u->t0 = 0;
    u->n = tokens;
    u->partial = NULL;
    return u->part == 0;
  }
  if (u->part >= parts)
    return false;
  const uint64_t per = job->part_tokens[u->seq];
  u->t0 = u->part * per;
  u->n = tokens - u->t0 < per ? tokens - u->t0 : per;
  u->partial = job->partials +
               (((uint64_t)u->seq * heads + u->kvh) * job->parts + u->part) *
                   part_floats(job);
  return true;
}

/* Checks that one sequence's `rows` queries fit its `tokens` tokens under
 * the call's params (causal: no more queries than tokens; a mask: rows
 * long enough). */
typedef tq_status (*sequence_check)(const attention_job *job, uint32_t seq,
                                    int32_t rows, uint64_t tokens);

/* Finds the decode (one query row) or prefill kernel of the call's
 * configuration, or says why there is none. */
typedef tq_status (*kernel_finder)(tq_runtime *rt, const attention_job *job,
                                   bool decode, void **out);

/* A call with no queries still names a configuration: it must be one the
 * library serves, or the first call with work would be the one to fail.
 * Its decode kernel, or failing that its prefill kernel, must exist and
 * match the cache. */
static tq_status check_configuration(tq_runtime *rt, const attention_job *job,
                                     kernel_finder find) {
  void *fn = NULL;
  tq_status status = find(rt, job, true, &fn);
  if (status != TQ_STATUS_NOT_FOUND)
    return status;
  char decode_error[512];
  snprintf(decode_error, sizeof decode_error, "%s", tq_last_error());
  status = find(rt, job, false, &fn);
  if (status != TQ_STATUS_NOT_FOUND)
    return status;
  char prefill_error[512];
  snprintf(prefill_error, sizeof prefill_error, "%s", tq_last_error());
  return tq_fail(TQ_STATUS_NOT_FOUND,
                 "a call without queries is checked like one with work, and "
                 "the library serves neither kernel of its configuration: "
                 "%s; %s",
                 decode_error, prefill_error);
}

/* Tokens per part when sequence s's decode splits into at most `most`
 * parts (page-aligned when paged, at least MIN_TOKENS_PER_PART each), or
 * 0 when it does not split. */
static uint64_t split_tokens(const attention_job *job, uint32_t s,
                             uint64_t most) {
  const tq_kv_cache_v0 *c = job->cache;
  if (!job->fns[s] || job->q_indptr[s + 1] - job->q_indptr[s] != 1)
    return 0;
  const uint64_t tokens = job->tokens[s];
  uint64_t parts = tokens / MIN_TOKENS_PER_PART;
  if (parts > most)
    parts = most;
  if (parts < 2)
    return 0;
  const uint64_t align =
      tq_layout_kind(c) == TQ_LAYOUT_PAGED ? c->page_size : 1;
  const uint64_t per = (tokens + parts - 1) / parts;
  return (per + align - 1) / align * align;
}

/* With fewer (sequence, kv head) items than threads, splits each decode's
 * tokens into parts so every thread has work. Sets job->parts and, when
 * some decode splits, the per-sequence plan in `scratch` (released by the
 * caller). */
static tq_status plan_split(tq_runtime *rt, attention_job *job,
                            void **scratch) {
  const tq_kv_cache_v0 *c = job->cache;
  const uint64_t items = (uint64_t)c->num_seqs * c->num_kv_heads;
  job->parts = 1;
  *scratch = NULL;
  if (!job->can_split || items >= rt->threads)
    return TQ_STATUS_OK;
  const uint64_t most = (rt->threads + items - 1) / items;
  uint64_t widest = 1;
  for (uint32_t s = 0; s < c->num_seqs; ++s) {
    const uint64_t per = split_tokens(job, s, most);
    if (per && (job->tokens[s] + per - 1) / per > widest)
      widest = (job->tokens[s] + per - 1) / per;
  }
  if (widest < 2)
    return TQ_STATUS_OK;
  job->parts = (uint32_t)widest;
  const uint64_t bytes =
      c->num_seqs * (sizeof(uint64_t) + sizeof(uint32_t)) +
      items * widest * part_floats(job) * sizeof(float);
  char *block =
      rt->allocator.allocate(rt->allocator.user, bytes, _Alignof(uint64_t));
  if (!block)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "attention: cannot allocate %llu bytes for a split "
                   "decode's partial sums",
                   (unsigned long long)bytes);
  *scratch = block;
  job->part_tokens = (uint64_t *)block;
  job->partials = (float *)(job->part_tokens + c->num_seqs);
  job->seq_parts =
      (uint32_t *)(job->partials + items * widest * part_floats(job));
  for (uint32_t s = 0; s < c->num_seqs; ++s) {
    const uint64_t per = split_tokens(job, s, most);
    job->part_tokens[s] = per ? per : job->tokens[s];
    job->seq_parts[s] =
        per ? (uint32_t)((job->tokens[s] + per - 1) / per) : 1;
  }
  return TQ_STATUS_OK;
}

/* Merges each split decode's parts into the caller's out. */
static void merge_split_decodes(const attention_job *job) {
  const tq_kv_cache_v0 *c = job->cache;
  const uint64_t stride = part_floats(job), dim = c->head_dim;
  for (uint32_t s = 0; s < c->num_seqs; ++s) {
    if (!job->fns[s] || job->seq_parts[s] < 2)
      continue;
    for (uint32_t kvh = 0; kvh < c->num_kv_heads; ++kvh) {
      const float *base =
          job->partials +
          ((uint64_t)s * c->num_kv_heads + kvh) * job->parts * stride;
      for (uint32_t j = 0; j < job->group; ++j) {
        float *out = job->out + ((uint64_t)job->q_indptr[s] * job->num_q_heads +
                                 kvh * job->group + j) *
                                    dim;
        tq_merge_parts(base + j * dim, base + job->group * dim + j,
                       (int64_t)stride, job->seq_parts[s], (int64_t)dim, out);
      }
    }
  }
}

/* Plans every sequence (nothing runs unless all have a kernel), then runs
 * the (sequence, kv head[, part]) grid of `item` on the pool. */
static tq_status run_attention(tq_runtime *rt, attention_job *job,
                               sequence_check check, kernel_finder find,
                               void (*item)(void *, uint64_t)) {
  const tq_kv_cache_v0 *cache = job->cache;
  job->group = job->num_q_heads / cache->num_kv_heads;
  if (cache->num_seqs == 0)
    return check_configuration(rt, job, find);
  size_t per_seq = sizeof(void *) + sizeof(uint64_t);
  void *scratch = rt->allocator.allocate(
      rt->allocator.user, per_seq * cache->num_seqs, _Alignof(uint64_t));
  int32_t *identity = identity_table(rt, cache->num_seqs);
  if (!scratch || !identity) {
    if (scratch)
      rt->allocator.release(rt->allocator.user, scratch);
    if (identity)
      rt->allocator.release(rt->allocator.user, identity);
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "attention: cannot allocate the plan of %u sequences",
                   cache->num_seqs);
  }
  job->identity = identity;
  job->tokens = (uint64_t *)scratch;
  job->fns = (void **)(job->tokens + cache->num_seqs);
  tq_status status = TQ_STATUS_OK;
  bool any_queries = false;
  for (uint32_t s = 0; s < cache->num_seqs && status == TQ_STATUS_OK; ++s) {
    int32_t rows;
    job->fns[s] = NULL;
    status = tq_query_rows(job->q_indptr, s, &rows);
    if (status != TQ_STATUS_OK)
      break;
    status = tq_kv_cache_tokens(cache, s, &job->tokens[s]);
    if (status != TQ_STATUS_OK || rows == 0)
      continue;
    any_queries = true;
    status = check(job, s, rows, job->tokens[s]);
    if (status == TQ_STATUS_OK)
      status = find(rt, job, rows == 1, &job->fns[s]);
  }
  void *split = NULL;
  if (status == TQ_STATUS_OK && !any_queries)
    status = check_configuration(rt, job, find);
  else if (status == TQ_STATUS_OK &&
           (status = plan_split(rt, job, &split)) == TQ_STATUS_OK) {
    tq_thread_pool_run(rt->pool,
                       (uint64_t)cache->num_seqs * cache->num_kv_heads *
                           job->parts,
                       item, job);
    if (job->parts > 1)
      merge_split_decodes(job);
  }
  if (split)
    rt->allocator.release(rt->allocator.user, split);
  rt->allocator.release(rt->allocator.user, identity);
  rt->allocator.release(rt->allocator.user, scratch);
  return status;
}

/* The views every kernel of a (sequence, kv head) item takes. */
typedef struct {
  memref3 q, out;
  memref4 k, v;
  memref1 table;
  uint64_t rows;
} item_views;

static item_views views_of(const attention_job *job, uint32_t seq,
                           uint32_t kvh) {
  const tq_kv_cache_v0 *c = job->cache;
  const int32_t *qp = job->q_indptr;
  item_views w;
  w.rows = (uint64_t)(qp[seq + 1] - qp[seq]);
  w.q = rows_view(job->q, (uint64_t)qp[seq], w.rows, job->num_q_heads,
                  kvh * job->group, job->group, c->head_dim);
  w.out = rows_view(job->out, (uint64_t)qp[seq], w.rows, job->num_q_heads,
                    kvh * job->group, job->group, c->head_dim);
  w.k = pool_view(c, c->k_pages, c->k_row_bytes, kvh);
  w.v = pool_view(c, c->v_pages, c->v_row_bytes, kvh);
  w.table = table_view(c, job->identity, seq);
  return w;
}

/* Moves the views' first token to t0 (a multiple of the page size when
 * paged). */
static void start_at(const tq_kv_cache_v0 *c, item_views *w, uint64_t t0) {
  if (t0 == 0)
    return;
  if (tq_layout_kind(c) == TQ_LAYOUT_CONTIGUOUS) {
    w->k.offset += (int64_t)t0 * w->k.strides[1];
    w->v.offset += (int64_t)t0 * w->v.strides[1];
    w->k.sizes[1] -= (int64_t)t0;
    w->v.sizes[1] -= (int64_t)t0;
  } else {
    const int64_t pages = (int64_t)(t0 / c->page_size);
    w->table.offset += pages;
    w->table.sizes[0] -= pages;
  }
}

/* A decode unit's out and lse: the caller's out row and `lse`, or the
 * unit's part of the scratch. */
static void decode_outputs(const attention_job *job, const grid_unit *u,
                           item_views *w, float *lse, memref2 *lm) {
  const int64_t g = job->group, d = job->cache->head_dim;
  if (u->partial) {
    w->out = (memref3){u->partial, u->partial, 0, {1, g, d}, {g * d, d, 1}};
    lse = u->partial + g * d;
  }
  *lm = (memref2){lse, lse, 0, {1, g}, {g, 1}};
}

/* The kernel `name` of kind `kind` for this cache and group. */
static tq_status find_kernel(tq_runtime *rt, const tq_kv_cache_v0 *c,
                             const char *name, int64_t version, int kind,
                             uint32_t group, void **out) {
  kernel k;
  tq_status status = lookup(rt, name, version, &k);
  if (status != TQ_STATUS_OK)
    return status;
  if (k.info[INFO_KIND] != kind || k.info[INFO_HEAD_DIM] != c->head_dim ||
      k.info[INFO_GROUP] != group ||
      k.info[INFO_K_ROW_BYTES] != (int64_t)c->k_row_bytes ||
      k.info[INFO_V_ROW_BYTES] != (int64_t)c->v_row_bytes)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "kernel '%s' was built for head dim %lld, group %lld and "
                   "rows of %lld / %lld bytes; the cache has head dim %u, "
                   "group %u and rows of %u / %u bytes",
                   name, (long long)k.info[INFO_HEAD_DIM],
                   (long long)k.info[INFO_GROUP],
                   (long long)k.info[INFO_K_ROW_BYTES],
                   (long long)k.info[INFO_V_ROW_BYTES], c->head_dim, group,
                   c->k_row_bytes, c->v_row_bytes);
  *out = k.entry;
  return TQ_STATUS_OK;
}

static void attention_item(void *ctx, uint64_t index) {
  const attention_job *job = ctx;
  grid_unit u;
  if (!unit_of(job, index, &u))
    return;
  const tq_attention_params_v0 *p = job->params;
  item_views w = views_of(job, u.seq, u.kvh);
  start_at(job->cache, &w, u.t0);
  if (w.rows == 1) {
    float lse[job->group];
    memref2 lm;
    decode_outputs(job, &u, &w, lse, &lm);
    ((decode_fn)job->fns[u.seq])(&w.q, &w.k, &w.v, &w.table, (int64_t)u.n,
                                 p->scale, &w.out, &lm);
  } else {
    ((attention_fn)job->fns[u.seq])(&w.q, &w.k, &w.v, &w.table, (int64_t)u.n,
                                    p->scale, &w.out);
  }
}

static tq_status check_plain(const attention_job *job, uint32_t seq,
                             int32_t rows, uint64_t tokens) {
  const tq_attention_params_v0 *p = job->params;
  return tq_check_causal_rows(p->causal, seq, rows, tokens);
}

static tq_status find_plain(tq_runtime *rt, const attention_job *job,
                            bool decode, void **out) {
  const tq_attention_params_v0 *p = job->params;
  const int kind = decode ? KIND_DECODE : KIND_PREFILL;
  char name[384];
  if (!tq_attention_kernel_name(job->cache, p, kind, job->group, name,
                                sizeof name))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: no kernel name for formats '%s' / '%s'",
                   job->cache->k_format, job->cache->v_format);
  return find_kernel(rt, job->cache, name,
                     decode ? INFO_VERSION_DECODE : INFO_VERSION_PLAIN, kind,
                     job->group, out);
}

tq_status tq_attention(tq_runtime *rt, const tq_kv_cache_v0 *cache,
                       const tq_attention_params_v0 *params, const float *q,
                       float *out) {
  if (!rt || !params)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_attention: the runtime and params must be set");
  tq_status status = tq_check_attention_call(cache, params, q, out);
  if (status != TQ_STATUS_OK)
    return status;
  attention_job job = {cache, params, params->q_indptr, params->num_q_heads,
                       0, NULL, q, out, NULL, NULL, params->window == 0,
                       1, NULL, NULL, NULL};
  return run_attention(rt, &job, check_plain, find_plain, attention_item);
}

/*--- Engine-grade attention (tq_attention_params_v1) -------------------*/

static const uint16_t zero_half = 0;

static void engine_item(void *ctx, uint64_t index) {
  const attention_job *job = ctx;
  const tq_attention_params_v1 *p = job->params;
  grid_unit u;
  if (!unit_of(job, index, &u))
    return;
  const uint32_t seq = u.seq, kvh = u.kvh;
  item_views w = views_of(job, seq, kvh);
  start_at(job->cache, &w, u.t0);
  const uint32_t g = job->group, h0 = kvh * g;
  const uint64_t r0 = (uint64_t)p->q_indptr[seq];
  const int64_t n = (int64_t)u.n;
  memref2 mask;
  if (p->mask) /* rows r0.., the unit's n tokens from t0 */
    mask = (memref2){(void *)(uintptr_t)p->mask, (void *)(uintptr_t)p->mask,
                     (int64_t)(r0 * p->mask_row_stride + u.t0),
                     {(int64_t)w.rows, n},
                     {(int64_t)p->mask_row_stride, 1}};
  else /* one zero read through zero strides */
    mask = (memref2){(void *)(uintptr_t)&zero_half,
                     (void *)(uintptr_t)&zero_half, 0, {(int64_t)w.rows, n},
                     {0, 0}};
  float slopes[g], sinks[g];
  for (uint32_t j = 0; j < g; ++j) { /* sinks enter the first part only */
    slopes[j] = p->slopes ? p->slopes[h0 + j] : 1.0f;
    sinks[j] = p->sinks && u.part == 0 ? p->sinks[h0 + j] : -__builtin_inff();
  }
  memref1 sl = {slopes, slopes, 0, {g}, {1}};
  memref1 sk = {sinks, sinks, 0, {g}, {1}};
  if (w.rows == 1) {
    float lse[g];
    memref2 lm;
    decode_outputs(job, &u, &w, lse, &lm);
    ((engine_decode_fn)job->fns[seq])(&w.q, &w.k, &w.v, &w.table, n,
                                      p->scale, &mask, &sl, &sk, &w.out, &lm);
  } else {
    ((engine_prefill_fn)job->fns[seq])(&w.q, &w.k, &w.v, &w.table, n,
                                       p->scale, &mask, &sl, &sk, &w.out);
  }
}

static tq_status check_engine(const attention_job *job, uint32_t seq,
                              int32_t rows, uint64_t tokens) {
  (void)rows;
  const tq_attention_params_v1 *p = job->params;
  if (p->mask && tokens > p->mask_row_stride)
    return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                   "attention: sequence %u holds %llu tokens, more than "
                   "the mask's row stride %llu",
                   seq, (unsigned long long)tokens,
                   (unsigned long long)p->mask_row_stride);
  return TQ_STATUS_OK;
}

static tq_status find_engine(tq_runtime *rt, const attention_job *job,
                             bool decode, void **out) {
  const tq_attention_params_v1 *p = job->params;
  const tq_kv_cache_v0 *c = job->cache;
  char name[384];
  if (!tq_ggml_attention_kernel_name(decode, c->k_format, c->v_format,
                                     c->head_dim, c->head_dim, job->group,
                                     p->softcap, name, sizeof name))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: no kernel name for formats '%s' / '%s'",
                   c->k_format, c->v_format);
  return find_kernel(rt, c, name,
                     decode ? INFO_VERSION_GGML_DECODE : INFO_VERSION_PLAIN,
                     decode ? KIND_GGML_DECODE : KIND_GGML_PREFILL, job->group,
                     out);
}

tq_status tq_attention_v1(tq_runtime *rt, const tq_kv_cache_v0 *cache,
                          const tq_attention_params_v1 *params,
                          const float *q, float *out) {
  if (!rt || !params)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "tq_attention_v1: the runtime and params must be set");
  tq_status status = tq_check_attention_call_v1(cache, params, q, out);
  if (status != TQ_STATUS_OK)
    return status;
  attention_job job = {cache, params, params->q_indptr, params->num_q_heads,
                       0, NULL, q, out, NULL, NULL, true,
                       1, NULL, NULL, NULL};
  return run_attention(rt, &job, check_engine, find_engine, engine_item);
}
