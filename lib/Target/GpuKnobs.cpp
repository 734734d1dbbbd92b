//===- GpuKnobs.cpp - Knobs and tuning keys of GPU kernels ----------------===//
//
// GPU attention kernels have one knob, block_warps: the warps of a block
// (GpuKernels.h's lane groups are carved out of them, so it also sets how
// many tokens a block has in flight and how much workgroup memory holds
// their final states). The split count stays the GPU runtime's choice per
// call (it depends on the device's multiprocessors and the call's grid).
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/TQToGPU/GpuTarget.h"
#include "tq/Target/KernelLibrary.h"
#include "tq/Target/Tuning.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::tq;

namespace {
constexpr const char *kBlockWarps = "block_warps";
} // namespace

std::vector<KnobInfo> mlir::tq::gpuKernelKnobs(const RuntimeKernelSpec &spec,
                                               const GpuTarget &target) {
  if (!isAttentionKind(spec.kind))
    return {}; // append kernels: one thread per row, nothing to choose
  KnobInfo warps;
  warps.name = kBlockWarps;
  warps.description =
      "warps of one block of the split-KV kernel (each lane group takes its "
      "own tokens; more: more tokens in flight per block and more workgroup "
      "memory for the groups' states, fewer blocks per multiprocessor)";
  std::vector<std::string> legal;
  for (unsigned w = 1; w * target.warpSize() <= GpuTarget::kMaxBlockThreads;
       w *= 2)
    legal.push_back(std::to_string(w));
  warps.legal = llvm::join(legal, ", ");
  warps.defaultValue = std::to_string(target.warpsPerBlock());
  warps.values = {warps.defaultValue};
  for (unsigned w : {2u, 8u})
    if (w != target.warpsPerBlock() &&
        w * target.warpSize() <= GpuTarget::kMaxBlockThreads)
      warps.values.push_back(std::to_string(w));
  return {warps};
}

bool mlir::tq::setGpuKernelKnobs(const RuntimeKernelSpec &spec,
                                 const KnobValues &values,
                                 const GpuTarget &target,
                                 KernelLibraryOptions &options,
                                 std::string &error) {
  if (!checkKnobValues(spec, values, gpuKernelKnobs(spec, target), error))
    return false;
  options.kernelKnobs[spec.name()] = values;
  return true;
}

GpuTarget mlir::tq::gpuTargetFor(const RuntimeKernelSpec &spec,
                                 const GpuTarget &target,
                                 const KernelLibraryOptions &options) {
  auto knobs = options.kernelKnobs.find(spec.name());
  if (knobs == options.kernelKnobs.end())
    return target;
  auto warps = knobs->second.find(kBlockWarps);
  unsigned n = 0;
  // setGpuKernelKnobs checked the value; anything else keeps the default.
  if (warps == knobs->second.end() ||
      llvm::StringRef(warps->second).getAsInteger(10, n) || n == 0 ||
      n * target.warpSize() > GpuTarget::kMaxBlockThreads)
    return target;
  return target.withWarpsPerBlock(n);
}

TuningTarget mlir::tq::gpuTuningTarget(const GpuTarget &target,
                                       const std::string &device) {
  TuningTarget key;
  key.triple = target.triple().str();
  key.cpu = target.chip().str();
  key.features = device;
  key.featuresHash = tuningFeaturesHash(device);
  return key;
}
