//===- AttentionCase.cpp - Inputs of the accuracy-contract tests ---------===//

#include "AttentionCase.h"

#include "tq/Quant/Attention.h"
#include "tq/Quant/Random.h"

#include <gtest/gtest.h>

#include <span>

using namespace tq;
using namespace tq::quant;

test::AttentionInputs test::makeAttentionInputs(const AttentionCase &c,
                                                const Format &f,
                                                uint64_t seed) {
  SplitMix64 rng(seed);
  const size_t d = c.headDim, group = c.queryHeads / c.kvHeads;
  const size_t rows = size_t(c.numKeys) * c.kvHeads;
  std::vector<float> k(rows * d), v(rows * d);
  for (float &x : k)
    x = float(rng.gaussian());
  for (float &x : v)
    x = float(rng.gaussian());
  AttentionInputs in;
  in.q.resize(c.numQueries * c.queryHeads * d);
  for (int64_t i = 0; i < c.numQueries; ++i)
    for (unsigned h = 0; h < c.queryHeads; ++h) {
      float *row = &in.q[(i * c.queryHeads + h) * d];
      // Query i sees tokens [0, numKeys - numQueries + i] (causal).
      const int64_t visible = c.numKeys - c.numQueries + 1 + i;
      const int64_t token = int64_t(rng.next() % uint64_t(visible));
      const float *key = &k[(token * c.kvHeads + h / group) * d];
      for (size_t j = 0; j < d; ++j)
        row[j] = c.peaked ? float(0.6 * key[j] + 0.2 * rng.gaussian())
                          : float(0.05 * rng.gaussian());
    }
  auto encode = [&](const std::vector<float> &x) {
    std::vector<uint8_t> out(rows * f.rowBytes());
    for (size_t r = 0; r < rows; ++r)
      EXPECT_TRUE(f.encodeRow(std::span<const float>(x).subspan(r * d, d),
                              std::span<uint8_t>(out).subspan(r * f.rowBytes(),
                                                              f.rowBytes()))
                      .ok());
    return out;
  };
  in.keys = encode(k);
  in.values = encode(v);
  AttentionShape shape{unsigned(c.numQueries), c.queryHeads, c.kvHeads,
                       c.headDim, unsigned(c.numKeys)};
  AttentionOptions opts;
  opts.causal = c.numQueries > 1;
  std::vector<double> exact(in.q.size());
  EXPECT_TRUE(referenceAttention(shape, opts, in.q, k, v, exact).ok());
  in.exact.assign(exact.begin(), exact.end());
  return in;
}
