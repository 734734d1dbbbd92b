// fa-check: GGML_OP_FLASH_ATTN_EXT over tqc-typed K/V tensors, run through
// the patched ggml's CPU backend, against a double-precision attention
// computed here from the cache rows decoded by each type's to_float.
//
// Every case builds the graph llama.cpp builds for one layer: SET_ROWS
// writes f32 K and V rows into caches of kv_size cells x n_stream streams
// ([D*n_head_kv, kv_size*n_stream], rows at shuffled cell indices, as
// llama_kv_cache::cpy_k/cpy_v do), FLASH_ATTN_EXT reads them through
// llama_kv_cache::get_k's view ([D, n_head_kv, n_kv, ns] over streams s0..,
// permuted (0, 2, 1, 3)), Q is a permuted view of [D, n_head, n_q, ns], the
// mask is f16 [n_kv, >= n_q, 1, ns]. The graph runs on 1..4 threads
// (ggml_graph_compute_with_ctx) and every run must match the reference:
//
//   max |ggml - reference| <= tol (default 1e-4; V rows are O(1), so the
//   outputs are O(1) weighted means of them)
//
// and a query row whose every logit is -inf must come out as exact zeros
// (ggml's CPU kernel gives zeros, with or without a sink).
//
// Mask patterns (each with 1, 7 and 64 query rows by default):
//   causal   one stream, 200 of 256 cells used, the rest never written
//   window   causal + sliding window of 40, stale rows past n_kv
//   streams  3-stream cache, the view covers streams 1..2 (offset view),
//            each with its own fill (150, 256) and causal mask
//   unified  two sequences interleaved in one stream's cells (1 in 3 cells
//            belongs to sequence 1), queries from both
//   padded   130 cells used, stale rows (x50) in the masked cells, mask
//            with 5 spare rows, query row 0 hidden (all -inf; with one
//            query row, that row)
//   alibi    ALiBi (max_bias 8, mask = -distance)
//   sinks    attention sinks, query row 0 hidden (with more than one row)
//   mixed    2 streams, window 64, ALiBi 4, sinks, stale rows, last row
//            hidden (with more than one row), 3 spare mask rows
//
//   fa-check --pairs=K:V[,K:V...] --dk=D [--dv=DV] [--gqa=1,2,4,7,8]
//            [--rows=1,7,64] [--threads=1,2,3,4] [--patterns=all|p,q]
//            [--softcap=C] [--qscale=S] [--tol=T] [--seed=N] [--kv=N] [-v]
//
// --kv=N (default 256, at most 2048) sets the cells the view covers; the
// patterns' used cells scale with it. With N >= 512 a one-row query over
// fewer KV heads than threads makes the bridge split each head's tokens
// over the threads and merge the parts (tq_ggml_flash_attn_ext_threads).
//
// K and V are f16, q8_0 or tqc types (a tqc type has one head dim per
// process, so a tqc type may not appear at both DK and DV != DK). The
// kernel pack comes from TQ_GGML_PACK.
#include "ggml-cpu.h"
#include "ggml-tq.h"
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 16

typedef struct {
    enum ggml_type k, v;
} pair_t;

static struct {
    pair_t pairs[MAX_LIST];
    int    n_pairs;
    int64_t dk, dv;
    int    gqa[MAX_LIST], n_gqa;
    int    rows[MAX_LIST], n_rows;
    int    threads[MAX_LIST], n_threads;
    unsigned patterns;  // bit per pattern
    float  softcap, qscale;
    double tol;
    uint64_t seed;
    int64_t n_kv;
    int    verbose;
} opt;

#define MAX_KV 2048
#define MAX_CELLS (MAX_KV + 64)

// ---- random numbers (splitmix64, Box-Muller) ----------------------------

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(void) {  // (0, 1)
    return ((double) (rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

static float rng_gauss(void) {
    return (float) (sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform()));
}

// ---- patterns --------------------------------------------------------------

enum { P_CAUSAL, P_WINDOW, P_STREAMS, P_UNIFIED, P_PADDED, P_ALIBI, P_SINKS, P_MIXED, P_COUNT };
static const char * const pattern_names[P_COUNT] = {
    "causal", "window", "streams", "unified", "padded", "alibi", "sinks", "mixed",
};

typedef struct {
    int     ns_total;       // streams in the cache
    int     s0, ns;         // streams the view covers
    int64_t n_used[3];      // cells used per cache stream
    int64_t window;         // 0: none
    int     unified;        // two sequences in one stream
    int     stale;          // unused cells hold garbage rows (else never written)
    int64_t mask_pad;       // spare mask rows
    int     hidden;         // 0 none, 1 first query row, 2 last query row
    float   max_bias;
    int     sinks;
} pattern_t;

static pattern_t pattern_get(int p) {
    pattern_t c;
    memset(&c, 0, sizeof c);
    c.ns_total = 1;
    c.ns = 1;
    c.n_used[0] = 200;
    switch (p) {
        case P_CAUSAL:
            break;
        case P_WINDOW:
            c.n_used[0] = 256;
            c.window = 40;
            c.stale = 1;
            break;
        case P_STREAMS:
            c.ns_total = 3;
            c.s0 = 1;
            c.ns = 2;
            c.n_used[0] = 256;
            c.n_used[1] = 150;
            c.n_used[2] = 256;
            c.stale = 1;
            break;
        case P_UNIFIED:
            c.n_used[0] = 240;
            c.unified = 1;
            break;
        case P_PADDED:
            c.n_used[0] = 130;
            c.stale = 1;
            c.mask_pad = 5;
            c.hidden = 1;
            break;
        case P_ALIBI:
            c.max_bias = 8.0f;
            break;
        case P_SINKS:
            c.sinks = 1;
            c.hidden = 1;
            break;
        case P_MIXED:
            c.ns_total = 2;
            c.ns = 2;
            c.n_used[0] = 180;
            c.n_used[1] = 256;
            c.window = 64;
            c.max_bias = 4.0f;
            c.sinks = 1;
            c.stale = 1;
            c.mask_pad = 3;
            c.hidden = 2;
            break;
    }
    // The counts above are of 256 cells; --kv scales them.
    for (int st = 0; st < 3; ++st) {
        c.n_used[st] = c.n_used[st] * opt.n_kv / 256;
    }
    return c;
}

// ---- helpers ---------------------------------------------------------------

static enum ggml_type type_by_name(const char * name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * n = ggml_type_name((enum ggml_type) t);
        if (n && strcmp(n, name) == 0) {
            return (enum ggml_type) t;
        }
    }
    return GGML_TYPE_COUNT;
}

static int parse_ints(const char * s, int * out) {
    int n = 0;
    while (*s && n < MAX_LIST) {
        char * end;
        out[n++] = (int) strtol(s, &end, 10);
        if (end == s) {
            return -1;
        }
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void usage(void) {
    fprintf(stderr,
            "usage: fa-check --pairs=K:V[,K:V...] --dk=D [--dv=DV] [--gqa=1,2,4,7,8] [--rows=1,7,64]\n"
            "                [--threads=1,2,3,4] [--patterns=all|causal,window,...] [--softcap=C]\n"
            "                [--qscale=S] [--tol=T] [--seed=N] [--kv=N (64..2048)] [-v]\n");
    exit(2);
}

static void parse_args(int argc, char ** argv) {
    opt.dk = 0;
    opt.dv = 0;
    opt.n_kv = 256;
    opt.n_gqa = parse_ints("1,2,4,7,8", opt.gqa);
    opt.n_rows = parse_ints("1,7,64", opt.rows);
    opt.n_threads = parse_ints("1,2,3,4", opt.threads);
    opt.patterns = (1u << P_COUNT) - 1;
    opt.softcap = 0.0f;
    opt.qscale = 1.0f;
    opt.tol = 1e-4;
    opt.seed = 20260525;
    for (int i = 1; i < argc; ++i) {
        const char * a = argv[i];
        const char * eq = strchr(a, '=');
        const char * val = eq ? eq + 1 : "";
        if (strncmp(a, "--pairs=", 8) == 0) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", val);
            for (char * tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                char * colon = strchr(tok, ':');
                if (!colon || opt.n_pairs == MAX_LIST) {
                    usage();
                }
                *colon = 0;
                pair_t p = { type_by_name(tok), type_by_name(colon + 1) };
                if (p.k == GGML_TYPE_COUNT || p.v == GGML_TYPE_COUNT) {
                    fprintf(stderr, "fa-check: unknown type in %s:%s\n", tok, colon + 1);
                    exit(2);
                }
                opt.pairs[opt.n_pairs++] = p;
            }
        } else if (strncmp(a, "--dk=", 5) == 0) {
            opt.dk = atoll(val);
        } else if (strncmp(a, "--dv=", 5) == 0) {
            opt.dv = atoll(val);
        } else if (strncmp(a, "--gqa=", 6) == 0) {
            opt.n_gqa = parse_ints(val, opt.gqa);
        } else if (strncmp(a, "--rows=", 7) == 0) {
            opt.n_rows = parse_ints(val, opt.rows);
        } else if (strncmp(a, "--threads=", 10) == 0) {
            opt.n_threads = parse_ints(val, opt.threads);
        } else if (strncmp(a, "--softcap=", 10) == 0) {
            opt.softcap = (float) atof(val);
        } else if (strncmp(a, "--qscale=", 9) == 0) {
            opt.qscale = (float) atof(val);
        } else if (strncmp(a, "--tol=", 6) == 0) {
            opt.tol = atof(val);
        } else if (strncmp(a, "--seed=", 7) == 0) {
            opt.seed = strtoull(val, NULL, 10);
        } else if (strncmp(a, "--kv=", 5) == 0) {
            opt.n_kv = atoll(val);
        } else if (strncmp(a, "--patterns=", 11) == 0) {
            if (strcmp(val, "all") != 0) {
                opt.patterns = 0;
                char buf[256];
                snprintf(buf, sizeof buf, "%s", val);
                for (char * tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                    int found = 0;
                    for (int p = 0; p < P_COUNT; ++p) {
                        if (strcmp(tok, pattern_names[p]) == 0) {
                            opt.patterns |= 1u << p;
                            found = 1;
                        }
                    }
                    if (!found) {
                        fprintf(stderr, "fa-check: unknown pattern %s\n", tok);
                        exit(2);
                    }
                }
            }
        } else if (strcmp(a, "-v") == 0) {
            opt.verbose = 1;
        } else {
            usage();
        }
    }
    if (opt.dv == 0) {
        opt.dv = opt.dk;
    }
    if (opt.n_pairs == 0 || opt.dk <= 0 || opt.n_gqa <= 0 || opt.n_rows <= 0 || opt.n_threads <= 0 ||
        opt.n_kv < 64 || opt.n_kv > MAX_KV) {
        usage();
    }
}

static int set_head_dim(enum ggml_type type, int64_t d) {
    if (!ggml_is_tq_type(type)) {
        return 1;
    }
    char err[1024];
    if (!ggml_tq_set_head_dim(type, d, err, sizeof err)) {
        fprintf(stderr, "fa-check: %s\n", err);
        return 0;
    }
    return 1;
}

// ---- one case --------------------------------------------------------------

typedef struct {
    double max_diff, max_ref;
    int    hidden_ok;
    int    bytes_stable;
} result_t;

// Cell metadata of one cache stream: sequence and position of each cell.
typedef struct {
    int     seq[MAX_CELLS];
    int64_t pos[MAX_CELLS];
} cells_t;

static int run_case(pair_t pr, int G, int nq, int p, result_t * res) {
    const pattern_t pc = pattern_get(p);
    const int64_t DK = opt.dk, DV = opt.dv;
    const int64_t HKV = G == 1 ? 3 : G >= 8 ? 1 : 2;
    const int64_t H = HKV * G;
    const int64_t n_kv = opt.n_kv, kv_size = n_kv + 64;
    const int ns_total = pc.ns_total, ns = pc.ns, s0 = pc.s0;
    const int64_t nq_mask = nq + pc.mask_pad;

    // Cells: sequence ids and positions per cache stream.
    cells_t cells[3];
    for (int s = 0; s < ns_total; ++s) {
        int64_t next[2] = { 0, 0 };
        for (int64_t c = 0; c < kv_size; ++c) {
            const int sq = pc.unified && c % 3 == 1 ? 1 : 0;
            cells[s].seq[c] = sq;
            cells[s].pos[c] = c < pc.n_used[s] ? next[sq]++ : -1;
        }
    }

    const size_t ctx_size = (size_t) 256 << 20;
    struct ggml_init_params ip = { ctx_size, NULL, false };
    struct ggml_context * ctx = ggml_init(ip);
    if (!ctx) {
        fprintf(stderr, "fa-check: ggml_init failed\n");
        return 0;
    }

    // Caches and the rows SET_ROWS writes into them.
    struct ggml_tensor * kc = ggml_new_tensor_2d(ctx, pr.k, DK * HKV, kv_size * ns_total);
    struct ggml_tensor * vc = ggml_new_tensor_2d(ctx, pr.v, DV * HKV, kv_size * ns_total);
    memset(kc->data, 0, ggml_nbytes(kc));
    memset(vc->data, 0, ggml_nbytes(vc));
    // Written cells: used cells of every stream, plus every other cell when
    // stale rows are wanted (masked, or outside the view).
    int64_t n_write = 0;
    int64_t * order = malloc(sizeof(int64_t) * kv_size * ns_total);
    for (int s = 0; s < ns_total; ++s) {
        for (int64_t c = 0; c < kv_size; ++c) {
            if (c < pc.n_used[s] || pc.stale) {
                order[n_write++] = s * kv_size + c;
            }
        }
    }
    for (int64_t i = n_write - 1; i > 0; --i) {  // shuffled, as a batch's slots may be
        const int64_t j = (int64_t) (rng_next() % (uint64_t) (i + 1));
        const int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    struct ggml_tensor * kx   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, DK * HKV, n_write);
    struct ggml_tensor * vx   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, DV * HKV, n_write);
    struct ggml_tensor * kidx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_write);
    struct ggml_tensor * vidx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_write);
    for (int64_t r = 0; r < n_write; ++r) {
        const int64_t s = order[r] / kv_size, c = order[r] % kv_size;
        const float amp = c < pc.n_used[s] ? 1.0f : 50.0f;  // stale rows are large
        ((int64_t *) kidx->data)[r] = order[r];
        ((int64_t *) vidx->data)[r] = order[r];
        float * kr = (float *) ((char *) kx->data + r * kx->nb[1]);
        float * vr = (float *) ((char *) vx->data + r * vx->nb[1]);
        for (int64_t i = 0; i < DK * HKV; ++i) {
            const int64_t d = i % DK;
            kr[i] = amp * rng_gauss() * (d == 3 ? 8.0f : d == 17 ? -5.0f : 1.0f) + (d == 5 ? 2.0f : 0.0f);
        }
        for (int64_t i = 0; i < DV * HKV; ++i) {
            vr[i] = amp * rng_gauss();
        }
    }
    struct ggml_tensor * kset = ggml_set_rows(ctx, kc, kx, kidx);
    struct ggml_tensor * vset = ggml_set_rows(ctx, vc, vx, vidx);

    // llama_kv_cache::get_k / get_v, then build_attn_mha's permute.
    const size_t krow = ggml_row_size(pr.k, DK), vrow = ggml_row_size(pr.v, DV);
    struct ggml_tensor * k = ggml_view_4d(ctx, kset, DK, HKV, n_kv, ns, krow, krow * HKV,
                                          krow * HKV * kv_size, krow * HKV * kv_size * s0);
    struct ggml_tensor * v = ggml_view_4d(ctx, vset, DV, HKV, n_kv, ns, vrow, vrow * HKV,
                                          vrow * HKV * kv_size, vrow * HKV * kv_size * s0);
    k = ggml_permute(ctx, k, 0, 2, 1, 3);
    v = ggml_permute(ctx, v, 0, 2, 1, 3);

    // Queries: the last nq used cells of each viewed stream (their K rows are
    // in the cache, as in a prefill ubatch), [D, H, nq, ns] permuted.
    struct ggml_tensor * q0 = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, DK, H, nq, ns);
    for (int64_t i = 0; i < ggml_nelements(q0); ++i) {
        ((float *) q0->data)[i] = opt.qscale * rng_gauss();
    }
    struct ggml_tensor * q = ggml_permute(ctx, q0, 0, 2, 1, 3);

    // Mask [n_kv, nq_mask, 1, ns].
    struct ggml_tensor * mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, n_kv, nq_mask, 1, ns);
    int * hidden_row = calloc((size_t) nq * ns, sizeof(int));
    for (int s = 0; s < ns; ++s) {
        const cells_t * cl = &cells[s0 + s];
        const int64_t used = pc.n_used[s0 + s];
        for (int64_t i = 0; i < nq_mask; ++i) {
            ggml_fp16_t * mr = (ggml_fp16_t *) ((char *) mask->data + i * mask->nb[1] + s * mask->nb[3]);
            if (i >= nq) {  // spare rows: anything
                for (int64_t j = 0; j < n_kv; ++j) {
                    mr[j] = ggml_fp32_to_fp16(j % 2 ? -INFINITY : 3.0f);
                }
                continue;
            }
            const int64_t qc = used - nq + i;  // the query's own cell
            // Hidden rows: for one query row only in the padded pattern (a
            // decode whose row is all -inf); elsewhere that row is kept.
            const int hide = (nq > 1 || p == P_PADDED) &&
                             ((pc.hidden == 1 && i == 0) || (pc.hidden == 2 && i == nq - 1));
            hidden_row[s * nq + i] = hide;
            for (int64_t j = 0; j < n_kv; ++j) {
                float m = -INFINITY;
                if (!hide && j < used && cl->seq[j] == cl->seq[qc] && cl->pos[j] <= cl->pos[qc] &&
                    (pc.window == 0 || cl->pos[qc] - cl->pos[j] < pc.window)) {
                    m = pc.max_bias > 0.0f ? -(float) (cl->pos[qc] - cl->pos[j]) : 0.0f;
                }
                mr[j] = ggml_fp32_to_fp16(m);
            }
        }
    }

    struct ggml_tensor * sinks = NULL;
    if (pc.sinks) {
        sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, H);
        for (int64_t h = 0; h < H; ++h) {
            ((float *) sinks->data)[h] = 2.0f * rng_gauss();
        }
    }

    const float scale = 1.0f / sqrtf((float) DK);
    struct ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, pc.max_bias, opt.softcap);
    ggml_prec_set_acc(out, GGML_PREC_F32);  // as llama.cpp's build_attn_mha
    if (sinks) {
        ggml_flash_attn_ext_add_sinks(out, sinks);
    }
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);

    // The reference needs the cache bytes: run once, then decode every viewed
    // row with the types' to_float (the bridge's row decoder for tqc types).
    if (ggml_graph_compute_with_ctx(ctx, gf, opt.threads[0]) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "fa-check: graph compute failed\n");
        return 0;
    }
    const size_t kbytes = ggml_nbytes(kc), vbytes = ggml_nbytes(vc);
    char * kcopy = malloc(kbytes);
    char * vcopy = malloc(vbytes);
    memcpy(kcopy, kc->data, kbytes);
    memcpy(vcopy, vc->data, vbytes);

    const int64_t nrows = (int64_t) ns * HKV * n_kv;
    float * kd = malloc(sizeof(float) * nrows * DK);
    float * vd = malloc(sizeof(float) * nrows * DV);
    ggml_to_float_t k_to_float = ggml_get_type_traits(pr.k)->to_float;
    ggml_to_float_t v_to_float = ggml_get_type_traits(pr.v)->to_float;
    for (int s = 0; s < ns; ++s) {
        for (int64_t kh = 0; kh < HKV; ++kh) {
            for (int64_t j = 0; j < n_kv; ++j) {
                const int64_t r = ((int64_t) s * HKV + kh) * n_kv + j;
                const int64_t cell = (int64_t) (s0 + s) * kv_size + j;
                k_to_float((const char *) kc->data + cell * kc->nb[1] + kh * krow, kd + r * DK, DK);
                v_to_float((const char *) vc->data + cell * vc->nb[1] + kh * vrow, vd + r * DV, DV);
            }
        }
    }

    // Reference, ggml's semantics in double: logit = scale q.k (soft-capped:
    // c tanh(scale q.k / c)) + slope(h) mask; a sink is one more logit with
    // a zero value row; an all -inf row gives zeros.
    const int64_t n_out = DV * H * nq * ns;
    double * ref = malloc(sizeof(double) * n_out);
    double * lg = malloc(sizeof(double) * n_kv);
    double * acc = malloc(sizeof(double) * DV);
    const uint32_t n_head_log2 = 1u << (uint32_t) floor(log2((double) H));
    const double m0 = pow(2.0, -(double) pc.max_bias / n_head_log2);
    const double m1 = pow(2.0, -((double) pc.max_bias / 2.0) / n_head_log2);
    res->max_ref = 0.0;
    for (int s = 0; s < ns; ++s) {
        for (int64_t i = 0; i < nq; ++i) {
            const ggml_fp16_t * mr = (const ggml_fp16_t *) ((const char *) mask->data + i * mask->nb[1] + s * mask->nb[3]);
            for (int64_t h = 0; h < H; ++h) {
                const int64_t kh = h / G;
                const double slope = pc.max_bias > 0.0f
                    ? (h < n_head_log2 ? pow(m0, (double) (h + 1)) : pow(m1, (double) (2 * (h - n_head_log2) + 1)))
                    : 1.0;
                const float * qr = (const float *) ((const char *) q0->data + h * q0->nb[1] + i * q0->nb[2] + s * q0->nb[3]);
                double mx = sinks ? (double) ((const float *) sinks->data)[h] : -HUGE_VAL;
                for (int64_t j = 0; j < n_kv; ++j) {
                    const double mv = ggml_fp16_to_fp32(mr[j]);
                    if (mv == -HUGE_VAL) {
                        lg[j] = -HUGE_VAL;
                        continue;
                    }
                    const float * kr = kd + (((int64_t) s * HKV + kh) * n_kv + j) * DK;
                    double dot = 0.0;
                    for (int64_t d = 0; d < DK; ++d) {
                        dot += (double) qr[d] * (double) kr[d];
                    }
                    double l = dot * (double) scale;
                    if (opt.softcap > 0.0f) {
                        l = (double) opt.softcap * tanh(l / (double) opt.softcap);
                    }
                    lg[j] = l + slope * mv;
                    mx = lg[j] > mx ? lg[j] : mx;
                }
                double * o = ref + ((((int64_t) s * nq + i) * H + h) * DV);
                int any = 0;
                for (int64_t j = 0; j < n_kv; ++j) {
                    any |= lg[j] != -HUGE_VAL;
                }
                if (!any) {
                    memset(o, 0, sizeof(double) * DV);
                    continue;
                }
                double sum = sinks ? exp((double) ((const float *) sinks->data)[h] - mx) : 0.0;
                memset(acc, 0, sizeof(double) * DV);
                for (int64_t j = 0; j < n_kv; ++j) {
                    if (lg[j] == -HUGE_VAL) {
                        continue;
                    }
                    const double w = exp(lg[j] - mx);
                    const float * vr = vd + (((int64_t) s * HKV + kh) * n_kv + j) * DV;
                    sum += w;
                    for (int64_t d = 0; d < DV; ++d) {
                        acc[d] += w * (double) vr[d];
                    }
                }
                for (int64_t d = 0; d < DV; ++d) {
                    o[d] = acc[d] / sum;
                    res->max_ref = fabs(o[d]) > res->max_ref ? fabs(o[d]) : res->max_ref;
                }
            }
        }
    }

    // Every thread count against the reference.
    res->max_diff = 0.0;
    res->hidden_ok = 1;
    res->bytes_stable = 1;
    for (int t = 0; t < opt.n_threads; ++t) {
        if (t > 0) {
            memset(out->data, 0xff, ggml_nbytes(out));  // NaNs: every value must be written
            if (ggml_graph_compute_with_ctx(ctx, gf, opt.threads[t]) != GGML_STATUS_SUCCESS) {
                fprintf(stderr, "fa-check: graph compute failed\n");
                return 0;
            }
            res->bytes_stable &= memcmp(kcopy, kc->data, kbytes) == 0 && memcmp(vcopy, vc->data, vbytes) == 0;
        }
        for (int s = 0; s < ns; ++s) {
            for (int64_t i = 0; i < nq; ++i) {
                for (int64_t h = 0; h < H; ++h) {
                    const float * got = (const float *) ((const char *) out->data + h * out->nb[1] + i * out->nb[2] + s * out->nb[3]);
                    const double * o = ref + ((((int64_t) s * nq + i) * H + h) * DV);
                    for (int64_t d = 0; d < DV; ++d) {
                        const double diff = fabs((double) got[d] - o[d]);
                        if (!(diff <= res->max_diff)) {
                            res->max_diff = isnan(diff) ? INFINITY : diff;
                        }
                        if (hidden_row[s * nq + i] && got[d] != 0.0f) {
                            res->hidden_ok = 0;
                        }
                    }
                }
            }
        }
    }

    free(order);
    free(hidden_row);
    free(kcopy);
    free(vcopy);
    free(kd);
    free(vd);
    free(ref);
    free(lg);
    free(acc);
    ggml_free(ctx);
    return 1;
}

int main(int argc, char ** argv) {
    parse_args(argc, argv);
    for (int i = 0; i < opt.n_pairs; ++i) {
        const pair_t p = opt.pairs[i];
        if (p.k == p.v && ggml_is_tq_type(p.k) && opt.dk != opt.dv) {
            fprintf(stderr, "fa-check: %s cannot have head dim %lld for K and %lld for V in one process\n",
                    ggml_type_name(p.k), (long long) opt.dk, (long long) opt.dv);
            return 2;
        }
        if (!set_head_dim(p.k, opt.dk) || !set_head_dim(p.v, opt.dv)) {
            return 1;
        }
    }
    printf("fa-check: DK %lld DV %lld softcap %g, pack %s, tolerance %g\n", (long long) opt.dk,
           (long long) opt.dv, (double) opt.softcap, ggml_tq_pack_path(), opt.tol);

    int passed = 0, failed = 0;
    double worst = 0.0;
    rng_state = opt.seed;
    for (int pi = 0; pi < opt.n_pairs; ++pi) {
        const pair_t pr = opt.pairs[pi];
        for (int gi = 0; gi < opt.n_gqa; ++gi) {
            double pair_worst = 0.0;
            int pair_cases = 0;
            for (int p = 0; p < P_COUNT; ++p) {
                if (!(opt.patterns & (1u << p))) {
                    continue;
                }
                for (int ri = 0; ri < opt.n_rows; ++ri) {
                    result_t r;
                    if (!run_case(pr, opt.gqa[gi], opt.rows[ri], p, &r)) {
                        return 1;
                    }
                    const int ok = r.max_diff <= opt.tol && r.hidden_ok && r.bytes_stable;
                    ok ? ++passed : ++failed;
                    ++pair_cases;
                    worst = r.max_diff > worst ? r.max_diff : worst;
                    pair_worst = r.max_diff > pair_worst ? r.max_diff : pair_worst;
                    if (!ok || opt.verbose) {
                        printf("%s K %s V %s d%lld/%lld g%d rows %d %s: max |ggml - reference| %.3g "
                               "(|reference| <= %.3g)%s%s\n",
                               ok ? "ok  " : "FAIL", ggml_type_name(pr.k), ggml_type_name(pr.v),
                               (long long) opt.dk, (long long) opt.dv, opt.gqa[gi], opt.rows[ri],
                               pattern_names[p], r.max_diff, r.max_ref,
                               r.hidden_ok ? "" : ", a hidden row is not all zeros",
                               r.bytes_stable ? "" : ", SET_ROWS bytes differ between thread counts");
                    }
                }
            }
            printf("K %s V %s d%lld/%lld g%d: %d cases x threads", ggml_type_name(pr.k), ggml_type_name(pr.v),
                   (long long) opt.dk, (long long) opt.dv, opt.gqa[gi], pair_cases);
            for (int t = 0; t < opt.n_threads; ++t) {
                printf("%s%d", t ? "," : " ", opt.threads[t]);
            }
            printf(": max |ggml - reference| %.3g\n", pair_worst);
        }
    }
    printf("%d passed, %d failed (worst max |ggml - reference| %.3g, tolerance %g)\n", passed, failed, worst,
           opt.tol);
    return failed ? 1 : 0;
}
