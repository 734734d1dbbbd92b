//===- IntegerOpsExecutionTest.cpp - x86 lowerings of the dot paths' ops -===//
//
// tq-lower-lane-lookup's native lowerings of tq.byte_lookup, tq.byte_dot,
// tq.word_lookup and tq.pair_dot must compute exactly what the portable
// ones do, at the extremes of their operands too: a narrow byte_dot's
// lhs at 127 against rhs at -128 and 127 (vpmaddubsw saturates at 16
// bits: the pair sums must stay below), i16 products of -32768, and i32
// sums that wrap. The DotPath tests run the same lowerings inside
// attention kernels, where the query never reaches -128.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "tq/Conversion/Passes.h"
#include "tq/Pipelines/Pipelines.h"
#include "tq/Quant/Random.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace mlir;

namespace {

// One function per op pair; 64 bytes / 16 i32 lanes and 32 words / 16
// lanes, so every lowering splits them into parts and joins them again.
constexpr const char *kOps = R"mlir(
func.func @bytes(%idx: memref<64xi8>, %q: memref<64xi8>, %acc: memref<16xi32>,
                 %narrow: memref<16xi32>, %wide: memref<16xi32>)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %i = vector.load %idx[%c0] : memref<64xi8>, vector<64xi8>
  %qv = vector.load %q[%c0] : memref<64xi8>, vector<64xi8>
  %a = vector.load %acc[%c0] : memref<16xi32>, vector<16xi32>
  %l7 = tq.byte_lookup %i [0, 1, 17, 42, 64, 100, 126, 127] : vector<64xi8>
  %n = tq.byte_dot %a, %l7, %qv {narrow} : vector<64xi8> -> vector<16xi32>
  vector.store %n, %narrow[%c0] : memref<16xi32>, vector<16xi32>
  %l8 = tq.byte_lookup %i [0, 1, 127, -128, -1, 64, 3, 5, 7, 9, 11, 13, 15, 17, 19, -2] : vector<64xi8>
  %w = tq.byte_dot %a, %l8, %qv : vector<64xi8> -> vector<16xi32>
  vector.store %w, %wide[%c0] : memref<16xi32>, vector<16xi32>
  return
}
func.func @words(%idx: memref<32xi16>, %w: memref<32xi16>, %acc: memref<16xi32>,
                 %eight: memref<16xi32>, %sixteen: memref<16xi32>)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %i = vector.load %idx[%c0] : memref<32xi16>, vector<32xi16>
  %wv = vector.load %w[%c0] : memref<32xi16>, vector<32xi16>
  %a = vector.load %acc[%c0] : memref<16xi32>, vector<16xi32>
  %l8 = tq.word_lookup %i [-32768, 32767, -511, 511, 0, 1, -1, 300] : vector<32xi16>
  %d8 = tq.pair_dot %a, %l8, %wv : vector<32xi16> -> vector<16xi32>
  vector.store %d8, %eight[%c0] : memref<16xi32>, vector<16xi32>
  %l16 = tq.word_lookup %i [-32768, 32767, -511, 511, 0, 1, -1, 300,
                            7, -7, 1000, -1000, 12345, -12345, 2, -2] : vector<32xi16>
  %d16 = tq.pair_dot %a, %l16, %wv : vector<32xi16> -> vector<16xi32>
  vector.store %d16, %sixteen[%c0] : memref<16xi32>, vector<16xi32>
  return
}
// Words looked up from bytes widened with zeros, as the pair weighted
// sum forms them (AVX2 rewrites these to byte lookups).
func.func @widened(%idx: memref<64xi8>, %w: memref<32xi16>,
                   %acc: memref<16xi32>, %eight: memref<16xi32>,
                   %sixteen: memref<16xi32>)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %b = vector.load %idx[%c0] : memref<64xi8>, vector<64xi8>
  %wv = vector.load %w[%c0] : memref<32xi16>, vector<32xi16>
  %a = vector.load %acc[%c0] : memref<16xi32>, vector<16xi32>
  %zero = arith.constant dense<0> : vector<64xi8>
  %wide = vector.shuffle %b, %zero [0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71, 8, 72, 9, 73, 10, 74, 11, 75, 12, 76, 13, 77, 14, 78, 15, 79, 16, 80, 17, 81, 18, 82, 19, 83, 20, 84, 21, 85, 22, 86, 23, 87, 24, 88, 25, 89, 26, 90, 27, 91, 28, 92, 29, 93, 30, 94, 31, 95] : vector<64xi8>, vector<64xi8>
  %i = vector.bitcast %wide : vector<64xi8> to vector<32xi16>
  %l8 = tq.word_lookup %i [-32768, 32767, -511, 511, 0, 1, -1, 300] : vector<32xi16>
  %d8 = tq.pair_dot %a, %l8, %wv : vector<32xi16> -> vector<16xi32>
  vector.store %d8, %eight[%c0] : memref<16xi32>, vector<16xi32>
  %l16 = tq.word_lookup %i [-32768, 32767, -511, 511, 0, 1, -1, 300,
                            7, -7, 1000, -1000, 12345, -12345, 2, -2] : vector<32xi16>
  %d16 = tq.pair_dot %a, %l16, %wv : vector<32xi16> -> vector<16xi32>
  vector.store %d16, %sixteen[%c0] : memref<16xi32>, vector<16xi32>
  return
}
)mlir";

template <typename T> StridedMemRefType<T, 1> view(std::vector<T> &v) {
  return {v.data(), v.data(), 0, {int64_t(v.size())}, {1}};
}

/// @bytes and @words: (index, other operand, acc, two results), the
/// operands of element type T.
template <typename T>
using OpsFn = void (*)(StridedMemRefType<T, 1> *, StridedMemRefType<T, 1> *,
                       StridedMemRefType<int32_t, 1> *,
                       StridedMemRefType<int32_t, 1> *,
                       StridedMemRefType<int32_t, 1> *);
using BytesFn = OpsFn<int8_t>;
using WordsFn = OpsFn<int16_t>;
using WidenedFn = void (*)(StridedMemRefType<int8_t, 1> *,
                           StridedMemRefType<int16_t, 1> *,
                           StridedMemRefType<int32_t, 1> *,
                           StridedMemRefType<int32_t, 1> *,
                           StridedMemRefType<int32_t, 1> *);

/// The ops lowered for `isa` and JIT-compiled for the host.
class Lowered {
public:
  explicit Lowered(const std::string &isa)
      : context_(::tq::test::makeJitContext()) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(kOps, context_.get());
    EXPECT_TRUE(module);
    if (!module)
      return;
    PassManager pm(context_.get());
    mlir::tq::TQLowerLaneLookupOptions options;
    options.isa = isa;
    pm.addPass(mlir::tq::createTQLowerLaneLookup(options));
    mlir::tq::buildHostLoopsToLLVMPipeline(pm);
    EXPECT_TRUE(succeeded(pm.run(*module))) << isa;
    auto engine = ExecutionEngine::create(*module, ExecutionEngineOptions());
    EXPECT_TRUE(bool(engine)) << isa;
    if (!engine) {
      llvm::consumeError(engine.takeError());
      return;
    }
    engine_ = std::move(*engine);
  }

  template <typename Fn> Fn function(const char *name) {
    if (!engine_)
      return nullptr;
    auto sym = engine_->lookup(std::string("_mlir_ciface_") + name);
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return nullptr;
    }
    return reinterpret_cast<Fn>(*sym);
  }

private:
  std::unique_ptr<MLIRContext> context_;
  std::unique_ptr<ExecutionEngine> engine_;
};

/// Inputs: random, then every index against the extremes of the other
/// operand, with accumulators near the ends of i32 so the sums wrap.
struct Inputs {
  std::vector<int8_t> index, query;
  std::vector<int16_t> wordIndex, weights;
  std::vector<int32_t> acc;
};

std::vector<Inputs> makeInputs() {
  std::vector<Inputs> all;
  ::tq::quant::SplitMix64 rng(18);
  for (int round = 0; round < 24; ++round) {
    Inputs in;
    for (int j = 0; j < 64; ++j) {
      in.index.push_back(int8_t(rng.next()));
      const int8_t extremes[] = {-128, 127, -127, 0};
      in.query.push_back(round < 8 ? int8_t(rng.next())
                                   : extremes[(j + round) % 4]);
    }
    for (int j = 0; j < 32; ++j) {
      in.wordIndex.push_back(int16_t(rng.next()));
      const int16_t extremes[] = {-32768, 32767, -1, 12345};
      in.weights.push_back(round < 8 ? int16_t(rng.next())
                                     : extremes[(j + round) % 4]);
    }
    for (int l = 0; l < 16; ++l) {
      const int32_t ends[] = {std::numeric_limits<int32_t>::max(),
                              std::numeric_limits<int32_t>::min(), 0};
      in.acc.push_back(round % 2 ? ends[(l + round) % 3]
                                 : int32_t(rng.next()));
    }
    all.push_back(in);
  }
  return all;
}

/// The six results of the three functions on `in`.
std::vector<std::vector<int32_t>> runOps(Lowered &lowered, Inputs in) {
  std::vector<std::vector<int32_t>> out(6, std::vector<int32_t>(16, 0));
  auto bytes = lowered.function<BytesFn>("bytes");
  auto words = lowered.function<WordsFn>("words");
  auto widened = lowered.function<WidenedFn>("widened");
  EXPECT_TRUE(bytes && words && widened);
  if (!bytes || !words || !widened)
    return out;
  auto index = view(in.index), query = view(in.query);
  auto wordIndex = view(in.wordIndex), weights = view(in.weights);
  auto acc = view(in.acc);
  auto o0 = view(out[0]), o1 = view(out[1]), o2 = view(out[2]),
       o3 = view(out[3]), o4 = view(out[4]), o5 = view(out[5]);
  bytes(&index, &query, &acc, &o0, &o1);
  words(&wordIndex, &weights, &acc, &o2, &o3);
  widened(&index, &weights, &acc, &o4, &o5);
  return out;
}

/// `isa`'s lowering against the portable one (isa=none), or skipped with
/// the reason where the host lacks `feature`.
void expectMatchesPortable(const std::string &isa, const char *feature) {
  if (!llvm::sys::getHostCPUFeatures().lookup(feature))
    GTEST_SKIP() << "this host has no " << feature << ": the isa=" << isa
                 << " lowering cannot run here";
  Lowered portable("none"), native(isa);
  int round = 0;
  for (const Inputs &in : makeInputs()) {
    SCOPED_TRACE("round " + std::to_string(round++));
    std::vector<std::vector<int32_t>> want = runOps(portable, in),
                                      got = runOps(native, in);
    const char *names[] = {"narrow byte_dot",      "byte_dot",
                           "8-word pair_dot",      "16-word pair_dot",
                           "widened 8-word lookup", "widened 16-word lookup"};
    for (int k = 0; k < 6; ++k)
      EXPECT_EQ(got[k], want[k]) << names[k] << " (isa=" << isa << ")";
  }
}

TEST(IntegerOps, Avx2MatchesPortable) { expectMatchesPortable("avx2", "avx2"); }

TEST(IntegerOps, AvxVnniMatchesPortable) {
  expectMatchesPortable("avxvnni", "avxvnni");
}

TEST(IntegerOps, Avx512VnniMatchesPortable) {
  expectMatchesPortable("avx512vnni", "avx512vnni");
}

/// The portable lowering itself against scalar arithmetic, so that the
/// comparisons above compare against the op's definition.
TEST(IntegerOps, PortableMatchesScalarDefinition) {
  Lowered portable("none");
  const int8_t narrowTable[] = {0, 1, 17, 42, 64, 100, 126, 127};
  const int16_t words8[] = {-32768, 32767, -511, 511, 0, 1, -1, 300};
  for (const Inputs &in : makeInputs()) {
    std::vector<std::vector<int32_t>> got = runOps(portable, in);
    for (int l = 0; l < 16; ++l) {
      uint32_t sum = uint32_t(in.acc[l]);
      for (int k = 0; k < 4; ++k)
        sum += uint32_t(int32_t(uint8_t(narrowTable[in.index[4 * l + k] & 7])) *
                        int32_t(in.query[4 * l + k]));
      EXPECT_EQ(got[0][l], int32_t(sum)) << "narrow byte_dot lane " << l;
      uint32_t pairs = uint32_t(in.acc[l]);
      for (int k = 0; k < 2; ++k)
        pairs += uint32_t(int32_t(words8[in.wordIndex[2 * l + k] & 7]) *
                          int32_t(in.weights[2 * l + k]));
      EXPECT_EQ(got[2][l], int32_t(pairs)) << "8-word pair_dot lane " << l;
      // Word 2l + k of @widened is byte 2l + k, zero-extended.
      uint32_t widened = uint32_t(in.acc[l]);
      for (int k = 0; k < 2; ++k)
        widened += uint32_t(int32_t(words8[uint8_t(in.index[2 * l + k]) & 7]) *
                            int32_t(in.weights[2 * l + k]));
      EXPECT_EQ(got[4][l], int32_t(widened)) << "widened lookup lane " << l;
    }
  }
}

} // namespace
