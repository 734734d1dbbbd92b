//===- ForkConstants.h - Literal constants of existing formats --*- C++ -*-===//
//
// Sign vectors, codebooks and decision thresholds of the block formats that
// existing llama.cpp forks already write (tq3_0, turbo2/3/4_0), transcribed
// from the format specs in ../shared/golden/*/manifest.json. Byte-exact
// compatibility depends on these exact float values.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_QUANT_FORKCONSTANTS_H
#define TQ_LIB_QUANT_FORKCONSTANTS_H

#include <cstdint>

namespace tq::quant::fork {

// tq3_0 (both variants): one sign vector around a 32-point WHT.
inline constexpr int8_t kTq3Signs32[32] = {
    1, -1, 1, 1, -1, -1, 1, -1, 1, 1, -1, 1, -1, 1, -1, -1, 1, -1, -1, 1, 1, -1,
    1, -1, -1, 1, 1, 1, -1, -1, 1, -1,
};

// tq3_0: 3-bit codebook in units of the block scale d = amax / 2.1573.
inline constexpr float kTq3Centroids[8] = {
    -2.1573f, -1.3336f, -0.7434f, -0.2428f, 0.2428f, 0.7434f, 1.3336f, 2.1573f,
};
inline constexpr float kTq3Thresholds[7] = {
    -1.7455f, -1.0385f, -0.4931f, 0.0f, 0.4931f, 1.0385f, 1.7455f,
};

// tq3_0_legacy: 2-bit codebook, d = amax / 1.510.
inline constexpr float kTq3LegacyCentroids[4] = {
    -1.51f, -0.4528f, 0.4528f, 1.51f,
};
inline constexpr float kTq3LegacyThresholds[3] = {
    -0.9814f, 0.0f, 0.9814f,
};

// turbo2/3/4_0: R = diag(S2) H128/sqrt(128) diag(S1).
inline constexpr int8_t kTurboSigns1[128] = {
    -1, 1, 1, -1, -1, 1, -1, 1, -1, -1, 1, 1, 1, 1, 1, 1, 1, -1, 1, -1, 1, -1,
    -1, 1, 1, 1, -1, 1, 1, -1, -1, -1, -1, 1, 1, -1, 1, 1, -1, 1, -1, 1, 1, -1,
    -1, 1, -1, 1, 1, 1, 1, -1, -1, -1, -1, -1, 1, -1, 1, 1, 1, 1, -1, 1, -1, -1,
    1, -1, -1, -1, 1, -1, -1, -1, 1, -1, -1, -1, 1, 1, 1, -1, -1, 1, 1, 1, -1,
    -1, 1, 1, -1, 1, 1, -1, 1, -1, -1, 1, 1, -1, 1, -1, 1, -1, 1, 1, 1, 1, -1,
    1, -1, 1, 1, -1, 1, 1, -1, -1, -1, -1, -1, 1, 1, -1, 1, 1, -1, 1,
};
inline constexpr int8_t kTurboSigns2[128] = {
    1, 1, 1, 1, -1, 1, 1, -1, 1, -1, -1, -1, 1, -1, -1, -1, 1, 1, -1, -1, 1, -1,
    1, -1, 1, -1, -1, 1, -1, 1, 1, 1, 1, 1, -1, -1, -1, 1, -1, -1, -1, -1, -1,
    -1, 1, 1, 1, -1, 1, -1, 1, 1, 1, -1, -1, 1, -1, -1, -1, -1, -1, -1, 1, 1, 1,
    -1, 1, -1, -1, -1, -1, 1, -1, 1, -1, 1, -1, -1, 1, 1, -1, 1, -1, 1, 1, -1,
    1, -1, -1, -1, -1, 1, -1, -1, 1, -1, 1, -1, 1, 1, 1, -1, -1, 1, -1, 1, -1,
    1, 1, -1, -1, 1, -1, 1, -1, 1, 1, -1, 1, -1, 1, -1, -1, -1, -1, -1, 1, -1,
};

// turbo codebooks for unit-norm, rotated 128-vectors.
inline constexpr float kTurbo2Centroids[4] = {
    -0.133462f, -0.039994f, 0.039994f, 0.133462f,
};
inline constexpr float kTurbo2Midpoints[3] = {
    -0.086728f, 0.0f, 0.086728f,
};
inline constexpr float kTurbo3Centroids[8] = {
    -0.190685f, -0.117832f, -0.065717f, -0.02146f, 0.02146f, 0.065717f,
    0.117832f, 0.190685f,
};
inline constexpr float kTurbo3Midpoints[7] = {
    -0.154259f, -0.091775f, -0.043589f, 0.0f, 0.043589f, 0.091775f, 0.154259f,
};
inline constexpr float kTurbo4Centroids[16] = {
    -0.173926f, -0.117195f, -0.089527f, -0.068756f, -0.051262f, -0.035597f,
    -0.020989f, -0.006938f, 0.006938f, 0.020989f, 0.035597f, 0.051262f,
    0.068756f, 0.089527f, 0.117195f, 0.173926f,
};
inline constexpr float kTurbo4Midpoints[15] = {
    -0.14556f, -0.103361f, -0.079142f, -0.060009f, -0.04343f, -0.028293f,
    -0.013963f, 0.0f, 0.013963f, 0.028293f, 0.04343f, 0.060009f, 0.079142f,
    0.103361f, 0.14556f,
};

} // namespace tq::quant::fork

#endif // TQ_LIB_QUANT_FORKCONSTANTS_H
