// ops-check: runs the ggml ops a tqc KV cache uses on ggml's CPU backend
// and checks them against the bridge called directly:
//   SET_ROWS f32 -> tqc (from_float), GET_ROWS tqc -> f32 and CPY tqc -> f32
//   (to_float), CPY f32 -> tqc, and a second head dim for the same type
//   (refused with a message).
// build.sh compiles it against the patched ggml and runs it with the pack.
//
//   ops-check [FORMAT [HEAD_DIM]]   (default turbo3_0 256)
#include "ggml-cpu.h"
#include "ggml-tq.h"
#include "ggml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char * what) {
    printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

int main(int argc, char ** argv) {
    const char * name = argc > 1 ? argv[1] : "turbo3_0";
    const int64_t D = argc > 2 ? atoll(argv[2]) : 256;
    enum ggml_type type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (ggml_is_tq_type((enum ggml_type) t) && strcmp(ggml_type_name((enum ggml_type) t), name) == 0) {
            type = (enum ggml_type) t;
        }
    }
    if (type == GGML_TYPE_COUNT) {
        fprintf(stderr, "ops-check: %s is not a tqc type\n", name);
        return 2;
    }
    char err[1024];
    if (!ggml_tq_set_head_dim(type, D, err, sizeof err)) {
        fprintf(stderr, "ops-check: %s\n", err);
        return 1;
    }
    const size_t row = ggml_row_size(type, D);
    printf("%s at head dim %lld: blck_size %lld, row %zu bytes (pack %s)\n", name, (long long) D,
           (long long) ggml_blck_size(type), row, ggml_tq_pack_path());

    // 8 cells of 2 heads; rows 1, 6, 3 are written.
    const int64_t heads = 2, cells = 8, n = 3;
    struct ggml_init_params ip = { 64u << 20, NULL, false };
    struct ggml_context * ctx = ggml_init(ip);
    struct ggml_tensor * cache = ggml_new_tensor_2d(ctx, type, D * heads, cells);
    struct ggml_tensor * src   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D * heads, n);
    struct ggml_tensor * idx   = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n);
    struct ggml_tensor * gidx  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    memset(cache->data, 0, ggml_nbytes(cache));
    float * x = (float *) src->data;
    srand(7);
    for (int64_t i = 0; i < D * heads * n; ++i) {
        x[i] = (float) (rand() % 2001 - 1000) / 250.0f + (i % D == 5 ? 6.0f : 0.0f);
    }
    const int64_t rows[3] = { 1, 6, 3 };
    for (int i = 0; i < 3; ++i) {
        ((int64_t *) idx->data)[i]  = rows[i];
        ((int32_t *) gidx->data)[i] = (int32_t) rows[i];
    }

    struct ggml_tensor * set  = ggml_set_rows(ctx, cache, src, idx);
    struct ggml_tensor * get  = ggml_get_rows(ctx, set, gidx);
    struct ggml_tensor * all  = ggml_cpy(ctx, set, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D * heads, cells));
    struct ggml_tensor * enc  = ggml_cpy(ctx, src, ggml_new_tensor_2d(ctx, type, D * heads, n));
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, get);
    ggml_build_forward_expand(gf, all);
    ggml_build_forward_expand(gf, enc);
    check(ggml_graph_compute_with_ctx(ctx, gf, 2) == GGML_STATUS_SUCCESS, "graph computed on 2 threads");

    // The bridge's own round trip of the same rows.
    const struct ggml_type_traits * tt = ggml_get_type_traits(type);
    char * bytes = malloc(row * heads * n);
    float * back = malloc(sizeof(float) * D * heads * n);
    tt->from_float_ref(x, bytes, D * heads * n);
    tt->to_float(bytes, back, D * heads * n);

    int same_bytes = 1;
    for (int i = 0; i < 3; ++i) {
        same_bytes &= memcmp((char *) cache->data + rows[i] * cache->nb[1], bytes + i * row * heads, row * heads) == 0;
    }
    check(same_bytes, "SET_ROWS wrote the encoder's bytes into cells 1, 6, 3");
    check(memcmp(enc->data, bytes, row * heads * n) == 0, "CPY f32 -> tqc wrote the encoder's bytes");
    check(memcmp(get->data, back, sizeof(float) * D * heads * n) == 0, "GET_ROWS decoded them as to_float does");
    int cpy_ok = 1;
    for (int64_t c = 0; c < cells; ++c) {
        const float * r = (const float *) ((char *) all->data + c * all->nb[1]);
        for (int64_t j = 0; j < D * heads; ++j) {
            const float want = c == 1 ? back[j] : c == 6 ? back[D * heads + j] : c == 3 ? back[2 * D * heads + j] : 0.0f;
            cpy_ok &= r[j] == want;
        }
    }
    check(cpy_ok, "CPY tqc -> f32 of the whole cache (unwritten cells decode to 0)");
    double se = 0.0, sx = 0.0;
    for (int64_t i = 0; i < D * heads * n; ++i) {
        se += (double) (back[i] - x[i]) * (back[i] - x[i]);
        sx += (double) x[i] * x[i];
    }
    printf("      relative MSE of the round trip: %.4f\n", se / sx);
    check(se / sx < 0.5, "round trip is close to the input (1-bit polar1: 0.36)");

    check(!ggml_tq_set_head_dim(type, D / 2, err, sizeof err), "a second head dim is refused");
    printf("      %s\n", err);

    free(bytes);
    free(back);
    ggml_free(ctx);
    printf("%d passed, %d failed\n", 7 - failures, failures);
    return failures ? 1 : 0;
}
