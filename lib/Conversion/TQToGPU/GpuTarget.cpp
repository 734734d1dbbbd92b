//===- GpuTarget.cpp - What differs between GPU vendors -------------------===//

#include "tq/Conversion/TQToGPU/GpuTarget.h"

#include "tq/Conversion/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/GPUToROCDL/GPUToROCDLPass.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::tq;

namespace {
struct ChipInfo {
  GpuVendor vendor;
  const char *chip;
  unsigned warpSize;
};
// RDNA (gfx11) runs wave32 by default; CDNA is wave64 only.
constexpr ChipInfo kChips[] = {
    {GpuVendor::Nvidia, "sm_80", 32},  {GpuVendor::Nvidia, "sm_86", 32},
    {GpuVendor::Nvidia, "sm_89", 32},  {GpuVendor::Nvidia, "sm_90a", 32},
    {GpuVendor::Amd, "gfx90a", 64},    {GpuVendor::Amd, "gfx942", 64},
    {GpuVendor::Amd, "gfx1100", 32},
};
} // namespace

GpuTarget GpuTarget::hostEmulation(unsigned warpSize, unsigned warps) {
  GpuTarget t;
  t.vendor_ = GpuVendor::HostEmulation;
  t.chip_ = "host";
  t.warpSize_ = warpSize;
  t.warps_ = warps;
  return t;
}

std::vector<std::string> GpuTarget::chips(GpuVendor vendor) {
  std::vector<std::string> out;
  for (const ChipInfo &c : kChips)
    if (c.vendor == vendor)
      out.push_back(c.chip);
  return out;
}

FailureOr<GpuTarget> GpuTarget::get(StringRef target, StringRef chip,
                                    std::string &error) {
  GpuVendor vendor;
  if (target == "nvptx") {
    vendor = GpuVendor::Nvidia;
  } else if (target == "amdgcn") {
    vendor = GpuVendor::Amd;
  } else {
    error = "unknown GPU target '" + target.str() + "' (nvptx or amdgcn)";
    return failure();
  }
  for (const ChipInfo &c : kChips) {
    if (c.vendor != vendor || (!chip.empty() && chip != c.chip))
      continue;
    GpuTarget t;
    t.vendor_ = vendor;
    t.chip_ = c.chip;
    t.warpSize_ = c.warpSize;
    return t;
  }
  error = "unsupported chip '" + chip.str() + "' for --target=" +
          target.str() + " (supported: " + llvm::join(chips(vendor), ", ") +
          ")";
  return failure();
}

StringRef GpuTarget::name() const {
  switch (vendor_) {
  case GpuVendor::Nvidia:
    return "nvptx";
  case GpuVendor::Amd:
    return "amdgcn";
  case GpuVendor::HostEmulation:
    return "host";
  }
  return "unknown";
}

StringRef GpuTarget::triple() const {
  return vendor_ == GpuVendor::Nvidia ? "nvptx64-nvidia-cuda"
                                      : "amdgcn-amd-amdhsa";
}

StringRef GpuTarget::assemblyExtension() const {
  return vendor_ == GpuVendor::Nvidia ? "ptx" : "s";
}

Attribute GpuTarget::targetAttr(MLIRContext *context) const {
  if (vendor_ == GpuVendor::Nvidia)
    return NVVM::NVVMTargetAttr::get(context, /*optLevel=*/3, triple(), chip_,
                                     /*features=*/"+ptx80");
  return ROCDL::ROCDLTargetAttr::get(context, /*optLevel=*/3, triple(), chip_);
}

void GpuTarget::addConversionPasses(OpPassManager &pm) const {
  // The encoders' sqrt, round and absf as exact arith expansions: the
  // vendor conversions would call libdevice / ocml, and libdevice's
  // __nv_sqrtf is the approximate square root unless __CUDA_PREC_SQRT is
  // reflected, so the bytes would no longer match the library's encoder.
  pm.addNestedPass<gpu::GPUModuleOp>(createTQExactMath());
  // The softmax's exp2 as the hardware instruction (ex2.approx.ftz.f32,
  // v_exp_f32), not the device-library call the vendor conversions would
  // make of it (libdevice's __nv_exp2f, ocml's __ocml_exp2_f32).
  TQNativeExp2Options exp2;
  if (vendor_ == GpuVendor::Nvidia)
    exp2.intrinsic = "llvm.nvvm.ex2.approx.ftz.f32";
  pm.addNestedPass<gpu::GPUModuleOp>(createTQNativeExp2(exp2));
  if (vendor_ == GpuVendor::Nvidia) {
    pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
    return;
  }
  ConvertGpuOpsToROCDLOpsOptions options;
  options.chipset = chip_;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToROCDLOps(options));
}
