//===- Codebook.h - Scalar codebooks and Lloyd-Max design -------*- C++ -*-===//
//
// A codebook maps a b-bit index to a centroid. Quantisation picks the index
// by comparing against the decision thresholds: idx = first i with
// v < thresholds[i], else 2^b - 1 (ties go to the upper index, the rule every
// existing encoder uses).
//
// Lloyd-Max codebooks are designed for the distribution of one coordinate of
// a uniformly random point on the unit sphere S^{d-1} (density proportional
// to (1 - x^2)^((d-3)/2) on [-1, 1]) or for its Gaussian limit N(0, 1/d).
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_CODEBOOK_H
#define TQ_QUANT_CODEBOOK_H

#include "tq/Quant/Status.h"

#include <cstdint>
#include <vector>

namespace tq::quant {

/// The source distribution a Lloyd-Max codebook is optimal for.
enum class CodebookDistribution {
  /// One coordinate of a uniform point on S^{d-1}.
  Sphere,
  /// N(0, 1/d), the d -> infinity limit of Sphere.
  Gaussian,
};

/// A scalar quantiser: 2^bits sorted centroids and 2^bits - 1 sorted
/// thresholds. Invariant: centroids.size() == 1 << bits and
/// thresholds.size() == centroids.size() - 1.
struct Codebook {
  unsigned bits = 0;
  std::vector<float> centroids;
  std::vector<float> thresholds;

  /// Index of the cell containing v (ties to the upper cell).
  uint32_t quantize(float v) const;
  /// Largest |centroid|.
  float maxAbs() const;
  /// A codebook from literal values; thresholds default to midpoints.
  static Result<Codebook> literal(std::vector<float> centroids,
                                  std::vector<float> thresholds = {});
};

/// Result of a Lloyd-Max design, in double precision.
struct LloydMaxDesign {
  std::vector<double> centroids;
  std::vector<double> thresholds;
  /// Expected squared error of one coordinate, E[(x - Q(x))^2].
  double mse = 0.0;
  /// Iterations taken until the centroids moved by less than the tolerance.
  unsigned iterations = 0;
};

/// Designs the Lloyd-Max quantiser with 2^bits levels for one coordinate of
/// a d-dimensional unit vector. bits in [1, 8], dim >= 1 (Sphere needs
/// dim >= 3 for a bounded density).
Result<LloydMaxDesign> designLloydMax(CodebookDistribution dist, unsigned dim,
                                      unsigned bits);

/// designLloydMax rounded to float as a Codebook.
Result<Codebook> lloydMaxCodebook(CodebookDistribution dist, unsigned dim,
                                  unsigned bits);

} // namespace tq::quant

#endif // TQ_QUANT_CODEBOOK_H
