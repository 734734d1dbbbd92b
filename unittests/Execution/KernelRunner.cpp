//===- KernelRunner.cpp - JIT-compile and run attention kernels -----------===//

#include "KernelRunner.h"

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <tuple>
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tq::test {

namespace {
template <typename T>
StridedMemRefType<T, 3> view3(std::vector<T> &data, int64_t a, int64_t b,
                              int64_t c) {
  StridedMemRefType<T, 3> m;
  m.basePtr = m.data = data.data();
  m.offset = 0;
  m.sizes[0] = a;
  m.sizes[1] = b;
  m.sizes[2] = c;
  m.strides[0] = b * c;
  m.strides[1] = c;
  m.strides[2] = 1;
  return m;
}
} // namespace

void CompiledKernel::run(std::vector<float> &q, std::vector<uint8_t> &k,
                         std::vector<uint8_t> &v, std::vector<float> &mask,
                         std::vector<float> &out) const {
  const int64_t nq = spec_.numQueries, h = spec_.queryHeads,
                d = spec_.headDim, n = spec_.numKeys, kvh = spec_.kvHeads;
  auto qm = view3(q, nq, h, d);
  auto om = view3(out, nq, h, d);
  auto km = view3(k, n, kvh, keyRowBytes_);
  auto vm = view3(v, n, kvh, valueRowBytes_);
  using I8 = StridedMemRefType<uint8_t, 3>;
  using F3 = StridedMemRefType<float, 3>;
  if (spec_.mask) {
    StridedMemRefType<float, 2> mm;
    mm.basePtr = mm.data = mask.data();
    mm.offset = 0;
    mm.sizes[0] = nq;
    mm.sizes[1] = n;
    mm.strides[0] = n;
    mm.strides[1] = 1;
    reinterpret_cast<void (*)(F3 *, I8 *, I8 *, StridedMemRefType<float, 2> *,
                              F3 *)>(entry_)(&qm, &km, &vm, &mm, &om);
  } else {
    reinterpret_cast<void (*)(F3 *, I8 *, I8 *, F3 *)>(entry_)(&qm, &km, &vm,
                                                             &om);
  }
}

void CompiledKernel::runEngine(std::vector<float> &q, std::vector<uint8_t> &k,
                               std::vector<uint8_t> &v,
                               std::vector<uint16_t> &mask,
                               std::vector<float> &slopes,
                               std::vector<float> &sinks,
                               std::vector<float> &out,
                               std::vector<float> *lse) const {
  const int64_t nq = spec_.numQueries, h = spec_.queryHeads,
                d = spec_.headDim, n = spec_.numKeys, kvh = spec_.kvHeads;
  auto qm = view3(q, nq, h, d);
  auto om = view3(out, nq, h, d);
  auto km = view3(k, n, kvh, keyRowBytes_);
  auto vm = view3(v, n, kvh, valueRowBytes_);
  // Arguments in the order AttentionKernel.h gives: memref descriptors by
  // pointer through the C interface.
  std::vector<void *> args = {&qm, &km, &vm};
  StridedMemRefType<uint16_t, 2> mm;
  if (spec_.mask) {
    mm.basePtr = mm.data = mask.data();
    mm.offset = 0;
    mm.sizes[0] = nq;
    mm.sizes[1] = n;
    mm.strides[0] = n;
    mm.strides[1] = 1;
    args.push_back(&mm);
  }
  StridedMemRefType<float, 1> sl, sk;
  for (auto [on, vec, m] : {std::tuple{spec_.slopes, &slopes, &sl},
                            std::tuple{spec_.sinks, &sinks, &sk}})
    if (on) {
      m->basePtr = m->data = vec->data();
      m->offset = 0;
      m->sizes[0] = h;
      m->strides[0] = 1;
      args.push_back(m);
    }
  args.push_back(&om);
  StridedMemRefType<float, 2> lm;
  if (spec_.lse) {
    lse->assign(nq * h, NAN);
    lm.basePtr = lm.data = lse->data();
    lm.offset = 0;
    lm.sizes[0] = nq;
    lm.sizes[1] = h;
    lm.strides[0] = h;
    lm.strides[1] = 1;
    args.push_back(&lm);
  }
  switch (args.size()) {
  case 5:
    reinterpret_cast<void (*)(void *, void *, void *, void *, void *)>(entry_)(
        args[0], args[1], args[2], args[3], args[4]);
    break;
  case 6:
    reinterpret_cast<void (*)(void *, void *, void *, void *, void *, void *)>(
        entry_)(args[0], args[1], args[2], args[3], args[4], args[5]);
    break;
  case 7:
    reinterpret_cast<void (*)(void *, void *, void *, void *, void *, void *,
                              void *)>(entry_)(args[0], args[1], args[2],
                                               args[3], args[4], args[5],
                                               args[6]);
    break;
  case 8:
    reinterpret_cast<void (*)(void *, void *, void *, void *, void *, void *,
                              void *, void *)>(entry_)(
        args[0], args[1], args[2], args[3], args[4], args[5], args[6],
        args[7]);
    break;
  default:
    reinterpret_cast<void (*)(void *, void *, void *, void *)>(entry_)(
        args[0], args[1], args[2], args[3]);
  }
}

void CompiledKernel::runPaged(std::vector<float> &q,
                              std::vector<uint8_t> &kPool,
                              std::vector<uint8_t> &vPool, int64_t numPages,
                              std::vector<int32_t> &table, int64_t numTokens,
                              std::vector<float> &mask,
                              std::vector<float> &out) const {
  const int64_t nq = spec_.numQueries, h = spec_.queryHeads,
                d = spec_.headDim, ps = spec_.pageSize, kvh = spec_.kvHeads;
  auto qm = view3(q, nq, h, d);
  auto om = view3(out, nq, h, d);
  auto pool = [&](std::vector<uint8_t> &data, int64_t rowBytes) {
    StridedMemRefType<uint8_t, 4> m;
    m.basePtr = m.data = data.data();
    m.offset = 0;
    int64_t sizes[4] = {numPages, ps, kvh, rowBytes};
    for (int i = 3, stride = 1; i >= 0; stride *= int(sizes[i]), --i) {
      m.sizes[i] = sizes[i];
      m.strides[i] = stride;
    }
    return m;
  };
  auto km = pool(kPool, keyRowBytes_);
  auto vm = pool(vPool, valueRowBytes_);
  StridedMemRefType<int32_t, 1> tm;
  tm.basePtr = tm.data = table.data();
  tm.offset = 0;
  tm.sizes[0] = int64_t(table.size());
  tm.strides[0] = 1;
  using P4 = StridedMemRefType<uint8_t, 4>;
  using T1 = StridedMemRefType<int32_t, 1>;
  using F3 = StridedMemRefType<float, 3>;
  if (spec_.mask) {
    StridedMemRefType<float, 2> mm;
    mm.basePtr = mm.data = mask.data();
    mm.offset = 0;
    mm.sizes[0] = nq;
    mm.sizes[1] = numTokens;
    mm.strides[0] = numTokens;
    mm.strides[1] = 1;
    reinterpret_cast<void (*)(F3 *, P4 *, P4 *, T1 *, int64_t,
                              StridedMemRefType<float, 2> *, F3 *)>(entry_)(
        &qm, &km, &vm, &tm, numTokens, &mm, &om);
  } else {
    reinterpret_cast<void (*)(F3 *, P4 *, P4 *, T1 *, int64_t, F3 *)>(entry_)(
        &qm, &km, &vm, &tm, numTokens, &om);
  }
}

std::unique_ptr<MLIRContext> makeJitContext() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<mlir::tq::TQDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

KernelRunner::KernelRunner() : context_(makeJitContext()) {}

KernelRunner::~KernelRunner() = default;

std::function<LogicalResult(Diagnostic &)>
KernelRunner::collectInto(std::string &out) {
  return [&out](Diagnostic &diag) {
    llvm::raw_string_ostream os(out);
    os << diag << "\n";
    return success();
  };
}

OwningOpRef<ModuleOp>
KernelRunner::buildModule(const mlir::tq::AttentionKernelSpec &spec) {
  Location loc = UnknownLoc::get(context_.get());
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder(module->getBodyRegion());
  if (failed(mlir::tq::buildAttentionKernel(
          builder, loc, spec, [&] { return emitError(loc); })))
    return nullptr;
  return module;
}

std::unique_ptr<CompiledKernel>
KernelRunner::compile(const mlir::tq::AttentionKernelSpec &spec,
                      const mlir::tq::TQPipelineOptions &options,
                      std::string &error) {
  MLIRContext *ctx = context_.get();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(ctx, collectInto(diagnostics));
  OwningOpRef<ModuleOp> module = buildModule(spec);
  if (!module) {
    error = "kernel construction failed: " + diagnostics;
    return nullptr;
  }
  auto kernel = std::make_unique<CompiledKernel>();
  kernel->spec_ = spec;
  kernel->engine_ = jit(*module, options, spec.name, kernel->entry_,
                        diagnostics, error);
  if (!kernel->engine_)
    return nullptr;
  auto keyType = mlir::tq::CacheType::get(
      ctx, {spec.numKeys, int64_t(spec.kvHeads), int64_t(spec.headDim)},
      mlir::tq::FormatAttr::get(ctx, spec.keyFormat));
  auto valueType = mlir::tq::CacheType::get(
      ctx, {spec.numKeys, int64_t(spec.kvHeads), int64_t(spec.headDim)},
      mlir::tq::FormatAttr::get(ctx, spec.valueFormat));
  kernel->keyRowBytes_ = keyType.getRowBytes();
  kernel->valueRowBytes_ = valueType.getRowBytes();
  return kernel;
}

namespace {

/// f32 -> bf16, rounding to nearest even (NaNs stay NaN): what LLVM calls
/// `__truncsfbf2` for where the CPU lacks AVX512-BF16 (the dot paths'
/// portable lowering). The JIT does not find it in the process (libgcc
/// 12 has none), so the runner provides it.
extern "C" __bf16 tqTestTruncSfBf2(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t h =
      (u & 0x7fffffffu) > 0x7f800000u
          ? uint16_t((u >> 16) | 0x40u)
          : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return std::bit_cast<__bf16>(h);
}

llvm::orc::SymbolMap runtimeLibcalls(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  map[interner("__truncsfbf2")] = {
      llvm::orc::ExecutorAddr::fromPtr(&tqTestTruncSfBf2),
      llvm::JITSymbolFlags::Exported};
  return map;
}

} // namespace

std::unique_ptr<ExecutionEngine>
KernelRunner::jit(ModuleOp module, const mlir::tq::TQPipelineOptions &options,
                  const std::string &name, void *&entry,
                  std::string &diagnostics, std::string &error) {
  PassManager pm(context_.get());
  mlir::tq::buildTQToLLVMPipeline(pm, options);
  if (failed(pm.run(module))) {
    error = "pipeline failed: " + diagnostics;
    return nullptr;
  }
  // options.transformer is a function_ref: the function must outlive create().
  auto transformer = makeOptimizingTransformer(2, 0, nullptr);
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = transformer;
  auto engine = ExecutionEngine::create(module, engineOptions);
  if (!engine) {
    error = "JIT failed: " + llvm::toString(engine.takeError());
    return nullptr;
  }
  (*engine)->registerSymbols(runtimeLibcalls);
  auto symbol = (*engine)->lookup("_mlir_ciface_" + name);
  if (!symbol) {
    error = "entry point missing: " + llvm::toString(symbol.takeError());
    return nullptr;
  }
  entry = *symbol;
  return std::move(*engine);
}

void CompiledEncoder::run(std::vector<float> &rows,
                          std::vector<uint8_t> &out) const {
  const int64_t n = spec_.numRows, kvh = spec_.kvHeads, d = spec_.headDim;
  auto rm = view3(rows, n, kvh, d);
  auto om = view3(out, n, kvh, rowBytes_);
  reinterpret_cast<void (*)(StridedMemRefType<float, 3> *,
                            StridedMemRefType<uint8_t, 3> *)>(entry_)(&rm,
                                                                      &om);
}

std::unique_ptr<CompiledEncoder>
KernelRunner::compileEncoder(const mlir::tq::QuantizeKernelSpec &spec,
                             std::string &error) {
  MLIRContext *ctx = context_.get();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(ctx, collectInto(diagnostics));
  Location loc = UnknownLoc::get(ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder(module->getBodyRegion());
  if (failed(mlir::tq::buildQuantizeKernel(
          builder, loc, spec, [&] { return emitError(loc); }))) {
    error = "kernel construction failed: " + diagnostics;
    return nullptr;
  }
  auto encoder = std::make_unique<CompiledEncoder>();
  encoder->spec_ = spec;
  encoder->engine_ = jit(*module, mlir::tq::TQPipelineOptions(), spec.name,
                         encoder->entry_, diagnostics, error);
  if (!encoder->engine_)
    return nullptr;
  encoder->rowBytes_ =
      mlir::tq::CacheType::get(ctx,
                               {spec.numRows, int64_t(spec.kvHeads),
                                int64_t(spec.headDim)},
                               mlir::tq::FormatAttr::get(ctx, spec.format))
          .getRowBytes();
  return encoder;
}

std::optional<RotationCount>
KernelRunner::countRotations(const mlir::tq::AttentionKernelSpec &spec,
                             const mlir::tq::TQPipelineOptions &options,
                             std::string &error) {
  MLIRContext *ctx = context_.get();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(ctx, collectInto(diagnostics));
  OwningOpRef<ModuleOp> module = buildModule(spec);
  PassManager fusion(ctx);
  mlir::tq::buildTQFusionPipeline(fusion, options);
  if (!module || failed(fusion.run(*module))) {
    error = diagnostics;
    return std::nullopt;
  }
  RotationCount count;
  module->walk([&](mlir::tq::RotateOp op) {
    ++count.ops;
    int64_t rows = 1;
    for (int64_t s : cast<RankedTensorType>(op.getType()).getShape().drop_back())
      rows *= s;
    count.rows += rows;
  });
  return count;
}

} // namespace tq::test
