//===- Polar.cpp - PolarQuant and TurboQuant_prod rows --------------------===//
//
// The paper's formats, one block per head:
//   polarB  (B = 1..4): fp16 ||x|| at byte 0, then B-bit Lloyd-Max indices
//           of the unit vector rotated by a seeded two-sided randomised WHT
//           over the head zero-padded to a power of two (>= 8).
//   tqprodB (B = 2..4): fp16 ||x|| at 0, fp16 ||r|| at 2, (B-1)-bit polar
//           indices, then paddedDim QJL sign bits of the rotated unit-vector
//           residual r = y - C[idx] under a seeded Gaussian projection.
// Index bits: 1-, 2- and 4-bit planes hold the index directly; 3 bits are a
// 2-bit plane followed by a 1-bit plane (bit 2), as in turbo3_0.
//
//===----------------------------------------------------------------------===//

#include "Codecs.h"
#include "tq/Quant/Half.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace tq::quant::detail {

namespace {

/// Seeds fixing the formats' random objects ("TQ_POLAR", "TQ_QJL_S").
constexpr uint64_t kPolarRotationSeed = 0x54515f504f4c4152ull;
constexpr uint64_t kQjlSeed = 0x54515f514a4c5f53ull;

/// Index planes for `bits`-bit indices of n values starting at `offset`;
/// returns the byte just past them.
unsigned addIndexPlanes(FormatSpec &spec, unsigned bits, unsigned n,
                        unsigned offset) {
  spec.indexBits = bits;
  if (bits == 3) {
    spec.indexPlanes = {BitPlane{offset, 2, 0},
                        BitPlane{offset + n / 4, 1, 2}};
  } else {
    spec.indexPlanes = {BitPlane{offset, bits, 0}};
  }
  return offset + n * bits / 8;
}

Result<FormatSpec> makeSpec(FormatFamily family, unsigned bits,
                            unsigned headDim) {
  const bool prod = family == FormatFamily::TqProd;
  const unsigned indexBits = prod ? bits - 1 : bits;
  FormatSpec spec;
  spec.family = family;
  spec.name = (prod ? "tqprod" : "polar") + std::to_string(bits);
  spec.headDim = headDim;
  // Power of two for the WHT; >= 8 so every plane is whole bytes.
  spec.paddedDim = std::max(8u, nextPowerOfTwo(headDim));
  spec.blockLen = spec.paddedDim;
  spec.scaleRule = ScaleRule::L2;
  spec.scaleType = ScalarType::F16;
  spec.scaleOffset = 0;
  unsigned offset = 2;
  if (prod) {
    spec.residualNormOffset = 2;
    offset = 4;
  }
  offset = addIndexPlanes(spec, indexBits, spec.paddedDim, offset);
  if (prod) {
    spec.qjlPlane = BitPlane{offset, 1, 0};
    offset += spec.paddedDim / 8;
    spec.qjl = std::make_shared<QjlProjection>(spec.paddedDim,
                                               spec.paddedDim, kQjlSeed);
  }
  spec.bytesPerBlock = offset;
  Result<Rotation> rot =
      Rotation::seededHadamard(spec.paddedDim, kPolarRotationSeed, true);
  if (!rot)
    return rot.status();
  spec.rotation = std::move(*rot);
  Result<Codebook> cb = lloydMaxCodebook(CodebookDistribution::Sphere,
                                         spec.paddedDim, indexBits);
  if (!cb)
    return cb.status();
  spec.codebook = std::move(*cb);
  return spec;
}

} // namespace

Result<FormatSpec> makePolarSpec(unsigned bits, unsigned headDim) {
  return makeSpec(FormatFamily::Polar, bits, headDim);
}

Result<FormatSpec> makeTqProdSpec(unsigned bits, unsigned headDim) {
  return makeSpec(FormatFamily::TqProd, bits, headDim);
}

void encodePolar(const FormatSpec &spec, std::span<float> row,
                 std::span<uint8_t> out, EncodeStats &stats) {
  const Codebook &cb = *spec.codebook;
  const unsigned n = spec.paddedDim;
  uint8_t *blk = out.data();
  const double norm = robustNorm(row);
  for (float &v : row)
    v = norm > 0 ? float(double(v) / norm) : 0.0f;
  spec.rotation->forward(row);
  bool saturated = false;
  storeHalf(blk + spec.scaleOffset,
            floatToHalfSaturating(float(std::fmin(norm, 3.0e38)), &saturated));
  std::vector<float> residual(spec.qjl ? n : 0);
  for (unsigned j = 0; j < n; ++j) {
    uint32_t idx = cb.quantize(row[j]);
    writeIndex(blk, spec, j, idx);
    if (spec.qjl)
      residual[j] = row[j] - cb.centroids[idx];
  }
  if (spec.qjl) {
    double rnormSq = 0;
    for (float r : residual)
      rnormSq += double(r) * r;
    storeHalf(blk + *spec.residualNormOffset,
              floatToHalf(float(std::sqrt(rnormSq))));
    spec.qjl->signs(residual, std::span<uint8_t>(
                                  blk + spec.qjlPlane->byteOffset, n / 8));
  }
  stats.saturatedBlocks += saturated;
  ++stats.blocks;
}

void decodePolar(const FormatSpec &spec, std::span<const uint8_t> in,
                 std::span<float> out, Domain domain) {
  const Codebook &cb = *spec.codebook;
  const unsigned n = spec.paddedDim;
  const uint8_t *blk = in.data();
  const float norm = halfToFloat(loadHalfBits(blk + spec.scaleOffset));
  std::vector<float> correction(n, 0.0f);
  if (spec.qjl) {
    const float rnorm =
        halfToFloat(loadHalfBits(blk + *spec.residualNormOffset));
    spec.qjl->reconstruct(
        std::span<const uint8_t>(blk + spec.qjlPlane->byteOffset, n / 8),
        rnorm, correction);
  }
  for (unsigned j = 0; j < n; ++j)
    out[j] = norm * (cb.centroids[readIndex(blk, spec, j)] + correction[j]);
  if (domain == Domain::Original)
    spec.rotation->inverse(out);
}

} // namespace tq::quant::detail
