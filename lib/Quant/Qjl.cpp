//===- Qjl.cpp - Quantised Johnson-Lindenstrauss residual sketch ----------===//
//
// The seeded Gaussian projection behind TurboQuant_prod's residual stage.
// All inner products are accumulated in double and only the stored results
// (S itself, S x) are rounded to float, so the estimator's statistics are not
// polluted by float summation error.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Qjl.h"

#include "tq/Quant/Random.h"

#include <cassert>
#include <cmath>
#include <cstddef>

namespace tq::quant {

namespace {

/// sqrt(pi / 2): the factor that makes E[<s, y> sign(<s, r>)] = <y, r> / ||r||
/// unbiased for s ~ N(0, I).
constexpr double kSqrtHalfPi = 1.2533141373155002512078826424055;

/// Row i of S as a span (dim floats).
std::span<const float> rowOf(const std::vector<float> &s, unsigned dim,
                             unsigned i) {
  return std::span<const float>(s).subspan(size_t(i) * dim, dim);
}

/// <row, x> accumulated in double.
double dot(std::span<const float> row, std::span<const float> x) {
  double acc = 0.0;
  for (size_t j = 0; j < row.size(); ++j)
    acc += double(row[j]) * double(x[j]);
  return acc;
}

/// +1 if bit i of the packed LSB-first sign vector is set, else -1.
double signAt(std::span<const uint8_t> bits, unsigned i) {
  return ((bits[i / 8] >> (i % 8)) & 1u) ? 1.0 : -1.0;
}

} // namespace

QjlProjection::QjlProjection(unsigned dim, unsigned rows, uint64_t seed)
    : dim_(dim), rows_(rows), seed_(seed) {
  // Row-major draw order is part of the format: a seed fixes S everywhere.
  SplitMix64 rng(seed);
  s_.resize(size_t(rows) * dim);
  for (float &v : s_)
    v = float(rng.gaussian());
}

void QjlProjection::project(std::span<const float> x,
                            std::span<float> out) const {
  assert(x.size() == dim_ && out.size() == rows_ && "project: bad sizes");
  for (unsigned i = 0; i < rows_; ++i)
    out[i] = float(dot(rowOf(s_, dim_, i), x));
}

void QjlProjection::signs(std::span<const float> r,
                          std::span<uint8_t> bits) const {
  assert(r.size() == dim_ && bits.size() >= signBytes() && "signs: bad sizes");
  // Clear the whole packed range first so unused high bits of the last byte
  // end up zero; bytes past signBytes() are left untouched.
  for (unsigned b = 0; b < signBytes(); ++b)
    bits[b] = 0;
  for (unsigned i = 0; i < rows_; ++i)
    if (dot(rowOf(s_, dim_, i), r) >= 0.0)
      bits[i / 8] |= uint8_t(1u << (i % 8));
}

double QjlProjection::estimate(std::span<const float> sy,
                               std::span<const uint8_t> bits,
                               double residualNorm) const {
  assert(sy.size() == rows_ && bits.size() >= signBytes() &&
         "estimate: bad sizes");
  if (rows_ == 0)
    return 0.0;
  double acc = 0.0;
  for (unsigned i = 0; i < rows_; ++i)
    acc += double(sy[i]) * signAt(bits, i);
  return residualNorm * kSqrtHalfPi / double(rows_) * acc;
}

void QjlProjection::reconstruct(std::span<const uint8_t> bits,
                                double residualNorm,
                                std::span<float> out) const {
  assert(bits.size() >= signBytes() && out.size() == dim_ &&
         "reconstruct: bad sizes");
  if (rows_ == 0) {
    for (float &v : out)
      v = 0.0f;
    return;
  }
  // out = c * S^T sign(S r), accumulated column-wise in double; walking S
  // row by row keeps the matrix access sequential.
  std::vector<double> acc(dim_, 0.0);
  for (unsigned i = 0; i < rows_; ++i) {
    double sgn = signAt(bits, i);
    std::span<const float> row = rowOf(s_, dim_, i);
    for (unsigned j = 0; j < dim_; ++j)
      acc[j] += double(row[j]) * sgn;
  }
  double c = residualNorm * kSqrtHalfPi / double(rows_);
  for (unsigned j = 0; j < dim_; ++j)
    out[j] = float(c * acc[j]);
}

} // namespace tq::quant
