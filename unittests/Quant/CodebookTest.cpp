//===- CodebookTest.cpp - Tests for scalar codebooks and Lloyd-Max --------===//
//
// Checks Codebook::quantize / literal, and the Lloyd-Max designs against
// published Gaussian values (Max 1960; the TurboQuant paper), exact
// closed-form cases of the sphere distribution, an independent numerical
// integration of the optimality conditions, and a Monte-Carlo measurement
// of the distortion on random unit vectors.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Codebook.h"
#include "tq/Quant/Random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace tq::quant;

namespace {

constexpr CodebookDistribution Sphere = CodebookDistribution::Sphere;
constexpr CodebookDistribution Gaussian = CodebookDistribution::Gaussian;

/// The design, asserting success.
LloydMaxDesign design(CodebookDistribution dist, unsigned dim, unsigned bits) {
  Result<LloydMaxDesign> r = designLloydMax(dist, dim, bits);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : LloydMaxDesign{};
}

/// The upper half of the centroids times sqrt(dim) (the unit-variance
/// scale the literature quotes).
std::vector<double> upperScaled(const LloydMaxDesign &d, unsigned dim) {
  std::vector<double> out;
  for (size_t i = d.centroids.size() / 2; i < d.centroids.size(); ++i)
    out.push_back(d.centroids[i] * std::sqrt(double(dim)));
  return out;
}

void expectNear(const std::vector<double> &got, const std::vector<double> &want,
                double tol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
}

std::string formatList(const std::vector<double> &v) {
  std::string s;
  char buf[32];
  for (double x : v) {
    std::snprintf(buf, sizeof(buf), " %.6f", x);
    s += buf;
  }
  return s;
}

//===----------------------------------------------------------------------===//
// Codebook
//===----------------------------------------------------------------------===//

TEST(CodebookTest, LiteralDefaultsToFloatMidpoints) {
  std::vector<float> c = {-2.5f, -0.7f, 0.3f, 1.9f};
  Result<Codebook> r = Codebook::literal(c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->bits, 2u);
  EXPECT_EQ(r->centroids, c);
  ASSERT_EQ(r->thresholds.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(r->thresholds[i], (c[i] + c[i + 1]) / 2.0f);
}

TEST(CodebookTest, LiteralBitsFromSize) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    std::vector<float> c;
    for (unsigned i = 0; i < (1u << bits); ++i)
      c.push_back(float(i) - float(1u << bits) / 2.0f);
    Result<Codebook> r = Codebook::literal(c);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->bits, bits);
    EXPECT_EQ(r->thresholds.size(), c.size() - 1);
  }
}

TEST(CodebookTest, LiteralKeepsExplicitThresholds) {
  // Thresholds may sit on a centroid and may repeat (an empty cell).
  Result<Codebook> r =
      Codebook::literal({-1.0f, 0.0f, 1.0f, 2.0f}, {0.0f, 0.0f, 1.5f});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->thresholds, (std::vector<float>{0.0f, 0.0f, 1.5f}));
  EXPECT_EQ(r->quantize(-0.5f), 0u);
  EXPECT_EQ(r->quantize(0.0f), 2u); // Cell 1 is empty.
  EXPECT_EQ(r->quantize(1.5f), 3u);
}

TEST(CodebookTest, LiteralRejectsBadSizes) {
  for (size_t n : {0, 1, 3, 6, 12, 257, 512}) {
    std::vector<float> c;
    for (size_t i = 0; i < n; ++i)
      c.push_back(float(i));
    Result<Codebook> r = Codebook::literal(c);
    EXPECT_FALSE(r.ok()) << n;
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(CodebookTest, LiteralRejectsBadCentroids) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> bad = {
      {-1.0f, 0.0f, 0.0f, 1.0f}, // Not strictly increasing.
      {-1.0f, 1.0f, 0.0f, 2.0f}, // Decreasing.
      {1.0f, -1.0f},             // Decreasing.
      {-1.0f, nan, 0.5f, 1.0f},  // NaN.
      {-inf, -1.0f, 0.0f, 1.0f}, // Infinite.
      {-1.0f, 0.0f, 1.0f, inf},  // Infinite.
  };
  for (const auto &c : bad) {
    Result<Codebook> r = Codebook::literal(c);
    EXPECT_FALSE(r.ok());
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(CodebookTest, LiteralRejectsBadThresholds) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> c = {-3.0f, -1.0f, 1.0f, 3.0f};
  std::vector<std::vector<float>> bad = {
      {-2.0f, 0.0f},             // Too few.
      {-2.0f, 0.0f, 2.0f, 2.5f}, // Too many.
      {-3.5f, 0.0f, 2.0f},       // Below its lower centroid.
      {-2.0f, 1.5f, 2.0f},       // Above its upper centroid.
      {-2.0f, 0.0f, 3.5f},       // Above the last centroid.
      {-2.0f, nan, 2.0f},        // NaN.
  };
  for (const auto &t : bad) {
    Result<Codebook> r = Codebook::literal(c, t);
    EXPECT_FALSE(r.ok()) << t.size();
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(CodebookTest, QuantizeTiesGoUp) {
  Result<Codebook> r = Codebook::literal({-1.5f, -0.5f, 0.5f, 1.5f});
  ASSERT_TRUE(r.ok());
  const Codebook &cb = *r;
  ASSERT_EQ(cb.thresholds, (std::vector<float>{-1.0f, 0.0f, 1.0f}));
  // Exactly on a threshold: the upper cell.
  EXPECT_EQ(cb.quantize(-1.0f), 1u);
  EXPECT_EQ(cb.quantize(0.0f), 2u);
  EXPECT_EQ(cb.quantize(-0.0f), 2u); // -0.0 == 0.0.
  EXPECT_EQ(cb.quantize(1.0f), 3u);
  // Just below: the lower cell.
  EXPECT_EQ(cb.quantize(std::nextafter(-1.0f, -2.0f)), 0u);
  EXPECT_EQ(cb.quantize(std::nextafter(0.0f, -1.0f)), 1u);
  EXPECT_EQ(cb.quantize(std::nextafter(1.0f, 0.0f)), 2u);
  // Extremes.
  EXPECT_EQ(cb.quantize(-std::numeric_limits<float>::infinity()), 0u);
  EXPECT_EQ(cb.quantize(std::numeric_limits<float>::infinity()), 3u);
  EXPECT_EQ(cb.quantize(-1e30f), 0u);
  EXPECT_EQ(cb.quantize(1e30f), 3u);
  // NaN compares false against every threshold: the last index.
  EXPECT_EQ(cb.quantize(std::numeric_limits<float>::quiet_NaN()), 3u);
}

TEST(CodebookTest, QuantizeMatchesLinearScan) {
  Result<Codebook> r = lloydMaxCodebook(Sphere, 128, 8);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Codebook &cb = *r;
  auto linear = [&](float v) {
    uint32_t i = 0;
    while (i < cb.thresholds.size() && !(v < cb.thresholds[i]))
      ++i;
    return i;
  };
  for (size_t i = 0; i < cb.thresholds.size(); ++i) {
    float t = cb.thresholds[i];
    EXPECT_EQ(cb.quantize(t), i + 1);
    EXPECT_EQ(cb.quantize(std::nextafter(t, -1.0f)), i);
  }
  SplitMix64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    float v = float(rng.gaussian() * 0.15);
    ASSERT_EQ(cb.quantize(v), linear(v)) << v;
  }
}

TEST(CodebookTest, MaxAbs) {
  Result<Codebook> a = Codebook::literal({-3.0f, -1.0f, 1.0f, 2.0f});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->maxAbs(), 3.0f);
  Result<Codebook> b = Codebook::literal({-0.5f, 2.5f});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->maxAbs(), 2.5f);
}

//===----------------------------------------------------------------------===//
// Lloyd-Max: arguments and structure
//===----------------------------------------------------------------------===//

TEST(LloydMaxTest, RejectsInvalidArguments) {
  for (auto dist : {Sphere, Gaussian}) {
    EXPECT_FALSE(designLloydMax(dist, 128, 0).ok());
    EXPECT_FALSE(designLloydMax(dist, 128, 9).ok());
    EXPECT_FALSE(designLloydMax(dist, 0, 2).ok());
    EXPECT_FALSE(lloydMaxCodebook(dist, 128, 0).ok());
    EXPECT_FALSE(lloydMaxCodebook(dist, 128, 9).ok());
  }
  EXPECT_FALSE(designLloydMax(Sphere, 1, 2).ok());
  EXPECT_FALSE(designLloydMax(Sphere, 2, 2).ok());
  EXPECT_FALSE(lloydMaxCodebook(Sphere, 2, 2).ok());
  Result<LloydMaxDesign> r = designLloydMax(Sphere, 2, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dim"), std::string::npos);
  // The smallest valid dimensions.
  EXPECT_TRUE(designLloydMax(Sphere, 3, 2).ok());
  EXPECT_TRUE(designLloydMax(Gaussian, 1, 2).ok());
}

TEST(LloydMaxTest, StructureAndConvergence) {
  for (auto dist : {Sphere, Gaussian}) {
    for (unsigned dim : {3u, 4u, 16u, 64u, 128u, 256u, 4096u}) {
      for (unsigned bits = 1; bits <= 8; ++bits) {
        SCOPED_TRACE("dist " + std::to_string(int(dist)) + " dim " +
                     std::to_string(dim) + " bits " + std::to_string(bits));
        LloydMaxDesign d = design(dist, dim, bits);
        const size_t n = size_t(1) << bits;
        ASSERT_EQ(d.centroids.size(), n);
        ASSERT_EQ(d.thresholds.size(), n - 1);
        EXPECT_LT(d.iterations, 20000u);
        EXPECT_GT(d.iterations, 0u);
        const double sigma = 1.0 / std::sqrt(double(dim));
        for (size_t i = 0; i < n; ++i) {
          // Odd symmetry, exactly (the design is symmetrised).
          EXPECT_EQ(d.centroids[i], -d.centroids[n - 1 - i]);
          if (i > 0) {
            EXPECT_LT(d.centroids[i - 1], d.centroids[i]);
          }
        }
        for (size_t i = 0; i + 1 < n; ++i) {
          // Nearest-neighbour condition: thresholds are midpoints.
          EXPECT_NEAR(d.thresholds[i],
                      0.5 * (d.centroids[i] + d.centroids[i + 1]),
                      1e-15 * sigma);
          EXPECT_LT(d.centroids[i], d.thresholds[i]);
          EXPECT_LT(d.thresholds[i], d.centroids[i + 1]);
        }
        EXPECT_EQ(d.thresholds[n / 2 - 1], 0.0);
        if (dist == Sphere) {
          EXPECT_LT(d.centroids.back(), 1.0);
        }
        // Distortion: positive, below the variance, decreasing in bits.
        EXPECT_GT(d.mse, 0.0);
        EXPECT_LT(d.mse, sigma * sigma);
        if (bits > 1) {
          EXPECT_LT(d.mse, design(dist, dim, bits - 1).mse);
        }
      }
    }
  }
}

TEST(LloydMaxTest, EightBitDesignIsFast) {
  for (auto dist : {Sphere, Gaussian}) {
    auto start = std::chrono::steady_clock::now();
    LloydMaxDesign d = design(dist, 128, 8);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    std::printf("[ info     ] %s d=128 b=8: %u iterations, %.3f ms, "
                "d*mse=%.6e\n",
                dist == Sphere ? "sphere" : "gaussian", d.iterations, ms,
                d.mse * 128.0);
    EXPECT_LT(d.iterations, 20000u);
    // Far below the 100 ms budget in a release build; generous so that
    // debug and sanitizer builds pass too.
    EXPECT_LT(ms, 1000.0);
  }
}

TEST(LloydMaxTest, FloatCodebookRoundsTheDesign) {
  for (auto dist : {Sphere, Gaussian}) {
    for (unsigned bits = 1; bits <= 8; ++bits) {
      LloydMaxDesign d = design(dist, 128, bits);
      Result<Codebook> r = lloydMaxCodebook(dist, 128, bits);
      ASSERT_TRUE(r.ok()) << r.status().message();
      const Codebook &cb = *r;
      EXPECT_EQ(cb.bits, bits);
      ASSERT_EQ(cb.centroids.size(), d.centroids.size());
      ASSERT_EQ(cb.thresholds.size(), d.thresholds.size());
      for (size_t i = 0; i < cb.centroids.size(); ++i)
        EXPECT_EQ(cb.centroids[i], float(d.centroids[i]));
      for (size_t i = 0; i < cb.thresholds.size(); ++i)
        EXPECT_EQ(cb.thresholds[i], float(d.thresholds[i]));
      // 0 is the middle threshold and goes to the upper half.
      EXPECT_EQ(cb.quantize(0.0f), (1u << bits) / 2);
      EXPECT_EQ(cb.quantize(-0.0f), (1u << bits) / 2);
      EXPECT_EQ(cb.maxAbs(), float(d.centroids.back()));
    }
  }
}

//===----------------------------------------------------------------------===//
// Lloyd-Max: reference values
//===----------------------------------------------------------------------===//

TEST(LloydMaxTest, GaussianMatchesPublishedTables) {
  // Unit-variance Lloyd-Max levels: b = 1 is +-sqrt(2/pi); b = 2 the
  // TurboQuant paper's +-0.453, +-1.51; b = 3, 4 from Max (1960), who
  // quotes 4 decimals.
  const std::vector<std::vector<double>> levels = {
      {std::sqrt(2.0 / M_PI)},
      {0.4528, 1.5104},
      {0.2451, 0.7560, 1.3440, 2.1520},
      {0.1284, 0.3881, 0.6568, 0.9424, 1.2562, 1.6181, 2.0690, 2.7326},
  };
  const double unitMse[] = {0.3634, 0.1175, 0.03454, 0.009497};
  for (unsigned dim : {1u, 128u}) {
    for (unsigned bits = 1; bits <= 4; ++bits) {
      LloydMaxDesign d = design(Gaussian, dim, bits);
      std::vector<double> got = upperScaled(d, dim);
      expectNear(got, levels[bits - 1], bits == 1 ? 1e-14 : 1.5e-4,
                 "gaussian b=" + std::to_string(bits));
      EXPECT_NEAR(d.mse * dim, unitMse[bits - 1], 1e-3 * unitMse[bits - 1])
          << "bits " << bits;
    }
  }
  // b = 1 in closed form: E[(x - sign(x) sqrt(2/pi))^2] = 1 - 2/pi.
  EXPECT_NEAR(design(Gaussian, 1, 1).mse, 1.0 - 2.0 / M_PI, 1e-15);
}

TEST(LloydMaxTest, GaussianScalesWithDimension) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    LloydMaxDesign a = design(Gaussian, 1, bits);
    LloydMaxDesign b = design(Gaussian, 128, bits);
    for (size_t i = 0; i < a.centroids.size(); ++i)
      EXPECT_NEAR(b.centroids[i] * std::sqrt(128.0), a.centroids[i], 1e-12);
    EXPECT_NEAR(b.mse * 128.0, a.mse, 1e-12 * a.mse);
  }
}

TEST(LloydMaxTest, SphereClosedForms) {
  // d = 3: the coordinate is uniform on [-1, 1]; the optimum is the uniform
  // quantiser with cells of width 2/L and distortion (2/L)^2 / 12.
  for (unsigned bits = 1; bits <= 8; ++bits) {
    LloydMaxDesign d = design(Sphere, 3, bits);
    const double n = double(1u << bits);
    for (size_t i = 0; i < d.centroids.size(); ++i)
      EXPECT_NEAR(d.centroids[i], -1.0 + (2.0 * i + 1.0) / n, 1e-13);
    EXPECT_NEAR(d.mse, (4.0 / (n * n)) / 12.0, 1e-15);
  }
  // d = 5, b = 1: f = 3/4 (1 - x^2), centroid E[x | x > 0] = 3/8, and
  // distortion 1/5 - (3/8)^2.
  LloydMaxDesign d5 = design(Sphere, 5, 1);
  EXPECT_NEAR(d5.centroids[1], 0.375, 1e-15);
  EXPECT_NEAR(d5.mse, 0.2 - 0.375 * 0.375, 1e-15);
  // Any d, b = 1: the centroid is E|x| = Gamma(d/2) / (sqrt(pi)
  // Gamma((d+1)/2)) and the distortion 1/d - E|x|^2.
  for (unsigned dim : {3u, 4u, 7u, 64u, 128u, 1000u}) {
    double e = std::exp(std::lgamma(dim / 2.0) - std::lgamma((dim + 1) / 2.0)) /
               std::sqrt(M_PI);
    LloydMaxDesign d = design(Sphere, dim, 1);
    EXPECT_NEAR(d.centroids[1], e, 1e-12 * e) << dim;
    EXPECT_NEAR(d.mse, 1.0 / dim - e * e, 1e-11 / dim) << dim;
  }
}

TEST(LloydMaxTest, SphereAtDim128) {
  // Centroids * sqrt(128) of the sphere design (cross-checked with an
  // independent brute-force Lloyd iteration on Simpson-integrated cells).
  // Note: the literal tq3_0 constants 0.2428, 0.7434, 1.3336, 2.1573 are
  // NOT this design (its outer levels differ by 1e-2 .. 3e-2; 2.1573 is
  // even wider than the Gaussian 2.1519, while every sphere design is
  // narrower), so they are deliberately not asserted here.
  const std::vector<std::vector<double>> levels = {
      {0.799444},
      {0.452453, 1.505193},
      {0.244425, 0.753330, 1.336599, 2.131471},
      {0.127873, 0.386381, 0.653619, 0.937097, 1.247770, 1.604343, 2.045925,
       2.688859},
  };
  const double unitMse[] = {0.3608885937, 0.1160000703, 0.03396592579,
                            0.009314787954};
  for (unsigned bits = 1; bits <= 4; ++bits) {
    LloydMaxDesign s = design(Sphere, 128, bits);
    LloydMaxDesign g = design(Gaussian, 128, bits);
    std::vector<double> got = upperScaled(s, 128);
    std::printf("[ info     ] sphere d=128 b=%u: centroids*sqrt(d) =%s, "
                "d*mse = %.10f (gaussian %.10f)\n",
                bits, formatList(got).c_str(), s.mse * 128, g.mse * 128);
    expectNear(got, levels[bits - 1], 2e-6, "sphere b=" + std::to_string(bits));
    EXPECT_NEAR(s.mse * 128, unitMse[bits - 1], 1e-8 * unitMse[bits - 1]);
    // Lighter tails than the Gaussian: less distortion and, from 2 bits on,
    // a narrower design (the 1-bit level E|x| is slightly larger), but
    // within 2% at d = 128.
    if (bits >= 2) {
      EXPECT_LT(s.centroids.back(), g.centroids.back());
    }
    EXPECT_LT(s.mse, g.mse);
    EXPECT_NEAR(s.mse / g.mse, 1.0, 0.025);
    for (size_t i = 0; i < s.centroids.size(); ++i)
      EXPECT_NEAR(s.centroids[i] / g.centroids[i], 1.0, 0.02);
  }
  // The 2-bit levels +-0.4528, +-1.51 another format uses (1.51 is the
  // Gaussian value rounded; the sphere one is 1.5052).
  expectNear(upperScaled(design(Sphere, 128, 2), 128), {0.4528, 1.51}, 5e-3,
             "2-bit literal");
}

TEST(LloydMaxTest, SphereApproachesGaussian) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    LloydMaxDesign s = design(Sphere, 1u << 20, bits);
    LloydMaxDesign g = design(Gaussian, 1u << 20, bits);
    for (size_t i = 0; i < s.centroids.size(); ++i)
      EXPECT_NEAR(s.centroids[i] / g.centroids[i], 1.0, 1e-5);
    EXPECT_NEAR(s.mse / g.mse, 1.0, 1e-5);
  }
}

//===----------------------------------------------------------------------===//
// Lloyd-Max: independent checks of optimality and distortion
//===----------------------------------------------------------------------===//

struct CellMoments {
  double m0 = 0, m1 = 0, m2c = 0; ///< int f, int x f, int (x - c)^2 f.
};

/// Composite Simpson over [lo, hi] with `steps` (even) intervals of
/// weight(t) times 1, x, (x - c)^2 with x = position(t).
CellMoments simpson(const std::function<double(double)> &weight,
                    const std::function<double(double)> &position, double lo,
                    double hi, double c, int steps) {
  CellMoments m;
  double h = (hi - lo) / steps;
  for (int j = 0; j <= steps; ++j) {
    double t = lo + j * h;
    double w = (j == 0 || j == steps) ? 1.0 : (j % 2 ? 4.0 : 2.0);
    double v = w * weight(t), x = position(t);
    m.m0 += v;
    m.m1 += v * x;
    m.m2c += v * (x - c) * (x - c);
  }
  m.m0 *= h / 3;
  m.m1 *= h / 3;
  m.m2c *= h / 3;
  return m;
}

/// Verifies the centroid condition (each centroid is its cell's conditional
/// mean) and the distortion by direct numerical integration of the
/// unnormalised density. The sphere is integrated in theta = asin(x), where
/// (1 - x^2)^((d-3)/2) dx = cos^{d-2}(theta) dtheta has no endpoint
/// singularity at x = +-1.
void checkByIntegration(CodebookDistribution dist, unsigned dim, unsigned bits,
                        int stepsPerSigma) {
  SCOPED_TRACE("dim " + std::to_string(dim) + " bits " + std::to_string(bits));
  LloydMaxDesign d = design(dist, dim, bits);
  const double sigma = 1.0 / std::sqrt(double(dim));
  const size_t n = d.centroids.size();
  double total = 0.0, distortion = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double a, b;
    std::function<double(double)> weight, position;
    if (dist == Sphere) {
      a = i == 0 ? -M_PI / 2 : std::asin(d.thresholds[i - 1]);
      b = i + 1 == n ? M_PI / 2 : std::asin(d.thresholds[i]);
      weight = [dim](double t) { return std::pow(std::cos(t), dim - 2.0); };
      position = [](double t) { return std::sin(t); };
    } else {
      // The mass beyond 14 sigma is below 1e-43.
      a = i == 0 ? -14.0 * sigma : d.thresholds[i - 1];
      b = i + 1 == n ? 14.0 * sigma : d.thresholds[i];
      weight = [dim](double x) { return std::exp(-0.5 * dim * x * x); };
      position = [](double x) { return x; };
    }
    int steps =
        2 * std::max(100, int(std::ceil((b - a) / sigma * stepsPerSigma / 2)));
    CellMoments m = simpson(weight, position, a, b, d.centroids[i], steps);
    total += m.m0;
    distortion += m.m2c;
    EXPECT_NEAR(m.m1 / m.m0, d.centroids[i], 1e-9 * sigma) << "cell " << i;
  }
  EXPECT_NEAR(distortion / total, d.mse, 1e-8 * d.mse);
}

TEST(LloydMaxTest, CentroidsAreConditionalMeans) {
  for (unsigned bits : {1u, 2u, 3u, 4u, 8u}) {
    checkByIntegration(Sphere, 128, bits, 1000);
    checkByIntegration(Gaussian, 128, bits, 1000);
  }
  checkByIntegration(Sphere, 4, 3, 1000);
  checkByIntegration(Sphere, 16, 4, 1000);
  checkByIntegration(Sphere, 1024, 5, 1000);
}

TEST(LloydMaxTest, MonteCarloDistortionOnUnitVectors) {
  // Quantise every coordinate of random unit vectors in R^128 (and, for the
  // Gaussian codebooks, of N(0, 1/d) draws) and compare the measured d*MSE
  // with the design's. 768k samples: the standard error is a few 0.1%.
  constexpr unsigned dim = 128;
  constexpr int vectors = 6000;
  std::vector<Codebook> sphere, gauss;
  for (unsigned bits = 1; bits <= 4; ++bits) {
    sphere.push_back(*lloydMaxCodebook(Sphere, dim, bits));
    gauss.push_back(*lloydMaxCodebook(Gaussian, dim, bits));
  }
  double errSphere[4] = {}, errGaussOnSphere[4] = {}, errGauss[4] = {};
  auto sq = [](const Codebook &cb, float x) {
    double e = double(x) - double(cb.centroids[cb.quantize(x)]);
    return e * e;
  };
  SplitMix64 rng(0x5eedC0deull);
  std::vector<double> v(dim);
  const double sigma = 1.0 / std::sqrt(double(dim));
  for (int n = 0; n < vectors; ++n) {
    double norm2 = 0.0;
    for (double &x : v) {
      x = rng.gaussian();
      norm2 += x * x;
    }
    double inv = 1.0 / std::sqrt(norm2);
    for (double raw : v) {
      float x = float(raw * inv);
      float g = float(raw * sigma);
      for (int b = 0; b < 4; ++b) {
        errSphere[b] += sq(sphere[b], x);
        errGaussOnSphere[b] += sq(gauss[b], x);
        errGauss[b] += sq(gauss[b], g);
      }
    }
  }
  const double samples = double(vectors) * dim;
  for (unsigned bits = 1; bits <= 4; ++bits) {
    int b = int(bits) - 1;
    double designSphere = design(Sphere, dim, bits).mse * dim;
    double designGauss = design(Gaussian, dim, bits).mse * dim;
    double mSphere = errSphere[b] / samples * dim;
    double mGaussOnSphere = errGaussOnSphere[b] / samples * dim;
    double mGauss = errGauss[b] / samples * dim;
    std::printf("[ info     ] d=128 b=%u d*MSE: sphere codebook on unit "
                "vectors %.5f (design %.5f); gaussian codebook on N(0,1/d) "
                "%.5f (design %.5f), on unit vectors %.5f\n",
                bits, mSphere, designSphere, mGauss, designGauss,
                mGaussOnSphere);
    RecordProperty("sphere_dmse_b" + std::to_string(bits),
                   std::to_string(mSphere));
    RecordProperty("gaussian_dmse_b" + std::to_string(bits),
                   std::to_string(mGauss));
    EXPECT_NEAR(mSphere / designSphere, 1.0, 0.02) << bits;
    EXPECT_NEAR(mGauss / designGauss, 1.0, 0.02) << bits;
    // The Gaussian codebook is slightly mismatched to sphere data but
    // within a few percent, and never better than the matched one.
    EXPECT_NEAR(mGaussOnSphere / designGauss, 1.0, 0.04) << bits;
    EXPECT_LT(mSphere, mGaussOnSphere * 1.005) << bits;
  }
}

} // namespace
