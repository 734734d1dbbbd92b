//===- Tuning.h - Kernel knobs and the tuning database ----------*- C++ -*-===//
//
// The knobs of a kernel spec (what the lowering lets a tuner choose: flash
// tile, split-KV chunks, centroid lookup strategy, unrolled row chunks,
// centroid permute on CPUs; warps per block on GPUs), the target a
// measurement belongs to (a CPU and its features, or a GPU chip and the
// device's name), and the lookup
// of the best recorded configuration in a tuning database (SQLite, written
// by the Python package's tqc.tuning / tqc.autotune; schema in
// docs/autotune.md). tq-aot --tuning-db and tqc.compile(tuning_db=...)
// share these functions.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_TARGET_TUNING_H
#define TQ_TARGET_TUNING_H

#include "tq/Pipelines/RuntimeKernels.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::tq {

struct KernelLibraryOptions;
class GpuTarget;

/// Knob name -> value, values spelt as in the database ("256", "tile").
using KnobValues = std::map<std::string, std::string>;

/// One knob of a kernel spec.
struct KnobInfo {
  /// tile_size, splits, lookup, max_unrolled_chunks, score_rows,
  /// accumulators, score_dot, score_lanes, value_dot, pair_ahead,
  /// prefetch, centroid_permute.
  std::string name;
  std::string description;
  /// What the compiler accepts, in words ("integer >= 1", "tile, select,
  /// lut").
  std::string legal;
  /// The values worth trying (the default first); integer knobs accept any
  /// value `legal` allows.
  std::vector<std::string> values;
  std::string defaultValue;
  /// "knob=value" this knob only matters with (empty: always).
  std::string onlyWith;
};

/// The knobs of `spec`'s kernel when built for CPU `cpu` (an LLVM CPU name
/// or "host"): attention kernels (decode, prefill, ggml) have some; append
/// and dequantize kernels none. False with `error` for an unknown CPU.
bool kernelKnobs(const RuntimeKernelSpec &spec, const std::string &cpu,
                 std::vector<KnobInfo> &knobs, std::string &error);

/// Checks `values` against `knobs` (names and legal values), with `error`
/// naming the kernel, the knob and what it takes.
bool checkKnobValues(const RuntimeKernelSpec &spec, const KnobValues &values,
                     const std::vector<KnobInfo> &knobs, std::string &error);

/// Checks `values` against `spec`'s knobs (names and legal values) and
/// records them in `options.kernelKnobs` for that kernel.
bool setKernelKnobs(const RuntimeKernelSpec &spec, const KnobValues &values,
                    KernelLibraryOptions &options, std::string &error);

/// The knobs of `spec`'s kernel when built for GPU `target`: attention
/// kernels (decode, prefill) have block_warps, the warps of one block
/// (every lane group of the block takes its own tokens; more warps: more
/// tokens in flight per block, more workgroup memory for their states);
/// append kernels none.
std::vector<KnobInfo> gpuKernelKnobs(const RuntimeKernelSpec &spec,
                                     const GpuTarget &target);

/// setKernelKnobs for GPU `target`: checks `values` against
/// gpuKernelKnobs and records them in `options.kernelKnobs`.
bool setGpuKernelKnobs(const RuntimeKernelSpec &spec, const KnobValues &values,
                       const GpuTarget &target, KernelLibraryOptions &options,
                       std::string &error);

/// `target` with `spec`'s knobs (options.kernelKnobs) applied: what its
/// kernels are built for.
GpuTarget gpuTargetFor(const RuntimeKernelSpec &spec, const GpuTarget &target,
                       const KernelLibraryOptions &options);

/// The effective knob values of `spec`'s kernel under `options` (its own
/// entry of options.kernelKnobs over the library-wide options), for
/// kernels.json; `permute` is the CPU's resolved centroid permute.
KnobValues effectiveKnobs(const RuntimeKernelSpec &spec,
                          const KernelLibraryOptions &options,
                          const std::string &permute);

/// The target a tuning measurement belongs to.
struct TuningTarget {
  std::string triple;
  /// The CPU name ("host" resolved to the host's, e.g. "znver4"); for a
  /// GPU its chip ("sm_90a").
  std::string cpu;
  /// The host's enabled CPU features, sorted, comma-separated ("+avx2,...");
  /// empty for a named CPU (its name fixes them). For a GPU the device's
  /// name as its driver reports it ("NVIDIA H100 80GB HBM3"): one chip
  /// comes in parts of different sizes and clocks.
  std::string features;
  /// 16 hex digits of xxh3-64 over `features`.
  std::string featuresHash;
};

/// TuningTarget::featuresHash of `features`: 16 lower-case hex digits of
/// xxh3-64.
std::string tuningFeaturesHash(const std::string &features);

/// The tuning target of GPU code for `target` run on device `device` (the
/// name tq_gpu_device_name reports).
TuningTarget gpuTuningTarget(const GpuTarget &target,
                             const std::string &device);

/// The tuning target of CPU code for `cpu` ("host" or an LLVM CPU name).
bool cpuTuningTarget(const std::string &cpu, TuningTarget &target,
                     std::string &error);

/// The context-length bucket of `tokens`: the smallest power of two >= it.
int64_t contextBucket(int64_t tokens);

/// A measurement of the tuning database.
struct TuningRecord {
  int64_t id = 0;
  int64_t context = 0;
  double seconds = 0;
  int64_t rounds = 0;
  std::string statistic;
  KnobValues knobs;
};

/// The fastest correct measurement of `spec` (a kernel name) for
/// (`version`, `target`) at context bucket contextBucket(`context`), or at
/// the largest bucket recorded for them when `context` is 0. `record` is
/// left empty when none matches. False with `error` when the database
/// cannot be read.
bool lookupTuningRecord(const std::string &database, const std::string &version,
                        const TuningTarget &target, const std::string &spec,
                        int64_t context, std::optional<TuningRecord> &record,
                        std::string &error);

/// For every attention spec: looks up its best record (as above) and sets
/// its knobs in `options`, adding one line per spec to `report` (the record
/// used, or why defaults are). The target is options.cpu's.
bool applyTuningDatabase(const std::string &database,
                         const std::string &version, int64_t context,
                         const std::vector<RuntimeKernelSpec> &specs,
                         KernelLibraryOptions &options,
                         std::vector<std::string> &report, std::string &error);

/// applyTuningDatabase for GPU kernels of `target` that will run on device
/// `device` (records of gpuTuningTarget(target, device)).
bool applyGpuTuningDatabase(const std::string &database,
                            const std::string &version, int64_t context,
                            const std::vector<RuntimeKernelSpec> &specs,
                            const GpuTarget &target, const std::string &device,
                            KernelLibraryOptions &options,
                            std::vector<std::string> &report,
                            std::string &error);

} // namespace mlir::tq

#endif // TQ_TARGET_TUNING_H
