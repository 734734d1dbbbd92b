//===- AttentionCase.h - Shapes of the accuracy-contract tests --*- C++ -*-===//
//
// The attention shape the reduced-precision path tests (DotPath, AmxTiles)
// run, its inputs, the kernels they compile, and the relative error their
// contracts bound.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_UNITTESTS_EXECUTION_ATTENTIONCASE_H
#define TQ_UNITTESTS_EXECUTION_ATTENTIONCASE_H

#include "KernelRunner.h"

#include "tq/Quant/Format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
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

  /// The attention kernel of this shape: K and V in `format`, causal
  /// where there are several query rows.
  mlir::tq::AttentionKernelSpec kernelSpec() const {
    mlir::tq::AttentionKernelSpec spec;
    spec.keyFormat = spec.valueFormat = format;
    spec.headDim = headDim;
    spec.queryHeads = queryHeads;
    spec.kvHeads = kvHeads;
    spec.numQueries = numQueries;
    spec.numKeys = numKeys;
    spec.causal = numQueries > 1;
    return spec;
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

/// A case's queries, its cache (K and V encoded in the case's format) and
/// the exact attention over the unquantised K/V.
struct AttentionInputs {
  std::vector<float> q;
  std::vector<uint8_t> keys, values;
  std::vector<float> exact;
};

/// Gaussian K and V from `seed`, then the queries: peaked ones a scaled
/// copy of a random key of their group in their causal prefix plus noise,
/// flat ones small noise.
AttentionInputs makeAttentionInputs(const AttentionCase &c,
                                    const quant::Format &f, uint64_t seed);

/// A test suite (over `Base`, ::testing::Test or TestWithParam) that keeps
/// its JIT-compiled kernels for the process, by a key of its own: a peaked
/// and a flat case of one shape share theirs (the tests are
/// compile-bound).
template <class Base> class CompiledKernelSuite : public Base {
protected:
  static KernelRunner &runner() {
    static KernelRunner r;
    return r;
  }
  static std::map<std::string, std::shared_ptr<CompiledKernel>> &compiled() {
    static std::map<std::string, std::shared_ptr<CompiledKernel>> m;
    return m;
  }
  /// Case `c`'s kernel lowered with `options`, compiled on the first call
  /// for `key` (which must name everything `options` set) and kept.
  static std::shared_ptr<CompiledKernel>
  compileOnce(const std::string &key, const AttentionCase &c,
              const mlir::tq::TQPipelineOptions &options) {
    auto &kernels = compiled();
    if (auto it = kernels.find(key); it != kernels.end())
      return it->second;
    std::string error;
    std::shared_ptr<CompiledKernel> kernel =
        runner().compile(c.kernelSpec(), options, error);
    EXPECT_TRUE(kernel) << key << ": " << error;
    if (kernel)
      kernels[key] = kernel;
    return kernel;
  }
  /// The kernels' execution engines must go while LLVM's statics live:
  /// not at exit.
  static void TearDownTestSuite() { compiled().clear(); }
};

} // namespace tq::test

#endif // TQ_UNITTESTS_EXECUTION_ATTENTIONCASE_H
