//===- GpuKernelEmulationTest.cpp - GPU kernels executed on the host ------===//
//
// The GPU kernel builders run for GpuTarget::hostEmulation(lanes, warps),
// tq-gpu-to-host turns the kernels into host functions of one GPU thread,
// and the CPU lowering plus MLIR's ExecutionEngine runs them over their
// grid with one host thread per GPU thread (GpuEmulator.h: real barriers,
// warp shuffles through shared slots): split-KV attention kernel, then
// combine. The outputs must match lib/Quant's reference over the same
// paged cache. With warps of 8 and 32 lanes, 4 warps a block, this covers
// what runs on a GPU — the shuffle butterflies and reductions, the
// multi-warp merge through workgroup memory, the barriers — besides the
// addressing (pages, rows, splits, partials), decoding, rotations, online
// softmax and masks; one-lane cases keep the shuffle-free form covered.
// What stays for hardware (tq-gpu-check): the vendor lowering itself,
// memory ordering and timing.
//
//===----------------------------------------------------------------------===//

#include "GpuEmulator.h"
#include "KernelRunner.h"

#include "tq/Conversion/Passes.h"
#include "tq/Conversion/TQToGPU/GpuKernels.h"
#include "tq/Conversion/TQToGPU/GpuPipeline.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Pipelines/Pipelines.h"
#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"
#include "tq/Quant/Stats.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <map>
#include <memory>

using namespace mlir;
using namespace mlir::tq;
namespace tqq = ::tq::quant;

namespace {

using ::tq::test::Memref1;
using ::tq::test::view;

/// Host functions end with block x, y, z, thread id and the arena.
using AttentionFn = void (*)(Memref1 *, Memref1 *, Memref1 *, Memref1 *,
                             Memref1 *, Memref1 *, Memref1 *, Memref1 *,
                             Memref1 *, int32_t, int32_t, int32_t, float,
                             int64_t, int64_t, int64_t, int64_t, Memref1 *);
using CombineFn = void (*)(Memref1 *, Memref1 *, int32_t, int32_t, int64_t,
                           int64_t, int64_t, int64_t, Memref1 *);

struct Case {
  std::string k, v;
  unsigned dim, group;
  bool prefill = false, causal = false;
  int64_t window = 0;
  float softcap = 0.0f;
  unsigned splits = 1;
  /// Threads per warp; blocks of 4 warps (1 lane: one-thread blocks)
  /// unless blockWarps (the block_warps knob) says otherwise.
  unsigned lanes = 8;
  unsigned blockWarps = 0;

  unsigned warps() const {
    return blockWarps ? blockWarps : lanes == 1 ? 1 : 4;
  }
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.k << "/" << c.v << " d" << c.dim << " g" << c.group
      << (c.prefill ? " prefill" : " decode") << " splits " << c.splits
      << " lanes " << c.lanes << " warps " << c.warps();
}

class GpuKernelEmulationTest : public ::testing::TestWithParam<Case> {};

/// The kernels of one spec, built for GpuTarget::hostEmulation(), run
/// through the GPU path's kernel-body lowering and exact math, turned into
/// host functions by tq-gpu-to-host and JIT-compiled.
class HostKernels {
public:
  HostKernels() : context_(::tq::test::makeJitContext()) {}

  /// Empty on success, else the diagnostics.
  std::string build(const RuntimeKernelSpec &spec, const GpuTarget &target) {
    std::string diagnostics;
    ScopedDiagnosticHandler handler(context_.get(), [&](Diagnostic &d) {
      llvm::raw_string_ostream os(diagnostics);
      os << d << "\n";
      return success();
    });
    Location loc = UnknownLoc::get(context_.get());
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    (*module)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                       UnitAttr::get(context_.get()));
    OpBuilder b(module->getBodyRegion());
    auto gm = gpu::GPUModuleOp::create(b, loc, "tq_kernels");
    auto infos =
        buildGpuKernels(gm, spec, target, [&] { return emitError(loc); });
    if (failed(infos))
      return "build: " + diagnostics;
    for (const GpuKernelInfo &info : *infos)
      workgroupBytes_[info.name] = info.workgroupBytes;
    PassManager pm(context_.get());
    // Append kernels are written on tensors. The attention kernels skip
    // the canonicalizer it runs: with narrow warps their token loop
    // carries hundreds of values and canonicalization is slow.
    if (spec.kind == RuntimeKernelKind::Append)
      buildGpuKernelBodiesPipeline(pm);
    pm.addPass(createTQExactMath()); // what the GPU targets run
    pm.addPass(createTQGpuToHost());
    pm.addPass(createTQApproximateMath()); // the GPU targets' exp2 as well
    pm.addPass(arith::createArithExpandOpsPass());
    buildHostLoopsToLLVMPipeline(pm);
    if (failed(pm.run(*module)))
      return "lowering: " + diagnostics;
    auto transformer = makeOptimizingTransformer(0, 0, nullptr);
    ExecutionEngineOptions options;
    options.transformer = transformer;
    // The kernels are large straight-line code (every lane register of a
    // one-thread warp unrolled); fast code generation keeps the test short.
    options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::None;
    auto engine = ExecutionEngine::create(*module, options);
    if (!engine)
      return llvm::toString(engine.takeError());
    engine_ = std::move(*engine);
    engine_->registerSymbols(::tq::test::emulatorSymbols);
    return "";
  }

  /// Workgroup bytes of kernel `name`, as buildGpuKernels reported them.
  int64_t workgroupBytes(const std::string &name) const {
    auto it = workgroupBytes_.find(name);
    return it == workgroupBytes_.end() ? 0 : it->second;
  }

  /// The host function of kernel `name`, or null.
  void *lookup(const std::string &name) {
    auto sym = engine_->lookup("_mlir_ciface_" + name);
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return nullptr;
    }
    return *sym;
  }

private:
  std::unique_ptr<MLIRContext> context_;
  std::unique_ptr<ExecutionEngine> engine_;
  std::map<std::string, int64_t> workgroupBytes_;
};

TEST_P(GpuKernelEmulationTest, MatchesReference) {
  const Case &c = GetParam();
  RuntimeKernelSpec spec;
  spec.kind = c.prefill ? RuntimeKernelKind::Prefill : RuntimeKernelKind::Decode;
  spec.keyFormat = c.k;
  spec.valueFormat = c.v;
  spec.headDim = c.dim;
  spec.group = c.group;
  spec.causal = c.causal;
  spec.window = c.window;
  spec.softcap = c.softcap;
  HostKernels kernels;
  std::string error =
      kernels.build(spec, GpuTarget::hostEmulation(c.lanes, c.warps()));
  ASSERT_TRUE(error.empty()) << error;
  auto attention = reinterpret_cast<AttentionFn>(kernels.lookup(spec.name()));
  auto combine =
      reinterpret_cast<CombineFn>(kernels.lookup(spec.name() + "_combine"));
  ASSERT_TRUE(attention && combine);

  // A ragged paged batch, pages in a permuted order.
  auto kf = *tqq::Format::get(c.k, c.dim), vf = *tqq::Format::get(c.v, c.dim);
  const unsigned kvHeads = 2, qHeads = kvHeads * c.group, page = 8;
  const std::vector<unsigned> lengths = {1, 13, 40, 0, 27};
  const std::vector<unsigned> queries =
      c.prefill ? std::vector<unsigned>{1, 3, 4, 0, 2}
                : std::vector<unsigned>{1, 1, 1, 0, 1};
  std::vector<int32_t> indptr = {0}, seqLens, rowSeq, rowPos;
  for (unsigned s = 0; s < lengths.size(); ++s) {
    indptr.push_back(indptr.back() + int32_t((lengths[s] + page - 1) / page));
    seqLens.push_back(int32_t(lengths[s]));
    for (unsigned i = 0; i < queries[s]; ++i) {
      rowSeq.push_back(int32_t(s));
      rowPos.push_back(int32_t(lengths[s] - queries[s] + i));
    }
  }
  const unsigned numPages = unsigned(indptr.back());
  std::vector<int32_t> indices(numPages);
  for (unsigned i = 0; i < numPages; ++i)
    indices[i] = int32_t((i * 5 + 3) % numPages);
  const size_t kb = kf.rowBytes(), vb = vf.rowBytes();
  std::vector<uint8_t> kPool(numPages * page * kvHeads * kb, 0xEE),
      vPool(numPages * page * kvHeads * vb, 0xEE);
  std::vector<std::vector<uint8_t>> kRows(lengths.size()), vRows(lengths.size());
  tqq::SplitMix64 rng(17);
  std::vector<float> x(c.dim);
  std::vector<uint8_t> ke(kb), ve(vb);
  for (unsigned s = 0; s < lengths.size(); ++s)
    for (unsigned t = 0; t < lengths[s]; ++t)
      for (unsigned h = 0; h < kvHeads; ++h) {
        for (float &f : x)
          f = float(rng.gaussian());
        ASSERT_TRUE(kf.encodeRow(x, ke).ok());
        for (float &f : x)
          f = float(rng.gaussian());
        ASSERT_TRUE(vf.encodeRow(x, ve).ok());
        kRows[s].insert(kRows[s].end(), ke.begin(), ke.end());
        vRows[s].insert(vRows[s].end(), ve.begin(), ve.end());
        size_t slot =
            (size_t(indices[indptr[s] + t / page]) * page + t % page) *
                kvHeads + h;
        std::memcpy(&kPool[slot * kb], ke.data(), kb);
        std::memcpy(&vPool[slot * vb], ve.data(), vb);
      }
  const int64_t rows = int64_t(rowSeq.size());
  std::vector<float> q(size_t(rows) * qHeads * c.dim), out(q.size(), NAN);
  for (float &f : q)
    f = float(rng.gaussian());
  std::vector<float> partial(size_t(rows) * kvHeads * c.splits * c.group *
                             gpuPartialStride(vf.spec()));
  Memref1 mq = view(q), mk = view(kPool), mv = view(vPool),
          mIndptr = view(indptr), mIndices = view(indices),
          mLens = view(seqLens), mSeq = view(rowSeq), mPos = view(rowPos),
          mPartial = view(partial), mOut = view(out);
  ::tq::test::Launch launch;
  launch.warpSize = c.lanes;
  launch.warps = c.warps();
  launch.grid[0] = rows;
  launch.grid[1] = kvHeads;
  launch.grid[2] = c.splits;
  launch.workgroupBytes = kernels.workgroupBytes(spec.name());
  // Each host thread gets its own descriptor copies (the JIT'd code only
  // reads them, but threads must not share mutable stack objects).
  error = ::tq::test::runGrid(
      launch, [&](int64_t x, int64_t y, int64_t z, int64_t t, Memref1 *arena) {
        Memref1 a[9] = {mq,   mk,   mv,   mIndptr, mIndices,
                        mLens, mSeq, mPos, mPartial};
        attention(&a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7],
                  &a[8], int32_t(page), int32_t(kvHeads), int32_t(c.splits),
                  0.0f, x, y, z, t, arena);
      });
  ASSERT_TRUE(error.empty()) << "attention: " << error;
  launch.grid[2] = 1;
  launch.workgroupBytes = kernels.workgroupBytes(spec.name() + "_combine");
  error = ::tq::test::runGrid(
      launch, [&](int64_t x, int64_t y, int64_t z, int64_t t, Memref1 *arena) {
        Memref1 a[2] = {mPartial, mOut};
        combine(&a[0], &a[1], int32_t(c.splits), int32_t(kvHeads), x, y, z, t,
                arena);
      });
  ASSERT_TRUE(error.empty()) << "combine: " << error;

  int64_t row = 0;
  for (unsigned s = 0; s < lengths.size(); ++s) {
    if (queries[s] == 0)
      continue;
    tqq::AttentionShape shape{queries[s], qHeads, kvHeads, c.dim,
                                lengths[s]};
    tqq::AttentionOptions o;
    o.causal = c.causal;
    o.window = unsigned(c.window);
    o.softcap = c.softcap;
    std::vector<double> ref(size_t(queries[s]) * qHeads * c.dim);
    ASSERT_TRUE(tqq::referenceAttentionQuantized(
                    shape, o,
                    std::span<const float>(q).subspan(
                        size_t(row) * qHeads * c.dim, ref.size()),
                    kf, kRows[s], vf, vRows[s], ref)
                    .ok());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(out[size_t(row) * qHeads * c.dim + i], ref[i], 2e-4)
          << "sequence " << s << " element " << i;
    row += queries[s];
  }
}

using AppendFn = void (*)(Memref1 *, Memref1 *, Memref1 *, int32_t, int32_t,
                          int32_t, int32_t, int64_t, int64_t, int64_t, int64_t,
                          Memref1 *);

/// Runs the append kernel of `format` at `dim` over a permuted page table
/// (positions 5 .. 13 of pages of 4 tokens, 2 KV heads) and checks that it
/// wrote exactly Format::encodeRow's bytes into exactly those slots.
void checkAppend(const std::string &format, unsigned dim, unsigned lanes = 1,
                 unsigned warps = 1) {
  SCOPED_TRACE(format + " d" + std::to_string(dim) + " block " +
               std::to_string(lanes * warps));
  RuntimeKernelSpec spec;
  spec.kind = RuntimeKernelKind::Append;
  spec.keyFormat = format;
  spec.headDim = dim;
  HostKernels kernels;
  std::string error =
      kernels.build(spec, GpuTarget::hostEmulation(lanes, warps));
  ASSERT_TRUE(error.empty()) << error;
  auto append = reinterpret_cast<AppendFn>(kernels.lookup(spec.name()));
  ASSERT_TRUE(append);

  auto f = *tqq::Format::get(format, dim);
  const unsigned kvHeads = 2, page = 4, start = 5, count = 9, poolPages = 5;
  std::vector<int32_t> pages = {3, 0, 4, 1};
  // Gaussian rows with outlier channels; one all-zero row, one constant.
  std::vector<float> rows = tqq::makeOutlierSample(count * kvHeads, dim, dim);
  std::fill_n(rows.begin(), dim, 0.0f);
  std::fill_n(rows.begin() + dim, dim, 0.75f);
  const size_t rb = f.rowBytes();
  std::vector<uint8_t> pool(poolPages * page * kvHeads * rb, 0xEE);
  std::vector<uint8_t> want = pool;
  for (unsigned t = 0; t < count; ++t)
    for (unsigned h = 0; h < kvHeads; ++h) {
      const unsigned pos = start + t;
      size_t slot = (size_t(pages[pos / page]) * page + pos % page) * kvHeads + h;
      ASSERT_TRUE(f.encodeRow(std::span<const float>(rows).subspan(
                                  (size_t(t) * kvHeads + h) * dim, dim),
                              std::span<uint8_t>(want).subspan(slot * rb, rb))
                      .ok());
    }
  Memref1 mRows = view(rows), mPool = view(pool), mPages = view(pages);
  // The runtime's grid, ceil(rows / block), plus one block past the rows.
  const int64_t block = int64_t(lanes) * warps;
  ::tq::test::Launch launch;
  launch.warpSize = lanes;
  launch.warps = warps;
  launch.grid[0] = (int64_t(count) * kvHeads + block - 1) / block + 1;
  error = ::tq::test::runGrid(
      launch, [&](int64_t x, int64_t y, int64_t z, int64_t t, Memref1 *arena) {
        Memref1 a[3] = {mRows, mPool, mPages};
        append(&a[0], &a[1], &a[2], int32_t(start), int32_t(count),
               int32_t(page), int32_t(kvHeads), x, y, z, t, arena);
      });
  ASSERT_TRUE(error.empty()) << error;
  size_t mismatches = 0, first = pool.size();
  for (size_t i = 0; i < pool.size(); ++i)
    if (pool[i] != want[i]) {
      ++mismatches;
      first = std::min(first, i);
    }
  EXPECT_EQ(mismatches, 0u) << "first differing byte " << first << " (row "
                            << first / rb << ", byte " << first % rb << ")";
}

/// Every format's append kernel (blocks past the rows write nothing).
TEST(GpuAppendEmulation, EveryFormatWritesLibraryBytes) {
  for (const tqq::FormatInfo &info : tqq::allFormats())
    checkAppend(info.name, 128);
}

/// Padded head dims and rows of several blocks.
TEST(GpuAppendEmulation, PaddedAndMultiBlockRows) {
  for (const char *name : {"tq3_0", "turbo3_0", "polar3", "tqprod2", "haar4",
                           "q8_0"})
    for (unsigned dim : {80u, 256u})
      checkAppend(name, dim);
}

/// Blocks of many threads (4 warps of 4): rows spread over the threads of
/// a block, the last block partly past the rows.
TEST(GpuAppendEmulation, ManyThreadsPerBlock) {
  for (const char *name : {"turbo3_0", "tqprod3", "q8_0"})
    checkAppend(name, 128, 4, 4);
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, GpuKernelEmulationTest,
    ::testing::Values(
        Case{"turbo3_0", "turbo3_0", 64, 2},
        Case{"turbo3_0", "turbo3_0", 64, 2, false, false, 0, 0.0f, 3},
        Case{"tq3_0", "q8_0", 64, 1},
        Case{"polar4", "f16", 80, 3, false, false, 0, 0.0f, 2},
        // f16 rows in the blocked layout (lane-relative reads).
        Case{"f16", "polar4", 128, 2, false, false, 0, 0.0f, 2},
        Case{"haar4", "haar4", 64, 2, false, false, 0, 0.0f, 2},
        Case{"turbo4_0", "polar2", 96, 1},
        Case{"turbo2_0", "tq3_0_legacy", 64, 2, true, true, 0, 0.0f, 2},
        Case{"q8_0", "turbo3_0", 64, 2, true, true, 5, 20.0f, 3},
        Case{"polar3", "haar4", 64, 1, true, false, 6, 0.0f, 1},
        Case{"turbo3_0", "turbo3_0", 128, 4, false, false, 0, 0.0f, 4},
        Case{"tq3_0", "tq3_0", 112, 7, false, false, 0, 0.0f, 2},
        Case{"polar1", "turbo2_0", 64, 8, true, true, 9, 30.0f, 2},
        Case{"tqprod3", "tqprod3", 64, 2, false, false, 0, 0.0f, 3},
        Case{"tqprod2", "turbo3_0", 80, 4, false, false, 0, 0.0f, 2},
        Case{"q8_0", "tqprod4", 64, 1, true, true, 0, 0.0f, 2},
        Case{"tqprod4", "haar4", 64, 2, true, true, 7, 25.0f, 1},
        // One-thread blocks (no shuffles, no concurrent warps).
        Case{"turbo3_0", "turbo3_0", 64, 2, false, false, 0, 0.0f, 3, 1},
        Case{"haar4", "tqprod3", 64, 3, false, false, 0, 0.0f, 2, 1},
        // Warps of 32 lanes, as on NVIDIA: 128 threads a block. Rows of
        // <= 128 values take groups of 16 lanes (two tokens a warp step)
        // while a lane holds at most 32 accumulators; else whole warps.
        Case{"tqprod3", "tqprod3", 128, 2, false, false, 0, 0.0f, 2, 32},
        Case{"turbo3_0", "turbo3_0", 128, 4, true, true, 0, 0.0f, 2, 32},
        Case{"polar4", "haar4", 96, 7, true, true, 0, 0.0f, 2, 32},
        Case{"polar3", "q8_0", 256, 2, false, false, 0, 0.0f, 2, 32},
        Case{"q8_0", "f16", 128, 2, false, false, 0, 0.0f, 3, 32},
        // Wave64, as on CDNA: four 16-lane groups a warp step.
        Case{"turbo3_0", "turbo3_0", 64, 2, false, false, 0, 0.0f, 3, 64},
        // Whole wave64 rows of 96 values: two per lane, lanes 48..63 past
        // the row (they read its last pair and keep zeros).
        Case{"turbo3_0", "tq3_0", 96, 8, false, false, 0, 0.0f, 2, 64},
        // The block_warps knob's other values (tq-aot --block-warps, the
        // GPU autotuner): blocks of 1, 2 and 8 warps of 32 lanes, short
        // rows (16-lane groups) and whole-warp rows.
        Case{"turbo3_0", "turbo3_0", 128, 4, false, false, 0, 0.0f, 3, 32, 2},
        Case{"polar4", "turbo3_0", 128, 4, true, true, 0, 0.0f, 2, 32, 8},
        Case{"turbo3_0", "polar4", 256, 2, false, false, 0, 0.0f, 2, 32, 8},
        Case{"tqprod3", "turbo4_0", 64, 2, false, false, 0, 0.0f, 2, 32, 1}),
    [](const ::testing::TestParamInfo<Case> &info) {
      const Case &c = info.param;
      return c.k + "_" + c.v + "_d" + std::to_string(c.dim) +
             (c.blockWarps ? "_bw" + std::to_string(c.blockWarps) : "") + "_g" +
             std::to_string(c.group) + (c.prefill ? "_prefill" : "_decode") +
             (c.causal ? "_causal" : "") +
             (c.window ? "_w" + std::to_string(c.window) : "") +
             (c.softcap > 0 ? "_sc" : "") + "_s" + std::to_string(c.splits) +
             "_l" + std::to_string(c.lanes);
    });

} // namespace
