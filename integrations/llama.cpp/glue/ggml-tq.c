// ggml-tq.c - tqc (TurboQuant) KV-cache types in ggml, through libtq_runtime's
// ggml bridge (tq/tq_ggml.h). Part of tqc's llama.cpp integration; build.sh
// copies it to ggml/src/ and the patch adds it to ggml-base.
#include "ggml-tq.h"

#include "tq/tq_ggml.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TQ_GGML_PACK_DEFAULT
#define TQ_GGML_PACK_DEFAULT "libtq_ggml_kernels.so"
#endif

#define TQ_FIRST GGML_TYPE_TURBO2_0
#define TQ_COUNT (GGML_TYPE_HAAR4 - GGML_TYPE_TURBO2_0 + 1)

static const char * const tq_build_hint =
    "build one with tqc's integrations/llama.cpp/build.sh (it runs `tq-aot --abi=ggml "
    "--k-format=F --v-format=F --head-dim=D --gqa=G -o DIR` for its list of formats), "
    "or point TQ_GGML_PACK at a libtq_ggml_kernels.so";

bool ggml_is_tq_type(enum ggml_type type) {
    return type >= TQ_FIRST && type < TQ_FIRST + TQ_COUNT;
}

const char * ggml_tq_pack_path(void) {
    const char * env = getenv("TQ_GGML_PACK");
    return env && *env ? env : TQ_GGML_PACK_DEFAULT;
}

// The pack, opened once.
static pthread_once_t   tq_pack_once = PTHREAD_ONCE_INIT;
static tq_ggml_pack   * tq_pack;
static char             tq_pack_error[1024];

static void tq_pack_open(void) {
    char err[768] = "";
    const char * path = ggml_tq_pack_path();
    tq_status st = tq_ggml_pack_open(path, &tq_pack, err, sizeof err);
    if (st != TQ_STATUS_OK || !tq_pack) {
        tq_pack = NULL;
        snprintf(tq_pack_error, sizeof tq_pack_error,
                 "tqc: cannot open the ggml kernel pack '%s': %s; %s", path, err, tq_build_hint);
    }
}

static const tq_ggml_pack * tq_pack_get(char * err, size_t err_size) {
    pthread_once(&tq_pack_once, tq_pack_open);
    if (!tq_pack && err) {
        snprintf(err, err_size, "%s", tq_pack_error);
    }
    return tq_pack;
}

static const tq_ggml_pack * tq_pack_or_abort(void) {
    const tq_ggml_pack * pack = tq_pack_get(NULL, 0);
    if (!pack) {
        GGML_ABORT("%s", tq_pack_error);
    }
    return pack;
}

// Head dims, set once per type.
static pthread_mutex_t  tq_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t  tq_head_dims[TQ_COUNT];

int64_t ggml_tq_head_dim(enum ggml_type type) {
    return ggml_is_tq_type(type) ? atomic_load(&tq_head_dims[type - TQ_FIRST]) : 0;
}

// Cache types a layer may be given besides the tqc types.
static bool tq_plain_cache_type(enum ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1:
        case GGML_TYPE_IQ4_NL:
            return true;
        default:
            return false;
    }
}

bool ggml_tq_layer_type(const char * var, int layer, enum ggml_type * type, char * err, size_t err_size) {
    const char * list = getenv(var);
    if (!list || !*list) {
        return true;
    }
    const char * p = list;
    while (*p) {
        char * end = NULL;
        const long l = strtol(p, &end, 10);
        if (end == p || *end != ':' || l < 0) {
            snprintf(err, err_size, "tqc: %s=\"%s\": expected LAYER:TYPE[,LAYER:TYPE...] at \"%s\"",
                     var, list, p);
            return false;
        }
        const char * name = end + 1;
        const size_t len = strcspn(name, ",");
        enum ggml_type found = GGML_TYPE_COUNT;
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            const char * tn = ggml_type_name((enum ggml_type) t);
            if (tn && strlen(tn) == len && strncmp(tn, name, len) == 0 &&
                (ggml_is_tq_type((enum ggml_type) t) || tq_plain_cache_type((enum ggml_type) t))) {
                found = (enum ggml_type) t;
            }
        }
        if (found == GGML_TYPE_COUNT) {
            snprintf(err, err_size, "tqc: %s=\"%s\": \"%.*s\" is not a KV cache type (a tqc type, f16, bf16, "
                     "f32, q8_0, q5_0, q5_1, q4_0, q4_1 or iq4_nl)", var, list, (int) len, name);
            return false;
        }
        if (l == layer) {
            *type = found;
        }
        p = name + len;
        if (*p == ',') {
            ++p;
        }
    }
    return true;
}

bool ggml_tq_set_head_dim(enum ggml_type type, int64_t head_dim, char * err, size_t err_size) {
    if (!ggml_is_tq_type(type)) {
        snprintf(err, err_size, "tqc: %s is not a tqc type", ggml_type_name(type));
        return false;
    }
    const char * name = ggml_type_name(type);
    if (head_dim <= 0 || head_dim > UINT32_MAX) {
        snprintf(err, err_size, "tqc: head dim %" PRId64 " is out of range for %s", head_dim, name);
        return false;
    }
    const tq_ggml_pack * pack = tq_pack_get(err, err_size);
    if (!pack) {
        return false;
    }

    bool ok = true;
    pthread_mutex_lock(&tq_mutex);
    const int64_t cur = atomic_load(&tq_head_dims[type - TQ_FIRST]);
    if (cur == head_dim) {
        // already set
    } else if (cur != 0) {
        snprintf(err, err_size,
                 "tqc: KV cache type %s already has head dim %" PRId64 " in this process and cannot "
                 "also have head dim %" PRId64 " (a ggml block of a tqc type is one head row, so a "
                 "process holds one head dim per tqc type; use another tqc type for these layers)",
                 name, cur, head_dim);
        ok = false;
    } else {
        uint32_t bytes = 0;
        const tq_status st = tq_ggml_row_bytes(pack, name, (uint32_t) head_dim, &bytes);
        if (st != TQ_STATUS_OK || bytes == 0) {
            snprintf(err, err_size,
                     "tqc: the kernel pack '%s' has no %s row kernels at head dim %" PRId64 " (%s); "
                     "add them with `tq-aot --abi=ggml --k-format=%s --v-format=%s --head-dim=%" PRId64
                     " --gqa=G -o DIR`",
                     ggml_tq_pack_path(), name, head_dim, tq_status_string(st), name, name, head_dim);
            ok = false;
        } else {
            ggml_tq_set_type_traits_internal(type, head_dim, bytes);
            atomic_store(&tq_head_dims[type - TQ_FIRST], head_dim);
        }
    }
    pthread_mutex_unlock(&tq_mutex);
    return ok;
}

static uint32_t tq_head_dim_or_abort(enum ggml_type type) {
    const int64_t d = ggml_tq_head_dim(type);
    if (d == 0) {
        GGML_ABORT("tqc: %s used before ggml_tq_set_head_dim() gave it a head dim", ggml_type_name(type));
    }
    return (uint32_t) d;
}

static void tq_to_float(enum ggml_type type, const void * x, float * y, int64_t k) {
    const tq_ggml_pack * pack = tq_pack_or_abort();
    const uint32_t d = tq_head_dim_or_abort(type);
    const tq_status st = tq_ggml_dequantize(pack, ggml_type_name(type), d, x, y, k);
    if (st != TQ_STATUS_OK) {
        GGML_ABORT("tqc: dequantizing %" PRId64 " values of %s (head dim %u) failed: %s",
                   k, ggml_type_name(type), d, tq_status_string(st));
    }
}

static void tq_from_float(enum ggml_type type, const float * x, void * y, int64_t k) {
    const tq_ggml_pack * pack = tq_pack_or_abort();
    const uint32_t d = tq_head_dim_or_abort(type);
    const tq_status st = tq_ggml_quantize(pack, ggml_type_name(type), d, x, y, k);
    if (st != TQ_STATUS_OK) {
        GGML_ABORT("tqc: quantizing %" PRId64 " values to %s (head dim %u) failed: %s",
                   k, ggml_type_name(type), d, tq_status_string(st));
    }
}

#define TQ_DEFINE_(T, n)                                                                          \
    void ggml_tq_to_float_##n(const void * GGML_RESTRICT x, float * GGML_RESTRICT y, int64_t k) { \
        tq_to_float(GGML_TYPE_##T, x, y, k);                                                      \
    }                                                                                             \
    void ggml_tq_from_float_##n(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k) { \
        tq_from_float(GGML_TYPE_##T, x, y, k);                                                    \
    }
GGML_TQ_TYPES(TQ_DEFINE_)

// ---- Centred K ------------------------------------------------------------

static pthread_once_t tq_centres_once = PTHREAD_ONCE_INIT;
static float *        tq_centres;          // [layers][heads][dim]
static int64_t        tq_centres_shape[3]; // layers, heads, dim
static char           tq_centres_error[512];

// Reads a little-endian float32, C-order, 3-D .npy file.
static void tq_centres_load(void) {
    const char * path = getenv("TQ_K_CENTRES");
    if (!path || !*path) {
        return;
    }
    FILE * f = fopen(path, "rb");
    char header[1024] = "";
    unsigned char pre[10];
    if (!f || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        snprintf(tq_centres_error, sizeof tq_centres_error, "cannot read '%s' as a .npy file", path);
        if (f) fclose(f);
        return;
    }
    const size_t len = (size_t) pre[8] | ((size_t) pre[9] << 8);
    long long l = 0, h = 0, d = 0;
    const char * shape = NULL;
    if (pre[6] != 1 || len >= sizeof header || fread(header, 1, len, f) != len ||
        !strstr(header, "'descr': '<f4'") || !strstr(header, "'fortran_order': False") ||
        !(shape = strstr(header, "'shape': (")) ||
        sscanf(shape, "'shape': (%lld, %lld, %lld)", &l, &h, &d) != 3 || l <= 0 || h <= 0 || d <= 0) {
        snprintf(tq_centres_error, sizeof tq_centres_error,
                 "'%s' is not a float32 [layers, kv_heads, head_dim] .npy file", path);
        fclose(f);
        return;
    }
    const size_t n = (size_t) (l * h * d);
    float * data = malloc(n * sizeof(float));
    if (!data || fread(data, sizeof(float), n, f) != n) {
        snprintf(tq_centres_error, sizeof tq_centres_error, "'%s' is shorter than its shape says", path);
        free(data);
        fclose(f);
        return;
    }
    fclose(f);
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(data[i])) {
            snprintf(tq_centres_error, sizeof tq_centres_error, "'%s' holds a non-finite value", path);
            free(data);
            return;
        }
    }
    tq_centres = data;
    tq_centres_shape[0] = l;
    tq_centres_shape[1] = h;
    tq_centres_shape[2] = d;
}

// The layer of a K cache tensor ("cache_k_l<il>", possibly viewed), or -1.
static int tq_k_cache_layer(const struct ggml_tensor * t) {
    while (t->view_src) {
        t = t->view_src;
    }
    int il = -1;
    char rest = 0;
    if (sscanf(t->name, "cache_k_l%d%c", &il, &rest) != 1 || il < 0) {
        return -1;
    }
    return il;
}

bool ggml_tq_is_centred_k(const struct ggml_tensor * t) {
    const char * env = getenv("TQ_K_CENTRES");
    return env && *env && ggml_is_tq_type(t->type) && tq_k_cache_layer(t) >= 0;
}

const float * ggml_tq_k_centre(const struct ggml_tensor * dst) {
    if (!ggml_tq_is_centred_k(dst)) {
        return NULL;
    }
    pthread_once(&tq_centres_once, tq_centres_load);
    if (!tq_centres) {
        GGML_ABORT("tqc: TQ_K_CENTRES: %s (make one with tq-capture-kv --centres)", tq_centres_error);
    }
    const int il = tq_k_cache_layer(dst);
    const int64_t heads = tq_centres_shape[1], dim = tq_centres_shape[2];
    if (il >= tq_centres_shape[0] || dim != ggml_tq_head_dim(dst->type) || dst->ne[0] % dim != 0 ||
        dst->ne[0] / dim != heads) {
        GGML_ABORT("tqc: TQ_K_CENTRES holds [%" PRId64 ", %" PRId64 ", %" PRId64 "] centres, which do not "
                   "fit layer %d's K cache of %" PRId64 " values per token at head dim %" PRId64
                   " (make them for this model with tq-capture-kv --centres)",
                   tq_centres_shape[0], heads, dim, il, dst->ne[0], ggml_tq_head_dim(dst->type));
    }
    return tq_centres + (size_t) il * (size_t) (heads * dim);
}

void ggml_tq_from_float_centred(enum ggml_type type, const float * centre, const float * x, void * y,
                                int64_t k) {
    const tq_ggml_pack * pack = tq_pack_or_abort();
    const uint32_t d = tq_head_dim_or_abort(type);
    const tq_status st = tq_ggml_quantize_centred(pack, ggml_type_name(type), d, centre,
                                                  (uint32_t) (k / d), x, y, k);
    if (st != TQ_STATUS_OK) {
        GGML_ABORT("tqc: quantizing %" PRId64 " centred values to %s (head dim %u) failed: %s; a pack "
                   "for centred K is built with `tq-aot --abi=ggml --centred-k ...` (build.sh does)",
                   k, ggml_type_name(type), d, tq_status_string(st));
    }
}

// ---- CPU backend ---------------------------------------------------------

static bool tq_fa_operand_type(enum ggml_type type) {
    return type == GGML_TYPE_F16 || type == GGML_TYPE_Q8_0 || ggml_is_tq_type(type);
}

int ggml_tq_cpu_supports_op(const struct ggml_tensor * op) {
    bool involved = ggml_is_tq_type(op->type);
    for (int i = 0; i < GGML_MAX_SRC && !involved; ++i) {
        involved = op->src[i] && ggml_is_tq_type(op->src[i]->type);
    }
    if (!involved) {
        return -1;
    }
    const struct ggml_tensor * src0 = op->src[0];
    switch (op->op) {
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return 1;
        case GGML_OP_SET_ROWS:
            return ggml_is_tq_type(op->type) &&
                   (src0->type == GGML_TYPE_F32 || src0->type == GGML_TYPE_F16);
        case GGML_OP_GET_ROWS:
            return ggml_is_tq_type(src0->type) && op->type == GGML_TYPE_F32 &&
                   !ggml_tq_is_centred_k(src0);
        case GGML_OP_CPY:
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            if (src0->type == op->type) {  // bytes
                return 1;
            }
            if (ggml_is_tq_type(op->type)) {  // f32/f16/bf16 -> tq, whole rows
                return (src0->type == GGML_TYPE_F32 || src0->type == GGML_TYPE_F16 ||
                        src0->type == GGML_TYPE_BF16) && ggml_is_contiguous(op);
            }
            return op->type == GGML_TYPE_F32 && !ggml_tq_is_centred_k(src0);  // tq -> f32
        case GGML_OP_FLASH_ATTN_EXT:
            return op->src[0]->type == GGML_TYPE_F32 && tq_fa_operand_type(op->src[1]->type) &&
                   tq_fa_operand_type(op->src[2]->type) &&
                   (!op->src[3] || op->src[3]->type == GGML_TYPE_F16);
        default:
            return 0;
    }
}

static void tq_tensor(tq_ggml_tensor_v0 * out, const struct ggml_tensor * t) {
    memset(out, 0, sizeof *out);
    if (!t) {
        return;
    }
    out->data = t->data;
    for (int i = 0; i < 4; ++i) {
        out->ne[i] = t->ne[i];
        out->nb[i] = t->nb[i];
    }
}

static const char * tq_fa_format(const struct ggml_tensor * t, const char * what) {
    if (!tq_fa_operand_type(t->type)) {
        GGML_ABORT("tqc: FLASH_ATTN_EXT over a tqc cache takes %s as f16, q8_0 or a tqc type, not %s",
                   what, ggml_type_name(t->type));
    }
    return ggml_type_name(t->type);  // "f16", "q8_0", "turbo3_0", ...
}

static void tq_debug_print(const char * name, const struct ggml_tensor * t) {
    if (!t) {
        fprintf(stderr, "tqc:   %-5s none\n", name);
        return;
    }
    fprintf(stderr,
            "tqc:   %-5s %-8s ne = [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]"
            " nb = [%zu, %zu, %zu, %zu]%s\n",
            name, ggml_type_name(t->type), t->ne[0], t->ne[1], t->ne[2], t->ne[3],
            t->nb[0], t->nb[1], t->nb[2], t->nb[3], t->data ? "" : " (no data)");
}

// TQ_GGML_FA_REFERENCE=1: FLASH_ATTN_EXT computed here instead, in double
// precision over rows decoded by the types' to_float (the bridge's row
// decoder for tqc types) -- a check of the fused kernels on a model's real
// data, not a fast path: every thread decodes all of K and V. The result
// goes to out, laid out like dst.
static void tq_fa_reference(const struct ggml_tensor * dst, int ith, int nth, void * out_data) {
    const struct ggml_tensor * q     = dst->src[0];
    const struct ggml_tensor * k     = dst->src[1];
    const struct ggml_tensor * v     = dst->src[2];
    const struct ggml_tensor * mask  = dst->src[3];
    const struct ggml_tensor * sinks = dst->src[4];

    const int64_t DK = k->ne[0], DV = v->ne[0], NQ = q->ne[1], H = q->ne[2], S = q->ne[3];
    const int64_t NKV = k->ne[1], HKV = k->ne[2];
    float scale, max_bias, softcap;
    memcpy(&scale,    (const float *) dst->op_params + 0, sizeof(float));
    memcpy(&max_bias, (const float *) dst->op_params + 1, sizeof(float));
    memcpy(&softcap,  (const float *) dst->op_params + 2, sizeof(float));
    const uint32_t n_head_log2 = 1u << (uint32_t) floor(log2((double) H));
    const double m0 = pow(2.0, -(double) max_bias / n_head_log2);
    const double m1 = pow(2.0, -((double) max_bias / 2.0) / n_head_log2);

    // decoded rows: [stream][kv head][token][dim]
    const int64_t nk = k->ne[3] * HKV * NKV, nv = v->ne[3] * HKV * NKV;
    float  * kd  = malloc(sizeof(float) * nk * DK);
    float  * vd  = malloc(sizeof(float) * nv * DV);
    double * lg  = malloc(sizeof(double) * NKV);
    double * acc = malloc(sizeof(double) * DV);
    GGML_ASSERT(kd && vd && lg && acc);
    ggml_to_float_t const k_to_float = ggml_get_type_traits(k->type)->to_float;
    ggml_to_float_t const v_to_float = ggml_get_type_traits(v->type)->to_float;
    for (int64_t r = 0; r < nk; ++r) {
        const int64_t j = r % NKV, kh = (r / NKV) % HKV, s = r / (NKV * HKV);
        k_to_float((const char *) k->data + j*k->nb[1] + kh*k->nb[2] + s*k->nb[3], kd + r*DK, DK);
    }
    for (int64_t r = 0; r < nv; ++r) {
        const int64_t j = r % NKV, kh = (r / NKV) % HKV, s = r / (NKV * HKV);
        v_to_float((const char *) v->data + j*v->nb[1] + kh*v->nb[2] + s*v->nb[3], vd + r*DV, DV);
    }

    for (int64_t row = ith; row < S * H * NQ; row += nth) {
        const int64_t i = row % NQ, h = (row / NQ) % H, s = row / (NQ * H);
        const int64_t kh = h / (H / HKV);
        const int64_t ks = s / (S / k->ne[3]), vs = s / (S / v->ne[3]);
        const double slope = max_bias > 0.0f
            ? (h < n_head_log2 ? pow(m0, h + 1) : pow(m1, 2*(h - n_head_log2) + 1)) : 1.0;
        const float * qr = (const float *) ((const char *) q->data + i*q->nb[1] + h*q->nb[2] + s*q->nb[3]);
        const ggml_fp16_t * mr = mask ? (const ggml_fp16_t *) ((const char *) mask->data + i*mask->nb[1] +
                                        (h % mask->ne[2])*mask->nb[2] + (s % mask->ne[3])*mask->nb[3]) : NULL;
        double mx = sinks ? (double) ((const float *) sinks->data)[h] : -HUGE_VAL;
        for (int64_t j = 0; j < NKV; ++j) {
            const double mv = mr ? slope * (double) ggml_fp16_to_fp32(mr[j]) : 0.0;
            if (mv == -HUGE_VAL) {
                lg[j] = -HUGE_VAL;
                continue;
            }
            const float * kr = kd + ((ks*HKV + kh)*NKV + j)*DK;
            double dot = 0.0;
            for (int64_t d = 0; d < DK; ++d) {
                dot += (double) qr[d] * (double) kr[d];
            }
            double l = dot * (double) scale;
            if (softcap > 0.0f) {
                l = (double) softcap * tanh(l / (double) softcap);
            }
            lg[j] = l + mv;
            mx = lg[j] > mx ? lg[j] : mx;
        }
        float * out = (float *) ((char *) out_data + h*dst->nb[1] + i*dst->nb[2] + s*dst->nb[3]);
        if (mx == -HUGE_VAL) {
            memset(out, 0, sizeof(float) * DV);
            continue;
        }
        double sum = sinks ? exp((double) ((const float *) sinks->data)[h] - mx) : 0.0;
        memset(acc, 0, sizeof(double) * DV);
        for (int64_t j = 0; j < NKV; ++j) {
            if (lg[j] == -HUGE_VAL) {
                continue;
            }
            const double p = exp(lg[j] - mx);
            const float * vr = vd + ((vs*HKV + kh)*NKV + j)*DV;
            sum += p;
            for (int64_t d = 0; d < DV; ++d) {
                acc[d] += p * (double) vr[d];
            }
        }
        for (int64_t d = 0; d < DV; ++d) {
            out[d] = (float) (acc[d] / sum);
        }
    }
    free(kd);
    free(vd);
    free(lg);
    free(acc);
}

static void tq_fa_bridge(const struct ggml_tensor * dst, int ith, int nth,
                         const tq_ggml_threads_v0 * threads);

// TQ_GGML_FA_REFERENCE=2: thread 0 runs the fused kernels (all of the call)
// and the reference, prints how far apart they are, and keeps the kernels'
// result.
static void tq_fa_check(const struct ggml_tensor * dst, int ith) {
    if (ith != 0) {
        return;
    }
    tq_fa_bridge(dst, 0, 1, NULL);
    const size_t bytes = ggml_nbytes(dst);
    float * ref = malloc(bytes);
    GGML_ASSERT(ref && ggml_is_contiguous(dst));
    tq_fa_reference(dst, 0, 1, ref);
    const float * got = (const float *) dst->data;
    double max_abs = 0.0, sum_sq = 0.0, sum_ref_sq = 0.0;
    int64_t worst = 0;
    for (int64_t i = 0; i < ggml_nelements(dst); ++i) {
        const double d = fabs((double) got[i] - (double) ref[i]);
        if (d > max_abs || isnan(d)) {
            max_abs = d;
            worst = i;
        }
        sum_sq += d * d;
        sum_ref_sq += (double) ref[i] * (double) ref[i];
    }
    fprintf(stderr, "tqc: check %s K %s V %s q [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] n_kv %" PRId64
            ": max |kernel - reference| %.3g at %" PRId64 " (kernel %g, reference %g), relative RMS %.3g\n",
            dst->name, ggml_type_name(dst->src[1]->type), ggml_type_name(dst->src[2]->type),
            dst->src[0]->ne[0], dst->src[0]->ne[1], dst->src[0]->ne[2], dst->src[0]->ne[3], dst->src[1]->ne[1],
            max_abs, worst, (double) got[worst], (double) ref[worst],
            sqrt(sum_sq / (sum_ref_sq > 0.0 ? sum_ref_sq : 1.0)));
    free(ref);
}

void ggml_tq_flash_attn_ext(const struct ggml_tensor * dst, int ith, int nth,
                            void * wdata, size_t wsize,
                            void (*barrier)(void *), void * barrier_ctx) {
    if (ggml_tq_is_centred_k(dst->src[1])) {
        float softcap;
        memcpy(&softcap, (const float *) dst->op_params + 2, sizeof(float));
        if (dst->src[4] || softcap != 0.0f) {
            GGML_ABORT("tqc: a centred K cache (TQ_K_CENTRES) gives the same attention only without "
                       "attention sinks and soft-capping, and this model uses %s; unset TQ_K_CENTRES",
                       dst->src[4] ? "sinks" : "a soft-cap");
        }
    }
    static _Atomic int reference = -1;
    if (atomic_load(&reference) < 0) {
        const char * env = getenv("TQ_GGML_FA_REFERENCE");
        atomic_store(&reference, env ? atoi(env) : 0);
    }
    switch (atomic_load(&reference)) {
        case 1:  tq_fa_reference(dst, ith, nth, dst->data); return;
        case 2:  tq_fa_check(dst, ith); return;
        default: break;
    }
    const tq_ggml_threads_v0 threads = {
        .version = TQ_GGML_THREADS_VERSION_0,
        .size = sizeof threads,
        .scratch = wdata,
        .scratch_bytes = wdata ? wsize : 0,
        .barrier = barrier,
        .barrier_context = barrier_ctx,
    };
    // TQ_GGML_SPLIT=0 keeps every decode whole (one thread per KV head), to
    // compare with the split.
    static _Atomic int split = -1;
    if (atomic_load(&split) < 0) {
        const char * env = getenv("TQ_GGML_SPLIT");
        atomic_store(&split, env && strcmp(env, "0") == 0 ? 0 : 1);
    }
    tq_fa_bridge(dst, ith, nth, barrier && atomic_load(&split) ? &threads : NULL);
}

static void tq_fa_bridge(const struct ggml_tensor * dst, int ith, int nth,
                         const tq_ggml_threads_v0 * threads) {

    const struct ggml_tensor * q     = dst->src[0];
    const struct ggml_tensor * k     = dst->src[1];
    const struct ggml_tensor * v     = dst->src[2];
    const struct ggml_tensor * mask  = dst->src[3];
    const struct ggml_tensor * sinks = dst->src[4];

    if (q->type != GGML_TYPE_F32) {
        GGML_ABORT("tqc: FLASH_ATTN_EXT over a tqc cache takes f32 queries, not %s", ggml_type_name(q->type));
    }
    if (mask && mask->type != GGML_TYPE_F16) {
        GGML_ABORT("tqc: FLASH_ATTN_EXT over a tqc cache takes an f16 mask, not %s", ggml_type_name(mask->type));
    }

    tq_ggml_attention_v0 call;
    memset(&call, 0, sizeof call);
    call.version  = TQ_GGML_ATTENTION_VERSION_0;
    call.size     = sizeof call;
    call.k_format = tq_fa_format(k, "K");
    call.v_format = tq_fa_format(v, "V");
    tq_tensor(&call.q, q);
    tq_tensor(&call.k, k);
    tq_tensor(&call.v, v);
    tq_tensor(&call.mask, mask);
    tq_tensor(&call.sinks, sinks);
    tq_tensor(&call.dst, dst);
    memcpy(&call.scale,    (const float *) dst->op_params + 0, sizeof(float));
    memcpy(&call.max_bias, (const float *) dst->op_params + 1, sizeof(float));
    memcpy(&call.softcap,  (const float *) dst->op_params + 2, sizeof(float));

    // TQ_GGML_DEBUG=N: thread 0 prints the operands of the first N calls.
    static _Atomic int debug_calls = -1;
    if (ith == 0) {
        int n = atomic_load(&debug_calls);
        if (n < 0) {
            const char * env = getenv("TQ_GGML_DEBUG");
            n = env ? atoi(env) : 0;
            atomic_store(&debug_calls, n);
        }
        if (n > 0) {
            atomic_store(&debug_calls, n - 1);
            fprintf(stderr, "tqc: FLASH_ATTN_EXT %s (nth = %d) scale = %g max_bias = %g softcap = %g\n",
                    dst->name, nth, (double) call.scale, (double) call.max_bias, (double) call.softcap);
            tq_debug_print("q", q);
            tq_debug_print("k", k);
            tq_debug_print("v", v);
            tq_debug_print("mask", mask);
            tq_debug_print("sinks", sinks);
            tq_debug_print("dst", dst);
            uint64_t split = 0;
            tq_ggml_flash_attn_ext_scratch(tq_pack_or_abort(), &call, (uint32_t) nth, &split);
            fprintf(stderr, "  split: %s (scratch %" PRIu64 " of %zu bytes)\n",
                    split > 0 && threads && threads->scratch_bytes >= split
                        ? "tokens over the threads" : "none",
                    split, threads ? (size_t) threads->scratch_bytes : (size_t) 0);
        }
    }

    char err[1024] = "";
    const tq_status st = threads
        ? tq_ggml_flash_attn_ext_threads(tq_pack_or_abort(), &call, (uint32_t) ith,
                                         (uint32_t) nth, threads, err, sizeof err)
        : tq_ggml_flash_attn_ext(tq_pack_or_abort(), &call, (uint32_t) ith,
                                 (uint32_t) nth, err, sizeof err);
    if (st != TQ_STATUS_OK) {
        GGML_ABORT("tqc: FLASH_ATTN_EXT (K %s, V %s, DK %" PRId64 ", DV %" PRId64 ", %" PRId64
                   " query heads, %" PRId64 " KV heads, %" PRId64 " queries, %" PRId64 " KV rows) "
                   "failed: %s: %s",
                   call.k_format, call.v_format, k->ne[0], v->ne[0], q->ne[2], k->ne[2], q->ne[1],
                   k->ne[1], tq_status_string(st), err);
    }
}
