//===- GpuEmulatorTest.cpp - tq-gpu-to-host and the host-thread emulator --===//
//
// Small gpu.func kernels, converted by tq-gpu-to-host, JIT-compiled and run
// by runGrid: every shuffle mode, workgroup memory shared by a block's
// threads across a barrier, and a divergent barrier reported instead of a
// hang.
//
//===----------------------------------------------------------------------===//

#include "GpuEmulator.h"
#include "KernelRunner.h"

#include "tq/Conversion/Passes.h"
#include "tq/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using ::tq::test::Memref1;

namespace {

constexpr const char *kKernels = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    // out[t][0..3] = xor 1, up 1, down 1, idx 3 of the lane's value (t).
    gpu.func @shuffles(%out: memref<?xf32>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : i32
      %c3 = arith.constant 3 : i32
      %w = arith.constant 8 : i32
      %ti = arith.index_cast %t : index to i32
      %v = arith.sitofp %ti : i32 to f32
      %x, %xv = gpu.shuffle xor %v, %c1, %w : f32
      %u, %uv = gpu.shuffle up %v, %c1, %w : f32
      %d, %dv = gpu.shuffle down %v, %c1, %w : f32
      %i, %iv = gpu.shuffle idx %v, %c3, %w : f32
      %c4 = arith.constant 4 : index
      %base = arith.muli %t, %c4 : index
      %o1 = arith.constant 1 : index
      %o2 = arith.constant 2 : index
      %o3 = arith.constant 3 : index
      %a1 = arith.addi %base, %o1 : index
      %a2 = arith.addi %base, %o2 : index
      %a3 = arith.addi %base, %o3 : index
      memref.store %x, %out[%base] : memref<?xf32>
      memref.store %u, %out[%a1] : memref<?xf32>
      memref.store %d, %out[%a2] : memref<?xf32>
      memref.store %i, %out[%a3] : memref<?xf32>
      gpu.return
    }
    // out[b][t] = the value thread 15 - t stored before the barrier.
    gpu.func @reverse(%out: memref<?xf32>)
        workgroup(%pad : memref<3xf32, #gpu.address_space<workgroup>>,
                  %buf : memref<16xf32, #gpu.address_space<workgroup>>)
        kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %c15 = arith.constant 15 : index
      %c16 = arith.constant 16 : index
      %c100 = arith.constant 100 : index
      %bt = arith.muli %b, %c100 : index
      %val = arith.addi %bt, %t : index
      %vi = arith.index_cast %val : index to i32
      %vf = arith.sitofp %vi : i32 to f32
      memref.store %vf, %buf[%t] : memref<16xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %r = arith.subi %c15, %t : index
      %got = memref.load %buf[%r] : memref<16xf32, #gpu.address_space<workgroup>>
      %row = arith.muli %b, %c16 : index
      %at = arith.addi %row, %t : index
      memref.store %got, %out[%at] : memref<?xf32>
      gpu.return
    }
    // Only thread 0 reaches the barrier: a GPU would hang.
    gpu.func @divergent(%out: memref<?xf32>) kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %first = arith.cmpi eq, %t, %c0 : index
      scf.if %first {
        gpu.barrier
      }
      gpu.return
    }
  }
}
)mlir";

using KernelFn = void (*)(Memref1 *, int64_t, int64_t, int64_t, int64_t,
                          Memref1 *);

class GpuEmulatorTest : public ::testing::Test {
protected:
  void SetUp() override {
    context_ = ::tq::test::makeJitContext();
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(kKernels, context_.get());
    ASSERT_TRUE(module);
    PassManager pm(context_.get());
    pm.addPass(mlir::tq::createTQGpuToHost());
    mlir::tq::buildHostLoopsToLLVMPipeline(pm);
    ASSERT_TRUE(succeeded(pm.run(*module)));
    ExecutionEngineOptions options;
    auto engine = ExecutionEngine::create(*module, options);
    ASSERT_TRUE(bool(engine));
    engine_ = std::move(*engine);
    engine_->registerSymbols(::tq::test::emulatorSymbols);
  }

  KernelFn kernel(const char *name) {
    auto sym = engine_->lookup(std::string("_mlir_ciface_") + name);
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return nullptr;
    }
    return reinterpret_cast<KernelFn>(*sym);
  }

  std::string run(KernelFn fn, const ::tq::test::Launch &launch,
                  std::vector<float> &out) {
    Memref1 m = ::tq::test::view(out);
    return ::tq::test::runGrid(
        launch, [&](int64_t x, int64_t y, int64_t z, int64_t t,
                    Memref1 *arena) {
          Memref1 local = m;
          fn(&local, x, y, z, t, arena);
        });
  }

  std::unique_ptr<MLIRContext> context_;
  std::unique_ptr<ExecutionEngine> engine_;
};

TEST_F(GpuEmulatorTest, ShuffleModes) {
  KernelFn fn = kernel("shuffles");
  ASSERT_TRUE(fn);
  ::tq::test::Launch launch;
  launch.warpSize = 8;
  launch.warps = 2;
  std::vector<float> out(16 * 4, -1.0f);
  ASSERT_EQ(run(fn, launch, out), "");
  for (int t = 0; t < 16; ++t) {
    const int lane = t % 8, warp = t / 8;
    EXPECT_EQ(out[t * 4 + 0], float(warp * 8 + (lane ^ 1))) << t;
    // Out-of-range sources return the lane's own value.
    EXPECT_EQ(out[t * 4 + 1], float(lane >= 1 ? t - 1 : t)) << t;
    EXPECT_EQ(out[t * 4 + 2], float(lane + 1 < 8 ? t + 1 : t)) << t;
    EXPECT_EQ(out[t * 4 + 3], float(warp * 8 + 3)) << t;
  }
}

TEST_F(GpuEmulatorTest, WorkgroupMemoryIsSharedAcrossABarrier) {
  KernelFn fn = kernel("reverse");
  ASSERT_TRUE(fn);
  ::tq::test::Launch launch;
  launch.grid[0] = 3;
  launch.warpSize = 4;
  launch.warps = 4;
  launch.workgroupBytes = (3 + 16) * 4;
  std::vector<float> out(3 * 16, -1.0f);
  ASSERT_EQ(run(fn, launch, out), "");
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 16; ++t)
      EXPECT_EQ(out[b * 16 + t], float(b * 100 + 15 - t)) << b << " " << t;
}

TEST_F(GpuEmulatorTest, DivergentBarrierIsReported) {
  KernelFn fn = kernel("divergent");
  ASSERT_TRUE(fn);
  ::tq::test::Launch launch;
  launch.warpSize = 4;
  launch.timeoutMs = 200;
  std::vector<float> out(1);
  std::string error = run(fn, launch, out);
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
}

} // namespace
