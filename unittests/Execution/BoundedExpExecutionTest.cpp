//===- BoundedExpExecutionTest.cpp - The softmax's exp against libm -------===//
//
// tq::boundedExp, the exp the vector softmax takes of a logit minus its
// maximum (d <= 0), JIT-compiled on a splat of each input: its relative
// error against exp in double precision stays under its documented bound
// over [-87, 0], it is exactly 1 at 0 and exactly 0 below -87 and at
// -inf (a hidden key), and NaN stays NaN.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"
#include "VectorSoftmax.h"

#include "tq/Pipelines/Pipelines.h"
#include "tq/Quant/Random.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mlir;

namespace {

/// The documented bound (VectorSoftmax.cpp) of boundedExp's relative error
/// with its f32 roundings.
constexpr double kRelativeErrorBound = 1.7e-7;

class BoundedExpExecution : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    context_ = ::tq::test::makeJitContext().release();
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(context_));
    OpBuilder b(module->getBodyRegion());
    Location loc = b.getUnknownLoc();
    Type f32 = b.getF32Type();
    // f(x) = lane 5 of boundedExp(splat(x)): every lane the same code.
    auto func = func::FuncOp::create(b, loc, "bounded_exp",
                                     b.getFunctionType({f32}, {f32}));
    b.setInsertionPointToStart(func.addEntryBlock());
    Value splat = vector::BroadcastOp::create(
        b, loc, VectorType::get({16}, f32), func.getArgument(0));
    Value e = mlir::tq::boundedExp(b, loc, splat);
    Value lane = vector::ExtractOp::create(b, loc, e, ArrayRef<int64_t>{5});
    func::ReturnOp::create(b, loc, lane);
    PassManager pm(context_);
    mlir::tq::buildHostLoopsToLLVMPipeline(pm);
    ASSERT_TRUE(succeeded(pm.run(*module)));
    auto engine = ExecutionEngine::create(*module, ExecutionEngineOptions());
    ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
    engine_ = engine->release();
    auto sym = engine_->lookup("bounded_exp");
    ASSERT_TRUE(bool(sym)) << llvm::toString(sym.takeError());
    exp_ = reinterpret_cast<float (*)(float)>(*sym);
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete context_;
  }

  static MLIRContext *context_;
  static ExecutionEngine *engine_;
  static float (*exp_)(float);
};

MLIRContext *BoundedExpExecution::context_ = nullptr;
ExecutionEngine *BoundedExpExecution::engine_ = nullptr;
float (*BoundedExpExecution::exp_)(float) = nullptr;

TEST_F(BoundedExpExecution, RelativeErrorWithinItsBound) {
  ASSERT_TRUE(exp_);
  ::tq::quant::SplitMix64 rng(35);
  double worst = 0.0;
  float worstAt = 0.0f;
  auto visit = [&](float d) {
    double want = std::exp(double(d));
    double error = std::fabs(double(exp_(d)) / want - 1.0);
    if (!(error <= worst)) {
      worst = error;
      worstAt = d;
    }
  };
  // Uniform over [-87, 0], denser near 0 (the weights that matter), and
  // every float in [-1, 0) at a stride.
  for (int i = 0; i < 400000; ++i) {
    double u = double(rng.next() >> 11) * 0x1.0p-53;
    visit(float(-87.0 * u));
    visit(float(-4.0 * u));
  }
  for (float d = -1.0f; d < 0.0f; d = std::nextafter(d, 1.0f) + 1e-7f)
    visit(d);
  EXPECT_LT(worst, kRelativeErrorBound) << "at d = " << worstAt;
  // The bound is not loose by orders of magnitude (a fit gone wrong would
  // show as a much larger error, a too-generous bound as a much smaller).
  EXPECT_GT(worst, kRelativeErrorBound / 16);
}

TEST_F(BoundedExpExecution, EndsAndHiddenKeys) {
  ASSERT_TRUE(exp_);
  EXPECT_EQ(exp_(0.0f), 1.0f);
  EXPECT_EQ(exp_(-0.0f), 1.0f);
  EXPECT_EQ(exp_(-87.5f), 0.0f);
  EXPECT_EQ(exp_(-1000.0f), 0.0f);
  EXPECT_EQ(exp_(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(exp_(std::numeric_limits<float>::quiet_NaN())));
  // -87 itself is kept: a normal float, not flushed.
  EXPECT_GT(exp_(-87.0f), 0.0f);
  EXPECT_LT(std::fabs(double(exp_(-87.0f)) / std::exp(-87.0) - 1.0),
            kRelativeErrorBound);
}

} // namespace
