//===- Codecs.h - Per-family row encoders and decoders ----------*- C++ -*-===//
//
// Internal to lib/Quant. Each family implements one encoder and one decoder
// over a whole zero-padded row (paddedDim values, blocksPerRow blocks).
// Callers (Format.cpp) guarantee: the spec belongs to the family, the input
// is finite, spans have exactly the sizes of the spec, and `out` of an
// encoder is zero-filled. Encoders may use `row` as scratch.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_QUANT_CODECS_CODECS_H
#define TQ_LIB_QUANT_CODECS_CODECS_H

#include "tq/Quant/Format.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

namespace tq::quant::detail {

// Spec construction, one per family. `name` is the format name; variant
// is the bit width for polar/tqprod/turbo and unused elsewhere.
Result<FormatSpec> makeTq3Spec(bool legacy, unsigned headDim);
Result<FormatSpec> makeTurboSpec(unsigned bits, unsigned headDim);
Result<FormatSpec> makePolarSpec(unsigned bits, unsigned headDim);
Result<FormatSpec> makeTqProdSpec(unsigned bits, unsigned headDim);
Result<FormatSpec> makeHaarSpec(unsigned headDim);
Result<FormatSpec> makeQ8_0Spec(unsigned headDim);
Result<FormatSpec> makeF16Spec(unsigned headDim);

void encodeTq3(const FormatSpec &spec, std::span<float> row,
               std::span<uint8_t> out, EncodeStats &stats);
void decodeTq3(const FormatSpec &spec, std::span<const uint8_t> in,
               std::span<float> out, Domain domain);
void encodeTurbo(const FormatSpec &spec, std::span<float> row,
                 std::span<uint8_t> out, EncodeStats &stats);
void decodeTurbo(const FormatSpec &spec, std::span<const uint8_t> in,
                 std::span<float> out, Domain domain);
/// Polar and TqProd (polar plus a QJL residual).
void encodePolar(const FormatSpec &spec, std::span<float> row,
                 std::span<uint8_t> out, EncodeStats &stats);
void decodePolar(const FormatSpec &spec, std::span<const uint8_t> in,
                 std::span<float> out, Domain domain);
void encodeHaar(const FormatSpec &spec, std::span<float> row,
                std::span<uint8_t> out, EncodeStats &stats);
void decodeHaar(const FormatSpec &spec, std::span<const uint8_t> in,
                std::span<float> out, Domain domain);
void encodeQ8_0(const FormatSpec &spec, std::span<float> row,
                std::span<uint8_t> out, EncodeStats &stats);
void decodeQ8_0(const FormatSpec &spec, std::span<const uint8_t> in,
                std::span<float> out, Domain domain);
void encodeF16(const FormatSpec &spec, std::span<float> row,
               std::span<uint8_t> out, EncodeStats &stats);
void decodeF16(const FormatSpec &spec, std::span<const uint8_t> in,
               std::span<float> out, Domain domain);

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Writes the low plane.bits bits of `value` as element j of the plane.
/// Plane widths are 1, 2, 4 or 8, so a field never straddles a byte.
inline void writePlane(uint8_t *block, const BitPlane &plane, unsigned j,
                       uint32_t value) {
  unsigned bit = j * plane.bits;
  uint32_t mask = (1u << plane.bits) - 1u;
  block[plane.byteOffset + bit / 8] |= uint8_t((value & mask) << (bit % 8));
}

inline uint32_t readPlane(const uint8_t *block, const BitPlane &plane,
                          unsigned j) {
  unsigned bit = j * plane.bits;
  uint32_t mask = (1u << plane.bits) - 1u;
  return (block[plane.byteOffset + bit / 8] >> (bit % 8)) & mask;
}

/// Spreads index bits over the spec's index planes.
inline void writeIndex(uint8_t *block, const FormatSpec &spec, unsigned j,
                       uint32_t index) {
  for (const BitPlane &p : spec.indexPlanes)
    writePlane(block, p, j, index >> p.shift);
}

inline uint32_t readIndex(const uint8_t *block, const FormatSpec &spec,
                          unsigned j) {
  uint32_t index = 0;
  for (const BitPlane &p : spec.indexPlanes)
    index |= readPlane(block, p, j) << p.shift;
  return index;
}

inline void storeHalf(uint8_t *dst, uint16_t h) {
  dst[0] = uint8_t(h & 0xff);
  dst[1] = uint8_t(h >> 8);
}

inline uint16_t loadHalfBits(const uint8_t *src) {
  return uint16_t(src[0] | (uint16_t(src[1]) << 8));
}

inline void storeF32(uint8_t *dst, float v) { std::memcpy(dst, &v, 4); }

inline float loadF32(const uint8_t *src) {
  float v;
  std::memcpy(&v, src, 4);
  return v;
}

/// Euclidean norm of a finite vector without overflow: the plain f32 sum
/// when it is finite, else a scaled double computation.
double robustNorm(std::span<const float> x);

} // namespace tq::quant::detail

#endif // TQ_LIB_QUANT_CODECS_CODECS_H
