//===- ByteScoreExecutionTest.cpp - The int8 score's accuracy contract ----===//
//
// tq-lower-to-loops{score-dot=i8} scores keys by int8 dot products: the
// query quantised to int8 per query row and head, the codebook levels as
// bytes. The contract, checked here over every format it applies to, head
// dims 64-256, GQA 1-8, long contexts and peaked and flat softmax:
//
//   ||out_i8 - out_f32|| / ||out_f32||  <=  kShareOfFormatError x
//   ||out_f32 - exact|| / ||exact||
//
// i.e. the error the int8 score adds to the attention output (against the
// f32 kernel over the same cache) is a small share of the format's own
// error (the f32 kernel against exact attention over unquantised K/V),
// and at most kAbsoluteBound in any case. Both the portable lowering of
// the byte ops and, on hosts with AVX512-VNNI, vpshufb/vpdpbusd run, and
// must agree bit for bit (integer sums are exact).
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace tq;
using namespace tq::quant;

namespace {

/// The int8 score's error on the output, as a share of the format's own.
constexpr double kShareOfFormatError = 0.2;
/// And never more than this (relative to the output's norm).
constexpr double kAbsoluteBound = 0.03;

/// The formats score-dot=i8 applies to at head dim `d` (mirrors
/// emitFusedByteScore's conditions: codes of at most 16 levels, one scale
/// per row, no QJL residual).
bool hasByteScore(const std::string &name, unsigned d) {
  Result<Format> f = Format::get(name, d);
  if (!f.ok())
    return false;
  const FormatSpec &spec = f->spec();
  return spec.codebook && spec.codebook->centroids.size() <= 16 &&
         !spec.qjl && spec.scaleRule != ScaleRule::None &&
         spec.blocksPerRow() == 1 && spec.paddedDim % 16 == 0;
}

struct Case {
  std::string format;
  unsigned headDim = 128, queryHeads = 8, kvHeads = 2;
  int64_t numQueries = 1, numKeys = 2048;
  /// Peaked: each query head is a scaled copy of one key of its group, so
  /// the softmax puts most weight on that token; flat: small queries.
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

double relativeL2(const std::vector<float> &x, const std::vector<float> &y) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    norm += double(y[i]) * y[i];
  }
  return std::sqrt(err / std::max(norm, 1e-30));
}

class ByteScore : public ::testing::Test {
protected:
  static test::KernelRunner &runner() {
    static test::KernelRunner r;
    return r;
  }

  static bool hostHasVnni() {
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    return features.lookup("avx512vnni") && features.lookup("avx512bw");
  }

  std::unique_ptr<test::CompiledKernel>
  compile(const Case &c, const std::string &scoreDot,
          const std::string &permute, bool vnni) {
    mlir::tq::AttentionKernelSpec spec;
    spec.keyFormat = spec.valueFormat = c.format;
    spec.headDim = c.headDim;
    spec.queryHeads = c.queryHeads;
    spec.kvHeads = c.kvHeads;
    spec.numQueries = c.numQueries;
    spec.numKeys = c.numKeys;
    spec.causal = c.numQueries > 1;
    mlir::tq::TQPipelineOptions options;
    options.lookup = mlir::tq::LookupStrategy::tile;
    options.tileSize = 256;
    options.scoreDot = scoreDot;
    options.centroidPermute = permute;
    options.vnni = vnni;
    std::string error;
    auto kernel = runner().compile(spec, options, error);
    EXPECT_TRUE(kernel) << error;
    return kernel;
  }

  /// Runs the case through the f32 and i8 scores (and the VNNI lowering
  /// where the host has it); checks the contract; returns the i8 error.
  double check(const Case &c) {
    SCOPED_TRACE(c.describe());
    Result<Format> f = Format::get(c.format, c.headDim);
    EXPECT_TRUE(f.ok());
    if (!f.ok())
      return 0;
    SplitMix64 rng(c.headDim * 131u + c.queryHeads * 7u + c.numKeys +
                   (c.peaked ? 1 : 0));
    const size_t d = c.headDim, group = c.queryHeads / c.kvHeads;
    std::vector<float> k(c.numKeys * c.kvHeads * d), v(k.size());
    for (float &x : k)
      x = float(rng.gaussian());
    for (float &x : v)
      x = float(rng.gaussian());
    std::vector<float> q(c.numQueries * c.queryHeads * d);
    for (int64_t i = 0; i < c.numQueries; ++i)
      for (unsigned h = 0; h < c.queryHeads; ++h) {
        float *row = &q[(i * c.queryHeads + h) * d];
        const unsigned kvh = h / group;
        // A token of the causal prefix of query row i.
        const int64_t visible = c.numKeys - c.numQueries + 1 + i;
        const int64_t token = int64_t(rng.next() % uint64_t(visible));
        for (size_t j = 0; j < d; ++j)
          row[j] = c.peaked
                       ? float(0.6 * k[(token * c.kvHeads + kvh) * d + j] +
                               0.2 * rng.gaussian())
                       : float(0.05 * rng.gaussian());
      }
    std::vector<uint8_t> kb(c.numKeys * c.kvHeads * f->rowBytes()), vb;
    for (size_t r = 0; r < size_t(c.numKeys * c.kvHeads); ++r)
      EXPECT_TRUE(f->encodeRow(std::span<const float>(k).subspan(r * d, d),
                               std::span<uint8_t>(kb).subspan(
                                   r * f->rowBytes(), f->rowBytes()))
                      .ok());
    vb.resize(kb.size());
    for (size_t r = 0; r < size_t(c.numKeys * c.kvHeads); ++r)
      EXPECT_TRUE(f->encodeRow(std::span<const float>(v).subspan(r * d, d),
                               std::span<uint8_t>(vb).subspan(
                                   r * f->rowBytes(), f->rowBytes()))
                      .ok());

    auto run = [&](const std::string &dot, const std::string &permute,
                   bool vnni) {
      std::vector<float> out(q.size(), NAN), noMask;
      if (auto kernel = compile(c, dot, permute, vnni))
        kernel->run(q, kb, vb, noMask, out);
      for (float x : out)
        EXPECT_TRUE(std::isfinite(x)) << dot << " " << permute;
      return out;
    };
    std::vector<float> f32 = run("f32", "none", false);
    std::vector<float> i8 = run("i8", "none", false);

    AttentionShape shape{unsigned(c.numQueries), c.queryHeads, c.kvHeads,
                         c.headDim, unsigned(c.numKeys)};
    AttentionOptions opts;
    opts.causal = c.numQueries > 1;
    std::vector<double> exact(q.size());
    EXPECT_TRUE(referenceAttention(shape, opts, q, k, v, exact).ok());
    std::vector<float> exactF(exact.begin(), exact.end());
    const double formatError = relativeL2(f32, exactF);
    const double byteError = relativeL2(i8, f32);
    std::printf("  %-44s i8 vs f32 %.2e, f32 vs exact %.2e (share %.3f)\n",
                c.describe().c_str(), byteError, formatError,
                byteError / std::max(formatError, 1e-30));
    EXPECT_LE(byteError, kShareOfFormatError * formatError)
        << "the int8 score's error is not a small share of the format's";
    EXPECT_LE(byteError, kAbsoluteBound);
    if (hostHasVnni())
      EXPECT_EQ(run("i8", "avx512", true), i8)
          << "vpshufb/vpdpbusd disagree with the portable byte ops";
    return byteError;
  }
};

TEST_F(ByteScore, EveryApplicableFormatPeakedAndFlat) {
  int formats = 0;
  for (const FormatInfo &info : allFormats()) {
    if (!hasByteScore(info.name, 128))
      continue;
    ++formats;
    for (bool peaked : {false, true}) {
      Case c;
      c.format = info.name;
      c.peaked = peaked;
      check(c);
    }
  }
  // turbo2/3/4_0, polar1-4, haar4 at least: a change that drops formats
  // from the path must say so here.
  EXPECT_GE(formats, 6);
}

TEST_F(ByteScore, HeadDims) {
  for (unsigned d : {64u, 96u, 256u})
    for (const char *format : {"turbo3_0", "polar4"}) {
      Case c;
      c.format = format;
      c.headDim = d;
      c.peaked = true;
      if (!hasByteScore(format, d))
        continue;
      check(c);
    }
}

TEST_F(ByteScore, GqaGroupsAndLongContext) {
  for (unsigned group : {1u, 2u, 4u, 8u}) {
    Case c;
    c.format = "turbo3_0";
    c.queryHeads = 2 * group;
    c.kvHeads = 2;
    c.numKeys = group == 4 ? 16384 : 4096;
    c.peaked = group % 2 == 0;
    check(c);
  }
}

TEST_F(ByteScore, PrefillRows) {
  for (const char *format : {"turbo3_0", "polar4"}) {
    Case c;
    c.format = format;
    c.numQueries = 5;
    c.numKeys = 1000;
    c.peaked = true;
    check(c);
  }
}

/// Formats the path does not apply to (block scales, QJL, q8_0, f16) keep
/// the f32 score: score-dot=i8 changes nothing, bit for bit.
TEST_F(ByteScore, OtherFormatsKeepTheF32Score) {
  for (const char *format : {"tq3_0", "tqprod3", "q8_0", "f16"}) {
    Case c;
    c.format = format;
    c.numKeys = 300;
    SCOPED_TRACE(format);
    EXPECT_FALSE(hasByteScore(format, 128));
    Result<Format> f = Format::get(format, 128);
    ASSERT_TRUE(f.ok());
    std::vector<float> q(c.queryHeads * 128);
    SplitMix64 rng(3);
    for (float &x : q)
      x = float(rng.gaussian());
    std::vector<uint8_t> kb(c.numKeys * c.kvHeads * f->rowBytes());
    for (auto &x : kb)
      x = uint8_t(rng.next() & 0x3b); // (small f16 / scale bytes)
    auto run = [&](const std::string &dot) {
      std::vector<float> out(q.size(), NAN), noMask;
      std::vector<uint8_t> vb = kb;
      if (auto kernel = compile(c, dot, "none", false))
        kernel->run(q, kb, vb, noMask, out);
      return out;
    };
    std::vector<float> f32 = run("f32"), i8 = run("i8");
    for (size_t j = 0; j < f32.size(); ++j)
      ASSERT_TRUE(f32[j] == i8[j] || (std::isnan(f32[j]) && std::isnan(i8[j])))
          << "lane " << j;
  }
}

} // namespace
