// rows-check: the rows a tqc KV cache holds, written through ggml, against
// tqc's own encoder and decoder (tq-quant, i.e. lib/Quant).
//
//   rows-check list
//       the tqc types of this ggml, one a line.
//   rows-check gen D N SEED OUT.f32
//       N float32 rows of D values: Gaussian rows with outlier channels at
//       several scales, and edge rows (all zero, one non-zero value,
//       constant, tiny and large norms).
//   rows-check FORMAT D IN.f32 ENC.bin DEC.f32 [TOL]
//       SET_ROWS writes IN's rows (as tokens of 2 KV heads: rows 2t and
//       2t+1 are token t) into shuffled cells of a [2*D, cells] cache of
//       type FORMAT on 2 threads; the bytes of each token's cell must equal
//       ENC.bin (`tq-quant encode --format FORMAT --dim D IN.f32 ENC.bin`)
//       byte for byte, and GET_ROWS of those cells must match DEC.f32
//       (`tq-quant decode ... ENC.bin DEC.f32`) within TOL (default 1e-5)
//       times the row's largest |value| (the decoders round differently:
//       tqprod's QJL residual and haar4's dense rotation sum D products in
//       another order).
//
// The kernel pack comes from TQ_GGML_PACK.
#include "ggml-cpu.h"
#include "ggml-tq.h"
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_gauss(void) {
    const double u1 = ((double) (rng_next() >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = ((double) (rng_next() >> 11) + 0.5) / 9007199254740992.0;
    return (float) (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void * read_file(const char * path, size_t * size) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "rows-check: cannot read %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *size = (size_t) ftell(f);
    fseek(f, 0, SEEK_SET);
    void * data = malloc(*size ? *size : 1);
    if (fread(data, 1, *size, f) != *size) {
        fprintf(stderr, "rows-check: short read of %s\n", path);
        exit(1);
    }
    fclose(f);
    return data;
}

static int gen(int64_t D, int64_t N, uint64_t seed, const char * path) {
    rng_state = seed;
    float * x = calloc((size_t) (D * N), sizeof(float));
    for (int64_t r = 0; r < N; ++r) {
        float * row = x + r * D;
        switch (r) {
            case 3:  // all zero
                break;
            case 5:  // one non-zero value
                row[D / 3] = -2.5f;
                break;
            case 8:  // constant
                for (int64_t d = 0; d < D; ++d) row[d] = 0.75f;
                break;
            case 11:  // tiny norm
                for (int64_t d = 0; d < D; ++d) row[d] = 1e-4f * rng_gauss();
                break;
            case 12:  // large norm (fp16 norms stay finite: ~100 * sqrt(D))
                for (int64_t d = 0; d < D; ++d) row[d] = 100.0f * rng_gauss();
                break;
            default: {  // Gaussian, outlier channels, per-row scale 0.1 .. 10
                const float scale = powf(10.0f, (float) (r % 5) * 0.5f - 1.0f);
                for (int64_t d = 0; d < D; ++d) {
                    row[d] = scale * (rng_gauss() * (d == 3 ? 12.0f : d == 37 ? -18.0f : 1.0f) + (d == 9 ? 1.5f : 0.0f));
                }
            }
        }
    }
    FILE * f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof(float), (size_t) (D * N), f) != (size_t) (D * N) || fclose(f) != 0) {
        fprintf(stderr, "rows-check: cannot write %s\n", path);
        return 1;
    }
    free(x);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            if (ggml_is_tq_type((enum ggml_type) t)) {
                printf("%s\n", ggml_type_name((enum ggml_type) t));
            }
        }
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "gen") == 0) {
        return gen(atoll(argv[2]), atoll(argv[3]), strtoull(argv[4], NULL, 10), argv[5]);
    }
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: rows-check list\n"
                        "       rows-check gen D N SEED OUT.f32\n"
                        "       rows-check FORMAT D IN.f32 ENC.bin DEC.f32 [TOL]\n");
        return 2;
    }
    const char * name = argv[1];
    const int64_t D = atoll(argv[2]);
    const double tol = argc == 7 ? atof(argv[6]) : 1e-5;
    enum ggml_type type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (ggml_is_tq_type((enum ggml_type) t) && strcmp(ggml_type_name((enum ggml_type) t), name) == 0) {
            type = (enum ggml_type) t;
        }
    }
    if (type == GGML_TYPE_COUNT) {
        fprintf(stderr, "rows-check: %s is not a tqc type of this ggml\n", name);
        return 2;
    }
    char err[1024];
    if (!ggml_tq_set_head_dim(type, D, err, sizeof err)) {
        fprintf(stderr, "rows-check: %s\n", err);
        return 1;
    }
    size_t in_size, enc_size, dec_size;
    float * x = read_file(argv[3], &in_size);
    unsigned char * enc = read_file(argv[4], &enc_size);
    float * dec = read_file(argv[5], &dec_size);
    const int64_t heads = 2;
    const int64_t N = (int64_t) (in_size / (sizeof(float) * D));
    const size_t row = ggml_row_size(type, D);
    if (N == 0 || N % heads || in_size != (size_t) N * D * sizeof(float)) {
        fprintf(stderr, "rows-check: %s must hold an even number of rows of %lld floats\n", argv[3], (long long) D);
        return 2;
    }
    if (enc_size != (size_t) N * row) {
        fprintf(stderr, "rows-check: FAIL: %s has %zu bytes; %lld rows of %s at head dim %lld are %zu bytes in ggml\n",
                argv[4], enc_size, (long long) N, name, (long long) D, (size_t) N * row);
        return 1;
    }
    if (dec_size != in_size) {
        fprintf(stderr, "rows-check: %s and %s differ in size\n", argv[3], argv[5]);
        return 2;
    }

    const int64_t tokens = N / heads, cells = tokens + 9;
    struct ggml_init_params ip = { (size_t) 64 << 20, NULL, false };
    struct ggml_context * ctx = ggml_init(ip);
    struct ggml_tensor * cache = ggml_new_tensor_2d(ctx, type, D * heads, cells);
    struct ggml_tensor * src   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D * heads, tokens);
    struct ggml_tensor * idx   = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, tokens);
    struct ggml_tensor * gidx  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, tokens);
    memset(cache->data, 0x5a, ggml_nbytes(cache));
    memcpy(src->data, x, in_size);
    // Token t goes to cell perm[t]: a shuffled permutation of the cells.
    int64_t * perm = malloc(sizeof(int64_t) * cells);
    rng_state = 99;
    for (int64_t c = 0; c < cells; ++c) perm[c] = c;
    for (int64_t i = cells - 1; i > 0; --i) {
        const int64_t j = (int64_t) (rng_next() % (uint64_t) (i + 1));
        const int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int64_t t = 0; t < tokens; ++t) {
        ((int64_t *) idx->data)[t] = perm[t];
        ((int32_t *) gidx->data)[t] = (int32_t) perm[t];
    }
    struct ggml_tensor * set = ggml_set_rows(ctx, cache, src, idx);
    struct ggml_tensor * get = ggml_get_rows(ctx, set, gidx);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, get);
    if (ggml_graph_compute_with_ctx(ctx, gf, 2) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "rows-check: graph compute failed\n");
        return 1;
    }

    int failures = 0;
    int64_t bad_rows = 0, first_bad = -1;
    for (int64_t t = 0; t < tokens; ++t) {
        const unsigned char * got = (const unsigned char *) cache->data + perm[t] * cache->nb[1];
        for (int64_t h = 0; h < heads; ++h) {
            if (memcmp(got + h * row, enc + (t * heads + h) * row, row) != 0) {
                bad_rows++;
                if (first_bad < 0) first_bad = t * heads + h;
            }
        }
    }
    if (bad_rows) {
        const int64_t r = first_bad;
        const unsigned char * got = (const unsigned char *) cache->data + perm[r / heads] * cache->nb[1] + (r % heads) * row;
        size_t b = 0;
        while (b < row && got[b] == enc[r * row + b]) ++b;
        printf("FAIL: %s d%lld: SET_ROWS bytes differ from tq-quant encode in %lld of %lld rows "
               "(first: row %lld, byte %zu: ggml 0x%02x, tq-quant 0x%02x)\n",
               name, (long long) D, (long long) bad_rows, (long long) N, (long long) r, b, got[b], enc[r * row + b]);
        failures++;
    } else {
        printf("ok    %s d%lld: SET_ROWS bytes of %lld rows (%zu bytes each) == tq-quant encode\n", name,
               (long long) D, (long long) N, row);
    }
    // Cells no token went to keep their bytes.
    int untouched = 1;
    for (int64_t t = tokens; t < cells; ++t) {
        const unsigned char * c = (const unsigned char *) cache->data + perm[t] * cache->nb[1];
        for (size_t b = 0; b < cache->nb[1]; ++b) untouched &= c[b] == 0x5a;
    }
    printf("%s  %s d%lld: cells SET_ROWS did not name are untouched\n", untouched ? "ok  " : "FAIL", name, (long long) D);
    failures += !untouched;

    // Decoded values are compared relative to their row's largest value
    // (the scale the decoder's rounding is relative to; an all-zero row
    // must decode to exact zeros).
    double max_diff = 0.0;
    int64_t worst = 0;
    for (int64_t r = 0; r < N; ++r) {
        double row_max = 0.0;
        for (int64_t d = 0; d < D; ++d) {
            row_max = fmax(row_max, fabs((double) dec[r * D + d]));
        }
        for (int64_t d = 0; d < D; ++d) {
            const int64_t i = r * D + d;
            const double diff = fabs((double) ((const float *) get->data)[i] - (double) dec[i]);
            const double rel = row_max > 0.0 ? diff / row_max : diff;
            if (!(rel <= max_diff)) {
                max_diff = isnan(rel) ? INFINITY : rel;
                worst = i;
            }
        }
    }
    const int dec_ok = max_diff <= tol;
    printf("%s  %s d%lld: GET_ROWS vs tq-quant decode: max |diff| / row's max |value| = %.3g at row %lld "
           "(ggml %.9g, tq-quant %.9g; tolerance %g)\n",
           dec_ok ? "ok  " : "FAIL", name, (long long) D, max_diff, (long long) (worst / D),
           (double) ((const float *) get->data)[worst], (double) dec[worst], tol);
    failures += !dec_ok;

    free(perm);
    free(x);
    free(enc);
    free(dec);
    ggml_free(ctx);
    return failures ? 1 : 0;
}
