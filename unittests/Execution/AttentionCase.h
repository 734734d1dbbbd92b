//===- AttentionCase.h - Shapes of the accuracy-contract tests --*- C++ -*-===//
//
// The attention shape the reduced-precision path tests (DotPath, AmxTiles)
// run, and the relative error their contracts bound.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_UNITTESTS_EXECUTION_ATTENTIONCASE_H
#define TQ_UNITTESTS_EXECUTION_ATTENTIONCASE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tq::test {

struct AttentionCase {
  std::string format;
  unsigned headDim = 128, queryHeads = 8, kvHeads = 2;
  int64_t numQueries = 1, numKeys = 2048;
  /// Peaked: each query head is a scaled copy of one key of its group (in
  /// its causal prefix), so the softmax puts most weight on that token;
  /// flat: small queries, weights spread over the whole context.
  bool peaked = false;

  std::string describe() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s d=%u H=%u KH=%u q=%lld n=%lld %s",
                  format.c_str(), headDim, queryHeads, kvHeads,
                  (long long)numQueries, (long long)numKeys,
                  peaked ? "peaked" : "flat");
    return buf;
  }
};

/// ||x - y|| / ||y||.
inline double relativeL2(const std::vector<float> &x,
                         const std::vector<float> &y) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    norm += double(y[i]) * y[i];
  }
  return std::sqrt(err / std::max(norm, 1e-30));
}

} // namespace tq::test

#endif // TQ_UNITTESTS_EXECUTION_ATTENTIONCASE_H
