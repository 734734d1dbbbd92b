/*===- common.c - What the CPU and GPU runtimes share -------------------===*/

/* syscall(2) for the AMX grant check (the build's _POSIX_C_SOURCE alone
 * hides it). */
#define _DEFAULT_SOURCE

#include "common.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static void *default_allocate(void *user, size_t bytes, size_t alignment) {
  (void)user;
  if (alignment < sizeof(void *))
    alignment = sizeof(void *);
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return aligned_alloc(alignment, rounded ? rounded : alignment);
}

static void default_release(void *user, void *pointer) {
  (void)user;
  free(pointer);
}

tq_status tq_resolve_allocator(const tq_allocator_v0 *allocator,
                               tq_allocator_v0 *out) {
  tq_allocator_v0 standard = {TQ_ALLOCATOR_VERSION_0, sizeof(tq_allocator_v0),
                              NULL, default_allocate, default_release};
  *out = standard;
  if (!allocator)
    return TQ_STATUS_OK;
  if (allocator->version != TQ_ALLOCATOR_VERSION_0 ||
      allocator->size != sizeof(tq_allocator_v0))
    return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                   "allocator: version %u, size %u; this runtime takes "
                   "version %u, size %zu",
                   allocator->version, allocator->size,
                   TQ_ALLOCATOR_VERSION_0, sizeof(tq_allocator_v0));
  if (!allocator->allocate || !allocator->release)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "allocator: allocate and release must both be set");
  *out = *allocator;
  return TQ_STATUS_OK;
}

tq_status tq_check_cache(const tq_kv_cache_v0 *c) {
  if (!c)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT, "the cache is NULL");
  if (c->version != TQ_KV_CACHE_VERSION_0 || c->size != sizeof(*c))
    return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                   "cache: version %u, size %u; this runtime takes version "
                   "%u, size %zu",
                   c->version, c->size, TQ_KV_CACHE_VERSION_0, sizeof(*c));
  if (!c->k_format || !c->v_format || !c->k_pages || !c->v_pages ||
      c->head_dim == 0 || c->num_kv_heads == 0 || c->page_size == 0 ||
      c->k_row_bytes == 0 || c->v_row_bytes == 0 || c->num_pages == 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "cache: k_format, v_format, k_pages and v_pages must be "
                   "set and head_dim, num_kv_heads, page_size, k_row_bytes, "
                   "v_row_bytes and num_pages non-zero");
  uint64_t bytes;
  if (!tq_mul_ok(c->num_pages, c->page_size, &bytes) ||
      !tq_mul_ok(bytes, c->num_kv_heads, &bytes) ||
      !tq_mul_ok(bytes, c->k_row_bytes > c->v_row_bytes ? c->k_row_bytes
                                                     : c->v_row_bytes,
              &bytes) ||
      bytes > (uint64_t)INT64_MAX)
    return tq_fail(TQ_STATUS_OVERFLOW,
                   "cache: num_pages x page_size x num_kv_heads x row bytes "
                   "overflows int64");
  if (tq_layout_kind(c) == TQ_LAYOUT_PAGED) {
    if (!c->indptr || !c->indices || !c->last_page_len)
      return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                     "paged cache: indptr, indices and last_page_len must "
                     "be set");
    if (c->indptr[0] != 0)
      return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                     "paged cache: indptr[0] is %d, not 0", c->indptr[0]);
    /* indptr first, whole: indices holds indptr[num_seqs] entries, so no
     * entry may be read before every bound is known to be within that. */
    for (uint32_t s = 0; s < c->num_seqs; ++s)
      if (c->indptr[s + 1] < c->indptr[s])
        return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                       "paged cache: indptr decreases at sequence %u "
                       "(%d, then %d)",
                       s, c->indptr[s], c->indptr[s + 1]);
    for (uint32_t s = 0; s < c->num_seqs; ++s) {
      int32_t begin = c->indptr[s], end = c->indptr[s + 1];
      int32_t last = c->last_page_len[s];
      if (end == begin ? last != 0 : (last < 1 || last > (int32_t)c->page_size))
        return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                       "paged cache: last_page_len[%u] = %d (sequence of %d "
                       "pages, page_size %u)",
                       s, last, end - begin, c->page_size);
      for (int32_t p = begin; p < end; ++p)
        if (c->indices[p] < 0 || (uint64_t)c->indices[p] >= c->num_pages)
          return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                         "paged cache: indices[%d] = %d is not a page "
                         "(num_pages %llu)",
                         p, c->indices[p], (unsigned long long)c->num_pages);
    }
  } else if (tq_layout_kind(c) == TQ_LAYOUT_CONTIGUOUS) {
    if (!c->seq_lens)
      return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                     "contiguous cache: seq_lens must be set");
    if (c->num_seqs > c->num_pages)
      return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                     "contiguous cache: %u sequences in %llu pages (one "
                     "page per sequence)",
                     c->num_seqs, (unsigned long long)c->num_pages);
    for (uint32_t s = 0; s < c->num_seqs; ++s)
      if (c->seq_lens[s] < 0 || (uint32_t)c->seq_lens[s] > c->page_size)
        return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                       "contiguous cache: seq_lens[%u] = %d is not in "
                       "[0, page_size %u]",
                       s, c->seq_lens[s], c->page_size);
  } else {
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "cache: layout %u is neither TQ_LAYOUT_PAGED nor "
                   "TQ_LAYOUT_CONTIGUOUS (either optionally | "
                   "TQ_LAYOUT_HEAD_MAJOR)",
                   c->layout);
  }
  return TQ_STATUS_OK;
}

/* What every attention params version shares: the query layout, the head
 * counts, a finite non-negative scale and a non-negative soft-cap. OK, or
 * the failure, said (tq_last_error). */
static tq_status check_queries(const tq_kv_cache_v0 *c,
                               const int32_t *q_indptr, uint32_t num_q_heads,
                               float scale, float softcap, const float *q,
                               const float *out) {
  if (!q_indptr || !q || !out)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: q_indptr, q and out must be set");
  if (num_q_heads == 0 || num_q_heads % c->num_kv_heads != 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: %u query heads is not a non-zero multiple of "
                   "the cache's %u kv heads",
                   num_q_heads, c->num_kv_heads);
  if (!(softcap >= 0.0f && softcap <= TQ_MAX_SOFTCAP))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: softcap %g is not in [0, %g]", (double)softcap,
                   (double)TQ_MAX_SOFTCAP);
  if (!(scale >= 0.0f && scale <= 3.4e38f))
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: scale %g is not finite and >= 0",
                   (double)scale);
  if (q_indptr[0] != 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: q_indptr[0] is %d, not 0", q_indptr[0]);
  return TQ_STATUS_OK;
}

/* The params struct's (version, size) against what `api` takes. */
static tq_status check_params_header(const char *api, uint32_t version,
                                     uint32_t size, uint32_t want_version,
                                     size_t want_size) {
  if (version == want_version && size == want_size)
    return TQ_STATUS_OK;
  return tq_fail(TQ_STATUS_VERSION_MISMATCH,
                 "attention params: version %u, size %u; %s takes version "
                 "%u, size %zu",
                 version, size, api, want_version, want_size);
}

tq_status tq_query_rows(const int32_t *q_indptr, uint32_t seq,
                        int32_t *out_rows) {
  *out_rows = q_indptr[seq + 1] - q_indptr[seq];
  if (*out_rows < 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention: q_indptr decreases at sequence %u (%d, then "
                   "%d)",
                   seq, q_indptr[seq], q_indptr[seq + 1]);
  return TQ_STATUS_OK;
}

tq_status tq_check_causal_rows(bool causal, uint32_t seq, int32_t rows,
                               uint64_t tokens) {
  if (causal && (uint64_t)rows > tokens)
    return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                   "attention: sequence %u has %d causal query rows but "
                   "only %llu tokens (each row needs a token of its own)",
                   seq, rows, (unsigned long long)tokens);
  return TQ_STATUS_OK;
}

tq_status tq_check_attention_call(const tq_kv_cache_v0 *c,
                                  const tq_attention_params_v0 *p,
                                  const float *q, const float *out) {
  tq_status status = tq_check_cache(c);
  if (status == TQ_STATUS_OK)
    status = check_params_header("tq_attention", p->version, p->size,
                                 TQ_ATTENTION_PARAMS_VERSION_0, sizeof(*p));
  if (status != TQ_STATUS_OK)
    return status;
  return check_queries(c, p->q_indptr, p->num_q_heads, p->scale, p->softcap,
                       q, out);
}

bool tq_is_identifier(const char *s) {
  if (!*s)
    return false;
  for (; *s; ++s)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

bool tq_attention_kernel_name(const tq_kv_cache_v0 *c,
                              const tq_attention_params_v0 *p, int kind,
                              uint32_t group, char *name, size_t size) {
  if (!tq_is_identifier(c->k_format) || !tq_is_identifier(c->v_format))
    return false;
  int n = snprintf(name, size, "tq_%s_%s_%s_d%u_g%u",
                   kind == KIND_DECODE ? "decode" : "prefill", c->k_format,
                   c->v_format, c->head_dim, group);
  if (n < 0 || (size_t)n >= size)
    return false;
  if (p->causal)
    n += snprintf(name + n, size - (size_t)n, "_causal");
  if (n >= 0 && (size_t)n < size && p->window)
    n += snprintf(name + n, size - (size_t)n, "_w%u", p->window);
  if (n < 0 || (size_t)n >= size)
    return false;
  if (p->softcap > 0.0f || p->softcap != p->softcap)
    return tq_softcap_suffix(p->softcap, name + n, size - (size_t)n);
  return true;
}

bool tq_softcap_suffix(float softcap, char *out, size_t size) {
  if (!(softcap > 0.0f && softcap <= TQ_MAX_SOFTCAP))
    return false;
  const long long hundredths = llround((double)softcap * 100.0);
  int n;
  if ((float)((double)hundredths / 100.0) == softcap) {
    n = snprintf(out, size, "_sc%lld", hundredths);
  } else {
    uint32_t bits;
    memcpy(&bits, &softcap, sizeof bits);
    n = snprintf(out, size, "_scx%08x", (unsigned)bits);
  }
  return n >= 0 && (size_t)n < size;
}

bool tq_append_kernel_name(const char *format, uint32_t head_dim, char *name,
                           size_t size) {
  if (!tq_is_identifier(format))
    return false;
  int n = snprintf(name, size, "tq_append_%s_d%u", format, head_dim);
  return n >= 0 && (size_t)n < size;
}

bool tq_append_info_matches(const int64_t *info, uint32_t head_dim,
                            uint32_t row_bytes) {
  return info[INFO_KIND] == KIND_APPEND && info[INFO_HEAD_DIM] == head_dim &&
         info[INFO_K_ROW_BYTES] == (int64_t)row_bytes;
}

tq_status tq_check_append_call(const tq_kv_cache_v0 *c, uint32_t seq,
                               uint64_t start, uint32_t num_rows,
                               const float *k_rows, const float *v_rows) {
  tq_status status = tq_check_cache(c);
  if (status != TQ_STATUS_OK)
    return status;
  if (seq >= c->num_seqs)
    return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                   "append: sequence %u of a cache of %u", seq, c->num_seqs);
  if (num_rows == 0)
    return TQ_STATUS_OK;
  if (!k_rows || !v_rows)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "append: k_rows and v_rows must be set");
  /* The tokens the sequence's pages hold. */
  const uint64_t capacity =
      tq_layout_kind(c) == TQ_LAYOUT_CONTIGUOUS
          ? c->page_size
          : (uint64_t)(c->indptr[seq + 1] - c->indptr[seq]) * c->page_size;
  if (start > capacity || num_rows > capacity - start)
    return tq_fail(TQ_STATUS_OUT_OF_RANGE,
                   "append: rows [%llu, %llu) of sequence %u, whose pages "
                   "hold %llu tokens",
                   (unsigned long long)start,
                   (unsigned long long)start + num_rows, seq,
                   (unsigned long long)capacity);
  return TQ_STATUS_OK;
}

bool tq_ggml_attention_kernel_name(bool decode, const char *k_format,
                                   const char *v_format, int64_t dk,
                                   int64_t dv, int64_t group, float softcap,
                                   char *name, size_t size) {
  if (!tq_is_identifier(k_format) || !tq_is_identifier(v_format))
    return false;
  char vdim[32] = "";
  if (dv != dk)
    snprintf(vdim, sizeof vdim, "_dv%lld", (long long)dv);
  int n = snprintf(name, size, "tq_ggml_%s_%s_%s_d%lld%s_g%lld",
                   decode ? "decode" : "prefill", k_format, v_format,
                   (long long)dk, vdim, (long long)group);
  if (n < 0 || (size_t)n >= size)
    return false;
  if (softcap > 0.0f || softcap != softcap)
    return tq_softcap_suffix(softcap, name + n, size - (size_t)n);
  return true;
}

tq_status tq_check_attention_call_v1(const tq_kv_cache_v0 *c,
                                     const tq_attention_params_v1 *p,
                                     const float *q, const float *out) {
  tq_status status = tq_check_cache(c);
  if (status == TQ_STATUS_OK)
    status = check_params_header("tq_attention_v1", p->version, p->size,
                                 TQ_ATTENTION_PARAMS_VERSION_1, sizeof(*p));
  if (status == TQ_STATUS_OK)
    status = check_queries(c, p->q_indptr, p->num_q_heads, p->scale,
                           p->softcap, q, out);
  if (status != TQ_STATUS_OK)
    return status;
  if (p->mask && p->mask_row_stride == 0)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT,
                   "attention params: a mask needs mask_row_stride > 0");
  return TQ_STATUS_OK;
}

/* tq_last_error's message, per thread. */
static _Thread_local char last_error[1024];

const char *tq_last_error(void) { return last_error; }

tq_status tq_fail(tq_status status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error, sizeof last_error, format, args);
  va_end(args);
  return status;
}

void tq_merge_parts(const float *outs, const float *lses, int64_t stride,
                    int64_t parts, int64_t dv, float *out) {
  float top = -INFINITY;
  for (int64_t j = 0; j < parts; ++j)
    if (lses[j * stride] > top)
      top = lses[j * stride];
  for (int64_t d = 0; d < dv; ++d)
    out[d] = 0.0f;
  if (top == -INFINITY)
    return;
  float total = 0.0f;
  for (int64_t j = 0; j < parts; ++j) {
    const float lse = lses[j * stride];
    if (lse == -INFINITY)
      continue;
    const float w = expf(lse - top);
    total += w;
    for (int64_t d = 0; d < dv; ++d)
      out[d] += w * outs[j * stride + d];
  }
  const float inv = 1.0f / total;
  for (int64_t d = 0; d < dv; ++d)
    out[d] *= inv;
}

/*--- AMX tiles ---------------------------------------------------------*/

#if defined(__linux__) && defined(__x86_64__)
/* Whether this process may use AMX tile data (XFEATURE_XTILEDATA, bit 18
 * of ARCH_GET_XCOMP_PERM's answer). A grant lasts for the process, so
 * once seen it is remembered: kernels are looked up on every call. */
static bool amx_granted(void) {
  static atomic_bool granted;
  if (atomic_load_explicit(&granted, memory_order_relaxed))
    return true;
  unsigned long features = 0;
  enum { ARCH_GET_XCOMP_PERM_ = 0x1022, XFEATURE_XTILEDATA_ = 18 };
  if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM_, &features) != 0 ||
      !((features >> XFEATURE_XTILEDATA_) & 1))
    return false;
  atomic_store_explicit(&granted, true, memory_order_relaxed);
  return true;
}
#else
static bool amx_granted(void) { return false; }
#endif

tq_status tq_check_amx_grant(void *library, const char *name) {
  char symbol[512];
  if (snprintf(symbol, sizeof symbol, "%s_uses_amx", name) >=
      (int)sizeof symbol)
    return tq_fail(TQ_STATUS_INVALID_ARGUMENT, "kernel name too long: %s",
                   name);
  if (!dlsym(library, symbol) || amx_granted())
    return TQ_STATUS_OK;
  return tq_fail(TQ_STATUS_UNAVAILABLE,
                 "kernel '%s' uses AMX tiles, which Linux did not grant "
                 "this process (arch_prctl ARCH_REQ_XCOMP_PERM refused or "
                 "unsupported): rebuild the library with tq-aot --amx=off",
                 name);
}
