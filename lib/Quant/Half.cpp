//===- Half.cpp - IEEE binary16 conversions -------------------------------===//

#include "tq/Quant/Half.h"

#include <bit>

namespace tq::quant {

namespace {
/// Rounds q + rem / 2^shift to nearest, ties to even.
uint32_t roundNearestEven(uint32_t q, uint32_t rem, unsigned shift) {
  uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u)))
    ++q;
  return q;
}
} // namespace

uint16_t floatToHalf(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) // NaN: keep it quiet.
    return uint16_t(sign | 0x7e00u);
  // >= 65520 (halfway between 65504 and 2^16) rounds to infinity.
  if (absx >= 0x477ff000u)
    return uint16_t(sign | 0x7c00u);
  if (absx >= 0x38800000u) { // Normal half: rebias exponent 127 -> 15.
    uint32_t r = absx - 0x38000000u;
    return uint16_t(sign | roundNearestEven(r >> 13, r & 0x1fffu, 13));
  }
  if (absx < 0x33000000u) // Below 2^-25: rounds to zero.
    return uint16_t(sign);
  // Subnormal half: value = m * 2^(e - 150), unit 2^-24.
  uint32_t e = absx >> 23;
  uint32_t m = (absx & 0x7fffffu) | 0x800000u;
  unsigned shift = 126 - e; // in [14, 24]
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u);
  return uint16_t(sign | roundNearestEven(q, rem, shift));
}

uint16_t floatToHalfSaturating(float value, bool *saturated) {
  uint16_t h = floatToHalf(value);
  bool isInfHalf = (h & 0x7fffu) == 0x7c00u;
  bool isFinite = (std::bit_cast<uint32_t>(value) & 0x7f800000u) != 0x7f800000u;
  if (isInfHalf && isFinite) {
    if (saturated)
      *saturated = true;
    return uint16_t((h & 0x8000u) | 0x7bffu);
  }
  return h;
}

float halfToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    out = sign;
  } else { // Subnormal half: normalise.
    unsigned e = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    out = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(out);
}

} // namespace tq::quant
