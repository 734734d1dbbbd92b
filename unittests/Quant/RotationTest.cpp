//===- RotationTest.cpp - Rotations are orthogonal and invertible ---------===//

#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"
#include "tq/Quant/Rotation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace tq::quant;

namespace {

/// max |M M^T - I|.
double orthogonalityError(const std::vector<double> &m, unsigned n) {
  double worst = 0;
  for (unsigned i = 0; i < n; ++i)
    for (unsigned j = 0; j < n; ++j) {
      double dot = 0;
      for (unsigned k = 0; k < n; ++k)
        dot += m[size_t(i) * n + k] * m[size_t(j) * n + k];
      worst = std::fmax(worst, std::fabs(dot - (i == j ? 1.0 : 0.0)));
    }
  return worst;
}

std::vector<float> randomVector(unsigned n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float &x : v)
    x = float(rng.gaussian());
  return v;
}

std::vector<Rotation> sampleRotations() {
  std::vector<Rotation> rs;
  rs.push_back(Rotation::identity(96));
  for (unsigned n : {2u, 32u, 64u, 128u, 256u}) {
    rs.push_back(*Rotation::seededHadamard(n, 7 + n, false));
    rs.push_back(*Rotation::seededHadamard(n, 9 + n, true));
  }
  std::vector<int8_t> s32(32, 1);
  s32[3] = -1;
  rs.push_back(*Rotation::blockHadamard(160, s32));
  rs.push_back(*Rotation::blockHadamard(256, s32, std::vector<int8_t>(32, -1)));
  for (unsigned n : {3u, 80u, 128u})
    rs.push_back(*Rotation::haar(n, 42 + n));
  return rs;
}

TEST(Rotation, MatricesAreOrthogonal) {
  for (const Rotation &r : sampleRotations())
    EXPECT_LT(orthogonalityError(r.matrix(), r.dim()), 1e-12) << r.describe();
}

TEST(Rotation, ForwardMatchesMatrixAndInverseRestores) {
  for (const Rotation &r : sampleRotations()) {
    std::vector<float> x = randomVector(r.dim(), r.dim());
    std::vector<float> y = x;
    r.forward(y);
    std::vector<double> m = r.matrix();
    double scale = 0;
    for (float v : x)
      scale = std::fmax(scale, std::fabs(v));
    for (unsigned i = 0; i < r.dim(); ++i) {
      double want = 0;
      for (unsigned j = 0; j < r.dim(); ++j)
        want += m[size_t(i) * r.dim() + j] * x[j];
      EXPECT_NEAR(y[i], want, 1e-6 * scale * std::sqrt(double(r.dim())))
          << r.describe() << " row " << i;
    }
    r.inverse(y);
    for (unsigned i = 0; i < r.dim(); ++i)
      EXPECT_NEAR(y[i], x[i], 1e-6 * scale) << r.describe();
  }
}

TEST(Rotation, HadamardPreservesNorm) {
  Rotation r = *Rotation::seededHadamard(128, 3, true);
  std::vector<float> x = randomVector(128, 11);
  double before = 0, after = 0;
  for (float v : x)
    before += double(v) * v;
  r.forward(x);
  for (float v : x)
    after += double(v) * v;
  EXPECT_NEAR(after, before, 1e-5 * before);
}

TEST(Rotation, SeedsDetermineTheRotation) {
  EXPECT_EQ(Rotation::seededHadamard(64, 5, true)->signs1(),
            Rotation::seededHadamard(64, 5, true)->signs1());
  EXPECT_NE(Rotation::seededHadamard(64, 5, true)->signs1(),
            Rotation::seededHadamard(64, 6, true)->signs1());
  EXPECT_EQ(Rotation::haar(16, 1)->haarQ(), Rotation::haar(16, 1)->haarQ());
  EXPECT_NE(Rotation::haar(16, 1)->haarQ(), Rotation::haar(16, 2)->haarQ());
}

/// A dense Haar matrix is O(dim^3) to draw (minutes at 4096): building,
/// describing or verifying a format that names one must not draw it; the
/// first product does, once for every rotation of the same (dim, seed).
TEST(Rotation, HaarIsDrawnOnFirstUseAndShared) {
  Result<Format> big = Format::get("haar4", 4096);
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_EQ(big->rowBytes(), 4u + 4096u);
  EXPECT_FALSE(big->spec().rotation->haarDrawn());
  EXPECT_NE(big->spec().rotation->describe().find("4096"), std::string::npos);
  EXPECT_FALSE(big->spec().rotation->haarDrawn());

  Rotation a = *Rotation::haar(24, 99), b = *Rotation::haar(24, 99);
  EXPECT_FALSE(a.haarDrawn());
  std::vector<float> x(24, 1.0f);
  a.forward(x);
  EXPECT_TRUE(a.haarDrawn());
  EXPECT_TRUE(b.haarDrawn());
  EXPECT_EQ(&a.haarQ(), &b.haarQ());
  EXPECT_FALSE(Rotation::identity(8).haarDrawn());
  EXPECT_TRUE(Rotation::identity(8).haarQ().empty());
}

TEST(Rotation, InvalidArgumentsAreErrors) {
  EXPECT_FALSE(Rotation::hadamard(std::vector<int8_t>(3, 1)).ok());
  EXPECT_FALSE(Rotation::hadamard({}).ok());
  EXPECT_FALSE(
      Rotation::hadamard(std::vector<int8_t>(4, 1), std::vector<int8_t>(8, 1))
          .ok());
  Result<Rotation> badSign = Rotation::hadamard({1, 0, 1, 1});
  ASSERT_FALSE(badSign.ok());
  EXPECT_NE(badSign.status().message().find("signs1[1]"), std::string::npos);
  EXPECT_FALSE(Rotation::blockHadamard(48, std::vector<int8_t>(32, 1)).ok());
  EXPECT_FALSE(Rotation::haar(0, 1).ok());
}

/// Heads that are not a multiple of the rotation are zero-padded, rotated,
/// and sliced back: decode(encode(x)) of an exact format round-trips, and
/// the padded tail stays zero through forward + inverse.
TEST(Rotation, ZeroPaddingRoundTrips) {
  for (unsigned d : {80u, 96u, 112u, 160u, 192u}) {
    unsigned padded = nextPowerOfTwo(d);
    Rotation r = *Rotation::seededHadamard(padded, 99, true);
    std::vector<float> x = randomVector(d, d);
    std::vector<float> buf(padded, 0.0f);
    std::copy(x.begin(), x.end(), buf.begin());
    r.forward(buf);
    r.inverse(buf);
    for (unsigned j = 0; j < padded; ++j)
      EXPECT_NEAR(buf[j], j < d ? x[j] : 0.0f, 1e-5) << "dim " << d;
  }
}

TEST(Rotation, NextPowerOfTwo) {
  EXPECT_EQ(nextPowerOfTwo(1), 1u);
  EXPECT_EQ(nextPowerOfTwo(80), 128u);
  EXPECT_EQ(nextPowerOfTwo(128), 128u);
  EXPECT_EQ(nextPowerOfTwo(129), 256u);
}

} // namespace
