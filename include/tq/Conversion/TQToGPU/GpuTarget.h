//===- GpuTarget.h - What differs between GPU vendors -----------*- C++ -*-===//
//
// The one place that knows NVIDIA from AMD. Kernel builders emit
// vendor-neutral gpu dialect ops (ids, shuffles, barriers, workgroup
// memory) and ask this class only for the warp width; the lowering asks it
// for the conversion pass and the target attribute that
// gpu-module-to-binary serialises with.
//
//   nvptx:  sm_80, sm_86, sm_89, sm_90a   warp 32   PTX (+ptx80)
//   amdgcn: gfx90a, gfx942 (wave 64), gfx1100 (wave 32)   AMDGCN assembly
//   host emulation (tests only): warps of any width (one thread: no
//   shuffles at all), run on the CPU after tq-gpu-to-host with one host
//   thread per GPU thread.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_CONVERSION_TQTOGPU_GPUTARGET_H
#define TQ_CONVERSION_TQTOGPU_GPUTARGET_H

#include "mlir/IR/Attributes.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::tq {

enum class GpuVendor { Nvidia, Amd, HostEmulation };

class GpuTarget {
public:
  /// target: "nvptx" or "amdgcn"; chip: one of chips(target), or empty for
  /// the first. Fails with a message listing the supported chips.
  static FailureOr<GpuTarget> get(StringRef target, StringRef chip,
                                  std::string &error);
  /// For executing kernels on the CPU in tests (tq-gpu-to-host): blocks
  /// of `warps` warps of `warpSize` threads (default: one thread).
  static GpuTarget hostEmulation(unsigned warpSize = 1, unsigned warps = 1);
  /// The chips tqc emits code for.
  static std::vector<std::string> chips(GpuVendor vendor);

  GpuVendor vendor() const { return vendor_; }
  StringRef chip() const { return chip_; }
  /// Threads that execute in lock step and exchange values by shuffles.
  unsigned warpSize() const { return warpSize_; }
  /// Warps per block of every tq kernel (4 unless the block_warps knob
  /// says otherwise, see withWarpsPerBlock).
  unsigned warpsPerBlock() const { return warps_; }
  /// This target with blocks of `warps` warps; warps * warpSize() must not
  /// exceed kMaxBlockThreads (the callers check: setGpuKernelKnobs).
  GpuTarget withWarpsPerBlock(unsigned warps) const {
    GpuTarget t = *this;
    t.warps_ = warps;
    return t;
  }
  /// Threads one block may have on every supported chip.
  static constexpr unsigned kMaxBlockThreads = 1024;
  /// Static workgroup (shared / LDS) memory one block may declare: 48 KiB
  /// on NVIDIA (more needs a dynamic opt-in), 64 KiB on AMD.
  int64_t maxWorkgroupBytes() const {
    switch (vendor_) {
    case GpuVendor::Nvidia:
      return 48 * 1024;
    case GpuVendor::Amd:
      return 64 * 1024;
    case GpuVendor::HostEmulation:
      break;
    }
    return INT64_MAX;
  }
  /// "nvptx" or "amdgcn".
  StringRef name() const;
  StringRef triple() const;
  /// Extension of the serialised module: "ptx" or "s".
  StringRef assemblyExtension() const;

  /// #nvvm.target<chip, features = "+ptx80"> or #rocdl.target<chip>.
  Attribute targetAttr(MLIRContext *context) const;
  /// The gpu-to-NVVM or gpu-to-ROCDL conversion, nested on gpu.module.
  void addConversionPasses(OpPassManager &pm) const;

private:
  GpuVendor vendor_ = GpuVendor::Nvidia;
  std::string chip_;
  unsigned warpSize_ = 32;
  unsigned warps_ = 4;
};

} // namespace mlir::tq

#endif // TQ_CONVERSION_TQTOGPU_GPUTARGET_H
