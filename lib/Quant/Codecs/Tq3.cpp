//===- Tq3.cpp - tq3_0 and tq3_0_legacy blocks ----------------------------===//
//
// 32 values in 14 bytes: a one-sided randomised WHT32 per block, a block
// scale d = amax(rotated) / max|centroid| stored as fp16 at byte 12, and the
// codebook index of rotated / d per value. tq3_0 spreads a 3-bit index over
// qs (bytes 0-7, low 2 bits) and qr (bytes 8-11, bit 2); tq3_0_legacy keeps
// a 2-bit index in qs and writes residual-sign bits to qr that no decoder
// reads. Arithmetic follows the reference encoder operation for operation
// (f32, no contraction), so blocks match it byte for byte.
//
//===----------------------------------------------------------------------===//

#include "Codecs.h"
#include "../ForkConstants.h"
#include "tq/Quant/Half.h"

#include <cmath>
#include <vector>

namespace tq::quant::detail {

namespace {
constexpr unsigned kBlock = 32;
constexpr unsigned kBytes = 14;
constexpr unsigned kScaleOffset = 12;
} // namespace

Result<FormatSpec> makeTq3Spec(bool legacy, unsigned headDim) {
  FormatSpec spec;
  spec.name = legacy ? "tq3_0_legacy" : "tq3_0";
  spec.family = legacy ? FormatFamily::Tq3Legacy : FormatFamily::Tq3;
  spec.headDim = headDim;
  spec.paddedDim = (headDim + kBlock - 1) / kBlock * kBlock;
  spec.blockLen = kBlock;
  spec.bytesPerBlock = kBytes;
  spec.scaleRule = ScaleRule::AmaxOverMaxCentroid;
  spec.scaleType = ScalarType::F16;
  spec.scaleOffset = kScaleOffset;
  std::vector<int8_t> signs(std::begin(fork::kTq3Signs32),
                            std::end(fork::kTq3Signs32));
  Result<Rotation> rot = Rotation::blockHadamard(spec.paddedDim, signs);
  if (!rot)
    return rot.status();
  spec.rotation = std::move(*rot);
  Result<Codebook> cb =
      legacy ? Codebook::literal(
                   {std::begin(fork::kTq3LegacyCentroids),
                    std::end(fork::kTq3LegacyCentroids)},
                   {std::begin(fork::kTq3LegacyThresholds),
                    std::end(fork::kTq3LegacyThresholds)})
             : Codebook::literal({std::begin(fork::kTq3Centroids),
                                  std::end(fork::kTq3Centroids)},
                                 {std::begin(fork::kTq3Thresholds),
                                  std::end(fork::kTq3Thresholds)});
  if (!cb)
    return cb.status();
  spec.codebook = std::move(*cb);
  spec.indexBits = legacy ? 2 : 3;
  spec.indexPlanes.push_back(BitPlane{0, 2, 0});
  if (legacy)
    spec.residualSignPlane = BitPlane{8, 1, 0};
  else
    spec.indexPlanes.push_back(BitPlane{8, 1, 2});
  return spec;
}

void encodeTq3(const FormatSpec &spec, std::span<float> row,
               std::span<uint8_t> out, EncodeStats &stats) {
  const Codebook &cb = *spec.codebook;
  // The reference divides by the literal largest centroid (2.1573f, 1.510f).
  const float cmax = cb.centroids.back();
  const std::vector<float> input(row.begin(), row.end());
  spec.rotation->forward(row);
  for (unsigned b = 0; b < spec.blocksPerRow(); ++b) {
    float *rot = row.data() + b * kBlock;
    uint8_t *blk = out.data() + b * kBytes;
    // Inputs near FLT_MAX can overflow the butterfly. Such a block is
    // rotated again at 2^-32 scale (exact) and its scale multiplied back;
    // the reference encoder would write inf here.
    float unscale = 1.0f;
    bool overflowed = false;
    for (unsigned j = 0; j < kBlock; ++j)
      overflowed |= !std::isfinite(rot[j]);
    if (overflowed) {
      unscale = 0x1p32f;
      std::vector<float> scaled(kBlock);
      for (unsigned j = 0; j < kBlock; ++j)
        scaled[j] = input[b * kBlock + j] * 0x1p-32f;
      // The row rotation is block-diagonal: rotate this block alone by
      // applying it to a row that is zero elsewhere.
      std::vector<float> tmp(spec.paddedDim, 0.0f);
      std::copy(scaled.begin(), scaled.end(), tmp.begin() + b * kBlock);
      spec.rotation->forward(tmp);
      std::copy(tmp.begin() + b * kBlock, tmp.begin() + (b + 1) * kBlock, rot);
    }
    float amax = 0.0f;
    for (unsigned j = 0; j < kBlock; ++j)
      if (std::fabs(rot[j]) > amax)
        amax = std::fabs(rot[j]);
    const float d = amax / cmax;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    bool saturated = false;
    // Clamped in double: d * 2^32 itself may exceed the float range.
    const float stored = float(std::fmin(double(d) * unscale, 3.0e38));
    storeHalf(blk + kScaleOffset, floatToHalfSaturating(stored, &saturated));
    stats.saturatedBlocks += saturated;
    for (unsigned j = 0; j < kBlock; ++j) {
      // Note: scaled by 1/d in f32, not by the fp16-rounded scale.
      uint32_t idx = cb.quantize(rot[j] * id);
      writeIndex(blk, spec, j, idx);
      if (spec.residualSignPlane) {
        float residual = rot[j] - d * cb.centroids[idx];
        writePlane(blk, *spec.residualSignPlane, j, residual >= 0.0f);
      }
    }
    ++stats.blocks;
  }
}

void decodeTq3(const FormatSpec &spec, std::span<const uint8_t> in,
               std::span<float> out, Domain domain) {
  const Codebook &cb = *spec.codebook;
  for (unsigned b = 0; b < spec.blocksPerRow(); ++b) {
    const uint8_t *blk = in.data() + b * kBytes;
    const float d = halfToFloat(loadHalfBits(blk + kScaleOffset));
    float *y = out.data() + b * kBlock;
    for (unsigned j = 0; j < kBlock; ++j)
      y[j] = d * cb.centroids[readIndex(blk, spec, j)];
  }
  if (domain == Domain::Original)
    spec.rotation->inverse(out);
}

} // namespace tq::quant::detail
