//===- QuantizeExecutionTest.cpp - Compiled encoders vs lib/Quant ---------===//
//
// tq.quantize lowered by tq-lower-to-loops, JIT-compiled, must write the
// same bytes as Format::encodeRow for every format and head dim: the
// generated encoders perform the library's arithmetic operation for
// operation.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"
#include "tq/Quant/Stats.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace tq;
using namespace tq::quant;

namespace {

test::KernelRunner &runner() {
  static test::KernelRunner r;
  return r;
}

/// Rows of N(0, 1) with outlier channels, one all-zero row, one constant
/// row and one tiny row.
std::vector<float> sampleRows(unsigned rows, unsigned dim) {
  std::vector<float> x = makeOutlierSample(rows, dim, 1234 + dim);
  for (unsigned j = 0; j < dim; ++j) {
    x[j] = 0.0f;
    x[dim + j] = 0.75f;
    x[2 * dim + j] = 1e-7f * float(j % 7);
  }
  return x;
}

void checkFormat(const std::string &name, unsigned dim, unsigned kvHeads) {
  SCOPED_TRACE(name + " d=" + std::to_string(dim));
  const unsigned rows = 8;
  mlir::tq::QuantizeKernelSpec spec;
  spec.format = name;
  spec.headDim = dim;
  spec.kvHeads = kvHeads;
  spec.numRows = rows;
  std::string error;
  auto encoder = runner().compileEncoder(spec, error);
  ASSERT_TRUE(encoder) << error;
  Result<Format> f = Format::get(name, dim);
  ASSERT_TRUE(f.ok());
  std::vector<float> x = sampleRows(rows * kvHeads, dim);
  std::vector<uint8_t> got(rows * kvHeads * f->rowBytes(), 0xAB);
  encoder->run(x, got);
  std::vector<uint8_t> want(got.size());
  for (size_t r = 0; r < size_t(rows) * kvHeads; ++r)
    ASSERT_TRUE(f->encodeRow(std::span<const float>(x).subspan(r * dim, dim),
                             std::span<uint8_t>(want).subspan(
                                 r * f->rowBytes(), f->rowBytes()))
                    .ok());
  size_t mismatches = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ++mismatches;
      first = std::min(first, i);
    }
  std::printf("  %-13s d=%-3u %zu bytes, %zu differ\n", name.c_str(), dim,
              got.size(), mismatches);
  EXPECT_EQ(mismatches, 0u)
      << "first differing byte " << first << " (row "
      << first / f->rowBytes() << ", byte " << first % f->rowBytes()
      << "): got " << int(got[first]) << ", library wrote "
      << int(want[first]);
}

TEST(QuantizeExecution, EveryFormatMatchesLibraryBytes) {
  for (const FormatInfo &info : allFormats())
    checkFormat(info.name, 128, 2);
}

TEST(QuantizeExecution, PaddedHeadDims) {
  for (const char *name : {"tq3_0", "turbo3_0", "polar3", "tqprod2", "haar4",
                           "q8_0", "f16"})
    for (unsigned dim : {64u, 80u, 96u, 160u})
      checkFormat(name, dim, 1);
}

/// The generated encoders write what the existing forks' encoders wrote
/// (../shared/golden), byte for byte.
TEST(QuantizeExecution, GoldenBlocks) {
  namespace fs = std::filesystem;
  const fs::path root(TQC_GOLDEN_DIR);
  if (!fs::is_directory(root))
    GTEST_SKIP() << "golden vectors not found at " << root;
  const std::pair<const char *, const char *> cases[] = {
      {"tq3_0_animehacker", "tq3_0"}, {"tq3_0_unixsysdev", "tq3_0_legacy"},
      {"turbo2_0", "turbo2_0"},       {"turbo3_0", "turbo3_0"},
      {"turbo4_0", "turbo4_0"}};
  auto read = [](const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  };
  for (auto [dir, name] : cases) {
    SCOPED_TRACE(dir);
    std::vector<uint8_t> input = read(root / dir / "gauss_outliers.input.f32.bin");
    std::vector<uint8_t> want = read(root / dir / "gauss_outliers.q.bin");
    ASSERT_EQ(input.size(), 128u * 128u * 4u);
    std::vector<float> rows(input.size() / 4);
    std::memcpy(rows.data(), input.data(), input.size());
    mlir::tq::QuantizeKernelSpec spec;
    spec.format = name;
    spec.headDim = 128;
    spec.numRows = 128;
    std::string error;
    auto encoder = runner().compileEncoder(spec, error);
    ASSERT_TRUE(encoder) << error;
    std::vector<uint8_t> got(want.size());
    encoder->run(rows, got);
    EXPECT_EQ(got, want);
  }
}

} // namespace
