//===- Stats.cpp - Quality of a format on a set of rows -------------------===//

#include "tq/Quant/Stats.h"
#include "tq/Quant/Random.h"

#include <cmath>
#include <string>

namespace tq::quant {

Result<QualityReport> measureQuality(const Format &format,
                                     std::span<const float> data,
                                     unsigned numQueries,
                                     uint64_t querySeed) {
  const unsigned dim = format.headDim();
  if (data.empty() || data.size() % dim != 0)
    return Status::error(std::to_string(data.size()) +
                         " values are not a whole number of rows of " +
                         std::to_string(dim));
  const size_t rows = data.size() / dim;
  std::vector<float> queries(size_t(numQueries) * dim);
  SplitMix64 rng(querySeed);
  for (float &v : queries)
    v = float(rng.gaussian());

  QualityReport r;
  r.rows = rows;
  r.bitsPerValue = format.bitsPerValue();
  r.compressionVsF16 = 16.0 / r.bitsPerValue;
  std::vector<uint8_t> block(format.rowBytes());
  std::vector<float> recon(dim);
  EncodeStats stats;
  double errSq = 0, refSq = 0, cosSum = 0;
  double ipErrSum = 0, ipErrSq = 0, ipRefSq = 0;
  for (size_t i = 0; i < rows; ++i) {
    std::span<const float> x = data.subspan(i * dim, dim);
    if (Status s = format.encodeRow(x, block, &stats); !s)
      return Status::error("row " + std::to_string(i) + ": " + s.message());
    if (Status s = format.decodeRow(block, recon); !s)
      return Status::error("row " + std::to_string(i) + ": " + s.message());
    double dot = 0, xx = 0, yy = 0, e = 0;
    for (unsigned j = 0; j < dim; ++j) {
      double a = x[j], b = recon[j];
      dot += a * b;
      xx += a * a;
      yy += b * b;
      e += (a - b) * (a - b);
    }
    errSq += e;
    refSq += xx;
    cosSum += (xx > 0 && yy > 0) ? dot / std::sqrt(xx * yy)
                                 : (xx == 0 && yy == 0 ? 1.0 : 0.0);
    for (unsigned q = 0; q < numQueries; ++q) {
      const float *qv = &queries[size_t(q) * dim];
      double ref = 0, est = 0;
      for (unsigned j = 0; j < dim; ++j) {
        ref += double(qv[j]) * x[j];
        est += double(qv[j]) * recon[j];
      }
      ipErrSum += est - ref;
      ipErrSq += (est - ref) * (est - ref);
      ipRefSq += ref * ref;
    }
  }
  const double n = double(rows) * numQueries;
  r.mse = errSq / double(data.size());
  r.relError = refSq > 0 ? std::sqrt(errSq / refSq) : std::sqrt(errSq);
  r.cosine = cosSum / double(rows);
  if (numQueries > 0) {
    const double refRms = std::sqrt(ipRefSq / n);
    const double mean = ipErrSum / n;
    const double var = n > 1 ? (ipErrSq - n * mean * mean) / (n - 1) : 0.0;
    const double unit = refRms > 0 ? refRms : 1.0;
    r.ipBias = mean / unit;
    r.ipBiasStdErr = std::sqrt(std::fmax(var, 0.0) / n) / unit;
    r.ipRelRmse = std::sqrt(ipErrSq / n) / unit;
  }
  r.saturatedBlocks = stats.saturatedBlocks;
  return r;
}

std::vector<float> makeOutlierSample(unsigned rows, unsigned dim,
                                     uint64_t seed) {
  static constexpr unsigned kChannels[] = {3, 37, 77, 101};
  static constexpr float kGains[] = {12.0f, 25.0f, -18.0f, 40.0f};
  SplitMix64 rng(seed);
  std::vector<float> data(size_t(rows) * dim);
  for (float &v : data)
    v = float(rng.gaussian());
  for (unsigned r = 0; r < rows; ++r)
    for (unsigned c = 0; c < 4; ++c)
      data[size_t(r) * dim + kChannels[c] % dim] *= kGains[c];
  return data;
}

} // namespace tq::quant
