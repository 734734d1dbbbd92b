//===- Stats.h - Quality of a format on a set of rows -----------*- C++ -*-===//
//
// Measures what a format does to real-looking K/V rows: storage cost and
// reconstruction error, and the bias of attention scores <q, k_hat>
// against random Gaussian queries. Also provides the built-in sample that
// the README's demo encodes.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_STATS_H
#define TQ_QUANT_STATS_H

#include "tq/Quant/Format.h"
#include "tq/Quant/Status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tq::quant {

struct QualityReport {
  size_t rows = 0;
  double bitsPerValue = 0;
  /// 16 / bitsPerValue.
  double compressionVsF16 = 0;
  /// Mean over all values of (x - x_hat)^2.
  double mse = 0;
  /// sqrt(sum (x - x_hat)^2 / sum x^2) over all rows.
  double relError = 0;
  /// Mean over rows of cos(x, x_hat) (rows of zeros count as 1 when the
  /// reconstruction is zero too).
  double cosine = 0;
  /// Mean of <q, x_hat> - <q, x> over rows x queries, divided by the RMS
  /// of <q, x>; with its standard error in the same unit.
  double ipBias = 0;
  double ipBiasStdErr = 0;
  /// RMS of <q, x_hat> - <q, x> divided by the RMS of <q, x>.
  double ipRelRmse = 0;
  size_t saturatedBlocks = 0;
};

/// Encodes and decodes every row of `data` (rows of format.headDim()
/// values) and measures the result against numQueries N(0, I) queries
/// drawn from SplitMix64(querySeed). Fails on non-finite input, naming the
/// row, or when data is not a whole number of rows.
Result<QualityReport> measureQuality(const Format &format,
                                     std::span<const float> data,
                                     unsigned numQueries = 64,
                                     uint64_t querySeed = 1);

/// The built-in K/V sample: N(0, 1) values with four large outlier
/// channels (at 3, 37, 77, 101 modulo dim, scaled by 12, 25, -18, 40), the
/// shape of real key caches. rows * dim values from SplitMix64(seed).
std::vector<float> makeOutlierSample(unsigned rows, unsigned dim,
                                     uint64_t seed = 20260525);

} // namespace tq::quant

#endif // TQ_QUANT_STATS_H
