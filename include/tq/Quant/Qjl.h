//===- Qjl.h - Quantised Johnson-Lindenstrauss residual sketch --*- C++ -*-===//
//
// QJL (TurboQuant_prod's second stage): a seeded Gaussian projection S with
// m rows and d columns, entries i.i.d. N(0, 1). A residual r is stored as
// sign(S r) (m bits) and ||r||. For any query y,
//
//   est(y) = ||r|| * sqrt(pi/2) / m * < S y , sign(S r) >
//
// is an unbiased estimate of <y, r> with variance at most
// pi / (2 m) * ||y||^2 * ||r||^2.
//
// Sign bits are packed LSB first: bit i of the row lives in byte i / 8 at bit
// position i % 8, set iff (S r)_i >= 0 (so +1).
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_QJL_H
#define TQ_QUANT_QJL_H

#include <cstdint>
#include <span>
#include <vector>

namespace tq::quant {

/// A seeded m x d Gaussian projection. Immutable once built.
class QjlProjection {
public:
  /// Draws S row-major from SplitMix64(seed) with Box-Muller normals.
  QjlProjection(unsigned dim, unsigned rows, uint64_t seed);

  unsigned dim() const { return dim_; }
  unsigned rows() const { return rows_; }
  uint64_t seed() const { return seed_; }
  /// Bytes needed for one row's sign bits.
  unsigned signBytes() const { return (rows_ + 7) / 8; }
  /// S as a row-major rows x dim matrix.
  const std::vector<float> &matrix() const { return s_; }

  /// out = S x (out.size() == rows, x.size() == dim), accumulated in double.
  void project(std::span<const float> x, std::span<float> out) const;
  /// Packs sign(S r) into bits (bits.size() >= signBytes()).
  void signs(std::span<const float> r, std::span<uint8_t> bits) const;
  /// Estimate of <y, r> given sy = S y (precomputed once per query), the
  /// packed signs of r and ||r||.
  double estimate(std::span<const float> sy, std::span<const uint8_t> bits,
                  double residualNorm) const;
  /// The unbiased reconstruction ||r|| sqrt(pi/2)/m * S^T sign(S r).
  void reconstruct(std::span<const uint8_t> bits, double residualNorm,
                   std::span<float> out) const;

private:
  unsigned dim_;
  unsigned rows_;
  uint64_t seed_;
  std::vector<float> s_;
};

} // namespace tq::quant

#endif // TQ_QUANT_QJL_H
