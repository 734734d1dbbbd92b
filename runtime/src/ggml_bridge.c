/*===- ggml_bridge.c - tqc kernels behind ggml's operator contracts -----===*
 *
 * Maps ggml tensors (data, ne, nb) onto the strided memref descriptors of
 * a tq-aot --abi=ggml pack and splits FLASH_ATTN_EXT over the caller's
 * threads: one work item is (stream, kv head, block of query rows), thread
 * ith takes items ith, ith + nth, ... A decode with fewer (stream, kv
 * head) pairs than threads splits each head's tokens into parts, merged
 * by log-sum-exp after the caller's barrier. Every check runs before any
 * kernel does, identically on every thread.
 *
 *===--------------------------------------------------------------------===*/

#include "tq/tq_ggml.h"

#include "common.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(tq_ggml_tensor_v0) == 72, "tq_ggml_tensor_v0 is pinned");
_Static_assert(sizeof(tq_ggml_attention_v0) == 472,
               "tq_ggml_attention_v0 is pinned");
_Static_assert(sizeof(tq_ggml_threads_v0) == 40, "tq_ggml_threads_v0 is pinned");

typedef void (*append_fn)(memref3 *rows, memref4 *pool, memref1 *table,
                          int64_t start);
typedef void (*dequantize_fn)(memref3 *rows, memref3 *out);
typedef void (*append_centred_fn)(memref3 *rows, memref4 *pool,
                                  memref1 *table, int64_t start,
                                  memref1 *centre);
typedef void (*dequantize_centred_fn)(memref3 *rows, memref3 *out,
                                      memref1 *centre);
typedef void (*attention_fn)(memref3 *q, memref4 *k, memref4 *v,
                             memref1 *table, int64_t tokens, float scale,
                             memref2 *mask, memref1 *slopes, memref1 *sinks,
                             memref3 *out);
/* Decode kernels (info version 2) also write each head's log-sum-exp. */
typedef void (*decode_fn)(memref3 *q, memref4 *k, memref4 *v, memref1 *table,
                          int64_t tokens, float scale, memref2 *mask,
                          memref1 *slopes, memref1 *sinks, memref3 *out,
                          memref2 *lse);

struct tq_ggml_pack {
  void *library;
  char path[1024];
};

/* Query rows per prefill work item: enough to share each decoded KV tile
 * across many rows, few enough to keep every thread busy. */
enum { MIN_ROWS_PER_ITEM = 16 };

/* Tokens per part when a decode splits one head's tokens over threads:
 * below this the merge and the thread hand-off cost more than they save. */
enum { MIN_TOKENS_PER_PART = 256 };

static const int32_t zero_table[1] = {0};
static const uint16_t zero_half = 0;

/* Kernels take read-only buffers through the same descriptors as written
 * ones; they never write through these. */
static void *mut(const void *p) { return (void *)(uintptr_t)p; }

static void say(char *error, size_t size, const char *fmt, ...) {
  if (!error || size == 0)
    return;
  va_list args;
  va_start(args, fmt);
  vsnprintf(error, size, fmt, args);
  va_end(args);
}

tq_status tq_ggml_pack_open(const char *library_path, tq_ggml_pack **out_pack,
                            char *error, size_t error_size) {
  if (!out_pack)
    return TQ_STATUS_INVALID_ARGUMENT;
  *out_pack = NULL;
  if (!library_path) {
    say(error, error_size, "no kernel pack path given");
    return TQ_STATUS_INVALID_ARGUMENT;
  }
  if (strlen(library_path) >= sizeof(((tq_ggml_pack *)0)->path)) {
    say(error, error_size, "kernel pack path is too long");
    return TQ_STATUS_INVALID_ARGUMENT;
  }
  tq_ggml_pack *pack = calloc(1, sizeof(*pack));
  if (!pack)
    return TQ_STATUS_OUT_OF_MEMORY;
  pack->library = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
  if (!pack->library) {
    say(error, error_size,
        "cannot load the tqc kernel pack '%s' (%s); build one with "
        "tq-aot --abi=ggml",
        library_path, dlerror());
    free(pack);
    return TQ_STATUS_UNAVAILABLE;
  }
  strcpy(pack->path, library_path);
  *out_pack = pack;
  return TQ_STATUS_OK;
}

void tq_ggml_pack_close(tq_ggml_pack *pack) {
  if (!pack)
    return;
  dlclose(pack->library);
  free(pack);
}

/* The entry point and the info of kernel `name` with calling convention
 * `version`, or false; *entry and *info are set wherever the symbols
 * exist. Whether this process may run it (tq_check_amx_grant) is the
 * caller's check. */
static bool lookup(const tq_ggml_pack *pack, const char *name,
                   int64_t version, void **entry, const int64_t **info) {
  *entry = NULL;
  *info = NULL;
  char symbol[256];
  if (snprintf(symbol, sizeof symbol, "_mlir_ciface_%s", name) >=
      (int)sizeof symbol)
    return false;
  *entry = dlsym(pack->library, symbol);
  if (snprintf(symbol, sizeof symbol, "%s_info", name) >= (int)sizeof symbol)
    return false;
  *info = (const int64_t *)dlsym(pack->library, symbol);
  return *entry && *info && (*info)[INFO_VERSION] == version;
}

/* The row kernel `kind` ("append" or "dequantize") of format at head_dim. */
static tq_status row_kernel(const tq_ggml_pack *pack, const char *kind,
                            const char *format, uint32_t head_dim,
                            bool centred, void **entry, uint32_t *row_bytes) {
  if (!pack || !format || head_dim == 0)
    return TQ_STATUS_INVALID_ARGUMENT;
  if (!tq_is_identifier(format))
    return TQ_STATUS_INVALID_ARGUMENT;
  char name[192];
  if (snprintf(name, sizeof name, "tq_%s_%s_d%u%s", kind, format, head_dim,
               centred ? "_centred" : "") >= (int)sizeof name)
    return TQ_STATUS_INVALID_ARGUMENT;
  const int64_t *info;
  if (!lookup(pack, name, INFO_VERSION_PLAIN, entry, &info) ||
      info[INFO_HEAD_DIM] != (int64_t)head_dim || info[INFO_K_ROW_BYTES] <= 0 ||
      tq_check_amx_grant(pack->library, name) != TQ_STATUS_OK)
    return TQ_STATUS_NOT_FOUND;
  *row_bytes = (uint32_t)info[INFO_K_ROW_BYTES];
  return TQ_STATUS_OK;
}

tq_status tq_ggml_row_bytes(const tq_ggml_pack *pack, const char *format,
                            uint32_t head_dim, uint32_t *out_bytes) {
  if (!out_bytes)
    return TQ_STATUS_INVALID_ARGUMENT;
  void *entry;
  return row_kernel(pack, "append", format, head_dim, false, &entry,
                    out_bytes);
}

/* rows = num_values / head_dim, or an error when it does not divide. */
static tq_status row_count(uint32_t head_dim, int64_t num_values,
                           int64_t *rows) {
  if (num_values < 0 || num_values % head_dim != 0)
    return TQ_STATUS_INVALID_ARGUMENT;
  *rows = num_values / head_dim;
  return TQ_STATUS_OK;
}

tq_status tq_ggml_quantize(const tq_ggml_pack *pack, const char *format,
                           uint32_t head_dim, const float *x, void *y,
                           int64_t num_values) {
  void *entry;
  uint32_t bytes;
  int64_t rows;
  tq_status status = row_kernel(pack, "append", format, head_dim, false,
                                &entry, &bytes);
  if (status == TQ_STATUS_OK)
    status = row_count(head_dim, num_values, &rows);
  if (status != TQ_STATUS_OK || rows == 0)
    return status;
  if (!x || !y)
    return TQ_STATUS_INVALID_ARGUMENT;
  memref3 in = {mut(x), mut(x), 0, {rows, 1, head_dim},
                {head_dim, head_dim, 1}};
  memref4 pool = {y, y, 0, {1, rows, 1, bytes},
                  {rows * (int64_t)bytes, bytes, bytes, 1}};
  memref1 table = {mut(zero_table), mut(zero_table), 0, {1}, {1}};
  ((append_fn)entry)(&in, &pool, &table, 0);
  return TQ_STATUS_OK;
}

tq_status tq_ggml_dequantize(const tq_ggml_pack *pack, const char *format,
                             uint32_t head_dim, const void *x, float *y,
                             int64_t num_values) {
  void *entry;
  uint32_t bytes;
  int64_t rows;
  tq_status status = row_kernel(pack, "dequantize", format, head_dim, false,
                                &entry, &bytes);
  if (status == TQ_STATUS_OK)
    status = row_count(head_dim, num_values, &rows);
  if (status != TQ_STATUS_OK || rows == 0)
    return status;
  if (!x || !y)
    return TQ_STATUS_INVALID_ARGUMENT;
  memref3 in = {mut(x), mut(x), 0, {rows, 1, bytes}, {bytes, bytes, 1}};
  memref3 out = {y, y, 0, {rows, 1, head_dim}, {head_dim, head_dim, 1}};
  ((dequantize_fn)entry)(&in, &out);
  return TQ_STATUS_OK;
}

/* Row kernel `kind` of format at head_dim, centred: rows r, r + C, ...
 * of the call share centre row r (C = centre_rows), so each centre is one
 * kernel call over a strided view of its rows. */
static tq_status centred_rows(const tq_ggml_pack *pack, bool encode,
                              const char *format, uint32_t head_dim,
                              const float *centre, uint32_t centre_rows,
                              const void *x, void *y, int64_t num_values) {
  void *entry;
  uint32_t row_bytes;
  int64_t rows;
  tq_status status =
      row_kernel(pack, encode ? "append" : "dequantize", format, head_dim,
                 true, &entry, &row_bytes);
  if (status == TQ_STATUS_OK)
    status = row_count(head_dim, num_values, &rows);
  if (status != TQ_STATUS_OK || rows == 0)
    return status;
  if (!x || !y || !centre || centre_rows == 0 || rows % centre_rows != 0)
    return TQ_STATUS_INVALID_ARGUMENT;
  const int64_t bytes = row_bytes;
  const int64_t C = centre_rows, per = rows / C, D = head_dim;
  for (int64_t j = 0; j < C; ++j) {
    memref1 c = {mut(centre + j * D), mut(centre + j * D), 0, {D}, {1}};
    if (encode) {
      const float *in = (const float *)x + j * D;
      uint8_t *out = (uint8_t *)y + j * bytes;
      memref3 rm = {mut(in), mut(in), 0, {per, 1, D}, {C * D, D, 1}};
      memref4 pool = {out, out, 0, {1, per, 1, bytes},
                      {per * C * bytes, C * bytes, bytes, 1}};
      memref1 table = {mut(zero_table), mut(zero_table), 0, {1}, {1}};
      ((append_centred_fn)entry)(&rm, &pool, &table, 0, &c);
    } else {
      const uint8_t *in = (const uint8_t *)x + j * bytes;
      float *out = (float *)y + j * D;
      memref3 rm = {mut(in), mut(in), 0, {per, 1, bytes},
                    {C * bytes, bytes, 1}};
      memref3 om = {out, out, 0, {per, 1, D}, {C * D, D, 1}};
      ((dequantize_centred_fn)entry)(&rm, &om, &c);
    }
  }
  return TQ_STATUS_OK;
}

tq_status tq_ggml_quantize_centred(const tq_ggml_pack *pack,
                                   const char *format, uint32_t head_dim,
                                   const float *centre, uint32_t centre_rows,
                                   const float *x, void *y,
                                   int64_t num_values) {
  return centred_rows(pack, true, format, head_dim, centre, centre_rows, x, y,
                      num_values);
}

tq_status tq_ggml_dequantize_centred(const tq_ggml_pack *pack,
                                     const char *format, uint32_t head_dim,
                                     const float *centre,
                                     uint32_t centre_rows, const void *x,
                                     float *y, int64_t num_values) {
  return centred_rows(pack, false, format, head_dim, centre, centre_rows, x,
                      y, num_values);
}

/*--- FLASH_ATTN_EXT ---------------------------------------------------*/

/* Everything a thread needs to run its items, derived from the call. */
typedef struct {
  void *fn; /* decode_fn for one query row, else attention_fn */
  int64_t dk, dv, n_queries, n_head, n_kv, n_kv_heads, group, streams;
  int64_t k_streams, v_streams, rows_per_item, blocks;
  /* Parts each head's tokens are split into (1: no split), tokens each. */
  int64_t parts, part_tokens;
  uint32_t k_row_bytes, v_row_bytes;
  float slope_m0, slope_m1;
  uint32_t n_head_log2;
} plan;

/* ggml's ALiBi slope of head h (1 without ALiBi). */
static float slope_of(const plan *p, float max_bias, uint32_t h) {
  if (max_bias <= 0.0f)
    return 1.0f;
  return h < p->n_head_log2
             ? powf(p->slope_m0, (float)(h + 1))
             : powf(p->slope_m1, (float)(2 * (h - p->n_head_log2) + 1));
}

static bool aligned_to(uint64_t value, uint64_t unit) {
  return value % unit == 0;
}

static tq_status find_attention(const tq_ggml_pack *pack,
                                const tq_ggml_attention_v0 *c, plan *p,
                                bool decode, char *error, size_t size) {
  char name[256];
  if (!tq_ggml_attention_kernel_name(decode, c->k_format, c->v_format, p->dk,
                                     p->dv, p->group, c->softcap, name,
                                     sizeof name)) {
    say(error, size, "format names are too long");
    return TQ_STATUS_INVALID_ARGUMENT;
  }
  void *entry;
  const int64_t *info;
  const int64_t version =
      decode ? INFO_VERSION_GGML_DECODE : INFO_VERSION_PLAIN;
  if (!lookup(pack, name, version, &entry, &info) && entry && info) {
    say(error, size,
        "the kernel %s of the tqc kernel pack '%s' has calling convention "
        "%lld, and this runtime calls convention %lld: rebuild the pack "
        "with this tqc's tq-aot --abi=ggml",
        name, pack->path, (long long)info[INFO_VERSION], (long long)version);
    return TQ_STATUS_VERSION_MISMATCH;
  }
  if (!entry || !info ||
      info[INFO_KIND] != (decode ? KIND_GGML_DECODE : KIND_GGML_PREFILL) ||
      info[INFO_HEAD_DIM] != p->dk || info[INFO_GROUP] != p->group) {
    char options[96] = "";
    int used = 0;
    if (p->dv != p->dk)
      used = snprintf(options, sizeof options, " --v-head-dim=%lld",
                      (long long)p->dv);
    if (c->softcap > 0.0f)
      snprintf(options + used, sizeof options - (size_t)used,
               " --softcap=%g", c->softcap);
    say(error, size,
        "the tqc kernel pack '%s' has no kernel %s (K %s, V %s, head dims "
        "%lld/%lld, %lld query heads per KV head); build it with: tq-aot "
        "--abi=ggml --k-format=%s --v-format=%s --head-dim=%lld --gqa=%lld%s "
        "-o DIR",
        pack->path, name, c->k_format, c->v_format, (long long)p->dk,
        (long long)p->dv, (long long)p->group, c->k_format, c->v_format,
        (long long)p->dk, (long long)p->group, options);
    return TQ_STATUS_NOT_FOUND;
  }
  if (tq_check_amx_grant(pack->library, name) != TQ_STATUS_OK) {
    say(error, size,
        "the kernel %s of the tqc kernel pack '%s' uses AMX tiles, which "
        "Linux did not grant this process (arch_prctl ARCH_REQ_XCOMP_PERM "
        "refused or unsupported): rebuild the pack with tq-aot --amx=off "
        "(integrations/llama.cpp/build.sh: TQ_GGML_AMX=off)",
        name, pack->path);
    return TQ_STATUS_UNAVAILABLE;
  }
  p->fn = entry;
  p->k_row_bytes = (uint32_t)info[INFO_K_ROW_BYTES];
  p->v_row_bytes = (uint32_t)info[INFO_V_ROW_BYTES];
  return TQ_STATUS_OK;
}

/* Checks the call and plans it. */
static tq_status plan_call(const tq_ggml_pack *pack,
                           const tq_ggml_attention_v0 *c, uint32_t nth,
                           plan *p, char *error, size_t size) {
#define REJECT(...)                                                            \
  do {                                                                         \
    say(error, size, __VA_ARGS__);                                             \
    return TQ_STATUS_INVALID_ARGUMENT;                                         \
  } while (0)
  if (!pack || !c)
    REJECT("null pack or call");
  if (c->version != TQ_GGML_ATTENTION_VERSION_0 ||
      c->size != sizeof(tq_ggml_attention_v0)) {
    say(error, size, "unknown tq_ggml_attention version %u or size %u",
        c->version, c->size);
    return TQ_STATUS_VERSION_MISMATCH;
  }
  if (nth == 0)
    REJECT("nth must be positive");
  if (!c->k_format || !c->v_format || !tq_is_identifier(c->k_format) ||
      !tq_is_identifier(c->v_format))
    REJECT("K and V format names must be identifiers");
  if (!c->q.data || !c->k.data || !c->v.data || !c->dst.data)
    REJECT("q, k, v and dst need data");
  if (!(c->scale > 0.0f) || !isfinite(c->scale))
    REJECT("scale must be finite and positive, got %g", c->scale);
  if (!(c->softcap >= 0.0f) || c->softcap > TQ_MAX_SOFTCAP)
    REJECT("softcap must be in [0, %g], got %g", (double)TQ_MAX_SOFTCAP,
           c->softcap);
  if (!(c->max_bias >= 0.0f) || !isfinite(c->max_bias))
    REJECT("max_bias must be finite and non-negative, got %g", c->max_bias);
  for (int i = 0; i < 4; ++i)
    if (c->q.ne[i] <= 0 || c->k.ne[i] <= 0 || c->v.ne[i] <= 0 ||
        c->dst.ne[i] <= 0 || (c->mask.data && c->mask.ne[i] <= 0) ||
        (c->sinks.data && c->sinks.ne[i] <= 0))
      REJECT("tensor extents must be positive");
  p->dk = c->q.ne[0];
  p->dv = c->v.ne[0];
  p->n_queries = c->q.ne[1];
  p->n_head = c->q.ne[2];
  p->streams = c->q.ne[3];
  p->n_kv = c->k.ne[1];
  p->n_kv_heads = c->k.ne[2];
  if (c->k.ne[0] != p->dk)
    REJECT("K head dim %lld differs from Q's %lld", (long long)c->k.ne[0],
           (long long)p->dk);
  if (c->v.ne[1] != p->n_kv || c->v.ne[2] != p->n_kv_heads)
    REJECT("K and V disagree on tokens or KV heads");
  if (p->n_head % p->n_kv_heads != 0)
    REJECT("%lld query heads are not a multiple of %lld KV heads",
           (long long)p->n_head, (long long)p->n_kv_heads);
  p->group = p->n_head / p->n_kv_heads;
  p->k_streams = c->k.ne[3];
  p->v_streams = c->v.ne[3];
  if (p->streams % p->k_streams != 0 || p->streams % p->v_streams != 0)
    REJECT("K/V streams do not divide Q's");
  if (c->dst.ne[0] != p->dv || c->dst.ne[1] != p->n_head ||
      c->dst.ne[2] != p->n_queries || c->dst.ne[3] != p->streams)
    REJECT("dst must be [DV, n_head, n_queries, streams]");
  if (c->q.nb[0] != 4 || c->dst.nb[0] != 4)
    REJECT("q and dst rows must be contiguous f32");
  for (int i = 1; i < 4; ++i)
    if (!aligned_to(c->q.nb[i], 4) || !aligned_to(c->dst.nb[i], 4))
      REJECT("q and dst strides must be multiples of 4 bytes");
  if (c->mask.data) {
    if (c->mask.nb[0] != 2 || !aligned_to(c->mask.nb[1], 2) ||
        !aligned_to(c->mask.nb[2], 2) || !aligned_to(c->mask.nb[3], 2))
      REJECT("the mask must be f16 with contiguous rows");
    if (c->mask.ne[0] < p->n_kv || c->mask.ne[1] < p->n_queries)
      REJECT("the mask is [%lld, %lld], smaller than [n_kv %lld, queries "
             "%lld]",
             (long long)c->mask.ne[0], (long long)c->mask.ne[1],
             (long long)p->n_kv, (long long)p->n_queries);
    if (p->streams % c->mask.ne[3] != 0)
      REJECT("the mask's streams do not divide Q's");
    if (c->mask.ne[2] != 1 && p->group != 1)
      REJECT("per-head masks need one query head per KV head");
  }
  if (c->sinks.data && c->sinks.nb[0] != 4)
    REJECT("sinks must be contiguous f32 (nb[0] = 4, got %llu)",
           (unsigned long long)c->sinks.nb[0]);
  if (c->sinks.data && c->sinks.ne[0] < p->n_head)
    REJECT("sinks have %lld entries for %lld heads",
           (long long)c->sinks.ne[0], (long long)p->n_head);
#undef REJECT
  tq_status status =
      find_attention(pack, c, p, p->n_queries == 1, error, size);
  if (status != TQ_STATUS_OK)
    return status;
  /* A row of one head must be contiguous bytes of the format. */
  if (c->k.nb[1] < p->k_row_bytes || c->v.nb[1] < p->v_row_bytes) {
    say(error, size, "K/V token strides are smaller than a row");
    return TQ_STATUS_INVALID_ARGUMENT;
  }
  /* Query rows per item: whole heads for decode; for prefill, blocks so
   * that every thread has several items to balance causal work. */
  const int64_t heads = p->streams * p->n_kv_heads;
  int64_t blocks = 1;
  if (p->n_queries > 1) {
    blocks = (4 * (int64_t)nth + heads - 1) / heads;
    int64_t most = (p->n_queries + MIN_ROWS_PER_ITEM - 1) / MIN_ROWS_PER_ITEM;
    if (blocks > most)
      blocks = most;
    if (blocks < 1)
      blocks = 1;
  }
  p->rows_per_item = (p->n_queries + blocks - 1) / blocks;
  p->blocks = (p->n_queries + p->rows_per_item - 1) / p->rows_per_item;
  /* Decode with fewer heads than threads: parts of each head's tokens
   * (used only where the caller shares a barrier and scratch). */
  p->parts = 1;
  if (p->n_queries == 1 && heads < (int64_t)nth) {
    int64_t parts = (int64_t)nth / heads;
    if (parts > p->n_kv / MIN_TOKENS_PER_PART)
      parts = p->n_kv / MIN_TOKENS_PER_PART;
    if (parts > 1)
      p->parts = parts;
  }
  p->part_tokens = (p->n_kv + p->parts - 1) / p->parts;
  p->n_head_log2 = 1u << (uint32_t)floor(log2((double)p->n_head));
  p->slope_m0 = powf(2.0f, -c->max_bias / (float)p->n_head_log2);
  p->slope_m1 = powf(2.0f, -(c->max_bias / 2.0f) / (float)p->n_head_log2);
  return TQ_STATUS_OK;
}

/* Where a work item writes: dst itself, or (a part of a split decode)
 * rows of the scratch, with its heads' log-sum-exp beside them. */
typedef struct {
  float *out;     /* null: dst */
  float *lse;     /* group floats; decode only */
} item_target;

/* Runs the rows of work item `item` of a planned call over tokens
 * [t0, t0 + n) of its head. */
static void run_item(const tq_ggml_attention_v0 *c, const plan *p,
                     int64_t item, int64_t t0, int64_t n,
                     const item_target *target) {
  const int64_t block = item % p->blocks;
  const int64_t kh = (item / p->blocks) % p->n_kv_heads;
  const int64_t s = item / (p->blocks * p->n_kv_heads);
  const int64_t r0 = block * p->rows_per_item;
  int64_t rows = p->n_queries - r0;
  if (rows > p->rows_per_item)
    rows = p->rows_per_item;
  const int64_t h0 = kh * p->group;
  const int64_t ks = s / (p->streams / p->k_streams);
  const int64_t vs = s / (p->streams / p->v_streams);

  char *q = (char *)mut(c->q.data) + s * c->q.nb[3] + h0 * c->q.nb[2] +
            r0 * c->q.nb[1];
  memref3 qm = {q, q, 0, {rows, p->group, p->dk},
                {(int64_t)c->q.nb[1] / 4, (int64_t)c->q.nb[2] / 4, 1}};
  memref3 om;
  if (target->out) {
    om = (memref3){target->out, target->out, 0, {rows, p->group, p->dv},
                   {p->group * p->dv, p->dv, 1}};
  } else {
    char *out = (char *)mut(c->dst.data) + s * c->dst.nb[3] +
                r0 * c->dst.nb[2] + h0 * c->dst.nb[1];
    om = (memref3){out, out, 0, {rows, p->group, p->dv},
                   {(int64_t)c->dst.nb[2] / 4, (int64_t)c->dst.nb[1] / 4, 1}};
  }
  char *k = (char *)mut(c->k.data) + ks * c->k.nb[3] + kh * c->k.nb[2] +
            t0 * c->k.nb[1];
  memref4 km = {k, k, 0, {1, n, 1, p->k_row_bytes},
                {n * (int64_t)c->k.nb[1], (int64_t)c->k.nb[1],
                 (int64_t)c->k.nb[2], 1}};
  char *v = (char *)mut(c->v.data) + vs * c->v.nb[3] + kh * c->v.nb[2] +
            t0 * c->v.nb[1];
  memref4 vm = {v, v, 0, {1, n, 1, p->v_row_bytes},
                {n * (int64_t)c->v.nb[1], (int64_t)c->v.nb[1],
                 (int64_t)c->v.nb[2], 1}};
  memref1 table = {mut(zero_table), mut(zero_table), 0, {1}, {1}};

  memref2 mask;
  if (c->mask.data) {
    const int64_t ms = s % c->mask.ne[3];
    const int64_t mh = c->mask.ne[2] == 1 ? 0 : h0 % c->mask.ne[2];
    char *m = (char *)mut(c->mask.data) + ms * c->mask.nb[3] +
              mh * c->mask.nb[2] + r0 * c->mask.nb[1] + t0 * 2;
    mask = (memref2){m, m, 0, {rows, n}, {(int64_t)c->mask.nb[1] / 2, 1}};
  } else { /* One zero broadcast to every entry. */
    mask = (memref2){mut(&zero_half), mut(&zero_half), 0, {rows, n}, {0, 0}};
  }
  /* Sinks enter one part only: the first. */
  float slopes[p->group], sinks[p->group];
  for (int64_t j = 0; j < p->group; ++j) {
    slopes[j] = slope_of(p, c->max_bias, (uint32_t)(h0 + j));
    sinks[j] = c->sinks.data && t0 == 0
                   ? ((const float *)c->sinks.data)[h0 + j]
                   : -INFINITY;
  }
  memref1 sm = {slopes, slopes, 0, {p->group}, {1}};
  memref1 sk = {sinks, sinks, 0, {p->group}, {1}};
  if (p->n_queries == 1) {
    float unused[p->group];
    float *l = target->lse ? target->lse : unused;
    memref2 lm = {l, l, 0, {1, p->group}, {p->group, 1}};
    ((decode_fn)p->fn)(&qm, &km, &vm, &table, n, c->scale, &mask, &sm, &sk,
                       &om, &lm);
  } else {
    ((attention_fn)p->fn)(&qm, &km, &vm, &table, n, c->scale, &mask, &sm,
                          &sk, &om);
  }
}

/* Scratch floats of one part: the group's output rows, then their lse. */
static int64_t part_floats(const plan *p) {
  return p->group * (p->dv + 1);
}

static uint64_t split_scratch_bytes(const plan *p) {
  if (p->parts <= 1)
    return 0;
  return (uint64_t)(p->streams * p->n_kv_heads * p->parts) *
         (uint64_t)part_floats(p) * sizeof(float);
}

/* Merges the parts of query head row `row` (stream, head) into dst. */
static void merge_row(const tq_ggml_attention_v0 *c, const plan *p,
                      const float *scratch, int64_t row) {
  const int64_t s = row / p->n_head, h = row % p->n_head;
  const int64_t item = s * p->n_kv_heads + h / p->group, j = h % p->group;
  float *out = (float *)((char *)mut(c->dst.data) + s * c->dst.nb[3] +
                         h * c->dst.nb[1]);
  const float *base = scratch + item * p->parts * part_floats(p);
  tq_merge_parts(base + j * p->dv, base + p->group * p->dv + j,
                 part_floats(p), p->parts, p->dv, out);
}

/* Split decode: thread ith runs parts ith, ith + nth, ...; all meet at the
 * barrier; then thread ith merges head rows ith, ith + nth, ... */
static void run_split(const tq_ggml_attention_v0 *c, const plan *p,
                      uint32_t ith, uint32_t nth,
                      const tq_ggml_threads_v0 *t) {
  float *scratch = (float *)t->scratch;
  const int64_t parts = p->streams * p->n_kv_heads * p->parts;
  for (int64_t i = ith; i < parts; i += nth) {
    const int64_t item = i / p->parts, part = i % p->parts;
    float *base = scratch + i * part_floats(p);
    const int64_t t0 = part * p->part_tokens;
    int64_t n = p->n_kv - t0;
    if (n > p->part_tokens)
      n = p->part_tokens;
    item_target target = {base, base + p->group * p->dv};
    if (n <= 0) { /* an empty part: nothing seen */
      for (int64_t j = 0; j < p->group; ++j)
        target.lse[j] = -INFINITY;
      continue;
    }
    run_item(c, p, item, t0, n, &target);
  }
  t->barrier(t->barrier_context);
  const int64_t rows = p->streams * p->n_head;
  for (int64_t row = ith; row < rows; row += nth)
    merge_row(c, p, scratch, row);
}

static tq_status run_call(const tq_ggml_pack *pack,
                          const tq_ggml_attention_v0 *call, uint32_t ith,
                          uint32_t nth, const tq_ggml_threads_v0 *threads,
                          char *error, size_t error_size) {
  plan p;
  tq_status status = plan_call(pack, call, nth, &p, error, error_size);
  if (status != TQ_STATUS_OK)
    return status;
  if (ith >= nth) {
    say(error, error_size, "ith %u is not below nth %u", ith, nth);
    return TQ_STATUS_INVALID_ARGUMENT;
  }
  if (threads && p.parts > 1 && threads->scratch &&
      threads->scratch_bytes >= split_scratch_bytes(&p)) {
    run_split(call, &p, ith, nth, threads);
    return TQ_STATUS_OK;
  }
  const item_target whole = {NULL, NULL};
  const int64_t items = p.streams * p.n_kv_heads * p.blocks;
  for (int64_t item = ith; item < items; item += nth)
    run_item(call, &p, item, 0, p.n_kv, &whole);
  return TQ_STATUS_OK;
}

tq_status tq_ggml_flash_attn_ext(const tq_ggml_pack *pack,
                                 const tq_ggml_attention_v0 *call,
                                 uint32_t ith, uint32_t nth, char *error,
                                 size_t error_size) {
  return run_call(pack, call, ith, nth, NULL, error, error_size);
}

tq_status tq_ggml_flash_attn_ext_scratch(const tq_ggml_pack *pack,
                                         const tq_ggml_attention_v0 *call,
                                         uint32_t nth, uint64_t *out_bytes) {
  if (!out_bytes)
    return TQ_STATUS_INVALID_ARGUMENT;
  *out_bytes = 0;
  plan p;
  tq_status status = plan_call(pack, call, nth, &p, NULL, 0);
  if (status == TQ_STATUS_OK)
    *out_bytes = split_scratch_bytes(&p);
  return status;
}

tq_status tq_ggml_flash_attn_ext_threads(const tq_ggml_pack *pack,
                                         const tq_ggml_attention_v0 *call,
                                         uint32_t ith, uint32_t nth,
                                         const tq_ggml_threads_v0 *threads,
                                         char *error, size_t error_size) {
  if (!threads || threads->version != TQ_GGML_THREADS_VERSION_0 ||
      threads->size != sizeof(tq_ggml_threads_v0)) {
    say(error, error_size, "unknown tq_ggml_threads version %u or size %u",
        threads ? threads->version : 0u, threads ? threads->size : 0u);
    return threads ? TQ_STATUS_VERSION_MISMATCH : TQ_STATUS_INVALID_ARGUMENT;
  }
  if (!threads->barrier) {
    say(error, error_size, "tq_ggml_threads needs a barrier");
    return TQ_STATUS_INVALID_ARGUMENT;
  }
  return run_call(pack, call, ith, nth, threads, error, error_size);
}
