/*===- PrevConventionPack.c - A pack from before ggml decode wrote lse ---===*
 *
 * Stands in for a libtq_ggml_kernels.so written by an older tq-aot: one
 * ggml decode kernel (turbo3_0/turbo3_0, head dim 64, group 4) whose info
 * says calling convention 1, the one without the %lse output. The bridge
 * and the runtime must refuse it (TQ_STATUS_VERSION_MISMATCH) and never
 * call it; calling it fails the test.
 *
 *===--------------------------------------------------------------------===*/

#include <stdint.h>
#include <stdlib.h>

/* {version, kind (ggml decode), head dim, group, K and V row bytes (turbo3_0
 * at d64: 26), causal, window}. */
const int64_t tq_ggml_decode_turbo3_0_turbo3_0_d64_g4_info[8] = {1, 3, 64, 4,
                                                                 26, 26, 0, 0};

void _mlir_ciface_tq_ggml_decode_turbo3_0_turbo3_0_d64_g4(void) { abort(); }
