//===- Haar.cpp - haar4: dense Haar rotation, uint8 indices ---------------===//
//
// An NPU-style layout, one block per head of d values (no padding):
//   f32 scale = ||x|| at byte 0, then d uint8 indices (4 bits used) of the
//   unit vector rotated by a seeded dense Haar rotation, quantised with the
//   4-bit Lloyd-Max codebook for S^{d-1}.
// Decoding renormalises the reconstruction: scale * C[idx] / ||C[idx]||, so
// the decoded vector keeps the input's norm exactly.
//
//===----------------------------------------------------------------------===//

#include "Codecs.h"

#include <cfloat>
#include <cmath>

namespace tq::quant::detail {

namespace {
/// Seed fixing the Haar rotation ("TQ_HAAR4").
constexpr uint64_t kHaarSeed = 0x54515f4841415234ull;
constexpr unsigned kScaleBytes = 4;
} // namespace

Result<FormatSpec> makeHaarSpec(unsigned headDim) {
  if (headDim < 3)
    return Status::error("haar4 needs a head dim of at least 3, got " +
                         std::to_string(headDim));
  FormatSpec spec;
  spec.name = "haar4";
  spec.family = FormatFamily::Haar;
  spec.headDim = headDim;
  spec.paddedDim = headDim;
  spec.blockLen = headDim;
  spec.bytesPerBlock = kScaleBytes + headDim;
  spec.scaleRule = ScaleRule::L2Renormalised;
  spec.scaleType = ScalarType::F32;
  spec.scaleOffset = 0;
  spec.indexBits = 4;
  spec.indexPlanes = {BitPlane{kScaleBytes, 8, 0}};
  Result<Rotation> rot = Rotation::haar(headDim, kHaarSeed);
  if (!rot)
    return rot.status();
  spec.rotation = std::move(*rot);
  Result<Codebook> cb =
      lloydMaxCodebook(CodebookDistribution::Sphere, headDim, 4);
  if (!cb)
    return cb.status();
  spec.codebook = std::move(*cb);
  return spec;
}

void encodeHaar(const FormatSpec &spec, std::span<float> row,
                std::span<uint8_t> out, EncodeStats &stats) {
  const double norm = robustNorm(row);
  for (float &v : row)
    v = norm > 0 ? float(double(v) / norm) : 0.0f;
  spec.rotation->forward(row);
  for (unsigned j = 0; j < spec.headDim; ++j)
    writeIndex(out.data(), spec, j, spec.codebook->quantize(row[j]));
  const bool saturated = norm > double(FLT_MAX);
  storeF32(out.data() + spec.scaleOffset,
           saturated ? FLT_MAX : float(norm));
  stats.saturatedBlocks += saturated;
  ++stats.blocks;
}

void decodeHaar(const FormatSpec &spec, std::span<const uint8_t> in,
                std::span<float> out, Domain domain) {
  const Codebook &cb = *spec.codebook;
  const float scale = loadF32(in.data() + spec.scaleOffset);
  double normSq = 0;
  // The encoder writes 0..15 in each uint8; of any other byte only the low
  // four bits count (as in the kernels' register permutes), so no byte
  // reads past the codebook.
  const size_t levels = cb.centroids.size();
  for (unsigned j = 0; j < spec.headDim; ++j) {
    out[j] = cb.centroids[readIndex(in.data(), spec, j) % levels];
    normSq += double(out[j]) * out[j];
  }
  // Every centroid is non-zero, so the reconstruction norm is positive.
  const double factor = normSq > 0 ? scale / std::sqrt(normSq) : 0.0;
  for (unsigned j = 0; j < spec.headDim; ++j)
    out[j] = float(out[j] * factor);
  if (domain == Domain::Original)
    spec.rotation->inverse(out);
}

} // namespace tq::quant::detail
