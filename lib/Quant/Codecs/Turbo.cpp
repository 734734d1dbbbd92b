//===- Turbo.cpp - turbo2_0 / turbo3_0 / turbo4_0 blocks ------------------===//
//
// 128 values per block. Each 128-group is L2-normalised, rotated by
// R = diag(S2) H128/sqrt(128) diag(S1) and quantised against a literal
// codebook; the stored fp16 norm is ||x|| / ||C[idx]||, which makes the
// reconstruction keep the input's norm. Layouts (bytes):
//   turbo2_0: norm(2) qs(32: 2-bit)                               = 34
//   turbo3_0: norm(2) qs(32: low 2 bits) signs(16: bit 2 of idx)  = 50
//   turbo4_0: norm(2) rnorm(2: always 0) qs(64: 4-bit nibbles)    = 68
// Decoding to the rotated domain (what the fork's dequantiser returns) is
// C[idx] * norm; the original domain applies R^T.
//
//===----------------------------------------------------------------------===//

#include "Codecs.h"
#include "../ForkConstants.h"
#include "tq/Quant/Half.h"

#include <cmath>
#include <vector>

namespace tq::quant::detail {

namespace {
constexpr unsigned kGroup = 128;
} // namespace

Result<FormatSpec> makeTurboSpec(unsigned bits, unsigned headDim) {
  FormatSpec spec;
  spec.family = FormatFamily::Turbo;
  spec.headDim = headDim;
  spec.paddedDim = (headDim + kGroup - 1) / kGroup * kGroup;
  spec.blockLen = kGroup;
  spec.scaleRule = ScaleRule::L2Corrected;
  spec.scaleType = ScalarType::F16;
  spec.scaleOffset = 0;
  spec.indexBits = bits;
  Result<Codebook> cb = Status::error("unsupported turbo width");
  switch (bits) {
  case 2:
    spec.name = "turbo2_0";
    spec.bytesPerBlock = 34;
    spec.indexPlanes = {BitPlane{2, 2, 0}};
    cb = Codebook::literal({std::begin(fork::kTurbo2Centroids),
                            std::end(fork::kTurbo2Centroids)},
                           {std::begin(fork::kTurbo2Midpoints),
                            std::end(fork::kTurbo2Midpoints)});
    break;
  case 3:
    spec.name = "turbo3_0";
    spec.bytesPerBlock = 50;
    spec.indexPlanes = {BitPlane{2, 2, 0}, BitPlane{34, 1, 2}};
    cb = Codebook::literal({std::begin(fork::kTurbo3Centroids),
                            std::end(fork::kTurbo3Centroids)},
                           {std::begin(fork::kTurbo3Midpoints),
                            std::end(fork::kTurbo3Midpoints)});
    break;
  case 4:
    spec.name = "turbo4_0";
    spec.bytesPerBlock = 68;
    spec.indexPlanes = {BitPlane{4, 4, 0}};
    spec.zeroFields = {{2, 2}};
    cb = Codebook::literal({std::begin(fork::kTurbo4Centroids),
                            std::end(fork::kTurbo4Centroids)},
                           {std::begin(fork::kTurbo4Midpoints),
                            std::end(fork::kTurbo4Midpoints)});
    break;
  default:
    break;
  }
  if (!cb)
    return cb.status();
  spec.codebook = std::move(*cb);
  Result<Rotation> rot = Rotation::blockHadamard(
      spec.paddedDim,
      {std::begin(fork::kTurboSigns1), std::end(fork::kTurboSigns1)},
      {std::begin(fork::kTurboSigns2), std::end(fork::kTurboSigns2)});
  if (!rot)
    return rot.status();
  spec.rotation = std::move(*rot);
  return spec;
}

void encodeTurbo(const FormatSpec &spec, std::span<float> row,
                 std::span<uint8_t> out, EncodeStats &stats) {
  const Codebook &cb = *spec.codebook;
  const unsigned groups = spec.blocksPerRow();
  std::vector<float> norms(groups);
  // Normalise each group before rotating, as the reference does.
  for (unsigned g = 0; g < groups; ++g) {
    std::span<float> x = row.subspan(g * kGroup, kGroup);
    float sumSq = 0.0f;
    for (float v : x)
      sumSq += v * v;
    float norm = std::sqrt(sumSq);
    if (std::isfinite(norm)) {
      const float inv = norm > 1e-10f ? 1.0f / norm : 0.0f;
      for (float &v : x)
        v *= inv;
    } else {
      // The f32 sum of squares overflowed: normalise in double instead
      // (the reference would write an inf norm here).
      double dnorm = robustNorm(x);
      for (float &v : x)
        v = float(double(v) / dnorm);
      norm = float(std::fmin(dnorm, 3.0e38));
    }
    norms[g] = norm;
  }
  spec.rotation->forward(row);
  for (unsigned g = 0; g < groups; ++g) {
    const float *y = row.data() + g * kGroup;
    uint8_t *blk = out.data() + g * spec.bytesPerBlock;
    float reconSq = 0.0f;
    for (unsigned j = 0; j < kGroup; ++j) {
      uint32_t idx = cb.quantize(y[j]);
      writeIndex(blk, spec, j, idx);
      reconSq += cb.centroids[idx] * cb.centroids[idx];
    }
    const float recon = std::sqrt(reconSq);
    // Divided in double (identical to the f32 quotient, since double
    // rounding of an f32 division is innocuous) so a huge norm over a small
    // recon saturates instead of overflowing to inf.
    const double quotient =
        recon > 1e-10f ? double(norms[g]) / double(recon) : norms[g];
    const float stored = float(std::fmin(quotient, 3.0e38));
    bool saturated = false;
    storeHalf(blk + spec.scaleOffset, floatToHalfSaturating(stored, &saturated));
    stats.saturatedBlocks += saturated;
    ++stats.blocks;
  }
}

void decodeTurbo(const FormatSpec &spec, std::span<const uint8_t> in,
                 std::span<float> out, Domain domain) {
  const Codebook &cb = *spec.codebook;
  for (unsigned g = 0; g < spec.blocksPerRow(); ++g) {
    const uint8_t *blk = in.data() + g * spec.bytesPerBlock;
    const float norm = halfToFloat(loadHalfBits(blk + spec.scaleOffset));
    float *y = out.data() + g * kGroup;
    for (unsigned j = 0; j < kGroup; ++j)
      y[j] = cb.centroids[readIndex(blk, spec, j)] * norm;
  }
  if (domain == Domain::Original)
    spec.rotation->inverse(out);
}

} // namespace tq::quant::detail
