//===- GpuKernelLibrary.cpp - Writing GPU kernel libraries ----------------===//

#include "tq/Target/GpuKernelLibrary.h"

#include "tq/Conversion/TQToGPU/GpuKernels.h"
#include "tq/Conversion/TQToGPU/GpuPipeline.h"
#include "tq/Quant/Format.h"
#include "tq/Target/LLVMTools.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::tq;

namespace {

bool writeFile(const std::string &path, StringRef text, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write '" + path + "': " + ec.message();
    return false;
  }
  os << text;
  return true;
}

/// <name>_info = {1, kind, head_dim, group, k_row_bytes, v_row_bytes,
/// causal, window, partial_stride (append: the format's padded dim),
/// block_threads} as a public constant of the gpu.module (the CPU layout
/// plus what sizes the launch).
void addInfoGlobal(gpu::GPUModuleOp module, const RuntimeKernelSpec &spec,
                   unsigned blockThreads) {
  SmallVector<int64_t> info = kernelInfo(spec);
  // GPU kernels keep calling convention 1 (no %lse: the GPU runtime merges
  // its splits in a combine kernel).
  info[0] = 1;
  // Append kernels have one format and no partials: its padded dim.
  const bool append = spec.kind == RuntimeKernelKind::Append;
  auto values = ::tq::quant::Format::get(
      append ? spec.keyFormat : spec.valueFormat, spec.headDim);
  int64_t stride = 0;
  if (values)
    stride = append ? values->paddedDim() : gpuPartialStride(values->spec());
  info.push_back(stride);
  info.push_back(int64_t(blockThreads));
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  auto type = MemRefType::get({int64_t(info.size())}, b.getI64Type(),
                              AffineMap(), b.getI64IntegerAttr(1));
  memref::GlobalOp::create(
      b, module.getLoc(), spec.name() + "_info", b.getStringAttr("public"),
      type,
      DenseElementsAttr::get(
          RankedTensorType::get({int64_t(info.size())}, b.getI64Type()),
          ArrayRef<int64_t>(info)),
      /*constant=*/true, /*alignment=*/b.getI64IntegerAttr(8));
}

llvm::json::Object describe(const RuntimeKernelSpec &spec,
                            const GpuKernelInfo &kernel,
                            const GpuTarget &target) {
  llvm::json::Object o;
  o["name"] = kernel.name;
  o["role"] = kernel.role;
  o["kind"] = kindName(spec.kind);
  o["k_format"] = spec.keyFormat;
  o["v_format"] = spec.valueFormat;
  o["head_dim"] = int64_t(spec.headDim);
  o["group"] = int64_t(spec.group);
  o["causal"] = spec.causal;
  o["window"] = spec.window;
  o["softcap"] = double(spec.softcap);
  o["block"] = int64_t(kernel.blockSize);
  o["workgroup_bytes"] = kernel.workgroupBytes;
  // The knob values the kernel was built with (see Tuning.h).
  llvm::json::Object knobs;
  for (const KnobInfo &knob : gpuKernelKnobs(spec, target))
    if (knob.name == "block_warps")
      knobs[knob.name] = std::to_string(target.warpsPerBlock());
  o["knobs"] = std::move(knobs);
  if (kernel.role == "attention")
    o["grid"] = llvm::json::Array{"rows", "kv_heads", "splits"};
  else if (kernel.role == "append")
    o["grid"] = llvm::json::Array{"ceil(count * kv_heads / block)"};
  else
    o["grid"] = llvm::json::Array{"rows", "kv_heads"};
  return o;
}

/// amdgcn: assembles and links the code object with the LLVM tools of the
/// LLVM tqc was built with.
bool linkCodeObject(const GpuTarget &target, const std::string &assembly,
                    const std::string &object, const std::string &hsaco,
                    std::string &error) {
  std::string triple = "-triple=" + target.triple().str();
  std::string cpu = "-mcpu=" + target.chip().str();
  bool ok = runLLVMTool("llvm-mc",
                        {triple, cpu, "-filetype=obj", assembly, "-o", object},
                        error) &&
            runLLVMTool("ld.lld", {"-shared", object, "-o", hsaco}, error);
  if (!ok)
    error += " (needed for amdgcn)";
  llvm::sys::fs::remove(object);
  return ok;
}

} // namespace

bool mlir::tq::writeGpuKernelLibrary(
    MLIRContext &context, const std::vector<RuntimeKernelSpec> &specs,
    const GpuTarget &target, const KernelLibraryOptions &options,
    const KernelProgress &progress, std::string &error) {
  if (specs.empty()) {
    error = "no kernels to compile";
    return false;
  }
  if (std::error_code ec =
          llvm::sys::fs::create_directories(options.outputDir)) {
    error = "cannot create '" + options.outputDir + "': " + ec.message();
    return false;
  }
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag << "\n";
    return success();
  });
  Location loc = UnknownLoc::get(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  (*module)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     UnitAttr::get(&context));
  OpBuilder builder(module->getBodyRegion());
  auto gpuModule = gpu::GPUModuleOp::create(builder, loc, "tq_kernels");

  llvm::json::Array entries;
  for (size_t i = 0; i < specs.size(); ++i) {
    const RuntimeKernelSpec &spec = specs[i];
    if (progress)
      progress(i, specs.size(), spec.name());
    const GpuTarget specTarget = gpuTargetFor(spec, target, options);
    auto kernels = buildGpuKernels(gpuModule, spec, specTarget,
                                   [&] { return emitError(loc); });
    if (failed(kernels)) {
      error = spec.name() + ": " + diagnostics;
      return false;
    }
    addInfoGlobal(gpuModule, spec, kernels->front().blockSize);
    for (const GpuKernelInfo &k : *kernels)
      entries.push_back(describe(spec, k, specTarget));
  }
  std::string gpuIR;
  {
    llvm::raw_string_ostream os(gpuIR);
    module->print(os);
  }
  const std::string base = options.outputDir + "/tq_kernels";
  if (!writeFile(base + ".gpu.mlir", gpuIR, error))
    return false;

  FailureOr<std::string> assembly =
      compileGpuModuleToAssembly(*module, target);
  if (failed(assembly)) {
    error = "lowering to " + target.name().str() + " failed: " + diagnostics;
    return false;
  }
  const std::string asmPath = base + "." + target.assemblyExtension().str();
  if (!writeFile(asmPath, *assembly, error))
    return false;
  llvm::json::Object metadata;
  metadata["format_version"] = 1;
  metadata["target"] = target.name();
  metadata["chip"] = target.chip();
  metadata["triple"] = target.triple();
  metadata["warp_size"] = int64_t(target.warpSize());
  metadata["assembly"] = "tq_kernels." + target.assemblyExtension().str();
  if (target.vendor() == GpuVendor::Amd) {
    if (!linkCodeObject(target, asmPath, base + ".o", base + ".hsaco", error))
      return false;
    metadata["code_object"] = "tq_kernels.hsaco";
  }
  metadata["kernels"] = std::move(entries);
  return writeFile(options.outputDir + "/kernels.json",
                   llvm::formatv("{0:2}\n",
                                 llvm::json::Value(std::move(metadata)))
                       .str(),
                   error);
}
