//===- IndexRangeExecutionTest.cpp - Index bytes beyond the codebook ------===//
//
// haar4 stores each 4-bit codebook index in a whole byte. The encoder
// writes 0..15, but a cache holds whatever bytes it was given, and
// lib/Quant's decoder reads a byte above 15 mod the codebook's size (the
// fuzz campaign found it reading past the table). The compiled kernels must
// do the same for every lookup: before this test the element-wise (select)
// and per-query table (lut) lowerings indexed the 16-entry codebook, and
// the 16-column table, with the whole byte.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace tq;
using namespace tq::quant;

namespace {

/// Encodes rows [n][kvh][d] into packed bytes.
std::vector<uint8_t> encodeRows(const Format &f,
                                const std::vector<float> &rows) {
  const size_t count = rows.size() / f.headDim();
  std::vector<uint8_t> bytes(count * f.rowBytes());
  for (size_t r = 0; r < count; ++r)
    EXPECT_TRUE(f.encodeRow(std::span<const float>(rows).subspan(
                                r * f.headDim(), f.headDim()),
                            std::span<uint8_t>(bytes).subspan(
                                r * f.rowBytes(), f.rowBytes()))
                    .ok());
  return bytes;
}

/// Sets random high bits in every index byte of haar4 rows (bytes 4 ..
/// 4 + d of each row, after the f32 scale): the low four bits, all the
/// decoder reads, stay; the byte becomes 16..255.
std::vector<uint8_t> withHighIndexBits(const Format &f,
                                       std::vector<uint8_t> bytes,
                                       uint64_t seed) {
  SplitMix64 rng(seed);
  for (size_t row = 0; row < bytes.size() / f.rowBytes(); ++row)
    for (unsigned j = 0; j < f.headDim(); ++j) {
      uint8_t &b = bytes[row * f.rowBytes() + 4 + j];
      EXPECT_LT(b, 16u) << "the encoder writes 0..15";
      b = uint8_t(b | (16u << (rng.next() % 4)) | (rng.next() & 0xF0));
    }
  return bytes;
}

class IndexRange : public ::testing::Test {
protected:
  static test::KernelRunner &runner() {
    static test::KernelRunner r;
    return r;
  }
};

TEST_F(IndexRange, Haar4IndexBytesAbove15ReadModTheCodebook) {
  const unsigned d = 64, heads = 4, kvHeads = 2;
  const int64_t queries = 2, keys = 19;
  Format f = *Format::get("haar4", d);
  ASSERT_EQ(f.rowBytes(), size_t(4 + d)) << "haar4's layout changed";
  SplitMix64 rng(11);
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = float(rng.gaussian());
    return v;
  };
  std::vector<float> q = fill(queries * heads * d);
  std::vector<uint8_t> kClean = encodeRows(f, fill(keys * kvHeads * d));
  std::vector<uint8_t> vClean = encodeRows(f, fill(keys * kvHeads * d));
  std::vector<uint8_t> k = withHighIndexBits(f, kClean, 1);
  std::vector<uint8_t> v = withHighIndexBits(f, vClean, 2);

  // The reference reads the bytes mod 16: the same attention as over the
  // clean bytes.
  AttentionShape shape{unsigned(queries), heads, kvHeads, d, unsigned(keys)};
  std::vector<double> ref(q.size()), refClean(q.size());
  ASSERT_TRUE(
      referenceAttentionQuantized(shape, {}, q, f, k, f, v, ref).ok());
  ASSERT_TRUE(referenceAttentionQuantized(shape, {}, q, f, kClean, f, vClean,
                                          refClean)
                  .ok());
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(ref[i], refClean[i]) << "the reference must mask the index";

  for (mlir::tq::LookupStrategy lookup :
       {mlir::tq::LookupStrategy::select, mlir::tq::LookupStrategy::lut,
        mlir::tq::LookupStrategy::tile}) {
    SCOPED_TRACE(lookup == mlir::tq::LookupStrategy::select ? "select"
                 : lookup == mlir::tq::LookupStrategy::lut  ? "lut"
                                                            : "tile");
    mlir::tq::AttentionKernelSpec spec;
    spec.keyFormat = spec.valueFormat = "haar4";
    spec.headDim = d;
    spec.queryHeads = heads;
    spec.kvHeads = kvHeads;
    spec.numQueries = queries;
    spec.numKeys = keys;
    mlir::tq::TQPipelineOptions options;
    options.lookup = lookup;
    options.tileSize = 8;
    std::string error;
    auto kernel = runner().compile(spec, options, error);
    ASSERT_TRUE(kernel) << error;
    std::vector<float> mask, out(q.size(), NAN);
    std::vector<uint8_t> kb = k, vb = v;
    kernel->run(q, kb, vb, mask, out);
    double worst = 0, largest = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(out[i])) << "output " << i;
      worst = std::max(worst, std::fabs(out[i] - ref[i]));
      largest = std::max(largest, std::fabs(ref[i]));
    }
    // fp32 tolerance, as in AttentionExecutionTest.
    EXPECT_LE(worst, 2e-5 * std::max(1.0, largest) * std::sqrt(double(d)))
        << "max |kernel - reference| over index bytes above 15";
  }
}

} // namespace
