// ggml-tq.h - tqc (TurboQuant) KV-cache types in ggml.
//
// Part of tqc's llama.cpp integration (integrations/llama.cpp in the tqc
// repository); build.sh copies it to ggml/include/. The types are served by
// libtq_runtime's ggml bridge (tq/tq_ggml.h) over a kernel pack written by
// `tq-aot --abi=ggml`.
//
// A tq type's block is one head row: blck_size = head dim and type_size =
// the row's bytes at that dim. Both are 0 (like a removed type) until
// ggml_tq_set_head_dim() sets them; llama.cpp's KV cache calls it before it
// creates a K or V tensor of a tq type. One head dim per type per process.
#pragma once

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

// X(ENUM_SUFFIX, name): every tq type, in enum order (GGML_TYPE_TURBO2_0 ...).
#define GGML_TQ_TYPES(X)     \
    X(TURBO2_0, turbo2_0)    \
    X(TURBO3_0, turbo3_0)    \
    X(TURBO4_0, turbo4_0)    \
    X(TQ3_0,    tq3_0)       \
    X(POLAR1,   polar1)      \
    X(POLAR2,   polar2)      \
    X(POLAR3,   polar3)      \
    X(POLAR4,   polar4)      \
    X(TQPROD2,  tqprod2)     \
    X(TQPROD3,  tqprod3)     \
    X(TQPROD4,  tqprod4)     \
    X(HAAR4,    haar4)

// `case GGML_TYPE_TURBO2_0: case ...:` for switches over ggml types.
#define GGML_TQ_CASE_(T, n) case GGML_TYPE_##T:
#define GGML_TQ_TYPE_CASES GGML_TQ_TYPES(GGML_TQ_CASE_)

GGML_API bool ggml_is_tq_type(enum ggml_type type);

// Sets a tq type's head dim: opens the kernel pack (if not yet open) and
// asks it for the row bytes. Returns false with a sentence in err when the
// pack cannot be opened, has no row kernels for the type at that dim, or the
// type already has a different head dim in this process. Thread-safe.
GGML_API bool ggml_tq_set_head_dim(enum ggml_type type, int64_t head_dim,
                                   char * err, size_t err_size);

// Per-layer cache types: the environment variable `var` (TQ_K_LAYER_TYPES
// or TQ_V_LAYER_TYPES) lists "LAYER:TYPE" entries separated by commas, e.g.
// "5:q8_0,11:q8_0"; a listed layer's cache gets TYPE (a tqc type, f16,
// bf16, f32, q8_0, q5_0, q5_1, q4_0, q4_1 or iq4_nl), the others keep
// *type. Returns false with a sentence in err when the list is malformed
// or names an unknown type.
GGML_API bool ggml_tq_layer_type(const char * var, int layer, enum ggml_type * type,
                                 char * err, size_t err_size);

// The head dim set for a tq type; 0 when none is set.
GGML_API int64_t ggml_tq_head_dim(enum ggml_type type);

// The kernel pack's path: $TQ_GGML_PACK, else the default compiled in.
GGML_API const char * ggml_tq_pack_path(void);

// The CPU backend's answer for an op that involves a tq type: 1 supported,
// 0 not; -1 when no source or result of the op has a tq type.
GGML_API int ggml_tq_cpu_supports_op(const struct ggml_tensor * op);

// GGML_OP_FLASH_ATTN_EXT whose K or V has a tq type, through the bridge;
// thread ith of nth computes its share. wdata/wsize is the op's work buffer
// and barrier(barrier_ctx) ggml's barrier: with them a decode with fewer KV
// heads than threads splits each head's tokens over the threads (wdata
// null: no split). Aborts with the bridge's message on error.
GGML_API void ggml_tq_flash_attn_ext(const struct ggml_tensor * dst, int ith, int nth,
                                     void * wdata, size_t wsize,
                                     void (*barrier)(void *), void * barrier_ctx);

// to_float / from_float of each type (k values, a multiple of the head dim).
#define GGML_TQ_DECLARE_(T, n)                                                           \
    GGML_API void ggml_tq_to_float_##n(const void * GGML_RESTRICT x, float * GGML_RESTRICT y, int64_t k); \
    GGML_API void ggml_tq_from_float_##n(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k);
GGML_TQ_TYPES(GGML_TQ_DECLARE_)

// Centred K (env TQ_K_CENTRES=FILE.npy, float32 [layers, kv_heads, head
// dim], e.g. from tq-capture-kv --centres): a K cache tensor of a tqc type
// ("cache_k_l<il>") stores each head's row minus that layer's and head's
// centre. Attention is unchanged (softmax is shift-invariant); reading the
// rows back as floats (GET_ROWS, CPY) is refused, and so are attention
// sinks and soft-capping, under which the shift is not free.
//
// The centres of dst's layer when dst is such a K cache (or a view of
// one) and centring is on; NULL otherwise. Aborts on a malformed file.
GGML_API const float * ggml_tq_k_centre(const struct ggml_tensor * dst);
// True when t is (a view of) a centred K cache.
GGML_API bool ggml_tq_is_centred_k(const struct ggml_tensor * t);
// from_float of one SET_ROWS row (k values: kv_heads whole head rows)
// minus the centres.
GGML_API void ggml_tq_from_float_centred(enum ggml_type type, const float * centre,
                                         const float * x, void * y, int64_t k);

// Internal (ggml.c): sets a tq type's blck_size and type_size in ggml's
// type traits table.
void ggml_tq_set_type_traits_internal(enum ggml_type type, int64_t blck_size, size_t type_size);

#ifdef __cplusplus
}
#endif
