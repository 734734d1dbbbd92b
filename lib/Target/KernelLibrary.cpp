//===- KernelLibrary.cpp - Writing compiled kernel libraries --------------===//

#include "tq/Target/KernelLibrary.h"

#include "tq/Target/LLVMTools.h"

#include "tq/Conversion/TQToLoops/TQToLoops.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Pipelines/Pipelines.h"
#include "tq/Quant/Format.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVM/ROCDL/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/xxhash.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <memory>
#include <mutex>

using namespace mlir;
using namespace mlir::tq;

namespace {

/// A target machine for the requested CPU: "host" (this machine), an
/// LLVM CPU name, or a name with ISA features added ("x86-64-v3+avxvnni").
std::unique_ptr<llvm::TargetMachine> makeTargetMachine(const std::string &cpu,
                                                       std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string cpuName;
  std::string features;
  if (cpu == "host") {
    cpuName = llvm::sys::getHostCPUName().str();
    for (const auto &f : llvm::sys::getHostCPUFeatures())
      features += (features.empty() ? "" : ",") +
                  std::string(f.second ? "+" : "-") + f.first().str();
  } else {
    // LLVM would only warn about an unknown CPU or feature, then abort on
    // the first instruction the generic CPU lacks.
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(cpu).split(parts, '+');
    cpuName = parts.front().str();
    std::unique_ptr<llvm::MCSubtargetInfo> info(
        target->createMCSubtargetInfo(triple, "", ""));
    if (!info || !info->isCPUStringValid(cpuName)) {
      error = "unknown CPU '" + cpuName + "' for " + triple.str() +
              " (give an LLVM CPU name such as znver5, sapphirerapids or "
              "x86-64-v3, optionally with +feature..., or host)";
      return nullptr;
    }
    for (llvm::StringRef feature : llvm::drop_begin(parts)) {
      if (!llvm::any_of(info->getAllProcessorFeatures(),
                        [&](const llvm::SubtargetFeatureKV &kv) {
                          return feature == kv.Key;
                        })) {
        error = "unknown CPU feature '" + feature.str() + "' in '" + cpu +
                "' (LLVM's names, such as avxvnni or avx512bf16)";
        return nullptr;
      }
      features += (features.empty() ? "+" : ",+") + feature.str();
    }
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpuName, features, options, llvm::Reloc::PIC_));
  if (!tm)
    error = "cannot create a target machine for cpu '" + cpu + "'";
  return tm;
}

/// True where the target CPU has AVX-512F (which implies FMA and SSE4.1
/// in LLVM's feature model): the lowering's vectors are 512 bits wide.
bool hasAvx512(const llvm::TargetMachine &tm) {
  return tm.getMCSubtargetInfo()->checkFeatures("+avx512f");
}

/// True where the target CPU is one of AMD's Zen cores (LLVM's znver*),
/// whose measured choices differ from Intel's (bf16 pair sums, L2
/// prefetches, shifted index fields).
bool isAmdZen(const llvm::TargetMachine &tm) {
  return tm.getTargetCPU().starts_with("znver");
}

/// Lowers `module` with the tq pipelines, lets `annotate` add to the
/// lowered module, and writes its machine code to `objectPath`.
bool emitObject(MLIRContext &context, ModuleOp module,
                const TQPipelineOptions &pipeline, bool passManagerCLOptions,
                llvm::TargetMachine &tm, const std::string &objectPath,
                const std::string &name, function_ref<void(ModuleOp)> annotate,
                std::string &diagnostics, std::string &error) {
  PassManager pm(&context);
  buildTQToLLVMPipeline(pm, pipeline);
  if (passManagerCLOptions) {
    if (failed(applyPassManagerCLOptions(pm))) {
      error = "invalid pass manager options: " + diagnostics;
      return false;
    }
    applyDefaultTimingPassManagerCLOptions(pm);
  }
  if (failed(pm.run(module))) {
    error = "lowering failed: " + diagnostics;
    return false;
  }
  if (annotate)
    annotate(module);
  // On AVX-512 CPUs the lowering's vectors are 512 bits wide, but LLVM's
  // tuning for Intel's (icelake-server and later) prefers 256 and would
  // split each 512-bit operation the kernels do not spell as an intrinsic
  // into two ymm halves. Measured on Emerald Rapids: prefill 1.09x.
  if (hasAvx512(tm))
    module.walk([](LLVM::LLVMFuncOp func) {
      if (!func.isExternal())
        func.setPreferVectorWidth("512");
    });
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, name);
  if (!llvmModule) {
    error = "translation to LLVM IR failed: " + diagnostics;
    return false;
  }
  llvmModule->setTargetTriple(tm.getTargetTriple());
  llvmModule->setDataLayout(tm.createDataLayout());
  if (llvm::Error err = makeOptimizingTransformer(3, 0, &tm)(llvmModule.get())) {
    error = "LLVM optimisation failed: " + llvm::toString(std::move(err));
    return false;
  }
  std::error_code ec;
  llvm::raw_fd_ostream out(objectPath, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + objectPath + "': " + ec.message();
    return false;
  }
  llvm::legacy::PassManager codegen;
  if (tm.addPassesToEmitFile(codegen, out, nullptr,
                             llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return false;
  }
  codegen.run(*llvmModule);
  return true;
}

/// The centroid permutes the target CPU has, widest first ("none", the
/// select tree, last).
std::vector<std::string> centroidPermutesOf(const llvm::TargetMachine &tm) {
  const llvm::MCSubtargetInfo *sti = tm.getMCSubtargetInfo();
  std::vector<std::string> permutes;
  if (hasAvx512(tm))
    permutes.push_back("avx512");
  if (sti->checkFeatures("+avx2"))
    permutes.push_back("avx2");
  permutes.push_back("none");
  return permutes;
}

/// True where the target CPU has the byte ops of the int8 score
/// (vpdpbusd, vpshufb on 512 bits).
bool hasVnni(const llvm::TargetMachine &tm) {
  return tm.getMCSubtargetInfo()->checkFeatures("+avx512vnni,+avx512bw");
}

/// True where the target CPU has AVX512-VBMI as well (vpmultishiftqb,
/// vpermb): the token-lane score's field gathers.
bool hasVbmi(const llvm::TargetMachine &tm) {
  return hasVnni(tm) && tm.getMCSubtargetInfo()->checkFeatures("+avx512vbmi");
}

/// True where the target CPU has AVX-VNNI (VEX 256-bit vpdpbusd).
bool hasAvxVnni(const llvm::TargetMachine &tm) {
  return tm.getMCSubtargetInfo()->checkFeatures("+avxvnni,+avx2");
}

/// True where the target CPU has the integer dot paths' ops in some form:
/// AVX512-VNNI's, or AVX2's vpshufb, vpmaddubsw and vpmaddwd.
bool hasIntegerDots(const llvm::TargetMachine &tm) {
  return hasVnni(tm) || tm.getMCSubtargetInfo()->checkFeatures("+avx2");
}

/// True where LLVM keeps vpdpwssd whole on the target CPU (its
/// fast-dpwssd tuning: Zen 4 and 5); elsewhere it may split the
/// instruction into vpmaddwd and vpaddd.
bool hasFastDpwssd(const llvm::TargetMachine &tm) {
  return tm.getMCSubtargetInfo()->checkFeatures("+fast-dpwssd");
}

/// True where the target CPU has AMX's tiles and their bf16 products
/// (tdpbf16ps): the prefill's tile products.
bool hasAmx(const llvm::TargetMachine &tm) {
  return tm.getMCSubtargetInfo()->checkFeatures("+amx-tile,+amx-bf16");
}

/// AVX512-BF16 as well (vdpbf16ps).
bool hasBf16(const llvm::TargetMachine &tm) {
  return hasVnni(tm) &&
         tm.getMCSubtargetInfo()->checkFeatures("+avx512bf16");
}

/// True where rows of `format` at `dim` have blocks under 64 values
/// (FormatSpec::hasShortScaleBlocks: tq3_0).
bool hasShortScaleBlocks(const std::string &format, unsigned dim) {
  auto f = ::tq::quant::Format::get(format, dim);
  return f && f->spec().hasShortScaleBlocks();
}

/// The one-row weighted sum's accumulators: `requested`, or for 0 as many
/// as the CPU's vector registers allow with the rest of the loop live:
/// 32 with AVX-512 (32 registers), 16 otherwise. A decode kernel (`spec`)
/// takes 16 on AVX-512 too, where no accumulator spills: a row wider
/// than 16 vectors takes several passes over the tile's pairs, each
/// decoding its own chunks. Measured on Emerald Rapids, 2 threads over
/// flushed caches, 32/8 heads, d128 (docs/perf/cpu.md, session #23):
/// turbo2_0 20-23%, turbo4_0 17%, turbo3_0 3-9% faster than 32, polar4 3%
/// faster at 16K and 0-1.5% slower at 64K, tq3_0 level; at d256 x 4
/// (Gemma 3) 16 beat 32 by 7-9% (session #20).
int64_t accumulatorsFor(const llvm::TargetMachine &tm, int64_t requested,
                        const RuntimeKernelSpec *spec = nullptr) {
  if (requested > 0)
    return requested;
  if (!hasAvx512(tm) || spec)
    return 16;
  return 32;
}

/// Whether `spec` builds with the decode kernels' options (tile, splits).
bool isDecodeKind(const RuntimeKernelSpec &spec) {
  return spec.kind == RuntimeKernelKind::Decode ||
         spec.kind == RuntimeKernelKind::GgmlDecode;
}

/// The int8 decode score's lanes: `requested`, or for "auto" tokens where
/// the CPU has AVX-512 with VBMI (the fields gathered by vpmultishiftqb),
/// rows elsewhere. Measured on Emerald Rapids with head-major pools, 2
/// threads over flushed caches, 64K tokens, 32/8 heads, d128: turbo3_0
/// 8-11% faster, polar4 1-5%, turbo4_0 0-1% (docs/perf/cpu.md, session
/// #20); on token-major pools no faster (session #19). A decode kernel
/// (`spec`) whose keys have short scale blocks (tq3_0) takes blocks there:
/// the same scores, tq3_0 5-8% faster on Zen 4 (session #32); one whose
/// keys have a 2-bit plane under a 1-bit one (turbo3_0, polar3; tq3_0 by
/// block lanes) takes shifts on AMD's Zen CPUs, where vpmultishiftqb
/// shares the multiply pipes with the dots: the same scores, turbo3_0
/// 2-5% and tq3_0 1.5-7% faster on Zen 4 (2 threads, flushed), one-plane
/// formats level (session #34).
std::string scoreLanesFor(const llvm::TargetMachine &tm,
                          const std::string &requested,
                          const RuntimeKernelSpec *spec = nullptr) {
  if (requested != "auto")
    return requested;
  if (!hasAvx512(tm) || !hasVbmi(tm))
    return "rows";
  if (!spec || !isDecodeKind(*spec))
    return "tokens";
  if (isAmdZen(tm) && shiftLaneScorePlanes(spec->keyFormat, spec->headDim) == 2)
    return "shifts";
  if (hasShortScaleBlocks(spec->keyFormat, spec->headDim))
    return "blocks";
  return "tokens";
}

/// Whether the decode pair sum decodes a pair ahead: `requested` (on or
/// off), or for "auto" on where the CPU has AVX-512 and fast vpdpwssd
/// (LLVM's fast-dpwssd: Zen 4 and 5). Measured on Zen 4 (d128 4/1, 64K,
/// one thread): turbo3_0 2-5% and polar4 5% faster, bf16 and i16 alike;
/// code for CPUs without fast-dpwssd (Ice Lake's, where LLVM splits
/// vpdpwssd into vpmaddwd and vpaddd and the sums spill) and AVX2 code
/// (16 registers) were 30-60% slower run on the same Zen 4
/// (docs/perf/cpu.md, session #26).
std::string pairAheadFor(const llvm::TargetMachine &tm,
                         const std::string &requested) {
  if (requested != "auto")
    return requested;
  return hasAvx512(tm) && hasFastDpwssd(tm) ? "on" : "off";
}

/// Where the fused products prefetch the next tile's rows: `requested`
/// (l1 or l2), or for "auto" l2 on AMD's Zen CPUs with AVX-512 (Zen 4 and
/// 5), l1 elsewhere. Measured on Zen 4 (docs/perf/cpu.md, session #33):
/// with the caches flushed before each call, as a model's other layers
/// leave them, the L1 prefetches of a tile's K and V rows (more than its
/// 32 KB L1 holds) cost 3-10% against L2's; warm, the two are level.
/// Emerald Rapids measured no gain from L2 (session #19), so Intel keeps
/// l1.
std::string prefetchFor(const llvm::TargetMachine &tm,
                        const std::string &requested) {
  if (requested != "auto")
    return requested;
  return hasAvx512(tm) && isAmdZen(tm) ? "l2" : "l1";
}

/// Whether prefill kernels take AMX tile products: `requested` (on or
/// off), or for "auto" on where the CPU has AMX-BF16.
std::string amxFor(const llvm::TargetMachine &tm,
                   const std::string &requested) {
  if (requested != "auto")
    return requested;
  return hasAmx(tm) ? "on" : "off";
}

/// Linux gives a process AMX's tile data only when asked
/// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); until then the
/// first tile instruction faults. An object with AMX kernels asks when
/// its library is loaded, from a constructor of its own (asking again is
/// harmless). Each such kernel also exports `<name>_uses_amx`: a runtime
/// that finds it checks the grant before the first call (a refusal would
/// make the first tile instruction fault).
void addAmxPermissionRequest(ModuleOp module, const std::string &kernel) {
  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto i64 = b.getI64Type();
  auto syscall = module.lookupSymbol<LLVM::LLVMFuncOp>("syscall");
  if (!syscall)
    syscall = LLVM::LLVMFuncOp::create(
        b, loc, "syscall",
        LLVM::LLVMFunctionType::get(i64, {i64}, /*isVarArg=*/true));
  auto ctor = LLVM::LLVMFuncOp::create(
      b, loc, "tq_request_amx_tiles",
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {}),
      LLVM::Linkage::Internal);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ctor.addEntryBlock(b));
    auto constant = [&](int64_t v) -> Value {
      return LLVM::ConstantOp::create(b, loc, i64, v);
    };
    constexpr int64_t kArchPrctl = 158, kReqXcompPerm = 0x1023,
                      kXtileData = 18;
    LLVM::CallOp::create(
        b, loc, syscall,
        ValueRange{constant(kArchPrctl), constant(kReqXcompPerm),
                   constant(kXtileData)});
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
  LLVM::GlobalCtorsOp::create(
      b, loc, b.getArrayAttr({FlatSymbolRefAttr::get(ctor)}),
      b.getI32ArrayAttr({65535}), b.getArrayAttr({LLVM::ZeroAttr::get(ctx)}));
  LLVM::GlobalOp::create(b, loc, b.getI8Type(), /*isConstant=*/true,
                         LLVM::Linkage::External, kernel + "_uses_amx",
                         b.getI8IntegerAttr(1));
}

/// Whether the lowered `module` holds AMX tile instructions: the AMX
/// dialect lowers to calls of LLVM's x86 tile intrinsics by name
/// (`llvm.x86.tileloadd64.internal`, `llvm.x86.tdpbf16ps.internal`, ...;
/// the tile configuration comes later, from LLVM). A library built with
/// AMX on has kernels without them (row kernels, and attention kernels
/// whose formats the tiles do not take).
bool usesAmxTiles(ModuleOp module) {
  auto isTileIntrinsic = [](LLVM::CallIntrinsicOp call) {
    StringRef name = call.getIntrin();
    return name.starts_with("llvm.x86.tile") ||
           name.starts_with("llvm.x86.tdp");
  };
  return module
      .walk([&](LLVM::CallIntrinsicOp call) {
        return isTileIntrinsic(call) ? WalkResult::interrupt()
                                     : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The permute `options` ask for, or the widest the target CPU has.
std::string centroidPermuteFor(const llvm::TargetMachine &tm,
                               const KernelLibraryOptions &options) {
  if (!options.centroidPermute.empty())
    return options.centroidPermute;
  return centroidPermutesOf(tm).front();
}

/// The prefill tile of `options` (amx resolved): its own, or by path.
int64_t prefillTileFor(const KernelLibraryOptions &options) {
  if (options.prefillTileSize > 0)
    return options.prefillTileSize;
  return options.amx == "on" ? 128 : 64;
}

/// `options` with `spec`'s own knobs (options.kernelKnobs) applied.
KernelLibraryOptions optionsFor(const RuntimeKernelSpec &spec,
                                const KernelLibraryOptions &options) {
  KernelLibraryOptions own = options;
  auto it = options.kernelKnobs.find(spec.name());
  if (it == options.kernelKnobs.end())
    return own;
  for (const auto &[knob, value] : it->second) {
    int64_t n = 0;
    bool isInt = !llvm::StringRef(value).getAsInteger(10, n);
    if (knob == "tile_size" && isInt)
      (isDecodeKind(spec) ? own.decodeTileSize : own.prefillTileSize) = n;
    else if (knob == "splits" && isInt)
      own.decodeSplits = n;
    else if (knob == "max_unrolled_chunks" && isInt)
      own.maxUnrolledChunks = n;
    else if (knob == "score_rows" && isInt)
      own.scoreRows = n;
    else if (knob == "accumulators" && isInt)
      own.accumulators = n;
    else if (knob == "score_dot")
      own.scoreDot = value;
    else if (knob == "value_dot")
      own.valueDot = value;
    else if (knob == "score_lanes")
      own.scoreLanes = value;
    else if (knob == "pair_ahead")
      own.pairAhead = value;
    else if (knob == "prefetch")
      own.prefetch = value;
    else if (knob == "amx")
      own.amx = value;
    else if (knob == "lookup") {
      if (auto l = symbolizeLookupStrategy(value))
        own.lookup = *l;
    } else if (knob == "centroid_permute")
      own.centroidPermute = value;
  }
  return own;
}

/// Fills `pipeline` from the library options and the target machine.
void configurePipeline(TQPipelineOptions &pipeline,
                       const KernelLibraryOptions &options,
                       const llvm::TargetMachine &tm, bool decode) {
  pipeline.centroidPermute = centroidPermuteFor(tm, options);
  pipeline.tileSize =
      decode ? options.decodeTileSize : prefillTileFor(options);
  pipeline.lookup = options.lookup;
  pipeline.splits = decode ? options.decodeSplits : 1;
  pipeline.maxUnrolledChunks = options.maxUnrolledChunks;
  pipeline.scoreRows = options.scoreRows;
  // writeKernelLibrary resolved 0 (by the CPU) for every kernel.
  assert(options.accumulators > 0 && "accumulators resolved by the CPU");
  pipeline.accumulators = options.accumulators;
  pipeline.scoreDot = options.scoreDot;
  pipeline.valueDot = options.valueDot;
  pipeline.vnni = hasVnni(tm);
  pipeline.bf16 = hasBf16(tm);
  pipeline.vbmi = hasVbmi(tm);
  pipeline.scoreLanes = options.scoreLanes;
  pipeline.pairAhead = decode && options.pairAhead == "on";
  // writeKernelLibrary resolved auto (by the CPU); a knob is l1 or l2.
  pipeline.prefetch = options.prefetch;
  pipeline.amxTiles = !decode && options.amx == "on" && hasAmx(tm);
  // exp's FMA and floor as instructions: measured 2-3% faster decode and
  // 1% faster prefill on Emerald Rapids; on a Zen 3 (AVX2) no gain showed
  // (docs/perf/cpu.md), so AVX-512 targets only.
  pipeline.nativeFmaFloor = hasAvx512(tm);
  pipeline.avxVnni = hasAvxVnni(tm);
  // The int8 score's byte products are vpdpbusd where the lowering has
  // it; else AVX2's vpmaddubsw, exact only for level bytes below 128.
  pipeline.narrowLevels = !hasVnniByteDots(laneLookupIsa(pipeline));
  if (options.naive) {
    pipeline.hoistRotations = false;
    pipeline.fuseCodebook = false;
    pipeline.tileSize = 0;
  }
}

/// Builds and compiles one runtime kernel.
bool compileKernel(MLIRContext &context, const RuntimeKernelSpec &spec,
                   const KernelLibraryOptions &libraryOptions,
                   llvm::TargetMachine &tm, const std::string &objectPath,
                   std::string &error) {
  const KernelLibraryOptions options = optionsFor(spec, libraryOptions);
  if (!options.centroidPermute.empty()) {
    std::vector<std::string> permutes = centroidPermutesOf(tm);
    if (!llvm::is_contained(permutes, options.centroidPermute)) {
      error = "centroid permute '" + options.centroidPermute +
              "' is not available on this CPU (it has: " +
              llvm::join(permutes, ", ") + ")";
      return false;
    }
  }
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag << "\n";
    return success();
  });
  Location loc = UnknownLoc::get(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder(module->getBodyRegion());
  if (failed(buildRuntimeKernel(builder, loc, spec,
                                [&] { return emitError(loc); }))) {
    error = diagnostics;
    return false;
  }
  // The runtime checks a cache against the kernel's own description:
  // <name>_info (see kernelInfo).
  auto addInfo = [&](ModuleOp lowered) {
    SmallVector<int64_t> info = kernelInfo(spec);
    OpBuilder b(lowered.getBodyRegion());
    auto type = LLVM::LLVMArrayType::get(b.getI64Type(), info.size());
    LLVM::GlobalOp::create(
        b, loc, type, /*isConstant=*/true, LLVM::Linkage::External,
        spec.name() + "_info",
        DenseElementsAttr::get(
            RankedTensorType::get({int64_t(info.size())}, b.getI64Type()),
            ArrayRef<int64_t>(info)));
  };
  TQPipelineOptions pipeline;
  configurePipeline(pipeline, options, tm, isDecodeKind(spec));
  auto annotate = [&](ModuleOp lowered) {
    addInfo(lowered);
    if (pipeline.amxTiles && usesAmxTiles(lowered))
      addAmxPermissionRequest(lowered, spec.name());
  };
  return emitObject(context, *module, pipeline, options.passManagerCLOptions,
                    tm, objectPath, spec.name(), annotate, diagnostics, error);
}

llvm::json::Object describe(const RuntimeKernelSpec &spec,
                            const KernelLibraryOptions &options,
                            const llvm::TargetMachine &tm) {
  llvm::json::Object o;
  o["name"] = spec.name();
  o["entry"] = "_mlir_ciface_" + spec.name();
  o["kind"] = kindName(spec.kind);
  o["k_format"] = spec.keyFormat;
  o["head_dim"] = int64_t(spec.headDim);
  auto rowBytes = [&](const std::string &f, unsigned dim) -> int64_t {
    auto format = ::tq::quant::Format::get(f, dim);
    return format ? int64_t(format->rowBytes()) : -1;
  };
  o["k_row_bytes"] = rowBytes(spec.keyFormat, spec.headDim);
  if (!isAttentionKind(spec.kind))
    o["centred"] = spec.centred;
  if (isAttentionKind(spec.kind)) {
    o["v_format"] = spec.valueFormat;
    o["v_head_dim"] = int64_t(spec.vDim());
    o["v_row_bytes"] = rowBytes(spec.valueFormat, spec.vDim());
    o["group"] = int64_t(spec.group);
    o["causal"] = spec.causal;
    o["window"] = spec.window;
    o["softcap"] = double(spec.softcap);
    // The knob values the kernel was built with (see Tuning.h).
    llvm::json::Object knobs;
    for (const auto &[knob, value] : effectiveKnobs(
             spec, options, centroidPermuteFor(tm, optionsFor(spec, options))))
      knobs[knob] = value;
    o["knobs"] = std::move(knobs);
  }
  // One call per (sequence, kv head) (ggml kernels: per stream, kv head
  // and block of query rows; row kernels: any number of rows); no
  // workspace beyond what the kernel allocates itself.
  if (isAttentionKind(spec.kind))
    o["grid"] = llvm::json::Array{"sequence", "kv_head"};
  else
    o["grid"] = llvm::json::Array{};
  o["workspace_bytes"] = 0;
  return o;
}

void writeHeader(llvm::raw_ostream &os,
                 const std::vector<RuntimeKernelSpec> &specs) {
  os << "/* Generated by tq-aot: entry points of this kernel library.\n"
        " * Buffers are MLIR strided memref descriptors; see "
        "docs/runtime.md. */\n"
        "#ifndef TQ_KERNELS_H\n#define TQ_KERNELS_H\n\n"
        "#include <stdint.h>\n\n"
        "#ifndef TQ_MEMREF_DESCRIPTORS\n#define TQ_MEMREF_DESCRIPTORS\n";
  for (int rank : {1, 3, 4})
    os << "typedef struct { void *allocated; void *aligned; int64_t offset; "
          "int64_t sizes["
       << rank << "]; int64_t strides[" << rank << "]; } tq_memref" << rank
       << ";\n";
  os << "#endif\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  for (int rank : {2})
    os << "#ifndef TQ_MEMREF2_DESCRIPTOR\n#define TQ_MEMREF2_DESCRIPTOR\n"
          "typedef struct { void *allocated; void *aligned; int64_t offset; "
          "int64_t sizes["
       << rank << "]; int64_t strides[" << rank << "]; } tq_memref" << rank
       << ";\n#endif\n";
  for (const RuntimeKernelSpec &spec : specs) {
    os << "void _mlir_ciface_" << spec.name();
    switch (spec.kind) {
    case RuntimeKernelKind::Append:
      os << "(tq_memref3 *rows, tq_memref4 *pool, tq_memref1 *table, "
            "int64_t start"
         << (spec.centred ? ", tq_memref1 *centre" : "") << ");\n";
      break;
    case RuntimeKernelKind::Dequantize:
      os << "(tq_memref3 *rows, tq_memref3 *out"
         << (spec.centred ? ", tq_memref1 *centre" : "") << ");\n";
      break;
    case RuntimeKernelKind::Decode:
    case RuntimeKernelKind::Prefill:
      os << "(tq_memref3 *q, tq_memref4 *k, tq_memref4 *v, tq_memref1 "
            "*table, int64_t tokens, float scale, tq_memref3 *out"
         << (spec.kind == RuntimeKernelKind::Decode ? ", tq_memref2 *lse"
                                                    : "")
         << ");\n";
      break;
    case RuntimeKernelKind::GgmlDecode:
    case RuntimeKernelKind::GgmlPrefill:
      os << "(tq_memref3 *q, tq_memref4 *k, tq_memref4 *v, tq_memref1 "
            "*table, int64_t tokens, float scale, tq_memref2 *mask, "
            "tq_memref1 *slopes, tq_memref1 *sinks, tq_memref3 *out"
         << (spec.kind == RuntimeKernelKind::GgmlDecode ? ", tq_memref2 *lse"
                                                        : "")
         << ");\n";
      break;
    }
  }
  os << "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* TQ_KERNELS_H */\n";
}

} // namespace

SmallVector<int64_t> mlir::tq::kernelInfo(const RuntimeKernelSpec &spec) {
  auto rowBytes = [&](const std::string &f, unsigned dim) -> int64_t {
    auto format = ::tq::quant::Format::get(f, dim);
    return format ? int64_t(format->rowBytes()) : 0;
  };
  // The version is that of the kernel's signature: ggml decode kernels
  // gained their %lse output in version 2, runtime decode kernels in 3.
  int64_t version = 1;
  if (spec.kind == RuntimeKernelKind::GgmlDecode)
    version = 2;
  else if (spec.kind == RuntimeKernelKind::Decode)
    version = 3;
  return {version,
          int64_t(spec.kind),
          int64_t(spec.headDim),
          int64_t(spec.group),
          rowBytes(spec.keyFormat, spec.headDim),
          isAttentionKind(spec.kind)
              ? rowBytes(spec.valueFormat, spec.vDim())
              : 0,
          spec.causal ? 1 : 0,
          spec.window};
}

std::unique_ptr<MLIRContext> mlir::tq::createKernelCompilerContext() {
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<TQDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // The GPU targets: gpu-module-to-binary serialises through these.
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerROCDLDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  ROCDL::registerROCDLTargetInterfaceExternalModels(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

namespace {
/// An entry point of a user-supplied IR module, described from its lowered
/// C interface.
struct InputEntry {
  std::string name;
  std::vector<std::string> cTypes; // C parameter types, in order
};

std::string cTypeOf(Type type) {
  if (isa<LLVM::LLVMPointerType>(type))
    return "void *";
  if (type.isInteger(64))
    return "int64_t";
  if (type.isInteger(32))
    return "int32_t";
  if (type.isF32())
    return "float";
  if (type.isF64())
    return "double";
  return "/* unsupported */ void *";
}

/// Lowers one input module; records its public functions' C interfaces.
bool compileInput(MLIRContext &context, ModuleOp input,
                  const KernelLibraryOptions &options, llvm::TargetMachine &tm,
                  const std::string &objectPath, const std::string &name,
                  std::vector<InputEntry> &entries, std::string &error) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag << "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = cast<ModuleOp>(input->clone());
  std::vector<std::string> publicFuncs;
  module->walk([&](func::FuncOp f) {
    if (f.isPublic() && !f.isDeclaration()) {
      f->setAttr("llvm.emit_c_interface", UnitAttr::get(&context));
      publicFuncs.push_back(f.getName().str());
    }
  });
  if (publicFuncs.empty()) {
    error = "has no public function to compile";
    return false;
  }
  auto record = [&](ModuleOp lowered) {
    for (const std::string &f : publicFuncs)
      if (auto wrapper =
              lowered.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_" + f)) {
        InputEntry e{f, {}};
        for (Type t : wrapper.getFunctionType().getParams())
          e.cTypes.push_back(cTypeOf(t));
        entries.push_back(std::move(e));
      }
  };
  TQPipelineOptions pipeline;
  configurePipeline(pipeline, options, tm, /*decode=*/false);
  return emitObject(context, *module, pipeline, options.passManagerCLOptions,
                    tm, objectPath, name, record, diagnostics, error);
}
} // namespace

namespace {

/// Compiles specs[i] to objects[i] on `options.jobs` threads, which take
/// the specs in order. One job compiles in `context` with `tm`; several
/// give every thread a context and target machine of its own (a context's
/// diagnostic handlers are shared by all its threads). Progress is
/// reported in spec order. The error reported is the first failing spec's
/// in spec order, whatever order the threads finish in; after a failure
/// no further kernel starts.
bool compileKernels(MLIRContext &context,
                    const std::vector<RuntimeKernelSpec> &specs,
                    ArrayRef<std::string> objects,
                    const KernelLibraryOptions &options,
                    llvm::TargetMachine &tm, size_t firstIndex, size_t total,
                    const KernelProgress &progress, std::string &error) {
  const size_t jobs = std::min<size_t>(
      llvm::hardware_concurrency(options.jobs).compute_thread_count(),
      specs.size());
  std::mutex mutex; // guards next, failed, errors and the progress calls
  size_t next = 0;
  bool failed = false;
  std::vector<std::string> errors(specs.size());
  // Compiles the next spec until none is left or one has failed.
  auto work = [&](MLIRContext &ctx, llvm::TargetMachine &machine) {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (failed || next == specs.size())
          return;
        i = next++;
        if (progress)
          progress(firstIndex + i, total, specs[i].name());
      }
      std::string why;
      if (!compileKernel(ctx, specs[i], options, machine, objects[i], why)) {
        std::lock_guard<std::mutex> lock(mutex);
        errors[i] = specs[i].name() + ": " + why;
        failed = true;
      }
    }
  };
  std::string setupError;
  if (jobs <= 1) {
    work(context, tm);
  } else {
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency(jobs));
    for (size_t j = 0; j < jobs; ++j)
      pool.async([&] {
        std::unique_ptr<MLIRContext> own = createKernelCompilerContext();
        own->disableMultithreading();
        std::string why;
        std::unique_ptr<llvm::TargetMachine> ownTm =
            makeTargetMachine(options.cpu, why);
        if (!ownTm) {
          std::lock_guard<std::mutex> lock(mutex);
          setupError = why;
          failed = true;
          return;
        }
        work(*own, *ownTm);
      });
    pool.wait();
  }
  for (const std::string &e : errors)
    if (!e.empty()) {
      error = e;
      return false;
    }
  error = setupError;
  return setupError.empty();
}

} // namespace

bool mlir::tq::writeKernelLibrary(MLIRContext &context,
                                  const std::vector<RuntimeKernelSpec> &specs,
                                  const KernelLibraryOptions &libraryOptions,
                                  const KernelProgress &progress,
                                  std::string &error,
                                  ArrayRef<ModuleOp> inputs) {
  if (specs.empty() && inputs.empty()) {
    error = "no kernels to compile";
    return false;
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(
          libraryOptions.outputDir + "/obj")) {
    error = "cannot create '" + libraryOptions.outputDir +
            "': " + ec.message();
    return false;
  }
  std::unique_ptr<llvm::TargetMachine> tm =
      makeTargetMachine(libraryOptions.cpu, error);
  if (!tm)
    return false;
  // Choices left to the CPU, made once (kernels.json records them).
  KernelLibraryOptions options = libraryOptions;
  const bool accumulatorsByShape = options.accumulators == 0;
  options.accumulators = accumulatorsFor(*tm, options.accumulators);
  options.scoreLanes = scoreLanesFor(*tm, options.scoreLanes);
  options.pairAhead = pairAheadFor(*tm, options.pairAhead);
  options.prefetch = prefetchFor(*tm, options.prefetch);
  options.amx = amxFor(*tm, options.amx);
  if (options.amx == "on" && !hasAmx(*tm)) {
    error = "amx=on needs a CPU with AMX tiles and AMX-BF16 (sapphirerapids "
            "or later), not '" + libraryOptions.cpu + "'";
    return false;
  }
  // A decode kernel whose shape wants other accumulators than the
  // library's default gets them as its own knob (unless it has one).
  if (accumulatorsByShape)
    for (const RuntimeKernelSpec &spec : specs) {
      if (!isAttentionKind(spec.kind) || !isDecodeKind(spec))
        continue;
      const int64_t own = accumulatorsFor(*tm, 0, &spec);
      if (own == options.accumulators)
        continue;
      KnobValues &knobs = options.kernelKnobs[spec.name()];
      knobs.try_emplace("accumulators", std::to_string(own));
    }

  // A decode kernel whose keys want other lanes than the library's
  // default (tq3_0's blocks, shifts on Zen) gets them as its own knob
  // (lanes of the int8 score: none without it), whether the library or
  // the kernel's own knob asks for that score.
  for (const RuntimeKernelSpec &spec : specs) {
    if (!isAttentionKind(spec.kind) ||
        optionsFor(spec, options).scoreDot != "i8")
      continue;
    const std::string own =
        scoreLanesFor(*tm, libraryOptions.scoreLanes, &spec);
    if (own != options.scoreLanes)
      options.kernelKnobs[spec.name()].try_emplace("score_lanes", own);
  }

  // Keys of blocks shorter than 64 (tq3_0) take the int8 score by token
  // lanes only (one query row); elsewhere the lowering keeps f32, which
  // their knobs then say (unless a knob of their own asked for i8).
  for (const RuntimeKernelSpec &spec : specs) {
    const KernelLibraryOptions own = optionsFor(spec, options);
    if (!isAttentionKind(spec.kind) || own.scoreDot != "i8" ||
        (isDecodeKind(spec) && own.scoreLanes != "rows"))
      continue;
    if (hasShortScaleBlocks(spec.keyFormat, spec.headDim))
      options.kernelKnobs[spec.name()].try_emplace("score_dot", "f32");
  }
  // Values of blocks shorter than 64 (tq3_0) take the pair sums only
  // with AVX-512: its 64-lane chunks span two blocks in one register;
  // with AVX2 the sums were slower than f32 (docs/perf/cpu.md, session
  // #21), so such kernels keep f32 values there (unless they have a knob).
  if (options.valueDot != "f32" && !hasAvx512(*tm))
    for (const RuntimeKernelSpec &spec : specs) {
      if (!isAttentionKind(spec.kind))
        continue;
      if (hasShortScaleBlocks(spec.valueFormat, spec.vDim()))
        options.kernelKnobs[spec.name()].try_emplace("value_dot", "f32");
    }

  std::vector<std::string> objects;
  llvm::json::Array entries;
  const size_t total = specs.size() + inputs.size();
  std::vector<InputEntry> inputEntries;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "input" + std::to_string(i);
    if (progress)
      progress(i, total, name);
    std::string object = options.outputDir + "/obj/" + name + ".o";
    std::string why;
    size_t before = inputEntries.size();
    if (!compileInput(context, inputs[i], options, *tm, object, name,
                      inputEntries, why)) {
      error = "input " + std::to_string(i) + ": " + why;
      return false;
    }
    objects.push_back(object);
    for (size_t e = before; e < inputEntries.size(); ++e) {
      llvm::json::Object o;
      o["name"] = inputEntries[e].name;
      o["entry"] = "_mlir_ciface_" + inputEntries[e].name;
      o["kind"] = "ir";
      o["input"] = int64_t(i);
      entries.push_back(std::move(o));
    }
  }
  std::vector<std::string> specObjects;
  for (const RuntimeKernelSpec &spec : specs)
    specObjects.push_back(options.outputDir + "/obj/" + spec.name() + ".o");
  if (!compileKernels(context, specs, specObjects, options, *tm,
                      inputs.size(), total, progress, error))
    return false;
  for (size_t i = 0; i < specs.size(); ++i) {
    objects.push_back(specObjects[i]);
    entries.push_back(describe(specs[i], options, *tm));
  }

  // Link the objects into the shared library the runtime loads.
  // Any C compiler driver links a shared library: this LLVM's clang first.
  StringRef driver = options.linker;
  if (!findLLVMTool(driver))
    driver = "cc";
  std::string library = options.outputDir + "/" + options.libraryName;
  SmallVector<StringRef> args = {"-shared", "-o", library};
  for (const std::string &o : objects)
    args.push_back(o);
  args.push_back("-lm");
  std::string linkError;
  if (!runLLVMTool(driver, args, linkError)) {
    error = "linking " + library + " failed: " + linkError;
    return false;
  }

  llvm::json::Object metadata;
  metadata["format_version"] = 1;
  metadata["target"] = "cpu";
  metadata["cpu"] = options.cpu == "host"
                        ? llvm::sys::getHostCPUName().str()
                        : options.cpu;
  metadata["triple"] = tm->getTargetTriple().str();
  metadata["library"] = options.libraryName;
  metadata["kernels"] = std::move(entries);
  std::error_code ec;
  llvm::raw_fd_ostream json(options.outputDir + "/kernels.json", ec);
  if (ec) {
    error = "cannot write kernels.json: " + ec.message();
    return false;
  }
  json << llvm::formatv("{0:2}", llvm::json::Value(std::move(metadata)))
       << "\n";
  llvm::raw_fd_ostream header(options.outputDir + "/tq_kernels.h", ec);
  if (ec) {
    error = "cannot write tq_kernels.h: " + ec.message();
    return false;
  }
  writeHeader(header, specs);
  if (!inputEntries.empty()) {
    header << "\n/* Entry points of the IR given with --input: memref "
              "arguments and results\n * are pointers to descriptors "
              "(results first), as MLIR's C interface\n * defines them. */\n"
              "#ifdef __cplusplus\nextern \"C\" {\n#endif\n";
    for (const InputEntry &e : inputEntries) {
      header << "void _mlir_ciface_" << e.name << "(";
      for (size_t a = 0; a < e.cTypes.size(); ++a)
        header << (a ? ", " : "") << e.cTypes[a];
      header << ");\n";
    }
    header << "#ifdef __cplusplus\n}\n#endif\n";
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Knobs (Tuning.h)
//===----------------------------------------------------------------------===//

namespace {

/// The most vector chunks (values and QJL signs) of a row of `format` at
/// `dim` as the fused products visit it (FusedTileProducts'
/// fusedChunkLanes: 16 lanes where they divide the padded width, else 8,
/// else the whole row).
int64_t rowChunks(const std::string &format, unsigned dim) {
  auto f = ::tq::quant::Format::get(format, dim);
  if (!f)
    return 0;
  const int64_t width = f->paddedDim();
  int64_t lanes = width;
  for (int64_t l : {16, 8})
    if (width % l == 0) {
      lanes = l;
      break;
    }
  int64_t signs = f->spec().qjl ? int64_t(f->spec().qjl->rows()) : 0;
  return width / lanes + (signs % lanes == 0 ? signs / lanes : 0);
}

bool hasCodebook(const std::string &format, unsigned dim) {
  auto f = ::tq::quant::Format::get(format, dim);
  return f && f->spec().codebook.has_value();
}

/// True where tq-lower-to-loops's score-dot=i8 and value-dot=bf16|i16
/// apply to rows of `format` (FormatSpec::isScaledCodesRow).
bool hasScaledCodes(const std::string &format, unsigned dim) {
  auto f = ::tq::quant::Format::get(format, dim);
  return f && f->spec().isScaledCodesRow();
}

/// The shortest period tq-lower-to-loops rolls (FusedTileProducts'
/// kMinPeriodChunks): rows of at most this many chunks never loop.
constexpr int64_t kMinPeriodChunks = 8;

} // namespace

bool mlir::tq::kernelKnobs(const RuntimeKernelSpec &spec,
                           const std::string &cpu, std::vector<KnobInfo> &knobs,
                           std::string &error) {
  knobs.clear();
  std::unique_ptr<llvm::TargetMachine> tm = makeTargetMachine(cpu, error);
  if (!tm)
    return false;
  if (!isAttentionKind(spec.kind))
    return true; // row kernels: nothing to choose
  const bool decode = isDecodeKind(spec);
  KernelLibraryOptions defaults;
  auto str = [](int64_t v) { return std::to_string(v); };

  KnobInfo tile;
  tile.name = "tile_size";
  tile.description = "tokens per KV tile of the flash loop";
  tile.legal = "integer >= 1";
  tile.defaultValue = str(decode ? defaults.decodeTileSize
                                 : prefillTileFor(defaults));
  tile.values = {tile.defaultValue};
  for (int64_t v : decode ? std::vector<int64_t>{64, 128, 256, 1024}
                          : std::vector<int64_t>{16, 32, 128, 256})
    tile.values.push_back(str(v));
  knobs.push_back(tile);

  if (decode) {
    KnobInfo splits;
    splits.name = "splits";
    splits.description = "split-KV chunks of the context, merged by "
                         "log-sum-exp inside the kernel";
    splits.legal = "integer >= 1";
    splits.defaultValue = str(defaults.decodeSplits);
    splits.values = {splits.defaultValue, "1", "2", "8", "16"};
    knobs.push_back(splits);
  }

  const bool codebook = hasCodebook(spec.keyFormat, spec.headDim) ||
                        hasCodebook(spec.valueFormat, spec.vDim());
  KnobInfo lookup;
  lookup.name = "lookup";
  lookup.description =
      "centroid lookup of the fused products: tile (each KV row decoded "
      "once in registers for the GQA group), select (codebook in "
      "registers), lut (per-query table; the same as select for formats "
      "without a codebook)";
  lookup.legal = "tile, select, lut";
  lookup.defaultValue = stringifyLookupStrategy(defaults.lookup).str();
  lookup.values = {"tile", "select"};
  if (codebook)
    lookup.values.push_back("lut");
  knobs.push_back(lookup);

  const int64_t chunks = std::max(rowChunks(spec.keyFormat, spec.headDim),
                                  rowChunks(spec.valueFormat, spec.vDim()));
  if (chunks > kMinPeriodChunks) {
    KnobInfo unrolled;
    unrolled.name = "max_unrolled_chunks";
    unrolled.description =
        "rows of more vector chunks (values and QJL signs; " + str(chunks) +
        " here) are visited by decode periods, a loop with one period "
        "unrolled, instead of unrolled whole";
    unrolled.legal = "integer >= 0";
    unrolled.defaultValue = str(defaults.maxUnrolledChunks);
    unrolled.values = {unrolled.defaultValue,
                       chunks > defaults.maxUnrolledChunks ? str(chunks)
                                                           : "0"};
    unrolled.onlyWith = "lookup=tile";
    knobs.push_back(unrolled);
  }

  // The fused products' register use (tile lookup only).
  KnobInfo rows;
  rows.name = "score_rows";
  rows.description = "at most this many KV rows per step of the fused score "
                     "(their chains share one horizontal-sum tree, which "
                     "also bounds the step; more: more independent chains)";
  rows.legal = "integer >= 1";
  rows.defaultValue = str(defaults.scoreRows);
  rows.values = {rows.defaultValue, "1", "2", "8"};
  rows.onlyWith = "lookup=tile";
  knobs.push_back(rows);
  if (decode) {
    KnobInfo accumulators;
    accumulators.name = "accumulators";
    accumulators.description =
        "vector accumulators of the one-row weighted sum per token loop "
        "(more: fewer passes over the rows, more register pressure)";
    accumulators.legal = "integer >= 1";
    accumulators.defaultValue =
        str(accumulatorsFor(*tm, defaults.accumulators, &spec));
    accumulators.values = {accumulators.defaultValue};
    for (const char *v : {"8", "16", "24", "32"})
      if (v != accumulators.defaultValue)
        accumulators.values.push_back(v);
    accumulators.onlyWith = "lookup=tile";
    knobs.push_back(accumulators);
  }

  if (hasIntegerDots(*tm) && hasScaledCodes(spec.keyFormat, spec.headDim)) {
    KnobInfo dot;
    dot.name = "score_dot";
    dot.description =
        "dot products of the fused score: f32 (decoded keys times the f32 "
        "query) or i8 (codebook levels as bytes times the query quantised "
        "to int8: vpdpbusd with AVX512-VNNI and centroid_permute=avx512 "
        "or with AVX-VNNI and centroid_permute=avx2, else 7-bit levels "
        "through AVX2's vpmaddubsw). i8 is lossy (bounded against "
        "the format's own error), so it is tuned only where asked for";
    dot.legal = "f32, i8";
    dot.defaultValue = defaults.scoreDot;
    // i8 changes results (within the accuracy contract of
    // docs/compiler.md): the tuner tries it only where asked to.
    dot.values = {dot.defaultValue};
    dot.onlyWith = "lookup=tile";
    knobs.push_back(dot);
  }

  if (decode && hasIntegerDots(*tm) &&
      hasScaledCodes(spec.keyFormat, spec.headDim)) {
    KnobInfo lanes;
    lanes.name = "score_lanes";
    lanes.description =
        "lanes of the int8 score (score_dot=i8) with one query row: rows "
        "(a vector per chunk of a row, summed by a shuffle tree) or tokens "
        "(four tokens a vector, each lane part of one token's score, the "
        "packed fields gathered by vpmultishiftqb where the CPU has "
        "AVX512-VBMI, else by shifts) or blocks (token lanes, and rows of "
        "short scale blocks, tq3_0's, hold four blocks' sums in a token's "
        "lanes) or shifts (token lanes, the fields of rows of one index "
        "plane or a 2-bit plane under a 1-bit one moved by whole-vector "
        "shifts instead of vpmultishiftqb). Formats whose planes do not "
        "fit token lanes keep rows. The scores are the same bit for bit, "
        "so the tuner tries tokens (and blocks for short blocks, shifts "
        "where they apply) where the CPU has AVX512-VBMI";
    lanes.legal = "rows, tokens, blocks, shifts";
    lanes.defaultValue = scoreLanesFor(*tm, defaults.scoreLanes, &spec);
    lanes.values = {lanes.defaultValue};
    auto offer = [&](const char *value) {
      if (!llvm::is_contained(lanes.values, value))
        lanes.values.push_back(value);
    };
    if (hasVbmi(*tm)) {
      offer("tokens");
      if (hasShortScaleBlocks(spec.keyFormat, spec.headDim))
        offer("blocks");
      if (shiftLaneScorePlanes(spec.keyFormat, spec.headDim))
        offer("shifts");
    }
    lanes.onlyWith = "score_dot=i8";
    knobs.push_back(lanes);
  }

  if (hasIntegerDots(*tm) &&
      hasScaledCodes(spec.valueFormat, spec.headDim)) {
    KnobInfo dot;
    dot.name = "value_dot";
    dot.description =
        "multiply-adds of the weighted sum: f32 (decoded values "
        "times each head's weight), i16 (int16 levels times fixed-point "
        "weights, two tokens per vpdpwssd with AVX512-VNNI, per vpmaddwd "
        "with AVX2) or, where the CPU has AVX512-BF16, bf16 (bf16 "
        "centroids and weights, two tokens per vdpbf16ps); the "
        "instructions need centroid_permute=avx512 (VNNI, BF16) or avx2. "
        "i16 and bf16 are lossy (bounded against the format's own error), "
        "so they are tuned only where asked for";
    dot.legal = hasBf16(*tm) ? "f32, bf16, i16" : "f32, i16";
    dot.defaultValue = defaults.valueDot;
    dot.values = {dot.defaultValue};
    dot.onlyWith = "lookup=tile";
    knobs.push_back(dot);
  }

  if (decode && hasIntegerDots(*tm) &&
      hasScaledCodes(spec.valueFormat, spec.headDim)) {
    KnobInfo ahead;
    ahead.name = "pair_ahead";
    ahead.description =
        "with value_dot=bf16 or i16 and one query row, the pair weighted "
        "sum decodes the next token pair while its dots take the current "
        "pair's words (on), or each pair before its dots (off); the same "
        "sums. On needs a chunk's words more in registers: measured "
        "faster on Zen 4, slower where vpdpwssd splits (no fast-dpwssd) "
        "or with AVX2's 16 registers, so the tuner tries it on AVX-512";
    ahead.legal = "on, off";
    ahead.defaultValue = pairAheadFor(*tm, defaults.pairAhead);
    ahead.values = {ahead.defaultValue};
    if (hasAvx512(*tm))
      ahead.values.push_back(ahead.defaultValue == "on" ? "off" : "on");
    knobs.push_back(ahead);
  }

  KnobInfo prefetch;
  prefetch.name = "prefetch";
  prefetch.description =
      "where the fused products prefetch the next tile's rows: l1 "
      "(prefetcht0) or l2 (prefetcht1); the same results. A tile's K and "
      "V rows outgrow the L1 while the tile before them is read: l2 "
      "measured faster on Zen 4 with flushed caches, level on Emerald "
      "Rapids, so the tuner tries both on AVX-512";
  prefetch.legal = "l1, l2";
  prefetch.defaultValue = prefetchFor(*tm, defaults.prefetch);
  prefetch.values = {prefetch.defaultValue};
  if (hasAvx512(*tm))
    prefetch.values.push_back(prefetch.defaultValue == "l1" ? "l2" : "l1");
  prefetch.onlyWith = "lookup=tile";
  knobs.push_back(prefetch);

  if (!decode && hasAmx(*tm)) {
    KnobInfo amx;
    amx.name = "amx";
    amx.description =
        "several query rows: the score and the weighted sum as AMX-BF16 "
        "tile products (tdpbf16ps over queries, keys, weights and values "
        "written once per tile as bf16; formats without QJL whose padded "
        "dim is a multiple of 32) or the vector products (off). bf16 "
        "operands are lossy (bounded against the format's own error), so "
        "it is tuned only where asked for";
    amx.legal = "on, off";
    amx.defaultValue = amxFor(*tm, defaults.amx);
    amx.values = {amx.defaultValue};
    amx.onlyWith = "lookup=tile";
    knobs.push_back(amx);
  }

  std::vector<std::string> permutes = centroidPermutesOf(*tm);
  if (codebook && permutes.size() > 1) {
    KnobInfo permute;
    permute.name = "centroid_permute";
    permute.description = "register permute of the centroid lookup in "
                          "vector row decoding (none: a select tree); "
                          "avx2's vpermps holds 8 levels, avx512's 16";
    permute.legal = llvm::join(permutes, ", ");
    permute.values = permutes;
    permute.defaultValue = permutes.front();
    knobs.push_back(permute);
  }
  return true;
}

bool mlir::tq::checkKnobValues(const RuntimeKernelSpec &spec,
                               const KnobValues &values,
                               const std::vector<KnobInfo> &knobs,
                               std::string &error) {
  for (const auto &[name, value] : values) {
    const KnobInfo *knob = nullptr;
    for (const KnobInfo &k : knobs)
      if (k.name == name)
        knob = &k;
    if (!knob) {
      std::vector<std::string> names;
      for (const KnobInfo &k : knobs)
        names.push_back(k.name);
      error = spec.name() + ": no knob '" + name + "' (its knobs: " +
              (names.empty() ? "none" : llvm::join(names, ", ")) + ")";
      return false;
    }
    bool ok;
    if (knob->legal.starts_with("integer")) {
      int64_t n = 0;
      const int64_t min = knob->legal == "integer >= 0" ? 0 : 1;
      ok = !llvm::StringRef(value).getAsInteger(10, n) && n >= min &&
           n <= (int64_t(1) << 30);
    } else {
      ok = llvm::is_contained(llvm::split(knob->legal, ", "), value);
    }
    if (!ok) {
      error = spec.name() + ": knob " + name + " takes " + knob->legal +
              ", got '" + value + "'";
      return false;
    }
  }
  return true;
}

bool mlir::tq::setKernelKnobs(const RuntimeKernelSpec &spec,
                              const KnobValues &values,
                              KernelLibraryOptions &options,
                              std::string &error) {
  std::vector<KnobInfo> knobs;
  if (!kernelKnobs(spec, options.cpu, knobs, error) ||
      !checkKnobValues(spec, values, knobs, error))
    return false;
  options.kernelKnobs[spec.name()] = values;
  return true;
}

KnobValues mlir::tq::effectiveKnobs(const RuntimeKernelSpec &spec,
                                    const KernelLibraryOptions &libraryOptions,
                                    const std::string &permute) {
  KnobValues values;
  if (!isAttentionKind(spec.kind))
    return values;
  const KernelLibraryOptions options = optionsFor(spec, libraryOptions);
  const bool decode = isDecodeKind(spec);
  values["tile_size"] = std::to_string(decode ? options.decodeTileSize
                                              : prefillTileFor(options));
  if (decode)
    values["splits"] = std::to_string(options.decodeSplits);
  values["lookup"] = stringifyLookupStrategy(options.lookup).str();
  values["max_unrolled_chunks"] = std::to_string(options.maxUnrolledChunks);
  values["score_rows"] = std::to_string(options.scoreRows);
  if (decode)
    values["accumulators"] = std::to_string(options.accumulators);
  values["score_dot"] = options.scoreDot;
  values["value_dot"] = options.valueDot;
  if (decode)
    values["score_lanes"] = options.scoreLanes;
  if (decode)
    values["pair_ahead"] = options.pairAhead;
  else
    values["amx"] = options.amx;
  values["prefetch"] = options.prefetch;
  values["centroid_permute"] = permute;
  return values;
}

bool mlir::tq::resolveAutoDotPaths(const std::string &cpu,
                                   std::string &scoreDot,
                                   std::string &valueDot, std::string &error) {
  if (scoreDot != "auto" && valueDot != "auto")
    return true;
  std::unique_ptr<llvm::TargetMachine> tm = makeTargetMachine(cpu, error);
  if (!tm)
    return false;
  // Measured in docs/perf/cpu.md: the integer paths beat f32 with VNNI
  // (znver4, emeraldrapids) and with AVX2 alone (znver3: vpmaddubsw on
  // 7-bit levels, vpmaddwd). The pair sums differ by vendor: bf16
  // (vdpbf16ps) beat i16 by 4-7% on Zen 4, i16 (vpdpwssd) beat bf16 by
  // 1.2x in decode and 1.4x in prefill on Emerald Rapids. So bf16 on AMD's
  // Zen CPUs that have it, i16 elsewhere.
  if (scoreDot == "auto")
    scoreDot = hasIntegerDots(*tm) ? "i8" : "f32";
  if (valueDot == "auto")
    valueDot = hasBf16(*tm) && isAmdZen(*tm) ? "bf16"
               : hasIntegerDots(*tm)         ? "i16"
                                             : "f32";
  return true;
}

bool mlir::tq::cpuRunsOnHost(const std::string &cpu, std::string &error) {
  if (cpu == "host")
    return true;
  std::unique_ptr<llvm::TargetMachine> tm = makeTargetMachine(cpu, error);
  if (!tm)
    return false;
  // The host's feature map names ISA features only (no tuning flags), so
  // the check is about instructions, not scheduling preferences.
  std::vector<std::string> missing;
  for (const auto &f : llvm::sys::getHostCPUFeatures())
    if (!f.second && tm->getMCSubtargetInfo()->checkFeatures(
                         "+" + f.first().str()))
      missing.push_back(f.first().str());
  if (missing.empty())
    return true;
  llvm::sort(missing);
  error = "code for cpu '" + cpu + "' needs " + llvm::join(missing, ", ") +
          ", which this machine lacks";
  return false;
}

bool mlir::tq::cpuTuningTarget(const std::string &cpu, TuningTarget &target,
                               std::string &error) {
  std::unique_ptr<llvm::TargetMachine> tm = makeTargetMachine(cpu, error);
  if (!tm)
    return false;
  target.triple = tm->getTargetTriple().str();
  target.cpu = tm->getTargetCPU().str();
  // The features makeTargetMachine enabled beyond the CPU name's: the
  // host's, or those added to a named CPU ("x86-64-v3+avxvnni").
  std::vector<std::string> features;
  for (llvm::StringRef f : llvm::split(tm->getTargetFeatureString(), ','))
    if (f.starts_with("+"))
      features.push_back(f.str());
  llvm::sort(features);
  target.features = llvm::join(features, ",");
  target.featuresHash = tuningFeaturesHash(target.features);
  return true;
}

std::string mlir::tq::tuningFeaturesHash(const std::string &features) {
  return llvm::utohexstr(llvm::xxh3_64bits(features), /*LowerCase=*/true,
                         /*Width=*/16);
}

int64_t mlir::tq::contextBucket(int64_t tokens) {
  if (tokens <= 1)
    return 1;
  return int64_t(llvm::PowerOf2Ceil(uint64_t(tokens)));
}
