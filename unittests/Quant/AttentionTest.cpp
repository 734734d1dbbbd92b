//===- AttentionTest.cpp - Tests for the reference attention --------------===//
//
// The reference attention is the oracle for every kernel, so it is checked
// against hand-computed numbers and against an independent brute force that
// builds the whole logit matrix before the softmax.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Attention.h"

#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace tq::quant;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> gaussianData(size_t n, uint64_t seed, double sigma = 1.0) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float &x : v)
    x = float(sigma * rng.gaussian());
  return v;
}

/// Multiples of 1/8 in [-2, 2]: exactly representable in IEEE half.
std::vector<float> eighthsData(size_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float &x : v)
    x = float(int(rng.next() % 33) - 16) / 8.0f;
  return v;
}

size_t qSize(const AttentionShape &s) {
  return size_t(s.numQueries) * s.numQHeads * s.headDim;
}
size_t kvSize(const AttentionShape &s) {
  return size_t(s.numKeys) * s.numKvHeads * s.headDim;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

//===----------------------------------------------------------------------===//
// Hand-computed cases
//===----------------------------------------------------------------------===//

TEST(AttentionTest, TwoKeysByHand) {
  // q = (1, 1), k0 = (0, 0), k1 = (1, 0), scale 1: logits 0 and 1, so the
  // weights are 1 / (1 + e) and e / (1 + e).
  AttentionShape shape{/*numQueries=*/1, /*numQHeads=*/1, /*numKvHeads=*/1,
                       /*headDim=*/2, /*numKeys=*/2};
  AttentionOptions options;
  options.scale = 1.0;
  std::vector<float> q = {1, 1};
  std::vector<float> k = {0, 0, 1, 0};
  std::vector<float> v = {1, 0, 0, 2};
  std::vector<double> out(2, -1.0);
  Status s = referenceAttention(shape, options, q, k, v, out);
  ASSERT_TRUE(s.ok()) << s.message();
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + e), 1e-15);
  EXPECT_NEAR(out[1], 2.0 * e / (1.0 + e), 1e-15);
}

TEST(AttentionTest, SinkJoinsTheDenominatorOnly) {
  // The two keys of TwoKeysByHand plus a sink logit of 1 per head: weights
  // 1 / (1 + 2e) and e / (1 + 2e), the sink's share e / (1 + 2e) goes to a
  // zero value row. A sink of -inf changes nothing.
  AttentionShape shape{1, 1, 1, 2, 2};
  AttentionOptions options;
  options.scale = 1.0;
  std::vector<float> q = {1, 1}, k = {0, 0, 1, 0}, v = {1, 0, 0, 2};
  std::vector<float> sinks = {1.0f};
  options.sinks = sinks;
  std::vector<double> out(2, -1.0);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + 2.0 * e), 1e-15);
  EXPECT_NEAR(out[1], 2.0 * e / (1.0 + 2.0 * e), 1e-15);
  sinks[0] = kNegInf;
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  EXPECT_NEAR(out[0], 1.0 / (1.0 + e), 1e-15);
  // A large sink dominates without overflow; a hidden row stays zero.
  sinks[0] = 1000.0f;
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  EXPECT_NEAR(out[1], 2.0 * std::exp(-999.0), 1e-300);
  std::vector<float> mask = {kNegInf, kNegInf};
  options.mask = mask;
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
}

TEST(AttentionTest, SlopesScaleTheMaskPerHead) {
  // Two heads over one KV head: logits 0 and 1 plus slope * mask with mask
  // (0, -2); head 0 (slope 0.5) sees logits 0, 0, head 1 (slope 1) 0, -1.
  AttentionShape shape{1, 2, 1, 2, 2};
  AttentionOptions options;
  options.scale = 1.0;
  std::vector<float> q = {1, 1, 1, 1}, k = {0, 0, 1, 0}, v = {1, 0, 0, 2};
  std::vector<float> mask = {0.0f, -2.0f}, slopes = {0.5f, 1.0f};
  options.mask = mask;
  options.slopes = slopes;
  std::vector<double> out(4, -1.0);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  EXPECT_NEAR(out[0], 0.5, 1e-15);
  EXPECT_NEAR(out[1], 1.0, 1e-15);
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[2], e / (1.0 + e), 1e-15);
  EXPECT_NEAR(out[3], 2.0 / (1.0 + e), 1e-15);
}

TEST(AttentionTest, DefaultScaleIsInverseSqrtHeadDim) {
  // headDim 4 -> scale 1/2. <q, k1> = 2 -> logit 1; <q, k0> = 0 -> logit 0.
  AttentionShape shape{1, 1, 1, 4, 2};
  std::vector<float> q = {1, 1, 1, 1};
  std::vector<float> k = {0, 0, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f};
  std::vector<float> v = {4, 0, 0, 0, 0, 4, 0, 0};
  std::vector<double> out(4);
  ASSERT_TRUE(referenceAttention(shape, {}, q, k, v, out).ok());
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0], 4.0 / (1.0 + e), 1e-15);
  EXPECT_NEAR(out[1], 4.0 * e / (1.0 + e), 1e-15);
  EXPECT_EQ(out[2], 0.0);
  EXPECT_EQ(out[3], 0.0);
}

TEST(AttentionTest, EqualLogitsAverageValues) {
  AttentionShape shape{1, 1, 1, 2, 2};
  std::vector<float> q = {0, 0};
  std::vector<float> k = {3, -1, 7, 2};
  std::vector<float> v = {1, 3, 3, 5};
  std::vector<double> out(2);
  ASSERT_TRUE(referenceAttention(shape, {}, q, k, v, out).ok());
  EXPECT_EQ(out[0], 2.0);
  EXPECT_EQ(out[1], 4.0);
}

TEST(AttentionTest, SoftcapByHand) {
  // Logits 0 and 4 (scale 1); softcap 2 maps 4 to 2 tanh(2).
  AttentionShape shape{1, 1, 1, 1, 2};
  AttentionOptions options;
  options.scale = 1.0;
  options.softcap = 2.0;
  std::vector<float> q = {2};
  std::vector<float> k = {0, 2};
  std::vector<float> v = {0, 1};
  std::vector<double> out(1);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  double w = std::exp(2.0 * std::tanh(2.0));
  EXPECT_NEAR(out[0], w / (1.0 + w), 1e-15);
}

TEST(AttentionTest, CausalQueriesAreTheLastPositions) {
  // 2 queries over 3 keys: query 0 sits at position 1 (sees keys 0, 1),
  // query 1 at position 2 (sees all). Zero q gives uniform weights.
  AttentionShape shape{2, 1, 1, 1, 3};
  AttentionOptions options;
  options.causal = true;
  std::vector<float> q = {0, 0};
  std::vector<float> k = {1, 2, 3};
  std::vector<float> v = {3, 6, 9};
  std::vector<double> out(2);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  EXPECT_DOUBLE_EQ(out[0], 4.5);
  EXPECT_DOUBLE_EQ(out[1], 6.0);

  // A window of 2 leaves query 1 with keys 1 and 2 only.
  options.window = 2;
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  EXPECT_DOUBLE_EQ(out[0], 4.5);
  EXPECT_DOUBLE_EQ(out[1], 7.5);
}

TEST(AttentionTest, LargeLogitsAreStable) {
  // Logits 2000 and 1999: a softmax without max subtraction overflows.
  AttentionShape shape{1, 1, 1, 1, 2};
  AttentionOptions options;
  options.scale = 1.0;
  std::vector<float> q = {1000}, k = {2, 1.999f}, v = {1, 0};
  std::vector<double> out(1);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  double gap = 1000.0 * (2.0 - double(1.999f));
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(-gap)), 1e-12);
}

TEST(AttentionTest, MaskIsAddedAfterSoftcap) {
  // Logit 4 capped at 1: 1 * tanh(4); the mask adds 2 afterwards, so key 1's
  // weight is exp(tanh(4) + 2) against key 0's exp(0).
  AttentionShape shape{1, 1, 1, 1, 2};
  AttentionOptions options;
  options.scale = 1.0;
  options.softcap = 1.0;
  std::vector<float> mask = {0.0f, 2.0f};
  options.mask = mask;
  std::vector<float> q = {2}, k = {0, 2}, v = {0, 1};
  std::vector<double> out(1);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  double w = std::exp(std::tanh(4.0) + 2.0);
  EXPECT_NEAR(out[0], w / (1.0 + w), 1e-15);
}

//===----------------------------------------------------------------------===//
// GQA
//===----------------------------------------------------------------------===//

TEST(AttentionTest, GqaHeadReadsKvHeadOverGroup) {
  AttentionShape shape{3, 4, 2, 8, 5};
  AttentionOptions options;
  options.causal = true;
  std::vector<float> q = gaussianData(qSize(shape), 1);
  std::vector<float> k = gaussianData(kvSize(shape), 2);
  std::vector<float> v = gaussianData(kvSize(shape), 3);
  std::vector<double> out(qSize(shape));
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());

  const unsigned d = shape.headDim;
  AttentionShape one = shape;
  one.numQHeads = 1;
  one.numKvHeads = 1;
  for (unsigned h = 0; h < shape.numQHeads; ++h) {
    unsigned kvHead = h / 2;
    std::vector<float> q1, k1, v1;
    for (unsigned i = 0; i < shape.numQueries; ++i)
      for (unsigned c = 0; c < d; ++c)
        q1.push_back(q[(i * shape.numQHeads + h) * d + c]);
    for (unsigned j = 0; j < shape.numKeys; ++j)
      for (unsigned c = 0; c < d; ++c) {
        k1.push_back(k[(j * shape.numKvHeads + kvHead) * d + c]);
        v1.push_back(v[(j * shape.numKvHeads + kvHead) * d + c]);
      }
    std::vector<double> out1(size_t(shape.numQueries) * d);
    ASSERT_TRUE(referenceAttention(one, options, q1, k1, v1, out1).ok());
    for (unsigned i = 0; i < shape.numQueries; ++i)
      for (unsigned c = 0; c < d; ++c)
        EXPECT_DOUBLE_EQ(out[(i * shape.numQHeads + h) * d + c],
                         out1[i * d + c])
            << "head " << h << " query " << i << " dim " << c;
  }
}

//===----------------------------------------------------------------------===//
// Brute force comparison
//===----------------------------------------------------------------------===//

/// An independent formulation: per head, build the full numQueries x numKeys
/// logit matrix, apply each masking rule as a separate pass, then softmax the
/// rows and multiply by V.
std::vector<double> bruteForce(const AttentionShape &shape,
                               const AttentionOptions &options,
                               const std::vector<float> &q,
                               const std::vector<float> &k,
                               const std::vector<float> &v) {
  const unsigned nq = shape.numQueries, nk = shape.numKeys,
                 hq = shape.numQHeads, hk = shape.numKvHeads, d = shape.headDim;
  const double inf = std::numeric_limits<double>::infinity();
  const double scale = options.scale != 0.0 ? options.scale : 1 / std::sqrt(d);
  std::vector<double> out(size_t(nq) * hq * d, 0.0);
  for (unsigned h = 0; h < hq; ++h) {
    unsigned g = h * hk / hq; // the same group, written differently
    std::vector<std::vector<double>> L(nq, std::vector<double>(nk));
    for (unsigned i = 0; i < nq; ++i)
      for (unsigned j = 0; j < nk; ++j) {
        double dotQK = 0;
        for (unsigned c = 0; c < d; ++c)
          dotQK +=
              double(q[(i * hq + h) * d + c]) * double(k[(j * hk + g) * d + c]);
        L[i][j] = scale * dotQK;
      }
    if (options.softcap > 0)
      for (auto &row : L)
        for (double &x : row)
          x = options.softcap * std::tanh(x / options.softcap);
    if (!options.mask.empty())
      for (unsigned i = 0; i < nq; ++i)
        for (unsigned j = 0; j < nk; ++j)
          L[i][j] += options.mask[i * nk + j];
    for (unsigned i = 0; i < nq; ++i) {
      long pos = long(nk - nq + i);
      for (unsigned j = 0; j < nk; ++j) {
        if (options.causal && long(j) > pos)
          L[i][j] = -inf;
        if (options.window > 0 && pos - long(j) >= long(options.window))
          L[i][j] = -inf;
      }
    }
    for (unsigned i = 0; i < nq; ++i) {
      double m = -inf;
      for (double x : L[i])
        m = std::max(m, x);
      if (m == -inf)
        continue; // fully masked: zeros
      std::vector<double> p(nk);
      double z = 0;
      for (unsigned j = 0; j < nk; ++j)
        z += (p[j] = std::exp(L[i][j] - m));
      for (unsigned c = 0; c < d; ++c) {
        double acc = 0;
        for (unsigned j = 0; j < nk; ++j)
          acc += p[j] / z * double(v[(j * hk + g) * d + c]);
        out[(i * hq + h) * d + c] = acc;
      }
    }
  }
  return out;
}

TEST(AttentionTest, MatchesBruteForceForEveryOptionCombination) {
  AttentionShape shape{4, 4, 2, 16, 9};
  std::vector<float> q = gaussianData(qSize(shape), 11, 2.0);
  std::vector<float> k = gaussianData(kvSize(shape), 12);
  std::vector<float> v = gaussianData(kvSize(shape), 13);
  // A mask with some hidden keys and some finite biases.
  std::vector<float> mask =
      gaussianData(size_t(shape.numQueries) * shape.numKeys, 14);
  for (size_t i = 0; i < mask.size(); i += 5)
    mask[i] = kNegInf;

  unsigned combos = 0;
  for (bool causal : {false, true})
    for (unsigned window : {0u, 3u})
      for (double softcap : {0.0, 0.7})
        for (bool useMask : {false, true})
          for (double scale : {0.0, 0.3}) {
            AttentionOptions options;
            options.causal = causal;
            options.window = window;
            options.softcap = softcap;
            options.scale = scale;
            if (useMask)
              options.mask = mask;
            std::vector<double> out(qSize(shape));
            Status s = referenceAttention(shape, options, q, k, v, out);
            ASSERT_TRUE(s.ok()) << s.message();
            std::vector<double> want = bruteForce(shape, options, q, k, v);
            for (size_t i = 0; i < out.size(); ++i) {
              ASSERT_FALSE(std::isnan(out[i]));
              ASSERT_NEAR(out[i], want[i], 1e-12 * (1 + std::fabs(want[i])))
                  << "causal " << causal << " window " << window << " softcap "
                  << softcap << " mask " << useMask << " scale " << scale
                  << " element " << i;
            }
            ++combos;
          }
  EXPECT_EQ(combos, 32u);
}

TEST(AttentionTest, OptionsChangeTheResult) {
  // Guards the brute-force comparison against options that are silently
  // ignored by both implementations.
  AttentionShape shape{2, 2, 1, 8, 6};
  std::vector<float> q = gaussianData(qSize(shape), 21, 2.0);
  std::vector<float> k = gaussianData(kvSize(shape), 22);
  std::vector<float> v = gaussianData(kvSize(shape), 23);
  std::vector<double> base(qSize(shape));
  ASSERT_TRUE(referenceAttention(shape, {}, q, k, v, base).ok());
  std::vector<float> mask(size_t(shape.numQueries) * shape.numKeys, 0.0f);
  mask[1] = -1.5f;
  AttentionOptions variants[5];
  variants[0].causal = true;
  variants[1].window = 2;
  variants[2].softcap = 0.5;
  variants[3].mask = mask;
  variants[4].scale = 0.9;
  for (int i = 0; i < 5; ++i) {
    std::vector<double> out(qSize(shape));
    ASSERT_TRUE(referenceAttention(shape, variants[i], q, k, v, out).ok());
    double diff = 0;
    for (size_t e = 0; e < out.size(); ++e)
      diff = std::max(diff, std::fabs(out[e] - base[e]));
    EXPECT_GT(diff, 1e-6) << "variant " << i << " had no effect";
  }
}

//===----------------------------------------------------------------------===//
// Fully masked queries
//===----------------------------------------------------------------------===//

TEST(AttentionTest, FullyMaskedQueryGivesZeros) {
  AttentionShape shape{2, 2, 1, 4, 5};
  AttentionOptions options;
  options.causal = true;
  options.window = 2;
  std::vector<float> mask(size_t(shape.numQueries) * shape.numKeys, kNegInf);
  options.mask = mask;
  std::vector<float> q = gaussianData(qSize(shape), 31);
  std::vector<float> k = gaussianData(kvSize(shape), 32);
  std::vector<float> v = gaussianData(kvSize(shape), 33);
  std::vector<double> out(qSize(shape), 123.0);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], 0.0) << "element " << i;

  // Unmask query 1's own position only: query 0 stays zero, query 1 copies
  // v at its position (the last key) for both heads.
  mask[size_t(1) * shape.numKeys + 4] = 0.0f;
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  const unsigned d = shape.headDim;
  for (unsigned h = 0; h < shape.numQHeads; ++h)
    for (unsigned c = 0; c < d; ++c) {
      EXPECT_EQ(out[(0 * shape.numQHeads + h) * d + c], 0.0);
      EXPECT_DOUBLE_EQ(out[(1 * shape.numQHeads + h) * d + c],
                       double(v[4 * d + c]));
    }
}

TEST(AttentionTest, MaskOutsideWindowGivesZerosNotNaN) {
  // Window 1 with keys visible only through a mask on other positions.
  AttentionShape shape{1, 1, 1, 2, 3};
  AttentionOptions options;
  options.causal = true;
  options.window = 1;
  std::vector<float> mask = {0.0f, 0.0f, kNegInf};
  options.mask = mask;
  std::vector<float> q = {1, 2}, k = {1, 1, 2, 2, 3, 3}, v = {1, 2, 3, 4, 5, 6};
  std::vector<double> out(2, 7.0);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, out).ok());
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
}

TEST(AttentionTest, NaNInputIsNotMistakenForMasking) {
  AttentionShape shape{1, 1, 1, 2, 2};
  std::vector<float> q = {std::numeric_limits<float>::quiet_NaN(), 0};
  std::vector<float> k = {1, 1, 1, 1}, v = {1, 1, 1, 1};
  std::vector<double> out(2, 0.0);
  ASSERT_TRUE(referenceAttention(shape, {}, q, k, v, out).ok());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// Runs validateAttention with the correct span sizes for `shape`.
Status validateShape(const AttentionShape &shape,
                     const AttentionOptions &options = {}) {
  return validateAttention(shape, options, qSize(shape), kvSize(shape),
                           kvSize(shape), qSize(shape));
}

void expectError(const Status &s, const std::string &needle) {
  ASSERT_FALSE(s.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_TRUE(contains(s.message(), needle))
      << "message '" << s.message() << "' does not mention '" << needle << "'";
}

TEST(AttentionValidateTest, AcceptsValidShape) {
  AttentionShape shape{2, 4, 2, 8, 5};
  AttentionOptions options;
  options.causal = true;
  options.window = 3;
  options.softcap = 30;
  options.scale = 0.1;
  std::vector<float> mask(10, 0.0f);
  mask[3] = kNegInf;
  options.mask = mask;
  Status s = validateShape(shape, options);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s.message().empty());
}

TEST(AttentionValidateTest, ZeroSizes) {
  const AttentionShape good{2, 2, 1, 4, 3};
  AttentionShape s = good;
  s.numQueries = 0;
  expectError(validateShape(s), "numQueries");
  s = good;
  s.numQHeads = 0;
  expectError(validateShape(s), "numQHeads");
  s = good;
  s.numKvHeads = 0;
  expectError(validateShape(s), "numKvHeads");
  s = good;
  s.headDim = 0;
  expectError(validateShape(s), "headDim");
  s = good;
  s.numKeys = 0;
  expectError(validateShape(s), "numKeys");
  // The default shape has headDim = numKeys = 0.
  expectError(validateShape(AttentionShape{}), "must be non-zero");
}

TEST(AttentionValidateTest, HeadsNotAMultiple) {
  AttentionShape s{1, 3, 2, 4, 3};
  Status st = validateShape(s);
  expectError(st, "multiple");
  expectError(st, "numQHeads (3)");
  expectError(st, "numKvHeads (2)");
}

TEST(AttentionValidateTest, CausalNeedsEnoughKeys) {
  AttentionShape s{5, 1, 1, 4, 3};
  AttentionOptions options;
  EXPECT_TRUE(validateShape(s, options).ok()) << "non-causal allows it";
  options.causal = true;
  Status st = validateShape(s, options);
  expectError(st, "causal");
  expectError(st, "numQueries (5)");
  expectError(st, "numKeys (3)");
}

TEST(AttentionValidateTest, SpanSizesNameTheOperand) {
  AttentionShape shape{2, 2, 1, 4, 3}; // q/out 16, k/v 12, mask 6
  AttentionOptions options;
  expectError(validateAttention(shape, options, 15, 12, 12, 16),
              "q has 15 elements, expected 16");
  expectError(validateAttention(shape, options, 16, 13, 12, 16),
              "k has 13 elements, expected 12");
  expectError(validateAttention(shape, options, 16, 12, 11, 16),
              "v has 11 elements, expected 12");
  expectError(validateAttention(shape, options, 16, 12, 12, 0),
              "out has 0 elements, expected 16");
  std::vector<float> mask(7, 0.0f);
  options.mask = mask;
  expectError(validateAttention(shape, options, 16, 12, 12, 16),
              "mask has 7 elements, expected 6");
}

TEST(AttentionValidateTest, ScaleAndSoftcap) {
  AttentionShape shape{1, 1, 1, 4, 3};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {-1.0, nan, inf, -inf}) {
    AttentionOptions options;
    options.scale = bad;
    expectError(validateShape(shape, options), "scale");
    options = {};
    options.softcap = bad;
    expectError(validateShape(shape, options), "softcap");
  }
}

TEST(AttentionValidateTest, MaskValues) {
  AttentionShape shape{1, 1, 1, 4, 3};
  AttentionOptions options;
  std::vector<float> mask = {0.0f, kNegInf, -1e30f};
  options.mask = mask;
  EXPECT_TRUE(validateShape(shape, options).ok());
  mask[2] = std::numeric_limits<float>::quiet_NaN();
  expectError(validateShape(shape, options), "mask element 2");
  mask[2] = std::numeric_limits<float>::infinity();
  expectError(validateShape(shape, options), "mask element 2");
}

TEST(AttentionValidateTest, SlopesAndSinks) {
  AttentionShape shape{1, 4, 2, 4, 3};
  AttentionOptions options;
  std::vector<float> heads(4, 0.5f), few(2, 0.5f), mask(3, 0.0f);
  options.sinks = few;
  expectError(validateShape(shape, options), "sinks has 2 elements");
  options.sinks = heads;
  EXPECT_TRUE(validateShape(shape, options).ok());
  options.slopes = heads;
  expectError(validateShape(shape, options), "slopes scale the mask");
  options.mask = mask;
  EXPECT_TRUE(validateShape(shape, options).ok());
  options.slopes = few;
  expectError(validateShape(shape, options), "slopes has 2 elements");
  options.slopes = heads;
  heads[1] = std::numeric_limits<float>::quiet_NaN();
  expectError(validateShape(shape, options), "sink is NaN");
}

TEST(AttentionValidateTest, ReferenceAttentionValidatesFirst) {
  AttentionShape shape{1, 1, 1, 2, 2};
  std::vector<float> q = {1, 1}, k = {1, 1, 1}, v = {1, 1, 1, 1};
  std::vector<double> out(2, 42.0);
  expectError(referenceAttention(shape, {}, q, k, v, out), "k has 3");
  // Nothing was written.
  EXPECT_EQ(out[0], 42.0);
  EXPECT_EQ(out[1], 42.0);
}

//===----------------------------------------------------------------------===//
// Quantised cache
//===----------------------------------------------------------------------===//

/// Encodes every row of `x` (rows of format.headDim() floats).
std::vector<uint8_t> encodeRows(const Format &format,
                                const std::vector<float> &x) {
  const size_t d = format.headDim(), rowBytes = format.rowBytes();
  const size_t rows = x.size() / d;
  std::vector<uint8_t> bytes(rows * rowBytes);
  for (size_t r = 0; r < rows; ++r) {
    Status s = format.encodeRow(
        std::span<const float>(x).subspan(r * d, d),
        std::span<uint8_t>(bytes).subspan(r * rowBytes, rowBytes));
    EXPECT_TRUE(s.ok()) << "row " << r << ": " << s.message();
  }
  return bytes;
}

TEST(AttentionQuantizedTest, F16CacheMatchesExactAttention) {
  AttentionShape shape{3, 4, 2, 8, 6};
  AttentionOptions options;
  options.causal = true;
  options.softcap = 3.0;
  Result<Format> f16 = Format::get("f16", shape.headDim);
  ASSERT_TRUE(f16.ok()) << f16.status().message();
  ASSERT_EQ(f16->rowBytes(), 2u * shape.headDim);

  std::vector<float> q = eighthsData(qSize(shape), 41);
  std::vector<float> k = eighthsData(kvSize(shape), 42);
  std::vector<float> v = eighthsData(kvSize(shape), 43);
  std::vector<uint8_t> kCache = encodeRows(*f16, k);
  std::vector<uint8_t> vCache = encodeRows(*f16, v);

  std::vector<double> exact(qSize(shape)), quant(qSize(shape), -9.0);
  ASSERT_TRUE(referenceAttention(shape, options, q, k, v, exact).ok());
  Status s = referenceAttentionQuantized(shape, options, q, *f16, kCache, *f16,
                                         vCache, quant);
  ASSERT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < exact.size(); ++i)
    EXPECT_NEAR(quant[i], exact[i], 1e-12) << "element " << i;
}

TEST(AttentionQuantizedTest, RejectsBadCaches) {
  AttentionShape shape{1, 2, 1, 4, 3};
  Result<Format> f16 = Format::get("f16", 4);
  Result<Format> f16Wide = Format::get("f16", 8);
  ASSERT_TRUE(f16.ok()) << f16.status().message();
  ASSERT_TRUE(f16Wide.ok()) << f16Wide.status().message();
  const size_t cacheBytes = 3 * 1 * f16->rowBytes();
  std::vector<float> q(qSize(shape), 0.5f);
  std::vector<uint8_t> good(cacheBytes, 0), shortCache(cacheBytes - 1, 0);
  std::vector<double> out(qSize(shape));

  Status ok =
      referenceAttentionQuantized(shape, {}, q, *f16, good, *f16, good, out);
  EXPECT_TRUE(ok.ok()) << ok.message();

  Status st = referenceAttentionQuantized(shape, {}, q, *f16, shortCache, *f16,
                                          good, out);
  expectError(st, "kCache has " + std::to_string(cacheBytes - 1) +
                      " bytes, expected " + std::to_string(cacheBytes));
  st = referenceAttentionQuantized(shape, {}, q, *f16, good, *f16, shortCache,
                                   out);
  expectError(st, "vCache has");

  st = referenceAttentionQuantized(shape, {}, q, *f16Wide, good, *f16, good,
                                   out);
  expectError(st, "kCache format 'f16' has headDim 8, expected 4");
  st = referenceAttentionQuantized(shape, {}, q, *f16, good, *f16Wide, good,
                                   out);
  expectError(st, "vCache format 'f16' has headDim 8");

  // Shape and q/out checks still apply.
  std::vector<float> badQ(qSize(shape) + 1);
  expectError(
      referenceAttentionQuantized(shape, {}, badQ, *f16, good, *f16, good, out),
      "q has");
  AttentionShape badShape = shape;
  badShape.numKvHeads = 0;
  expectError(
      referenceAttentionQuantized(badShape, {}, q, *f16, good, *f16, good, out),
      "numKvHeads");
}

} // namespace
