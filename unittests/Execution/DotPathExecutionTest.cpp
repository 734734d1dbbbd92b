//===- DotPathExecutionTest.cpp - Accuracy contracts of the dot paths ----===//
//
// tq-lower-to-loops has reduced-precision dot products beside the f32
// reference: score-dot=i8 scores keys by int8 dot products (the query
// quantised to int8 per query row and head, the codebook levels as bytes);
// value-dot=bf16 and value-dot=i16 sum values two tokens per multiply-add
// (bf16 centroids and weights, or int16 levels and fixed-point weights).
// The contract of each, checked here over every format it applies to,
// head dims 64-256, GQA 1-8, long contexts and peaked and flat softmax:
//
//   ||out_path - out_f32|| / ||out_f32||  <=  kShareOfFormatError x
//   ||out_f32 - exact|| / ||exact||
//
// i.e. the error the path adds to the attention output (against the f32
// kernel over the same cache) is a small share of the format's own error
// (the f32 kernel against exact attention over unquantised K/V), and at
// most kAbsoluteBound in any case. The int8 score also runs with 7-bit
// levels (narrow-levels, for CPUs without VNNI) under the same contract.
// Both the portable lowering of the path's ops and, on hosts with the
// instructions, the native ones run: AVX512-VNNI (vpshufb, vpdpbusd,
// vpermw, vpdpwssd; AVX512-BF16: vdpbf16ps), AVX2 (vpshufb, vpmaddubsw
// on the 7-bit levels, vpmaddwd) and AVX-VNNI (256-bit vpdpbusd on the
// 8-bit levels, vpdpwssd). Integer paths must agree with the portable ops
// bit for bit, bf16 to within rounding. The int8 score laid out by tokens
// (score-lanes=tokens: tq.select_bits, vpmultishiftqb and vpermb where the
// host has AVX512-VBMI) must also give the row layout's output bit for
// bit. On a host with AVX512-VBMI the native AVX-512 kernels also gather
// index fields by tq.select_bits (select-fields: vpmultishiftqb and a bit
// select, the bits above the index left for the lookups to ignore) and
// look the pair sum's words up as bytes (vpermb): the same outputs bit
// for bit as the portable ops' shifts, masks and word selects. The token
// lanes with fields moved by whole-vector shifts (score-lanes=shifts: the
// values in the shifts' order, the query in the same) must give the
// token lanes' output bit for bit too.
//
//===----------------------------------------------------------------------===//

#include "AttentionCase.h"
#include "KernelRunner.h"

#include "tq/Conversion/TQToLoops/TQToLoops.h"
#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace tq;
using namespace tq::quant;

namespace {

/// A path's error on the output, as a share of the format's own.
constexpr double kShareOfFormatError = 0.2;
/// And never more than this (relative to the output's norm).
constexpr double kAbsoluteBound = 0.03;
/// vdpbf16ps against the portable bf16 expansion (relative to the
/// output's norm): the same exact products, summed in another order.
constexpr double kNativeBf16Bound = 1e-5;

/// The formats the paths apply to at head dim `d`.
bool hasScaledCodes(const std::string &name, unsigned d) {
  Result<Format> f = Format::get(name, d);
  return f.ok() && f->spec().isScaledCodesRow();
}

/// Blocks of at least 64 values: the one-row int8 score by row lanes
/// applies (shorter ones, tq3_0's 32, take it by token lanes only).
bool rowLanesApply(const std::string &name, unsigned d) {
  Result<Format> f = Format::get(name, d);
  return f.ok() && f->spec().isScaledCodesRow() &&
         !f->spec().hasShortScaleBlocks();
}

/// One reduced-precision path: its pipeline options and the instructions
/// its native lowering needs.
struct Path {
  const char *name, *scoreDot, *valueDot;
  bool bf16;
  /// score-lanes=tokens (one query row; prefill keeps rows).
  bool tokenLanes = false;
  /// pair-ahead: the one-row pair sum decodes a pair ahead (the same
  /// sums as without, so the same bounds).
  bool pairAhead = false;
  /// score-lanes=blocks: token lanes, and for rows of short scale blocks
  /// (tq3_0's) four blocks' sums in a token's lanes (the same scores).
  bool blockLanes = false;
  /// score-lanes=shifts: token lanes whose level bytes come from shifts of
  /// 16-bit words (rows of one index plane or of a 2-bit plane under a
  /// 1-bit one; others as tokens; the same scores).
  bool shiftLanes = false;
  /// True where the path changes a kernel of `format` with `queryRows`
  /// query rows (the int8 score by rows, and by tokens with several
  /// rows, needs blocks of at least 64 values).
  bool applies(const std::string &format, unsigned d,
               int64_t queryRows = 1) const {
    if (blockLanes)
      return queryRows == 1 && hasScaledCodes(format, d) &&
             !rowLanesApply(format, d);
    if (std::string(scoreDot) == "i8" && (!tokenLanes || queryRows > 1))
      return rowLanesApply(format, d);
    return hasScaledCodes(format, d);
  }
};

const Path kPaths[] = {
    {"ScoreI8", "i8", "f32", false},
    {"ScoreI8Tokens", "i8", "f32", false, true},
    {"ScoreI8Blocks", "i8", "f32", false, true, false, true},
    {"ScoreI8Shifts", "i8", "f32", false, true, false, false, true},
    {"ValueBf16", "f32", "bf16", true},
    {"ValueI16", "f32", "i16", false},
    {"ValueBf16Ahead", "f32", "bf16", true, false, true},
    {"ValueI16Ahead", "f32", "i16", false, false, true},
};

using Case = test::AttentionCase;
using test::relativeL2;

class DotPath
    : public test::CompiledKernelSuite<::testing::TestWithParam<Path>> {
protected:
  /// How the path's ops are lowered.
  enum class Lowering {
    /// Portable ops, 8-bit score levels.
    Portable,
    /// Portable ops, 7-bit score levels (narrow-levels).
    PortableNarrow,
    /// AVX512-VNNI (and -BF16 for bf16 paths), 8-bit levels.
    Vnni,
    /// AVX2 (vpshufb, vpmaddubsw, vpmaddwd), 7-bit levels.
    Avx2,
    /// AVX2 lookups with AVX-VNNI's 256-bit vpdpbusd / vpdpwssd, 8-bit
    /// levels.
    AvxVnni,
  };

  /// True where the host runs the path's VNNI lowering.
  static bool hostHasVnni(const Path &path) {
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    return features.lookup("avx512vnni") && features.lookup("avx512bw") &&
           (!path.bf16 || features.lookup("avx512bf16"));
  }

  /// True where the host has AVX512-VBMI as well (the token lanes'
  /// vpmultishiftqb; byte lookups by vpermb).
  static bool hostHasVbmi() {
    return llvm::sys::getHostCPUFeatures().lookup("avx512vbmi");
  }

  /// True where the host runs the path's AVX2 lowering (integer paths
  /// only: AVX2 has no bf16 products).
  static bool hostHasAvx2(const Path &path) {
    return !path.bf16 && llvm::sys::getHostCPUFeatures().lookup("avx2");
  }

  /// True where the host runs the path's AVX-VNNI lowering.
  static bool hostHasAvxVnni(const Path &path) {
    return hostHasAvx2(path) &&
           llvm::sys::getHostCPUFeatures().lookup("avxvnni");
  }

  /// The kernel of case `c` with the dot products of `path` (null: f32),
  /// lowered as `lowering` says. Kernels are kept for the process: a
  /// peaked and a flat case of one shape share theirs (the tests are
  /// compile-bound).
  std::shared_ptr<test::CompiledKernel> compile(const Case &c,
                                                const Path *path,
                                                Lowering lowering) {
    Case shape = c;
    shape.peaked = false;
    const std::string key =
        shape.describe() + " " + (path && path->tokenLanes ? "tokens " : "") +
        (path && path->blockLanes ? "blocks " : "") +
        (path && path->shiftLanes ? "shifts " : "") +
        (path && path->pairAhead ? "ahead " : "") +
        (path ? path->name : "f32") + " " + std::to_string(int(lowering));
    mlir::tq::TQPipelineOptions options;
    options.lookup = mlir::tq::LookupStrategy::tile;
    options.tileSize = 256;
    options.scoreDot = path ? path->scoreDot : "f32";
    options.valueDot = path ? path->valueDot : "f32";
    options.centroidPermute = lowering == Lowering::Vnni ? "avx512"
                              : lowering == Lowering::Avx2 ||
                                      lowering == Lowering::AvxVnni
                                  ? "avx2"
                                  : "none";
    options.vnni = lowering == Lowering::Vnni;
    options.vbmi = options.vnni && hostHasVbmi();
    options.scoreLanes = path && path->blockLanes   ? "blocks"
                         : path && path->shiftLanes ? "shifts"
                         : path && path->tokenLanes ? "tokens"
                                                    : "rows";
    options.pairAhead = path && path->pairAhead;
    options.avxVnni = lowering == Lowering::AvxVnni;
    options.bf16 = options.vnni && path && path->bf16;
    options.narrowLevels = lowering == Lowering::PortableNarrow ||
                           lowering == Lowering::Avx2;
    return compileOnce(key, c, options);
  }

  /// Runs the case through the f32 kernel and the path (and its native
  /// lowerings where the host has them); checks the contract; returns the
  /// path's error. `thorough` also runs the portable 7-bit levels beside
  /// the AVX2 kernel and compares them bit for bit; otherwise the 7-bit
  /// contract takes the AVX2 kernel where the host has AVX2 (one compile
  /// fewer: these tests are compile-bound).
  double check(const Case &c, bool thorough = false) {
    const Path &path = GetParam();
    SCOPED_TRACE(c.describe());
    Result<Format> f = Format::get(c.format, c.headDim);
    EXPECT_TRUE(f.ok());
    if (!f.ok())
      return 0;
    test::AttentionInputs in = test::makeAttentionInputs(
        c, *f,
        c.headDim * 131u + c.queryHeads * 7u + c.numKeys + (c.peaked ? 1 : 0));

    auto run = [&](const Path *p, Lowering lowering) {
      std::vector<float> out(in.q.size(), NAN), noMask;
      if (auto kernel = compile(c, p, lowering))
        kernel->run(in.q, in.keys, in.values, noMask, out);
      for (float x : out)
        EXPECT_TRUE(std::isfinite(x))
            << (p ? p->name : "f32") << " lowering " << int(lowering);
      return out;
    };
    std::vector<float> f32 = run(nullptr, Lowering::Portable);
    std::vector<float> reduced = run(&path, Lowering::Portable);
    if (path.tokenLanes && rowLanesApply(c.format, c.headDim)) {
      // The same integer sums, scaled in the same order.
      Path rowLanes = path;
      rowLanes.tokenLanes = false;
      EXPECT_EQ(reduced, run(&rowLanes, Lowering::Portable))
          << "the token lanes' scores differ from the row lanes'";
    }
    if (path.blockLanes) {
      // The same integer sums, scaled and added in the same order.
      Path tokenLanes = path;
      tokenLanes.blockLanes = false;
      EXPECT_EQ(reduced, run(&tokenLanes, Lowering::Portable))
          << "the block lanes' scores differ from the token lanes'";
    }
    if (path.shiftLanes) {
      // The same integer sums (the values and the query bytes in another
      // order within each block), scaled in the same order.
      Path selected = path;
      selected.shiftLanes = false;
      EXPECT_EQ(reduced, run(&selected, Lowering::Portable))
          << "the shifted fields' scores differ from the selected ones'";
    }
    if (path.pairAhead && c.numQueries == 1) {
      // The same words and dots, only decoded a turn earlier.
      Path inTurn = path;
      inTurn.pairAhead = false;
      EXPECT_EQ(reduced, run(&inTurn, Lowering::Portable))
          << "the pair sum decoded ahead differs from the one decoded in turn";
    }

    const double formatError = relativeL2(f32, in.exact);
    auto contract = [&](const char *levels, const std::vector<float> &out) {
      const double pathError = relativeL2(out, f32);
      std::printf(
          "  %-9s %-6s %-44s vs f32 %.2e, f32 vs exact %.2e (share %.3f)\n",
          path.name, levels, c.describe().c_str(), pathError, formatError,
          pathError / std::max(formatError, 1e-30));
      EXPECT_LE(pathError, kShareOfFormatError * formatError)
          << "the path's error (" << levels
          << " levels) is not a small share of the format's";
      EXPECT_LE(pathError, kAbsoluteBound) << levels << " levels";
      return pathError;
    };
    const double pathError = contract("8-bit", reduced);
    if (hostHasVnni(path)) {
      std::vector<float> native = run(&path, Lowering::Vnni);
      if (path.bf16)
        EXPECT_LE(relativeL2(native, reduced), kNativeBf16Bound)
            << "vdpbf16ps disagrees with the portable bf16 products";
      else
        EXPECT_EQ(native, reduced)
            << "the VNNI instructions disagree with the portable ops";
    }
    if (thorough && hostHasAvxVnni(path))
      EXPECT_EQ(run(&path, Lowering::AvxVnni), reduced)
          << "the AVX-VNNI instructions disagree with the portable ops";
    // 7-bit levels change only the int8 score.
    const bool narrowDiffers = std::string(path.scoreDot) == "i8";
    const bool avx2 = hostHasAvx2(path);
    if (thorough || !avx2) {
      std::vector<float> narrow =
          narrowDiffers ? run(&path, Lowering::PortableNarrow) : reduced;
      if (narrowDiffers)
        contract("7-bit", narrow);
      if (avx2)
        EXPECT_EQ(run(&path, Lowering::Avx2), narrow)
            << "the AVX2 instructions disagree with the portable ops";
    } else if (narrowDiffers) {
      contract("7-bit", run(&path, Lowering::Avx2));
    }
    return pathError;
  }
};

TEST_P(DotPath, EveryApplicableFormatPeakedAndFlat) {
  int formats = 0;
  for (const FormatInfo &info : allFormats()) {
    if (!GetParam().applies(info.name, 128))
      continue;
    ++formats;
    for (bool peaked : {false, true}) {
      Case c;
      c.format = info.name;
      c.peaked = peaked;
      check(c, /*thorough=*/true);
    }
  }
  // turbo2/3/4_0, polar1-4, haar4 at least (block lanes: tq3_0 and its
  // legacy layout): a change that drops formats from the path must say so
  // here.
  EXPECT_GE(formats, GetParam().blockLanes ? 2 : 6);
}

/// Rows of several scale blocks (turbo's 128-value groups at d256 and
/// d384): each block's sums take the block's scale.
TEST_P(DotPath, BlockScaledRows) {
  if (GetParam().shiftLanes)
    GTEST_SKIP() << "ShiftLanesPlanesAndTails takes the shift lanes' rows "
                    "of several blocks (the tests are compile-bound)";
  struct Shape {
    const char *format;
    unsigned dim;
  };
  // tq3_0: a scale per 32 values, so the pair sums' 64-lane chunks span
  // two blocks (each 128-bit lane one block's weights).
  for (Shape s : {Shape{"turbo3_0", 256}, Shape{"turbo4_0", 256},
                  Shape{"turbo2_0", 384}, Shape{"tq3_0", 256}})
    for (bool peaked : {false, true}) {
      Case c;
      c.format = s.format;
      c.headDim = s.dim;
      c.peaked = peaked;
      ASSERT_TRUE(hasScaledCodes(c.format, c.headDim)) << c.format;
      Result<Format> f = Format::get(c.format, c.headDim);
      ASSERT_TRUE(f.ok());
      ASSERT_GT(f->spec().blocksPerRow(), 1u) << c.format;
      if (!GetParam().applies(c.format, c.headDim))
        continue;
      check(c);
    }
}

TEST_P(DotPath, HeadDims) {
  if (GetParam().blockLanes)
    GTEST_SKIP() << "turbo and polar rows have no short blocks; "
                    "BlockLanesTailsAndQuads takes tq3_0's head dims";
  if (GetParam().shiftLanes)
    GTEST_SKIP() << "ShiftLanesPlanesAndTails takes the shift lanes' head "
                    "dims (the tests are compile-bound)";
  for (unsigned d : {64u, 96u, 256u})
    for (const char *format : {"turbo3_0", "polar4"}) {
      Case c;
      c.format = format;
      c.headDim = d;
      c.peaked = true;
      if (!hasScaledCodes(format, d))
        continue;
      check(c);
    }
}

TEST_P(DotPath, GqaGroupsAndLongContext) {
  for (unsigned group : {1u, 2u, 4u, 8u}) {
    Case c;
    c.format = GetParam().blockLanes ? "tq3_0" : "turbo3_0";
    c.queryHeads = 2 * group;
    c.kvHeads = 2;
    c.numKeys = group == 4 ? 16384 : 4096;
    c.peaked = group % 2 == 0;
    check(c);
  }
}

/// Odd and short contexts for the weighted sums: a last pair (or a
/// whole context) of one row, whose second row repeats it at weight
/// zero, a last tile of three tokens, and with pair_ahead pair 0 decoded
/// before a loop of one turn.
TEST_P(DotPath, OddAndShortContexts) {
  if (std::string(GetParam().valueDot) == "f32")
    GTEST_SKIP() << "the score paths take no token pairs";
  for (int64_t keys : {1, 3, 259}) {
    Case c;
    c.format = "turbo3_0";
    c.numKeys = keys;
    c.peaked = keys > 1;
    check(c);
  }
}

/// The block lanes over short and odd contexts (a last step of one or
/// three tokens, whose masked quad reads end at the cache's last byte),
/// rows of two quads (d256) and of two blocks (d64: no quad, so the
/// token lanes), each against the token lanes bit for bit.
TEST_P(DotPath, BlockLanesTailsAndQuads) {
  if (!GetParam().blockLanes)
    GTEST_SKIP() << "only the block lanes read rows by quads";
  for (auto [dim, keys] : {std::pair<unsigned, int64_t>{128, 1},
                           {128, 3},
                           {128, 259},
                           {256, 300},
                           {64, 300}}) {
    Case c;
    c.format = "tq3_0";
    c.headDim = dim;
    c.numKeys = keys;
    c.peaked = keys > 1;
    check(c);
  }
}

/// The shift lanes over rows whose 1-bit plane's bytes of a piece are the
/// upper half of their read (polar3 at d64, and every second piece),
/// rows of several pieces and blocks (turbo3_0 and polar3 at d256), one-
/// plane rows of 2 and 4 bits, tq3_0's block lanes (one and two quads, a
/// last step of one or three tokens, whose masked quad reads end at the
/// cache's last byte; d64, two blocks, keeps the token lanes' selected
/// fields) and the legacy layout's one plane, each against the selected
/// fields of the token lanes bit for bit (check()).
TEST_P(DotPath, ShiftLanesPlanesAndTails) {
  if (!GetParam().shiftLanes)
    GTEST_SKIP() << "only the shift lanes move fields by shifts";
  struct Shape {
    const char *format;
    unsigned dim;
    int64_t keys;
    int64_t planes;
  };
  for (Shape s : {Shape{"polar3", 64, 300, 2}, Shape{"polar3", 256, 259, 2},
                  Shape{"turbo3_0", 256, 3, 2}, Shape{"turbo3_0", 128, 1, 2},
                  Shape{"turbo4_0", 256, 17, 1}, Shape{"tq3_0", 128, 3, 2},
                  Shape{"tq3_0", 256, 259, 2}, Shape{"tq3_0", 64, 300, 0},
                  Shape{"tq3_0_legacy", 128, 1, 1}}) {
    EXPECT_EQ(mlir::tq::shiftLaneScorePlanes(s.format, s.dim), s.planes)
        << s.format << " d" << s.dim;
    Case c;
    c.format = s.format;
    c.headDim = s.dim;
    c.numKeys = s.keys;
    c.peaked = s.keys > 1;
    check(c);
  }
  EXPECT_EQ(mlir::tq::shiftLaneScorePlanes("no_such_format", 128), 0);
}

/// Several query rows (the pair sum's words buffer; the score's rows
/// decoded once), also over rows of two scale blocks and tq3_0's (pair
/// sums over chunks of two blocks; its score keeps f32 here).
TEST_P(DotPath, PrefillRows) {
  if (GetParam().shiftLanes)
    GTEST_SKIP() << "several query rows keep the row lanes: ScoreI8's "
                    "kernels";
  for (auto [format, dim] : {std::pair<const char *, unsigned>{"turbo3_0", 128},
                             {"polar4", 128},
                             {"turbo3_0", 256},
                             {"tq3_0", 128}}) {
    Case c;
    c.format = format;
    c.headDim = dim;
    c.numQueries = 5;
    c.numKeys = 1000;
    c.peaked = true;
    if (!GetParam().applies(c.format, c.headDim, c.numQueries))
      continue;
    check(c);
  }
}

/// Formats the path does not apply to (QJL, q8_0, f16) keep the f32
/// products: the path changes nothing, bit for bit. So does tq3_0's
/// score by row lanes (32-value blocks: slower than f32 there; token
/// lanes take a one-row score).
TEST_P(DotPath, OtherFormatsKeepTheF32Products) {
  const Path &path = GetParam();
  const bool rowScore =
      std::string(path.scoreDot) == "i8" && !path.tokenLanes;
  for (const char *format : {"tq3_0", "tqprod3", "q8_0", "f16"}) {
    if (std::string(format) == "tq3_0" && !rowScore)
      continue;
    Case c;
    c.format = format;
    c.numKeys = 300;
    SCOPED_TRACE(format);
    EXPECT_FALSE(rowLanesApply(format, 128));
    Result<Format> f = Format::get(format, 128);
    ASSERT_TRUE(f.ok());
    std::vector<float> q(c.queryHeads * 128);
    SplitMix64 rng(3);
    for (float &x : q)
      x = float(rng.gaussian());
    std::vector<uint8_t> kb(c.numKeys * c.kvHeads * f->rowBytes());
    for (auto &x : kb)
      x = uint8_t(rng.next() & 0x3b); // (small f16 / scale bytes)
    auto run = [&](const Path *p) {
      std::vector<float> out(q.size(), NAN), noMask;
      std::vector<uint8_t> vb = kb;
      if (auto kernel = compile(c, p, Lowering::Portable))
        kernel->run(q, kb, vb, noMask, out);
      return out;
    };
    std::vector<float> f32 = run(nullptr), reduced = run(&GetParam());
    for (size_t j = 0; j < f32.size(); ++j)
      ASSERT_TRUE(f32[j] == reduced[j] ||
                  (std::isnan(f32[j]) && std::isnan(reduced[j])))
          << "lane " << j;
  }
}

/// The native lowerings this host runs, said by name; a host without one
/// reports the test skipped with the reason.
TEST_P(DotPath, NativeLoweringsOnThisHost) {
  const Path &path = GetParam();
  const bool vnni = hostHasVnni(path), avx2 = hostHasAvx2(path);
  if (!vnni && !avx2)
    GTEST_SKIP() << "this host has neither the AVX512-VNNI"
                 << (path.bf16 ? "/BF16" : "")
                 << (path.bf16 ? " instructions (AVX2 has no bf16 products)"
                               : " nor the AVX2 instructions")
                 << " of " << path.name
                 << ": only the portable lowering was checked";
  std::printf("  %s: native lowerings checked here:%s%s%s%s\n", path.name,
              vnni ? " AVX512-VNNI" : "",
              vnni && hostHasVbmi() ? " AVX512-VBMI" : "",
              avx2 ? " AVX2" : "", hostHasAvxVnni(path) ? " AVX-VNNI" : "");
  Case c;
  c.format = "polar4";
  c.peaked = true;
  check(c, /*thorough=*/true);
}

INSTANTIATE_TEST_SUITE_P(Paths, DotPath, ::testing::ValuesIn(kPaths),
                         [](const ::testing::TestParamInfo<Path> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
