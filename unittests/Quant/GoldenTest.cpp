//===- GoldenTest.cpp - Byte-exactness against existing encoders ----------===//
//
// ../shared/golden/<dir>/ holds, per test case, the input rows, the blocks
// an existing implementation wrote (*.q.bin), its dequantiser's output
// (*.dequant.f32.bin) and, for the turbo formats, the un-rotated
// reconstruction (*.recon.f32.bin). Encode must reproduce the blocks byte
// for byte and decode the floats bit for bit.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Format.h"
#include "tq/Quant/Stats.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

using namespace tq::quant;
namespace fs = std::filesystem;

namespace {

constexpr unsigned kDim = 128;

struct GoldenFormat {
  const char *dir;
  const char *format;
  /// Domain of *.dequant.f32.bin: tq3 dequantisers un-rotate, turbo ones
  /// stay in the rotated domain and ship *.recon.f32.bin for the original.
  Domain dequantDomain;
};

constexpr GoldenFormat kGoldenFormats[] = {
    {"tq3_0_animehacker", "tq3_0", Domain::Original},
    {"tq3_0_unixsysdev", "tq3_0_legacy", Domain::Original},
    {"turbo2_0", "turbo2_0", Domain::Rotated},
    {"turbo3_0", "turbo3_0", Domain::Rotated},
    {"turbo4_0", "turbo4_0", Domain::Rotated},
};

constexpr const char *kCases[] = {"gauss_outliers", "zeros", "constant",
                                  "upstream_test"};

fs::path goldenRoot() { return fs::path(TQC_GOLDEN_DIR); }

std::vector<uint8_t> readBytes(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> readFloats(const fs::path &p) {
  std::vector<uint8_t> b = readBytes(p);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

/// Index of the first differing float bit pattern, or -1.
long firstBitMismatch(const std::vector<float> &a, const std::vector<float> &b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0)
      return long(i);
  return a.size() == b.size() ? -1 : long(std::min(a.size(), b.size()));
}

struct GoldenCase {
  GoldenFormat format;
  std::string name;
};

/// Keeps test names readable in ctest (instead of a byte dump).
void PrintTo(const GoldenCase &c, std::ostream *os) {
  *os << c.format.dir << "/" << c.name;
}

std::vector<GoldenCase> allCases(bool onlyRotatedDequant) {
  std::vector<GoldenCase> cases;
  for (const GoldenFormat &f : kGoldenFormats)
    if (!onlyRotatedDequant || f.dequantDomain == Domain::Rotated)
      for (const char *c : kCases)
        cases.push_back({f, c});
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<GoldenCase> &info) {
  return std::string(info.param.format.dir) + "_" + info.param.name;
}

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {
protected:
  void SetUp() override {
    if (!fs::is_directory(goldenRoot()))
      GTEST_SKIP() << "golden vectors not found at " << goldenRoot()
                   << " (expected ../shared/golden beside the checkout)";
  }
  fs::path file(const std::string &suffix) const {
    const GoldenCase &c = GetParam();
    return goldenRoot() / c.format.dir / (c.name + suffix);
  }
};

TEST_P(GoldenTest, EncodeMatchesBlocksByteForByte) {
  const GoldenCase &c = GetParam();
  Result<Format> f = Format::get(c.format.format, kDim);
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::vector<float> input = readFloats(file(".input.f32.bin"));
  std::vector<uint8_t> expected = readBytes(file(".q.bin"));
  ASSERT_FALSE(input.empty());
  ASSERT_EQ(input.size() % kDim, 0u);
  const size_t rows = input.size() / kDim;
  ASSERT_EQ(expected.size(), rows * f->rowBytes());
  std::vector<uint8_t> actual(expected.size());
  for (size_t r = 0; r < rows; ++r) {
    Status s = f->encodeRow(
        std::span<const float>(input).subspan(r * kDim, kDim),
        std::span<uint8_t>(actual).subspan(r * f->rowBytes(), f->rowBytes()));
    ASSERT_TRUE(s.ok()) << s.message();
  }
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(int(actual[i]), int(expected[i]))
        << "first differing byte " << i << " (row " << i / f->rowBytes()
        << ", byte " << i % f->rowBytes() << " of the row)";
}

TEST_P(GoldenTest, DecodeMatchesDequantiserBitForBit) {
  const GoldenCase &c = GetParam();
  Result<Format> f = Format::get(c.format.format, kDim);
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::vector<uint8_t> blocks = readBytes(file(".q.bin"));
  std::vector<float> expected = readFloats(file(".dequant.f32.bin"));
  const size_t rows = blocks.size() / f->rowBytes();
  ASSERT_EQ(expected.size(), rows * kDim);
  std::vector<float> actual(expected.size());
  for (size_t r = 0; r < rows; ++r) {
    Status s = f->decodeRow(
        std::span<const uint8_t>(blocks).subspan(r * f->rowBytes(),
                                                 f->rowBytes()),
        std::span<float>(actual).subspan(r * kDim, kDim),
        c.format.dequantDomain);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  long bad = firstBitMismatch(actual, expected);
  EXPECT_EQ(bad, -1) << "value " << bad << ": got " << actual[size_t(bad)]
                     << ", expected " << expected[size_t(bad)];
}

/// Formats whose dequantiser stays rotated: the original-domain decode
/// must match their un-rotated reconstruction.
class GoldenReconTest : public GoldenTest {};

TEST_P(GoldenReconTest, OriginalDomainReconstructionBitForBit) {
  const GoldenCase &c = GetParam();
  fs::path reconPath = file(".recon.f32.bin");
  ASSERT_TRUE(fs::exists(reconPath)) << reconPath;
  Result<Format> f = Format::get(c.format.format, kDim);
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::vector<uint8_t> blocks = readBytes(file(".q.bin"));
  std::vector<float> expected = readFloats(reconPath);
  const size_t rows = blocks.size() / f->rowBytes();
  ASSERT_EQ(expected.size(), rows * kDim);
  std::vector<float> actual(expected.size());
  for (size_t r = 0; r < rows; ++r)
    ASSERT_TRUE(f->decodeRow(std::span<const uint8_t>(blocks).subspan(
                                 r * f->rowBytes(), f->rowBytes()),
                             std::span<float>(actual).subspan(r * kDim, kDim),
                             Domain::Original)
                    .ok());
  long bad = firstBitMismatch(actual, expected);
  EXPECT_EQ(bad, -1) << "value " << bad << ": got " << actual[size_t(bad)]
                     << ", expected " << expected[size_t(bad)];
}

INSTANTIATE_TEST_SUITE_P(AllFormats, GoldenTest,
                         ::testing::ValuesIn(allCases(false)), caseName);
INSTANTIATE_TEST_SUITE_P(RotatedDequantFormats, GoldenReconTest,
                         ::testing::ValuesIn(allCases(true)), caseName);

/// The turbo forks' query pre-rotation (GGML_OP_TURBO_WHT) is the format's
/// forward rotation; its output un-rotation is the inverse.
TEST(GoldenTurboWht, QueryRotationMatchesForkOp) {
  fs::path dir = goldenRoot() / "turbo3_0";
  if (!fs::exists(dir / "gauss_outliers.turbo_wht_fwd.f32.bin"))
    GTEST_SKIP() << "turbo WHT golden files not found under " << dir;
  Result<Format> f = Format::get("turbo3_0", kDim);
  ASSERT_TRUE(f.ok());
  const Rotation &rot = *f->spec().rotation;
  std::vector<float> input = readFloats(dir / "gauss_outliers.input.f32.bin");
  std::vector<float> fwd = input, inv = input;
  for (size_t r = 0; r < input.size() / kDim; ++r) {
    rot.forward(std::span<float>(fwd).subspan(r * kDim, kDim));
    rot.inverse(std::span<float>(inv).subspan(r * kDim, kDim));
  }
  EXPECT_EQ(firstBitMismatch(
                fwd, readFloats(dir / "gauss_outliers.turbo_wht_fwd.f32.bin")),
            -1);
  EXPECT_EQ(firstBitMismatch(
                inv, readFloats(dir / "gauss_outliers.turbo_wht_inv.f32.bin")),
            -1);
}

/// The built-in demo sample is drawn exactly like the golden generator's
/// gauss_outliers case, which pins the sample down across platforms.
TEST(GoldenSample, BuiltInSampleMatchesGoldenGenerator) {
  fs::path p = goldenRoot() / "turbo3_0" / "gauss_outliers.input.f32.bin";
  if (!fs::exists(p))
    GTEST_SKIP() << "golden input not found at " << p;
  std::vector<float> expected = readFloats(p);
  std::vector<float> sample = makeOutlierSample(128, kDim);
  EXPECT_EQ(firstBitMismatch(sample, expected), -1);
}

} // namespace
