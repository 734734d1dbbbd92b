//===- PageDivisorExecutionTest.cpp - GPU page walk's division ------------===//
//
// gpukernel::PageDivisor divides token positions by the page size with a
// multiplier computed once (floor(2^32 / d) + 1) and one correction. Its
// ops are plain arith, so they run on the host: a function of (n, d)
// returning (n / d, n % d) is JIT-compiled and compared with C's division
// over page sizes from 1 to 2^31 - 1 and positions up to 2^31 - 1 (the
// ABI's i32 range), near multiples of d and at random.
//
//===----------------------------------------------------------------------===//

#include "GpuBuilders.h"
#include "KernelRunner.h"

#include "tq/Pipelines/Pipelines.h"
#include "tq/Quant/Random.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace mlir;

namespace {

TEST(PageDivisorExecution, MatchesIntegerDivision) {
  std::unique_ptr<MLIRContext> context = ::tq::test::makeJitContext();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&*context));
  OpBuilder b(module->getBodyRegion());
  Location loc = b.getUnknownLoc();
  Type i32 = b.getI32Type();
  auto func = func::FuncOp::create(b, loc, "divrem",
                                   b.getFunctionType({i32, i32}, {i32, i32}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(func.addEntryBlock());
    Value size = arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                              func.getArgument(1));
    auto divisor = mlir::tq::gpukernel::PageDivisor::get(b, loc, size);
    auto [q, r] = divisor.divRem(b, loc, func.getArgument(0));
    func::ReturnOp::create(b, loc, ValueRange{q, r});
  }
  PassManager pm(&*context);
  mlir::tq::buildHostLoopsToLLVMPipeline(pm);
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto engine = ExecutionEngine::create(*module, ExecutionEngineOptions());
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
  auto sym = (*engine)->lookup("_mlir_ciface_divrem");
  ASSERT_TRUE(bool(sym)) << llvm::toString(sym.takeError());
  // A struct of two i32 results comes back through the first pointer.
  auto divrem = reinterpret_cast<void (*)(int32_t *, int32_t, int32_t)>(*sym);

  const int32_t kMax = INT32_MAX;
  std::vector<int32_t> sizes = {1,    2,     3,      7,          16,
                                100,  128,   1000,   1 << 20,    (1 << 20) + 1,
                                65521, 99991, 1 << 30, kMax - 1, kMax};
  ::tq::quant::SplitMix64 rng(11);
  for (int i = 0; i < 40; ++i)
    sizes.push_back(int32_t(1 + rng.next() % uint64_t(kMax)));
  size_t bad = 0, checked = 0;
  for (int32_t d : sizes) {
    std::vector<int64_t> positions = {0, 1, kMax, kMax - 1, d - 1, d};
    // Around multiples of d, low and high in the range.
    for (int64_t k : {int64_t(1), int64_t(2), int64_t(kMax) / d - 1,
                      int64_t(kMax) / d})
      for (int64_t delta = -2; delta <= 2; ++delta)
        positions.push_back(k * d + delta);
    for (int i = 0; i < 2000; ++i)
      positions.push_back(int64_t(rng.next() % (uint64_t(kMax) + 1)));
    for (int64_t n64 : positions) {
      if (n64 < 0 || n64 > kMax)
        continue;
      int32_t n = int32_t(n64), out[2] = {-1, -1};
      divrem(out, n, d);
      ++checked;
      if ((out[0] != n / d || out[1] != n % d) && bad++ < 5)
        ADD_FAILURE() << n << " / " << d << ": got (" << out[0] << ", "
                      << out[1] << "), want (" << n / d << ", " << n % d
                      << ")";
    }
  }
  EXPECT_EQ(bad, 0u) << "of " << checked << " divisions";
}

} // namespace
