//===- Half.h - IEEE binary16 conversions -----------------------*- C++ -*-===//
//
// Bit-exact float <-> half conversions. floatToHalf rounds to nearest even
// and overflows to +-inf, exactly like ggml_compute_fp32_to_fp16, so blocks
// match the existing encoders. Encoders use floatToHalfSaturating instead
// where a finite input must never produce an inf in a block.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_HALF_H
#define TQ_QUANT_HALF_H

#include <cstdint>

namespace tq::quant {

/// Largest finite half, 65504.
inline constexpr float kHalfMax = 65504.0f;

/// IEEE binary16 from float: round to nearest even, overflow to +-inf,
/// NaN to a quiet NaN.
uint16_t floatToHalf(float value);

/// Like floatToHalf, but a finite value that would round to +-inf becomes
/// +-65504 and sets *saturated (if given) to true.
uint16_t floatToHalfSaturating(float value, bool *saturated);

/// Exact widening of a half to float.
float halfToFloat(uint16_t bits);

} // namespace tq::quant

#endif // TQ_QUANT_HALF_H
