//===- ExactMathExecutionTest.cpp - tq-exact-math against libm ------------===//
//
// Scalar functions of one math op each, rewritten by tq-exact-math (so no
// math op is left), JIT-compiled and called on many inputs: the results
// must equal the C library's bit for bit (correctly rounded sqrt, round
// half away from zero, fabs), including zeros, infinities, NaN, negative
// inputs and subnormals.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "tq/Conversion/Passes.h"
#include "tq/Pipelines/Pipelines.h"
#include "tq/Quant/Random.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

using namespace mlir;

namespace {

/// f(x) = op(x) for each math op of interest, at f32 and f64.
template <typename Op> void addUnary(OpBuilder &b, StringRef name, Type t) {
  Location loc = b.getUnknownLoc();
  auto func =
      func::FuncOp::create(b, loc, name, b.getFunctionType({t}, {t}));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(func.addEntryBlock());
  Value r = Op::create(b, loc, func.getArgument(0));
  func::ReturnOp::create(b, loc, r);
}

class ExactMathExecution : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    context_ = ::tq::test::makeJitContext().release();
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(context_));
    OpBuilder b(module->getBodyRegion());
    Type f32 = b.getF32Type(), f64 = b.getF64Type();
    addUnary<math::SqrtOp>(b, "sqrt_f32", f32);
    addUnary<math::SqrtOp>(b, "sqrt_f64", f64);
    addUnary<math::RoundOp>(b, "round_f32", f32);
    addUnary<math::RoundOp>(b, "round_f64", f64);
    addUnary<math::AbsFOp>(b, "abs_f32", f32);
    addUnary<math::AbsFOp>(b, "abs_f64", f64);
    PassManager pm(context_);
    pm.addPass(mlir::tq::createTQExactMath());
    mlir::tq::buildHostLoopsToLLVMPipeline(pm);
    ASSERT_TRUE(succeeded(pm.run(*module)));
    bool leftover = false;
    module->walk([&](Operation *op) {
      leftover |= op->getName().getStringRef().starts_with("llvm.intr.sqrt") ||
                  op->getName().getStringRef().starts_with("llvm.intr.round") ||
                  op->getName().getStringRef().starts_with("llvm.intr.fabs");
    });
    ASSERT_FALSE(leftover) << "a math op reached the LLVM lowering";
    ExecutionEngineOptions options;
    auto engine = ExecutionEngine::create(*module, options);
    ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
    engine_ = engine->release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete context_;
  }

  template <typename T> static T (*fn(StringRef name))(T) {
    auto sym = engine_->lookup(name);
    EXPECT_TRUE(bool(sym));
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return nullptr;
    }
    return reinterpret_cast<T (*)(T)>(*sym);
  }

  /// Compares f with want bit for bit (any NaN matches any NaN).
  template <typename T, typename Want>
  static void check(T (*f)(T), Want want, const std::vector<T> &inputs) {
    ASSERT_TRUE(f);
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    size_t bad = 0;
    for (T x : inputs) {
      T got = f(x), ref = want(x);
      bool same = (std::isnan(got) && std::isnan(ref)) ||
                  std::bit_cast<U>(got) == std::bit_cast<U>(ref);
      if (!same && bad++ < 5)
        ADD_FAILURE() << "x = " << x << " (" << std::hexfloat << x
                      << "): got " << got << ", libm " << ref
                      << std::defaultfloat;
    }
    EXPECT_EQ(bad, 0u) << "of " << inputs.size() << " inputs";
  }

  /// Special values, then random bit patterns of every sign and exponent
  /// (subnormals included), then values near integers and halves.
  template <typename T> static std::vector<T> inputs() {
    using L = std::numeric_limits<T>;
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    std::vector<T> v = {T(0),          -T(0),          L::infinity(),
                        -L::infinity(), L::quiet_NaN(), L::denorm_min(),
                        L::min(),       L::max(),       T(-1),
                        T(0.5),         T(-0.5),        T(2.5),
                        T(-2.5),        T(72),          T(0.75)};
    ::tq::quant::SplitMix64 rng(2026);
    for (int i = 0; i < 400000; ++i) {
      U bits = U(rng.next());
      T x = std::bit_cast<T>(bits);
      if (std::isfinite(x))
        v.push_back(x);
    }
    for (int i = 0; i < 100000; ++i) {
      T n = T(int64_t(rng.next() % 20000001) - 10000000) / T(8);
      v.push_back(n);
      v.push_back(std::nextafter(n, L::infinity()));
      v.push_back(std::nextafter(n, -L::infinity()));
    }
    T big = std::ldexp(T(1), L::digits - 1);
    for (T x : {big, -big, std::nextafter(big, T(0)),
                std::nextafter(-big, T(0)), big + 1, T(0.49999997f)})
      v.push_back(x);
    return v;
  }

  static MLIRContext *context_;
  static ExecutionEngine *engine_;
};

MLIRContext *ExactMathExecution::context_ = nullptr;
ExecutionEngine *ExactMathExecution::engine_ = nullptr;

TEST_F(ExactMathExecution, SqrtIsCorrectlyRounded) {
  check(fn<float>("sqrt_f32"), [](float x) { return std::sqrt(x); },
        inputs<float>());
  check(fn<double>("sqrt_f64"), [](double x) { return std::sqrt(x); },
        inputs<double>());
}

TEST_F(ExactMathExecution, RoundHalvesAwayFromZero) {
  check(fn<float>("round_f32"), [](float x) { return std::round(x); },
        inputs<float>());
  check(fn<double>("round_f64"), [](double x) { return std::round(x); },
        inputs<double>());
}

TEST_F(ExactMathExecution, AbsClearsTheSign) {
  check(fn<float>("abs_f32"), [](float x) { return std::fabs(x); },
        inputs<float>());
  check(fn<double>("abs_f64"), [](double x) { return std::fabs(x); },
        inputs<double>());
}

} // namespace
