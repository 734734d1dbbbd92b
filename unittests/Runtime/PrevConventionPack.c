/*===- PrevConventionPack.c - A library from before decode wrote lse ----===*
 *
 * Stands in for a library written by an older tq-aot: a ggml decode kernel
 * and a runtime decode kernel (turbo3_0/turbo3_0, head dim 64, group 4)
 * whose infos say calling convention 1, the one without the %lse output.
 * The bridge and the runtime must refuse them
 * (TQ_STATUS_VERSION_MISMATCH) and never call them; calling one fails the
 * test.
 *
 *===--------------------------------------------------------------------===*/

#include <stdint.h>
#include <stdlib.h>

/* {version, kind (ggml decode), head dim, group, K and V row bytes (turbo3_0
 * at d64: 26), causal, window}. */
const int64_t tq_ggml_decode_turbo3_0_turbo3_0_d64_g4_info[8] = {1, 3, 64, 4,
                                                                 26, 26, 0, 0};

void _mlir_ciface_tq_ggml_decode_turbo3_0_turbo3_0_d64_g4(void) { abort(); }

/* {version, kind (runtime decode), ...} as above. */
const int64_t tq_decode_turbo3_0_turbo3_0_d64_g4_info[8] = {1, 1, 64, 4,
                                                            26, 26, 0, 0};

void _mlir_ciface_tq_decode_turbo3_0_turbo3_0_d64_g4(void) { abort(); }
