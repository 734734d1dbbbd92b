//===- Linear.cpp - q8_0 and f16, the uncompressed-domain partners --------===//
//
// Formats without rotation or codebook, for asymmetric K/V pairs:
//   q8_0: ggml's layout, 32 values in 34 bytes: fp16 d = amax / 127 at byte
//         0, then 32 int8 values round(x / d) (round half away from zero).
//   f16:  one IEEE half per value.
//
//===----------------------------------------------------------------------===//

#include "Codecs.h"
#include "tq/Quant/Half.h"

#include <cmath>

namespace tq::quant::detail {

namespace {
constexpr unsigned kQ8Block = 32;
} // namespace

Result<FormatSpec> makeQ8_0Spec(unsigned headDim) {
  FormatSpec spec;
  spec.name = "q8_0";
  spec.family = FormatFamily::Q8_0;
  spec.headDim = headDim;
  spec.paddedDim = (headDim + kQ8Block - 1) / kQ8Block * kQ8Block;
  spec.blockLen = kQ8Block;
  spec.bytesPerBlock = 2 + kQ8Block;
  spec.scaleRule = ScaleRule::AmaxOver127;
  spec.scaleType = ScalarType::F16;
  spec.scaleOffset = 0;
  // The "index" is the two's-complement int8 value itself.
  spec.indexBits = 8;
  spec.indexPlanes = {BitPlane{2, 8, 0}};
  return spec;
}

Result<FormatSpec> makeF16Spec(unsigned headDim) {
  FormatSpec spec;
  spec.name = "f16";
  spec.family = FormatFamily::F16;
  spec.headDim = headDim;
  spec.paddedDim = headDim;
  spec.blockLen = 1;
  spec.bytesPerBlock = 2;
  spec.scaleRule = ScaleRule::None;
  return spec;
}

void encodeQ8_0(const FormatSpec &spec, std::span<float> row,
                std::span<uint8_t> out, EncodeStats &stats) {
  for (unsigned b = 0; b < spec.blocksPerRow(); ++b) {
    const float *x = row.data() + b * kQ8Block;
    uint8_t *blk = out.data() + b * spec.bytesPerBlock;
    float amax = 0.0f;
    for (unsigned j = 0; j < kQ8Block; ++j)
      amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    bool saturated = false;
    storeHalf(blk, floatToHalfSaturating(d, &saturated));
    for (unsigned j = 0; j < kQ8Block; ++j)
      blk[2 + j] = uint8_t(int8_t(std::round(x[j] * id)));
    stats.saturatedBlocks += saturated;
    ++stats.blocks;
  }
}

void decodeQ8_0(const FormatSpec &spec, std::span<const uint8_t> in,
                std::span<float> out, Domain) {
  for (unsigned b = 0; b < spec.blocksPerRow(); ++b) {
    const uint8_t *blk = in.data() + b * spec.bytesPerBlock;
    const float d = halfToFloat(loadHalfBits(blk));
    for (unsigned j = 0; j < kQ8Block; ++j)
      out[b * kQ8Block + j] = d * float(int8_t(blk[2 + j]));
  }
}

void encodeF16(const FormatSpec &spec, std::span<float> row,
               std::span<uint8_t> out, EncodeStats &stats) {
  for (unsigned j = 0; j < spec.paddedDim; ++j) {
    bool saturated = false;
    storeHalf(out.data() + 2 * j, floatToHalfSaturating(row[j], &saturated));
    stats.saturatedBlocks += saturated;
  }
  stats.blocks += spec.paddedDim;
}

void decodeF16(const FormatSpec &spec, std::span<const uint8_t> in,
               std::span<float> out, Domain) {
  for (unsigned j = 0; j < spec.paddedDim; ++j)
    out[j] = halfToFloat(loadHalfBits(in.data() + 2 * j));
}

} // namespace tq::quant::detail
