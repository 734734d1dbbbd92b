//===- AmxTileExecutionTest.cpp - Accuracy contract of amx-tiles ---------===//
//
// tq-lower-to-loops{amx-tiles} runs the fused score and weighted sum of a
// kernel with several query rows (prefill) as AMX-BF16 tile products
// (tdpbf16ps over 16 x 16 f32 tiles): queries, keys, weights and values
// are rounded to bf16, the products summed in f32. A kv head's rows (query
// m / group, head kvh * group + m % group) go 16 to a tile, the last
// repeated up to a whole tile; tokens are padded to 16 (score) or 32
// (weighted sum). The lowering applies where the query has more than one
// row, the format has a codebook and no QJL residual (not tqprod, q8_0 or
// f16) and the padded head dim is a multiple of 32; elsewhere the vector
// lowering runs unchanged.
//
// The contract, checked over every format it applies to, head dims 64-256,
// GQA groups 1-8 (3: tiles of 16 rows splitting a group), contexts of 1 to
// 8192 tokens (none a multiple of the tiles but the longest) and peaked
// and flat softmax:
//
//   ||out_amx - out_f32|| / ||out_f32||  <=  kShareOfFormatError x
//   ||out_f32 - exact|| / ||exact||
//
// and at most kAbsoluteBound, where out_f32 is the f32 vector kernel over
// the same cache and exact is attention over the unquantised K/V (the
// same contract as the reduced-precision dot paths, DotPathExecutionTest).
// Where the lowering does not apply (QJL formats, one query row) the
// option must change nothing: the same output, bit for bit.
//
// The tests need AMX and Linux's permission to use the tile data; a host
// without either (e.g. AMD Zen 5) reports every test skipped, with why.
//
//===----------------------------------------------------------------------===//

#include "AttentionCase.h"
#include "KernelRunner.h"

#include "tq/Quant/Format.h"

#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace tq;
using namespace tq::quant;

namespace {

/// The tile products' error on the output, as a share of the format's own.
constexpr double kShareOfFormatError = 0.2;
/// And never more than this (relative to the output's norm).
constexpr double kAbsoluteBound = 0.03;

/// Why this process cannot run tile products; empty where it can. Asked
/// once: Linux's permission, once granted, holds for the process.
const std::string &amxSkipReason() {
  static const std::string reason = []() -> std::string {
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    if (!features.lookup("amx-tile") || !features.lookup("amx-bf16"))
      return "this host has no AMX-BF16 tiles (CPU features amx-tile and "
             "amx-bf16): the amx-tiles lowering cannot run here";
#if defined(__linux__) && defined(__x86_64__)
    // The tile data (XFEATURE_XTILEDATA = 18) is enabled per process on
    // request (ARCH_REQ_XCOMP_PERM = 0x1023); without it the first tile
    // load faults.
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
      const int error = errno;
      return std::string("Linux refused the AMX tile data permission "
                         "(arch_prctl ARCH_REQ_XCOMP_PERM, "
                         "XFEATURE_XTILEDATA): ") +
             std::strerror(error);
    }
    return "";
#else
    return "the AMX tile data permission is requested on Linux x86-64 only";
#endif
  }();
  return reason;
}

/// Where the lowering applies at head dim `d` with `numQueries` queries
/// (amxTilesApply: several rows, a codebook format without QJL, whole
/// 32-value tile rows; q8_0 and f16, nearly lossless, keep the vector
/// products: bf16 operands would be 0.4 and 9 times their own error).
bool amxApplies(const std::string &format, unsigned d, int64_t numQueries) {
  Result<Format> f = Format::get(format, d);
  return f.ok() && numQueries != 1 && f->spec().codebook &&
         !f->spec().qjl && f->paddedDim() % 32 == 0;
}

/// The tests' default shape: prefill (5 queries) over a context that is
/// no multiple of the tiles.
struct Case : test::AttentionCase {
  Case() {
    format = "turbo3_0";
    numQueries = 5;
    numKeys = 700;
  }
};
using test::relativeL2;

bool allFinite(const std::vector<float> &x) {
  return std::all_of(x.begin(), x.end(),
                     [](float v) { return std::isfinite(v); });
}

/// The case's inputs (a seed of its own per shape and softmax).
test::AttentionInputs makeInputs(const Case &c, const Format &f) {
  return test::makeAttentionInputs(
      c, f,
      c.headDim * 977u + c.queryHeads * 31u + c.numKeys * 3u + c.numQueries +
          (c.peaked ? 1 : 0));
}

class AmxTiles : public test::CompiledKernelSuite<::testing::Test> {
protected:
  /// Every test starts at the gate: without AMX it reports itself
  /// skipped (GTEST_SKIP in SetUp skips the body).
  void SetUp() override {
    if (!amxSkipReason().empty())
      GTEST_SKIP() << amxSkipReason();
  }

  /// The kernel of case `c`, with tile products or the f32 vector ones,
  /// otherwise the same options (tile lookup, 64-token tiles, vpermps
  /// centroids where there is AVX-512, as every AMX host has).
  std::shared_ptr<test::CompiledKernel> compile(const Case &c, bool amx) {
    Case shape = c;
    shape.peaked = false;
    const std::string key = shape.describe() + (amx ? " amx" : " f32");
    mlir::tq::TQPipelineOptions options;
    options.lookup = mlir::tq::LookupStrategy::tile;
    options.tileSize = 64;
    options.centroidPermute =
        llvm::sys::getHostCPUFeatures().lookup("avx512f") ? "avx512" : "none";
    options.amxTiles = amx;
    return compileOnce(key, c, options);
  }

  std::vector<float> run(const Case &c, bool amx, test::AttentionInputs &in) {
    std::vector<float> out(in.q.size(), NAN), noMask;
    if (auto kernel = compile(c, amx))
      kernel->run(in.q, in.keys, in.values, noMask, out);
    return out;
  }

  /// Runs case `c` with and without tile products: the contract where the
  /// lowering applies, the same output bit for bit where it does not.
  /// Returns whether it applied.
  bool check(const Case &c) {
    SCOPED_TRACE(c.describe());
    Result<Format> f = Format::get(c.format, c.headDim);
    EXPECT_TRUE(f.ok()) << c.format << " d=" << c.headDim;
    if (!f.ok())
      return false;
    test::AttentionInputs in = makeInputs(c, *f);
    const std::vector<float> f32 = run(c, false, in);
    const std::vector<float> amx = run(c, true, in);
    EXPECT_TRUE(allFinite(f32)) << "the f32 kernel's output";
    if (!amxApplies(c.format, c.headDim, c.numQueries)) {
      EXPECT_EQ(amx, f32) << "amx-tiles changed a kernel it does not apply to";
      std::printf("  AMX n/a   %-44s identical: %s\n", c.describe().c_str(),
                  amx == f32 ? "yes" : "NO");
      return false;
    }
    EXPECT_TRUE(allFinite(amx)) << "the tile products' output";
    const double formatError = relativeL2(f32, in.exact);
    const double amxError = relativeL2(amx, f32);
    std::printf(
        "  AMX       %-44s vs f32 %.2e, f32 vs exact %.2e (share %.3f)\n",
        c.describe().c_str(), amxError, formatError,
        amxError / std::max(formatError, 1e-30));
    EXPECT_LE(amxError, kShareOfFormatError * formatError)
        << "the tile products' error is not a small share of the format's";
    EXPECT_LE(amxError, kAbsoluteBound);
    return true;
  }
};

/// Five queries of four heads a kv head: 20 rows, a whole tile and one of
/// four rows (repeating the last), over 700 tokens (tiles of 64, the last
/// of 60: padded to 64 in both products).
TEST_F(AmxTiles, EveryApplicableFormatPeakedAndFlat) {
  int applicable = 0;
  for (const FormatInfo &info : allFormats()) {
    bool applied = false;
    for (bool peaked : {false, true}) {
      Case c;
      c.format = info.name;
      c.peaked = peaked;
      applied = check(c);
    }
    applicable += applied;
  }
  // turbo2/3/4_0, polar1-4, haar4 at least: a change that drops formats
  // from the lowering must say so here.
  EXPECT_GE(applicable, 6);
}

/// Head dims 64 to 256 (padded rows of 64 to 256 values, 2 to 8 steps
/// of 32 bf16 along the score's dot; turbo3_0 pads 64 and 96 to 128) and
/// groups of 1 to 8 heads: with 3, tiles of 16 rows end inside a query's
/// group. Each format takes every head dim and every group, the head dims
/// in turn, not every pair: a tile kernel takes seconds to compile, over
/// a minute at d256.
TEST_F(AmxTiles, HeadDimsAndGroups) {
  const unsigned dims[] = {64, 96, 256}, groups[] = {1, 3, 4, 8};
  const char *formats[] = {"turbo3_0", "polar4"};
  for (size_t i = 0; i < std::size(formats); ++i)
    for (size_t j = 0; j < std::size(groups); ++j)
      for (bool peaked : {false, true}) {
        Case c;
        c.format = formats[i];
        c.headDim = dims[(i + j) % std::size(dims)];
        c.kvHeads = 2;
        c.queryHeads = groups[j] * c.kvHeads;
        c.numQueries = 7;
        c.peaked = peaked;
        EXPECT_TRUE(check(c)) << "amx-tiles does not apply to " << c.format
                              << " at d=" << c.headDim;
      }
}

/// Contexts shorter than a tile of tokens (one token: one query, no tile
/// products) and one long one, a whole number of tiles, of 64 rows.
TEST_F(AmxTiles, ShortAndLongContexts) {
  for (int64_t keys : {1, 3, 17, 33})
    for (bool peaked : {false, true}) {
      Case c;
      c.numKeys = keys;
      // Causal: every query sees at least one token.
      c.numQueries = std::min<int64_t>(keys, 4);
      c.peaked = peaked;
      EXPECT_EQ(check(c), keys > 1);
    }
  for (bool peaked : {false, true}) {
    Case c;
    c.numKeys = 8192;
    c.numQueries = 16;
    c.peaked = peaked;
    EXPECT_TRUE(check(c));
  }
}

/// One query (decode), however many heads a group: the option changes
/// nothing.
TEST_F(AmxTiles, OneQueryRowUnchanged) {
  for (auto [format, group] : {std::pair<const char *, unsigned>{"turbo3_0", 4},
                               {"polar4", 8},
                               {"q8_0", 4}}) {
    Case c;
    c.format = format;
    c.queryHeads = group * c.kvHeads;
    c.numQueries = 1;
    c.peaked = true;
    EXPECT_FALSE(check(c));
  }
}

} // namespace
