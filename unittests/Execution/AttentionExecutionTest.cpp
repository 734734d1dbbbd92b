//===- AttentionExecutionTest.cpp - Compiled attention vs the reference ---===//
//
// Semantics proven by execution: kernels built from one tq.attention,
// lowered by the project's pipelines and JIT-compiled, must agree with
// lib/Quant's double-precision attention over the same quantised cache to
// fp32 tolerance, and with exact attention within the formats' own error.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Half.h"
#include "tq/Quant/Random.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace tq;
using namespace tq::quant;

namespace {

struct Config {
  std::string keyFormat, valueFormat;
  unsigned headDim = 64, queryHeads = 4, kvHeads = 1;
  int64_t numQueries = 1, numKeys = 17;
  bool causal = false;
  int64_t window = 0;
  float softcap = 0.0f;
  bool mask = false;
  bool hoist = true, fuse = true;
  int64_t tileSize = 64, splits = 1;
  int64_t pageSize = 0;
  mlir::tq::LookupStrategy lookup = mlir::tq::LookupStrategy::select;
  std::string centroidPermute = "none";
  int64_t maxUnrolledChunks = 48;
  int64_t scoreRows = 4, accumulators = 16;

  std::string describe() const {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s/%s d=%u H=%u KH=%u q=%lld n=%lld tile=%lld/%lld page=%lld%s%s%s%s%s%s permute=%s",
                  keyFormat.c_str(), valueFormat.c_str(), headDim, queryHeads,
                  kvHeads, (long long)numQueries, (long long)numKeys,
                  (long long)tileSize, (long long)splits, (long long)pageSize,
                  causal ? " causal" : "", window ? " window" : "",
                  softcap > 0 ? " softcap" : "", mask ? " mask" : "",
                  hoist ? "" : " naive",
                  lookup == mlir::tq::LookupStrategy::lut    ? " lut"
                  : lookup == mlir::tq::LookupStrategy::tile ? " tile"
                                                             : "",
                  centroidPermute.c_str());
    return buf;
  }
};

/// Relative L2 error of x vs a double reference.
double relativeError(const std::vector<float> &x,
                     const std::vector<double> &ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (x[i] - ref[i]) * (x[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / std::max(norm, 1e-30));
}

/// Encodes rows [n][kvh][d] into packed bytes.
std::vector<uint8_t> encode(const Format &f, const std::vector<float> &rows) {
  const size_t count = rows.size() / f.headDim();
  std::vector<uint8_t> bytes(count * f.rowBytes());
  for (size_t r = 0; r < count; ++r) {
    Status s = f.encodeRow(
        std::span<const float>(rows).subspan(r * f.headDim(), f.headDim()),
        std::span<uint8_t>(bytes).subspan(r * f.rowBytes(), f.rowBytes()));
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return bytes;
}

class Execution : public ::testing::Test {
protected:
  static test::KernelRunner &runner() {
    static test::KernelRunner r;
    return r;
  }

  /// Compiles and runs one configuration against both references; returns
  /// the kernel's output.
  std::vector<float> check(const Config &c) {
    SCOPED_TRACE(c.describe());
    mlir::tq::AttentionKernelSpec spec;
    spec.keyFormat = c.keyFormat;
    spec.valueFormat = c.valueFormat;
    spec.headDim = c.headDim;
    spec.queryHeads = c.queryHeads;
    spec.kvHeads = c.kvHeads;
    spec.numQueries = c.numQueries;
    spec.numKeys = c.numKeys;
    spec.causal = c.causal;
    spec.window = c.window;
    spec.softcap = c.softcap;
    spec.mask = c.mask;
    mlir::tq::TQPipelineOptions options;
    options.hoistRotations = c.hoist;
    options.fuseCodebook = c.fuse;
    options.lookup = c.lookup;
    options.centroidPermute = c.centroidPermute;
    options.maxUnrolledChunks = c.maxUnrolledChunks;
    options.scoreRows = c.scoreRows;
    options.accumulators = c.accumulators;
    spec.pageSize = c.pageSize;
    if (c.pageSize > 0)
      spec.numKeys = mlir::ShapedType::kDynamic;
    options.tileSize = c.tileSize;
    options.splits = c.splits;
    std::string error;
    auto kernel = runner().compile(spec, options, error);
    EXPECT_TRUE(kernel) << error;
    if (!kernel)
      return {};

    Result<Format> kf = Format::get(c.keyFormat, c.headDim);
    Result<Format> vf = Format::get(c.valueFormat, c.headDim);
    EXPECT_TRUE(kf.ok() && vf.ok());
    if (!kf.ok() || !vf.ok())
      return {};
    SplitMix64 rng(c.headDim * 7919u + c.queryHeads * 31u + c.numKeys);
    auto fill = [&](size_t n, double scale) {
      std::vector<float> v(n);
      for (float &x : v)
        x = float(scale * rng.gaussian());
      return v;
    };
    const size_t d = c.headDim;
    std::vector<float> q = fill(c.numQueries * c.queryHeads * d, 1.0);
    std::vector<float> k = fill(c.numKeys * c.kvHeads * d, 1.0);
    std::vector<float> v = fill(c.numKeys * c.kvHeads * d, 1.0);
    std::vector<float> mask;
    if (c.mask) {
      mask = fill(c.numQueries * c.numKeys, 0.5);
      mask[1] = -INFINITY;
    }
    std::vector<uint8_t> kb = encode(*kf, k), vb = encode(*vf, v);
    std::vector<float> out(q.size(), NAN);
    if (c.pageSize > 0) {
      // Scatter the rows into a pool of pages in a shuffled order, with a
      // spare page nobody uses, and run the paged kernel.
      const int64_t pages = (c.numKeys + c.pageSize - 1) / c.pageSize;
      const int64_t pool = pages + 1;
      std::vector<int32_t> table(pages);
      for (int64_t p = 0; p < pages; ++p)
        table[p] = int32_t((p * 7 + 3) % pool);
      auto scatter = [&](const Format &f, const std::vector<uint8_t> &rows) {
        const size_t tokenBytes = c.kvHeads * f.rowBytes();
        std::vector<uint8_t> poolBytes(pool * c.pageSize * tokenBytes, 0xEE);
        for (int64_t t = 0; t < c.numKeys; ++t)
          std::copy_n(rows.begin() + t * tokenBytes, tokenBytes,
                      poolBytes.begin() +
                          (table[t / c.pageSize] * c.pageSize +
                           t % c.pageSize) *
                              tokenBytes);
        return poolBytes;
      };
      std::vector<uint8_t> kPool = scatter(*kf, kb), vPool = scatter(*vf, vb);
      kernel->runPaged(q, kPool, vPool, pool, table, c.numKeys, mask, out);
    } else {
      kernel->run(q, kb, vb, mask, out);
    }

    AttentionShape shape{unsigned(c.numQueries), c.queryHeads, c.kvHeads,
                         c.headDim, unsigned(c.numKeys)};
    AttentionOptions opts;
    opts.causal = c.causal;
    opts.window = unsigned(c.window);
    opts.softcap = c.softcap;
    opts.mask = mask;
    std::vector<double> quantRef(q.size()), exact(q.size());
    EXPECT_TRUE(referenceAttentionQuantized(shape, opts, q, *kf, kb, *vf, vb,
                                            quantRef)
                    .ok());
    EXPECT_TRUE(referenceAttention(shape, opts, q, k, v, exact).ok());

    double maxAbs = 0, maxRef = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_TRUE(std::isfinite(out[i])) << "output " << i;
      maxAbs = std::max(maxAbs, std::fabs(out[i] - quantRef[i]));
      maxRef = std::max(maxRef, std::fabs(quantRef[i]));
    }
    const double exactError = relativeError(out, exact);
    std::printf("  %-60s max|kernel - quantised ref| %.2e, rel. error vs "
                "exact %.4f\n",
                c.describe().c_str(), maxAbs, exactError);
    // fp32 tolerance against the same quantised cache.
    EXPECT_LE(maxAbs, 2e-5 * std::max(1.0, maxRef) * std::sqrt(double(d)))
        << "max |kernel - reference over the quantised cache|";
    // Within the formats' own error of exact attention.
    double bound = 2.0 * (formatError(*kf) + formatError(*vf)) + 0.02;
    EXPECT_LT(exactError, bound)
        << "relative error vs exact attention";
    return out;
  }

  /// Relative reconstruction error of a format on Gaussian rows.
  static double formatError(const Format &f) {
    SplitMix64 rng(5);
    double err = 0, norm = 0;
    std::vector<float> x(f.headDim()), y(f.headDim());
    std::vector<uint8_t> bytes(f.rowBytes());
    for (int r = 0; r < 64; ++r) {
      for (float &v : x)
        v = float(rng.gaussian());
      (void)f.encodeRow(x, bytes);
      (void)f.decodeRow(bytes, y);
      for (size_t j = 0; j < x.size(); ++j) {
        err += (x[j] - y[j]) * double(x[j] - y[j]);
        norm += double(x[j]) * x[j];
      }
    }
    return std::sqrt(err / norm);
  }
};

Config make(const std::string &k, const std::string &v, unsigned d = 128) {
  Config c;
  c.keyFormat = k;
  c.valueFormat = v;
  c.headDim = d;
  return c;
}

/// Every format as both K and V, for decode (one query) and a non-causal
/// prefill block of three queries.
TEST_F(Execution, EveryFormatDecodeAndPrefill) {
  for (const FormatInfo &info : allFormats()) {
    Config c = make(info.name, info.name);
    check(c);
    c.numQueries = 3;
    check(c);
  }
}

TEST_F(Execution, AsymmetricPairs) {
  const char *pairs[][2] = {
      {"turbo3_0", "turbo2_0"}, {"tq3_0", "q8_0"},      {"polar4", "f16"},
      {"tqprod3", "polar2"},    {"haar4", "turbo4_0"},  {"q8_0", "polar3"},
      {"f16", "tq3_0_legacy"},  {"polar1", "tqprod4"},  {"turbo4_0", "haar4"},
  };
  for (auto &p : pairs)
    check(make(p[0], p[1]));
}

/// Padded and block-diagonal rotations at every head dim.
TEST_F(Execution, HeadDims) {
  for (unsigned d : {64u, 80u, 96u, 112u, 128u, 160u, 192u, 256u}) {
    check(make("polar3", "turbo3_0", d));
    check(make("tq3_0", "haar4", d));
    check(make("tqprod2", "q8_0", d));
  }
}

TEST_F(Execution, GqaGroups) {
  for (unsigned group : {1u, 2u, 4u, 6u, 7u, 8u}) {
    Config c = make("turbo3_0", "polar4", 64);
    c.kvHeads = 2;
    c.queryHeads = 2 * group;
    check(c);
    c.numQueries = 4;
    c.causal = true;
    check(c);
  }
}

/// Groups larger than one unrolled block of heads (16): the fused products
/// loop over blocks of 16 (32), of 12 (24) and of 1 (17, prime), with
/// decode (outputs in registers) and prefill rows (outputs in memory), row
/// scales (turbo3_0), block scales (q8_0) and QJL residuals (tqprod2).
TEST_F(Execution, LargeGqaGroupsLoopOverHeadBlocks) {
  for (unsigned group : {17u, 24u, 32u})
    for (auto [k, v] :
         {std::pair{"turbo3_0", "turbo3_0"}, std::pair{"q8_0", "polar4"},
          std::pair{"tqprod2", "tqprod2"}})
      for (int64_t queries : {1, 3}) {
        Config c = make(k, v, 64);
        c.kvHeads = 2;
        c.queryHeads = 2 * group;
        c.numQueries = queries;
        c.numKeys = 40;
        c.tileSize = 16;
        c.causal = queries > 1;
        c.lookup = mlir::tq::LookupStrategy::tile;
        check(c);
      }
}

/// Rows visited by decode periods (a loop over the periods, one unrolled)
/// instead of whole: every family's period (word reads of turbo3_0 and
/// tq3_0, bit-plane lane order of polar, 3-bit planes moving by their own
/// strides, QJL signs read from the row's end backwards, whole bytes of
/// haar4 and q8_0 with block scales, halves), decode (outputs in
/// registers) and prefill (outputs in memory).
TEST_F(Execution, RowsVisitedByDecodePeriods) {
  for (auto [k, v] :
       {std::pair{"turbo3_0", "turbo3_0"}, std::pair{"tq3_0", "q8_0"},
        std::pair{"polar4", "tqprod3"}, std::pair{"tqprod2", "haar4"},
        std::pair{"f16", "turbo4_0"}, std::pair{"polar3", "tqprod4"}})
    for (unsigned dim : {256u, 200u})
      for (int64_t queries : {1, 3}) {
        Config c = make(k, v, dim);
        c.kvHeads = 2;
        c.queryHeads = 8;
        c.numQueries = queries;
        c.numKeys = 40;
        c.tileSize = 16;
        c.causal = queries > 1;
        c.lookup = mlir::tq::LookupStrategy::tile;
        c.maxUnrolledChunks = 0;
        check(c);
      }
}

/// The fused products' register knobs (rows per score step, accumulators
/// of the one-row weighted sum) at values other than the defaults: fewer
/// and more rows per step than the sum tree takes by default, fewer
/// accumulators than one head's chunks and more than a block needs, with
/// QJL signs (tqprod3), row scales (turbo3_0) and block scales (q8_0).
TEST_F(Execution, RegisterKnobsKeepResults) {
  for (auto [k, v] : {std::pair{"turbo3_0", "turbo3_0"},
                      std::pair{"tqprod3", "q8_0"}})
    for (auto [rows, accumulators] :
         {std::pair{int64_t(1), int64_t(4)}, std::pair{int64_t(2), int64_t(8)},
          std::pair{int64_t(8), int64_t(32)}, std::pair{int64_t(3), int64_t(5)}})
      for (int64_t queries : {1, 3}) {
        Config c = make(k, v, 128);
        c.kvHeads = 2;
        c.queryHeads = 4;
        c.numQueries = queries;
        c.numKeys = 37;
        c.tileSize = 16;
        c.causal = queries > 1;
        c.lookup = mlir::tq::LookupStrategy::tile;
        c.scoreRows = rows;
        c.accumulators = accumulators;
        check(c);
      }
}

/// Causal prefill (queries aligned to the last positions), sliding window,
/// soft-cap and an additive mask, alone and together.
TEST_F(Execution, MaskingOptions) {
  Config base = make("turbo4_0", "tq3_0", 64);
  base.numQueries = 5;
  base.numKeys = 13;
  base.kvHeads = 2;
  base.queryHeads = 4;
  for (int variant = 0; variant < 6; ++variant) {
    Config c = base;
    c.causal = variant == 1 || variant == 5;
    c.window = (variant == 2 || variant == 5) ? 4 : 0;
    c.softcap = (variant == 3 || variant == 5) ? 2.5f : 0.0f;
    c.mask = variant == 4 || variant == 5;
    check(c);
  }
}

/// The flash loop: tiles that do not divide the context, split-KV chunks
/// (some of them empty when splits > tiles) merged by log-sum-exp, with
/// every masking option, against the same reference.
TEST_F(Execution, FlashTilingAndSplitKV) {
  for (int64_t tile : {4, 5, 64}) {
    for (int64_t splits : {1, 3, 8}) {
      Config c = make("polar3", "turbo4_0", 64);
      c.kvHeads = 2;
      c.queryHeads = 6;
      c.numKeys = 17;
      c.tileSize = tile;
      c.splits = splits;
      check(c);
      c.numQueries = 4;
      c.causal = true;
      c.window = 6;
      c.softcap = 3.0f;
      c.mask = true;
      check(c);
    }
  }
  // No tiling at all: the full-row softmax path.
  Config c = make("tq3_0", "q8_0", 64);
  c.tileSize = 0;
  check(c);
}

/// Paged caches (shuffled pages, page sizes 1, 16 and 128, a partial last
/// page) give the same attention as contiguous ones.
TEST_F(Execution, PagedMatchesContiguous) {
  for (int64_t pageSize : {1, 16, 128}) {
    for (int64_t tile : {5, 64}) {
      Config c = make("turbo3_0", "polar4", 96);
      c.kvHeads = 2;
      c.queryHeads = 4;
      c.numKeys = 37;
      c.tileSize = tile;
      Config contiguous = c;
      c.pageSize = pageSize;
      EXPECT_EQ(check(c), check(contiguous)) << "paged vs contiguous";
      c.numQueries = contiguous.numQueries = 3;
      c.causal = contiguous.causal = true;
      c.splits = contiguous.splits = 2;
      EXPECT_EQ(check(c), check(contiguous)) << "paged vs contiguous";
    }
  }
}

/// The naive pipeline (every cached row un-rotated) and the hoisted one
/// compute the same attention; lut and select lookups too.
TEST_F(Execution, PipelineVariantsAgree) {
  for (const char *fmt : {"turbo3_0", "polar3", "tq3_0", "haar4", "tqprod3"}) {
    Config c = make(fmt, fmt, 96);
    c.numQueries = 2;
    c.causal = true;
    c.hoist = false;
    check(c);
    c.hoist = true;
    c.lookup = mlir::tq::LookupStrategy::lut;
    check(c);
    c.lookup = mlir::tq::LookupStrategy::tile;
    c.tileSize = 5;
    c.splits = 2;
    check(c);
  }
}

/// Centroids picked by x86 register permutes (what tq-aot uses on such a
/// host) give the select tree's outputs exactly: same table entries, same
/// products. Covers 1- to 4-bit codebooks, one and several query rows
/// (registers / in-memory outputs), GQA groups and a tail tile.
TEST_F(Execution, RegisterPermutesMatchSelectTree) {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> isas;
  if (features.lookup("avx2"))
    isas.push_back("avx2");
  if (features.lookup("avx512f"))
    isas.push_back("avx512");
  if (isas.empty())
    GTEST_SKIP() << "the host has neither AVX2 nor AVX-512F";
  for (const char *fmt : {"turbo3_0", "polar4", "turbo2_0", "polar1", "tq3_0"})
    for (int64_t queries : {1, 3}) {
      Config c = make(fmt, fmt, 128);
      c.queryHeads = 8;
      c.kvHeads = 2;
      c.numQueries = queries;
      c.numKeys = 45;
      c.lookup = mlir::tq::LookupStrategy::tile;
      c.tileSize = 16;
      std::vector<float> tree = check(c);
      for (const std::string &isa : isas) {
        c.centroidPermute = isa;
        EXPECT_EQ(check(c), tree) << fmt << " " << isa;
      }
    }
}

} // namespace

namespace {

/// Rotations per decode step at a 4K context (32 query heads, 8 KV heads,
/// head dim 128): the naive pipeline un-rotates every cached key and value
/// row; the hoisted one rotates each query head once and each output head
/// once.
TEST_F(Execution, RotationsPerDecodeStepAt4K) {
  for (const char *fmt : {"turbo3_0", "polar3", "tq3_0", "haar4"}) {
    mlir::tq::AttentionKernelSpec spec;
    spec.keyFormat = spec.valueFormat = fmt;
    spec.headDim = 128;
    spec.queryHeads = 32;
    spec.kvHeads = 8;
    spec.numQueries = 1;
    spec.numKeys = 4096;
    mlir::tq::TQPipelineOptions naive, hoisted;
    naive.hoistRotations = false;
    std::string error;
    auto n = runner().countRotations(spec, naive, error);
    ASSERT_TRUE(n) << error;
    auto h = runner().countRotations(spec, hoisted, error);
    ASSERT_TRUE(h) << error;
    std::printf("  %-9s rotated vectors per decode step: naive %lld, hoisted "
                "%lld\n",
                fmt, (long long)n->rows, (long long)h->rows);
    EXPECT_EQ(n->rows, 2 * 4096 * 8) << fmt;
    EXPECT_EQ(h->rows, 2 * 32) << fmt;
  }
}

} // namespace

/// Engine options (an f16 mask hiding whole tiles, ALiBi slopes, sinks)
/// through every pipeline: the naive one (the dense softmax's sinks), the
/// fused untiled one, flash tiles (skipped tiles, sinks as the initial
/// state) and split-KV (sinks in the first split only).
TEST_F(Execution, EngineMaskSlopesAndSinks) {
  struct Variant {
    const char *name;
    bool hoist, fuse;
    int64_t tile, splits;
  };
  const Variant variants[] = {{"naive", false, false, 0, 1},
                              {"fused", true, true, 0, 1},
                              {"tiled", true, true, 16, 1},
                              {"split", true, true, 16, 3}};
  for (const Variant &variant : variants)
    for (auto [kName, vName] : {std::pair{"turbo3_0", "q8_0"},
                                std::pair{"polar4", "turbo4_0"}})
      for (int64_t queries : {1, 5}) {
        SCOPED_TRACE(std::string(variant.name) + " " + kName + "/" + vName +
                     " queries " + std::to_string(queries));
        mlir::tq::AttentionKernelSpec spec;
        spec.keyFormat = kName;
        spec.valueFormat = vName;
        spec.headDim = 64;
        spec.queryHeads = 4;
        spec.kvHeads = 2;
        spec.numQueries = queries;
        spec.numKeys = 100;
        spec.scale = 0.2f;
        spec.mask = spec.maskF16 = spec.slopes = spec.sinks = true;
        spec.lse = true;
        mlir::tq::TQPipelineOptions options;
        options.hoistRotations = variant.hoist;
        options.fuseCodebook = variant.fuse;
        options.tileSize = variant.tile;
        options.splits = variant.splits;
        std::string error;
        auto kernel = runner().compile(spec, options, error);
        ASSERT_TRUE(kernel) << error;

        Format kf = *Format::get(kName, 64), vf = *Format::get(vName, 64);
        SplitMix64 rng(uint64_t(queries) * 977 + kf.rowBytes());
        auto fill = [&](size_t n) {
          std::vector<float> x(n);
          for (float &e : x)
            e = float(rng.gaussian());
          return x;
        };
        std::vector<float> q = fill(queries * 4 * 64);
        std::vector<uint8_t> kb = encode(kf, fill(100 * 2 * 64));
        std::vector<uint8_t> vb = encode(vf, fill(100 * 2 * 64));
        // Keys [20, 70) visible with offsets in eighths (exact in half),
        // the rest hidden: tiles 0 and 5-6 of 16 tokens are skipped. The
        // last query sees nothing but its sinks.
        std::vector<float> mask(queries * 100, -INFINITY);
        for (int64_t i = 0; i + 1 < std::max<int64_t>(queries, 2); ++i)
          for (int t = 20; t < 70; ++t)
            mask[i * 100 + t] = float(int(rng.next() % 17) - 16) / 8.0f;
        std::vector<uint16_t> half;
        for (float m : mask)
          half.push_back(floatToHalf(m));
        std::vector<float> slopes = {0.5f, 1.0f, 2.0f, 0.25f};
        std::vector<float> sinks = {0.5f, -INFINITY, 3.0f, -1.0f};
        std::vector<float> out(q.size(), NAN), lse;
        kernel->runEngine(q, kb, vb, half, slopes, sinks, out, &lse);

        AttentionOptions o;
        o.scale = 0.2;
        o.mask = mask;
        o.slopes = slopes;
        o.sinks = sinks;
        std::vector<double> ref(q.size());
        Status s = referenceAttentionQuantized(
            AttentionShape{unsigned(queries), 4, 2, 64, 100}, o, q, kf, kb,
            vf, vb, ref);
        ASSERT_TRUE(s.ok()) << s.message();
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i)
          worst = std::max(worst, double(std::fabs(out[i] - ref[i])));
        EXPECT_LT(worst, 1e-4);
        // lse: log(sum_t exp(logit) + exp(sink)) in double over the decoded
        // keys; the last query sees only its sinks (head 1 has none: -inf).
        std::vector<float> keys(100 * 2 * 64);
        for (size_t r = 0; r < 100 * 2; ++r)
          ASSERT_TRUE(kf.decodeRow(std::span<const uint8_t>(kb).subspan(
                                       r * kf.rowBytes(), kf.rowBytes()),
                                   std::span<float>(keys).subspan(r * 64, 64))
                          .ok());
        for (int64_t i = 0; i < queries; ++i)
          for (int h = 0; h < 4; ++h) {
            double total = std::isinf(sinks[h]) ? 0.0 : std::exp(sinks[h]);
            for (int t = 0; t < 100; ++t) {
              const double m = halfToFloat(half[i * 100 + t]);
              if (std::isinf(m))
                continue;
              double dot = 0;
              for (int d = 0; d < 64; ++d)
                dot += double(q[(i * 4 + h) * 64 + d]) *
                       keys[(t * 2 + h / 2) * 64 + d];
              total += std::exp(0.2 * dot + slopes[h] * m);
            }
            const float got = lse[i * 4 + h];
            SCOPED_TRACE("lse of query " + std::to_string(i) + " head " +
                         std::to_string(h));
            if (total == 0.0)
              EXPECT_EQ(got, -INFINITY);
            else
              EXPECT_NEAR(got, std::log(total), 1e-4);
          }
      }
}
