//===- QjlTest.cpp - Tests for the QJL residual sketch --------------------===//
//
// Checks that the projection is a pure function of its seed, that the sign
// packing matches the header's bit layout, and the two statistical claims of
// Qjl.h: the inner-product estimate is unbiased and its variance is at most
// pi / (2 m) ||y||^2 ||r||^2.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Qjl.h"

#include "tq/Quant/Random.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

using namespace tq::quant;

namespace {

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double acc = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    acc += double(a[i]) * double(b[i]);
  return acc;
}

std::vector<float> gaussianVector(unsigned n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float &x : v)
    x = float(rng.gaussian());
  return v;
}

bool bitAt(const std::vector<uint8_t> &bits, unsigned i) {
  return (bits[i / 8] >> (i % 8)) & 1u;
}

TEST(QjlTest, MatrixIsRowMajorSplitMixDraw) {
  QjlProjection p(5, 3, 1234);
  EXPECT_EQ(p.dim(), 5u);
  EXPECT_EQ(p.rows(), 3u);
  EXPECT_EQ(p.seed(), 1234u);
  EXPECT_EQ(p.signBytes(), 1u);
  ASSERT_EQ(p.matrix().size(), 15u);
  SplitMix64 rng(1234);
  for (size_t i = 0; i < 15; ++i)
    EXPECT_EQ(p.matrix()[i], float(rng.gaussian())) << "entry " << i;
}

TEST(QjlTest, SameSeedSameMatrixDifferentSeedDiffers) {
  QjlProjection a(32, 16, 7), b(32, 16, 7), c(32, 16, 8);
  EXPECT_EQ(a.matrix(), b.matrix());
  ASSERT_EQ(a.matrix().size(), c.matrix().size());
  size_t differing = 0;
  for (size_t i = 0; i < a.matrix().size(); ++i)
    differing += a.matrix()[i] != c.matrix()[i];
  // Independent Gaussian draws essentially never coincide.
  EXPECT_GT(differing, a.matrix().size() * 9 / 10);
}

TEST(QjlTest, SignBytes) {
  EXPECT_EQ(QjlProjection(4, 1, 0).signBytes(), 1u);
  EXPECT_EQ(QjlProjection(4, 8, 0).signBytes(), 1u);
  EXPECT_EQ(QjlProjection(4, 9, 0).signBytes(), 2u);
  EXPECT_EQ(QjlProjection(4, 128, 0).signBytes(), 16u);
}

TEST(QjlTest, SignsOfBasisVectorReadTheMatrixColumn) {
  // With r = e_k, (S r)_i = S[i][k], so bit i is the sign of column k; this
  // checks the packing against the matrix directly, not via project().
  const unsigned dim = 4, rows = 10;
  QjlProjection p(dim, rows, 99);
  const std::vector<float> &s = p.matrix();
  for (unsigned k = 0; k < dim; ++k) {
    std::vector<float> r(dim, 0.0f);
    r[k] = 1.0f;
    // Pre-fill with ones: unused high bits must be cleared, and the byte past
    // signBytes() must be left alone.
    std::vector<uint8_t> bits(p.signBytes() + 1, 0xFF);
    p.signs(r, bits);
    uint8_t expected[2] = {0, 0};
    for (unsigned i = 0; i < rows; ++i)
      if (s[i * dim + k] >= 0.0f)
        expected[i / 8] |= uint8_t(1u << (i % 8));
    EXPECT_EQ(bits[0], expected[0]) << "column " << k;
    EXPECT_EQ(bits[1], expected[1]) << "column " << k;
    EXPECT_EQ(bits[1] & 0xFC, 0) << "unused high bits must be zero";
    EXPECT_EQ(bits[2], 0xFF) << "byte past signBytes() was written";
  }
}

TEST(QjlTest, SignsMatchProject) {
  const unsigned dim = 4, rows = 10;
  QjlProjection p(dim, rows, 5);
  std::vector<float> r = {0.5f, -1.25f, 2.0f, 0.75f};
  std::vector<float> sr(rows);
  p.project(r, sr);
  std::vector<uint8_t> bits(p.signBytes());
  p.signs(r, bits);
  for (unsigned i = 0; i < rows; ++i)
    EXPECT_EQ(bitAt(bits, i), sr[i] >= 0.0f) << "row " << i;
  // Negating r flips every bit (no projection is exactly zero here).
  std::vector<float> neg = {-0.5f, 1.25f, -2.0f, -0.75f};
  std::vector<uint8_t> negBits(p.signBytes());
  p.signs(neg, negBits);
  for (unsigned i = 0; i < rows; ++i)
    EXPECT_NE(bitAt(negBits, i), bitAt(bits, i)) << "row " << i;
}

TEST(QjlTest, ZeroResidualHasAllBitsSet) {
  // (S 0)_i = 0 >= 0, so every bit is +1; high bits of the last byte stay 0.
  QjlProjection p(4, 10, 3);
  std::vector<uint8_t> bits(2, 0);
  p.signs(std::vector<float>(4, 0.0f), bits);
  EXPECT_EQ(bits[0], 0xFF);
  EXPECT_EQ(bits[1], 0x03);
}

TEST(QjlTest, ProjectIsMatrixVectorProduct) {
  const unsigned dim = 3, rows = 2;
  QjlProjection p(dim, rows, 11);
  const std::vector<float> &s = p.matrix();
  std::vector<float> x = {1.0f, -2.0f, 0.5f};
  std::vector<float> out(rows);
  p.project(x, out);
  for (unsigned i = 0; i < rows; ++i) {
    double want = double(s[i * dim]) * 1.0 + double(s[i * dim + 1]) * -2.0 +
                  double(s[i * dim + 2]) * 0.5;
    EXPECT_EQ(out[i], float(want)) << "row " << i;
  }
}

TEST(QjlTest, EstimateByHand) {
  // rows = 10, sy = 1..10, bits 0b0000000101 0b10 -> +1 at rows 0, 2, 9.
  QjlProjection p(2, 10, 0);
  std::vector<float> sy = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<uint8_t> bits = {0x05, 0x02};
  double sum = 1 - 2 + 3 - 4 - 5 - 6 - 7 - 8 - 9 + 10; // = -27
  double want = 2.5 * std::sqrt(M_PI / 2) / 10 * sum;
  EXPECT_NEAR(p.estimate(sy, bits, 2.5), want, 1e-12);
}

TEST(QjlTest, ReconstructMatchesEstimate) {
  const unsigned d = 128;
  std::vector<float> y = gaussianVector(d, 101);
  std::vector<float> r = gaussianVector(d, 202);
  double rNorm = std::sqrt(dot(r, r));
  double yNorm = std::sqrt(dot(y, y));
  for (uint64_t seed : {1ull, 2ull, 3ull, 0xDEADBEEFull}) {
    QjlProjection p(d, d, seed);
    std::vector<float> sy(d), rec(d);
    std::vector<uint8_t> bits(p.signBytes());
    p.project(y, sy);
    p.signs(r, bits);
    p.reconstruct(bits, rNorm, rec);
    double viaReconstruct = dot(y, rec);
    double viaEstimate = p.estimate(sy, bits, rNorm);
    EXPECT_NEAR(viaReconstruct, viaEstimate, 1e-4 * yNorm * rNorm)
        << "seed " << seed;
  }
}

TEST(QjlTest, ReconstructByHand) {
  // out[j] = ||r|| sqrt(pi/2) / m * sum_i S[i][j] sign_i.
  const unsigned dim = 3, rows = 4;
  QjlProjection p(dim, rows, 77);
  const std::vector<float> &s = p.matrix();
  std::vector<uint8_t> bits = {0x09}; // +1 at rows 0 and 3, -1 at 1 and 2
  std::vector<float> out(dim);
  p.reconstruct(bits, 3.0, out);
  double c = 3.0 * std::sqrt(M_PI / 2) / rows;
  for (unsigned j = 0; j < dim; ++j) {
    double want =
        c * (double(s[j]) - s[dim + j] - s[2 * dim + j] + s[3 * dim + j]);
    EXPECT_NEAR(out[j], want, 1e-6 * (std::fabs(want) + 1)) << "col " << j;
  }
}

/// Estimates of <y, r> over many independent projections, computed once and
/// shared by the unbiasedness and variance tests.
struct EstimatorSample {
  static constexpr unsigned kDim = 128;
  static constexpr unsigned kSeeds = 4000;
  std::vector<float> y, r;
  double yNorm2 = 0, rNorm2 = 0, exact = 0;
  double mean = 0, variance = 0;
};

const EstimatorSample &estimatorSample() {
  static const EstimatorSample sample = [] {
    EstimatorSample s;
    const unsigned d = EstimatorSample::kDim;
    s.y = gaussianVector(d, 0x5EED0001);
    s.r = gaussianVector(d, 0x5EED0002);
    // r is a unit vector; y keeps its Gaussian norm (~sqrt(d)).
    double n = std::sqrt(dot(s.r, s.r));
    for (float &v : s.r)
      v = float(v / n);
    s.rNorm2 = dot(s.r, s.r);
    s.yNorm2 = dot(s.y, s.y);
    s.exact = dot(s.y, s.r);
    double rNorm = std::sqrt(s.rNorm2);

    // Projection seeds come from their own stream so they are unrelated.
    SplitMix64 seedStream(0xC0FFEE);
    std::vector<uint64_t> seeds(EstimatorSample::kSeeds);
    for (uint64_t &seed : seeds)
      seed = seedStream.next();
    // Drawing 4000 128x128 Gaussian matrices dominates the test's run time,
    // so trials are split over a few threads. Each writes its own slots of
    // errors, so the result does not depend on the thread count.
    std::vector<double> errors(EstimatorSample::kSeeds);
    auto runTrials = [&](unsigned begin, unsigned end) {
      std::vector<float> sy(d);
      std::vector<uint8_t> bits((d + 7) / 8);
      for (unsigned t = begin; t < end; ++t) {
        QjlProjection p(d, d, seeds[t]);
        p.project(s.y, sy);
        p.signs(s.r, bits);
        errors[t] = p.estimate(sy, bits, rNorm) - s.exact;
      }
    };
    unsigned numThreads =
        std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < numThreads; ++w)
      workers.emplace_back(runTrials, w * EstimatorSample::kSeeds / numThreads,
                           (w + 1) * EstimatorSample::kSeeds / numThreads);
    for (std::thread &worker : workers)
      worker.join();
    double sum = 0;
    for (double e : errors)
      sum += e;
    s.mean = sum / errors.size();
    double ss = 0;
    for (double e : errors)
      ss += (e - s.mean) * (e - s.mean);
    s.variance = ss / (errors.size() - 1);
    return s;
  }();
  return sample;
}

TEST(QjlTest, EstimateIsUnbiased) {
  const EstimatorSample &s = estimatorSample();
  double stdErr = std::sqrt(s.variance / EstimatorSample::kSeeds);
  ASSERT_GT(stdErr, 0.0);
  double sigmas = s.mean / stdErr;
  std::printf("[ QJL      ] <y,r> = %.6f, mean error = %.6g (%.3f standard "
              "errors, N = %u)\n",
              s.exact, s.mean, sigmas, EstimatorSample::kSeeds);
  EXPECT_LT(std::fabs(sigmas), 5.0);
}

TEST(QjlTest, VarianceWithinBound) {
  const EstimatorSample &s = estimatorSample();
  const double m = EstimatorSample::kDim;
  double bound = M_PI / (2 * m) * s.yNorm2 * s.rNorm2;
  // The exact variance is bound - <y, r>^2 / m; a sample far below it would
  // mean the estimator is not the documented one.
  double exactVar = bound - s.exact * s.exact / m;
  std::printf("[ QJL      ] variance = %.6g, bound = %.6g (ratio %.4f), "
              "theory = %.6g\n",
              s.variance, bound, s.variance / bound, exactVar);
  EXPECT_LE(s.variance, 1.10 * bound);
  EXPECT_NEAR(s.variance / exactVar, 1.0, 0.10);
}

} // namespace
