// tq-bench-ggml: ggml's CPU FLASH_ATTN_EXT at one shape, for tq-bench's
// ggml baselines. See tq-bench-ggml.h for the API and what a case holds.
#include "tq-bench-ggml.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tqbg {
    struct ggml_context *    ctx;
    struct ggml_cgraph *     graph;
    struct ggml_threadpool * pool;
    struct ggml_cplan        plan;
    uint8_t *                work;
    uint64_t                 bytes;
};

static _Thread_local char last_error[512];

static void set_error(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

int tqbg_abi_version(void) {
    return TQBG_ABI_VERSION;
}

const char * tqbg_describe(void) {
    static char text[128];
    snprintf(text, sizeof text, "ggml %s (commit %s), CPU backend", ggml_version(), ggml_commit());
    return text;
}

const char * tqbg_error(void) {
    return last_error;
}

// splitmix64 and Box-Muller, as fa-check.c.
static uint64_t rng_next(uint64_t * s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_gauss(uint64_t * s) {
    const double u1 = ((double) (rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = ((double) (rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    return (float) (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// The K/V types ggml's CPU flash attention reads through its vec_dot and
// to_float paths (tqc types need the bridge's kernel pack: not here).
static const char * const kv_types[] = { "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0" };

static int type_by_name(const char * name, enum ggml_type * out) {
    for (size_t i = 0; i < sizeof kv_types / sizeof kv_types[0]; ++i) {
        if (strcmp(name, kv_types[i]) != 0) {
            continue;
        }
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            const char * n = ggml_type_name((enum ggml_type) t);
            if (n && strcmp(n, name) == 0) {
                *out = (enum ggml_type) t;
                return 1;
            }
        }
    }
    return 0;
}

// `distinct` tokens of `heads` rows each, encoded in `type` from Gaussian
// values: [distinct * heads] rows of row_bytes.
static uint8_t * encoded_tokens(enum ggml_type type, int64_t d, int64_t heads, int64_t distinct, uint64_t * rng) {
    const int64_t n_rows = distinct * heads;
    float * values = malloc(sizeof(float) * (size_t) (n_rows * d));
    uint8_t * rows = malloc(ggml_row_size(type, d) * (size_t) n_rows);
    if (!values || !rows) {
        free(values);
        free(rows);
        return NULL;
    }
    for (int64_t i = 0; i < n_rows * d; ++i) {
        values[i] = rng_gauss(rng);
    }
    ggml_quantize_chunk(type, values, rows, 0, n_rows, d, NULL);
    free(values);
    return rows;
}

// Fills a K or V tensor of `context` cells x `heads` heads: cell t holds
// distinct token t % distinct; row (t, h) lies at (h * context + t) rows
// (contiguous) or (t * heads + h) rows (cache).
static void fill_cache(uint8_t * dst, const uint8_t * tokens, size_t row, int64_t heads, int64_t context,
                       int64_t distinct, int cache_layout) {
    for (int64_t t = 0; t < context; ++t) {
        const uint8_t * src = tokens + (size_t) ((t % distinct) * heads) * row;
        if (cache_layout) {
            memcpy(dst + (size_t) (t * heads) * row, src, row * (size_t) heads);
        } else {
            for (int64_t h = 0; h < heads; ++h) {
                memcpy(dst + (size_t) (h * context + t) * row, src + (size_t) h * row, row);
            }
        }
    }
}

tqbg * tqbg_create(const char * type_name, const char * layout, int head_dim, int q_heads, int kv_heads,
                   int64_t context, int rows, int threads) {
    last_error[0] = 0;
    enum ggml_type type;
    if (!type_name || !type_by_name(type_name, &type)) {
        set_error("unsupported K/V type '%s' (f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0)",
                  type_name ? type_name : "(null)");
        return NULL;
    }
    int cache_layout;
    if (layout && strcmp(layout, "contiguous") == 0) {
        cache_layout = 0;
    } else if (layout && strcmp(layout, "cache") == 0) {
        cache_layout = 1;
    } else {
        set_error("unknown layout '%s' (contiguous, cache)", layout ? layout : "(null)");
        return NULL;
    }
    if (head_dim <= 0 || q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0) {
        set_error("bad heads: head dim %d, %d query heads, %d KV heads (query heads a multiple of KV heads)",
                  head_dim, q_heads, kv_heads);
        return NULL;
    }
    if (head_dim % ggml_blck_size(type) != 0) {
        set_error("head dim %d is not a multiple of %s's block of %d", head_dim, type_name,
                  (int) ggml_blck_size(type));
        return NULL;
    }
    if (context <= 0 || rows <= 0 || rows > context || threads <= 0 || threads > GGML_MAX_N_THREADS) {
        set_error("bad context %lld / rows %d / threads %d", (long long) context, rows, threads);
        return NULL;
    }

    ggml_cpu_init();
    const int64_t D = head_dim, H = q_heads, HKV = kv_heads, n_kv = context, nq = rows;
    const size_t row = ggml_row_size(type, D);
    const size_t kv_bytes = row * (size_t) (HKV * n_kv);
    const size_t q_bytes = sizeof(float) * (size_t) (D * H * nq);
    const size_t mask_bytes = sizeof(ggml_fp16_t) * (size_t) (n_kv * nq);
    const size_t mem = 2 * kv_bytes + 2 * q_bytes + mask_bytes + 16 * ggml_tensor_overhead() +
                       ggml_graph_overhead() + ((size_t) 1 << 20);

    tqbg * h = calloc(1, sizeof *h);
    if (!h) {
        set_error("out of memory");
        return NULL;
    }
    struct ggml_init_params ip = { mem, NULL, false };
    h->ctx = ggml_init(ip);
    if (!h->ctx) {
        set_error("ggml_init failed (%zu bytes)", mem);
        free(h);
        return NULL;
    }
    struct ggml_context * ctx = h->ctx;

    // K and V: the same tokens (tq-bench's V pool is a copy of its K pool).
    uint64_t rng = 42;
    const int64_t distinct = n_kv < 1024 ? n_kv : 1024;
    uint8_t * tokens = encoded_tokens(type, D, HKV, distinct, &rng);
    if (!tokens) {
        set_error("out of memory");
        tqbg_destroy(h);
        return NULL;
    }
    struct ggml_tensor * kv[2];
    for (int i = 0; i < 2; ++i) {
        struct ggml_tensor * t = cache_layout ? ggml_new_tensor_2d(ctx, type, D * HKV, n_kv)
                                              : ggml_new_tensor_3d(ctx, type, D, n_kv, HKV);
        fill_cache(t->data, tokens, row, HKV, n_kv, distinct, cache_layout);
        if (cache_layout) {
            // llama_kv_cache::get_k / get_v, then build_attn_mha's permute.
            t = ggml_view_4d(ctx, t, D, HKV, n_kv, 1, row, row * HKV, row * HKV * n_kv, 0);
            t = ggml_permute(ctx, t, 0, 2, 1, 3);
        }
        kv[i] = t;
    }
    free(tokens);
    h->bytes = 2 * (uint64_t) kv_bytes;

    // Query [D, H, nq] permuted to [D, nq, H], as build_attn_mha.
    struct ggml_tensor * q0 = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, H, nq);
    for (int64_t i = 0; i < ggml_nelements(q0); ++i) {
        ((float *) q0->data)[i] = rng_gauss(&rng);
    }
    struct ggml_tensor * q = ggml_permute(ctx, q0, 0, 2, 1, 3);

    // Mask [n_kv, nq]: query row i sits at position n_kv - nq + i.
    struct ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, nq);
    const ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), minus_inf = ggml_fp32_to_fp16(-INFINITY);
    for (int64_t i = 0; i < nq; ++i) {
        ggml_fp16_t * m = (ggml_fp16_t *) ((char *) mask->data + i * mask->nb[1]);
        for (int64_t j = 0; j < n_kv; ++j) {
            m[j] = j <= n_kv - nq + i ? zero : minus_inf;
        }
    }

    struct ggml_tensor * out = ggml_flash_attn_ext(ctx, q, kv[0], kv[1], mask, 1.0f / sqrtf((float) D), 0.0f, 0.0f);
    ggml_prec_set_acc(out, GGML_PREC_F32);  // as llama.cpp's build_attn_mha
    h->graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(h->graph, out);

    struct ggml_threadpool_params tp = ggml_threadpool_params_default(threads);
    tp.paused = true;
    h->pool = ggml_threadpool_new(&tp);
    if (!h->pool) {
        set_error("ggml_threadpool_new failed (%d threads)", threads);
        tqbg_destroy(h);
        return NULL;
    }
    h->plan = ggml_graph_plan(h->graph, threads, h->pool);
    if (h->plan.work_size > 0) {
        h->work = malloc(h->plan.work_size);
        if (!h->work) {
            set_error("out of memory (work buffer of %zu bytes)", h->plan.work_size);
            tqbg_destroy(h);
            return NULL;
        }
        h->plan.work_data = h->work;
    }
    return h;
}

int tqbg_run(tqbg * h) {
    if (!h) {
        set_error("tqbg_run: null handle");
        return 1;
    }
    enum ggml_status s = ggml_graph_compute(h->graph, &h->plan);
    if (s != GGML_STATUS_SUCCESS) {
        set_error("ggml_graph_compute failed: %s", ggml_status_to_string(s));
        return 1;
    }
    return 0;
}

void tqbg_idle(tqbg * h) {
    if (h && h->pool) {
        ggml_threadpool_pause(h->pool);
    }
}

uint64_t tqbg_bytes(const tqbg * h) {
    return h ? h->bytes : 0;
}

void tqbg_destroy(tqbg * h) {
    if (!h) {
        return;
    }
    if (h->pool) {
        ggml_threadpool_free(h->pool);
    }
    free(h->work);
    if (h->ctx) {
        ggml_free(h->ctx);
    }
    free(h);
}
