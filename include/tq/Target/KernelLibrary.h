//===- KernelLibrary.h - Writing compiled kernel libraries ------*- C++ -*-===//
//
// A kernel library is a directory holding
//   kernels.json      what is inside: one entry per kernel (name, kind,
//                     formats, head dim, group, mask options, row bytes)
//   tq_kernels.h      C prototypes of the entry points
//   libtqkernels.so   the machine code (CPU), loaded by the runtime
// Kernels are built from RuntimeKernelSpecs, lowered by the tq pipelines
// and compiled by LLVM for the chosen CPU.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_TARGET_KERNELLIBRARY_H
#define TQ_TARGET_KERNELLIBRARY_H

#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Pipelines/RuntimeKernels.h"
#include "tq/Target/Tuning.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlir::tq {

struct KernelLibraryOptions {
  /// Output directory (created if missing).
  std::string outputDir;
  /// CPU name for code generation; "host" means the machine running tq-aot
  /// with all its features.
  std::string cpu = "host";
  /// Flash tile (tokens) of decode and prefill kernels, and the split-KV
  /// chunks of decode kernels. Decode tiles are larger: per-tile work
  /// (address walk, softmax merge, tqprod's S^T projection of the sign
  /// sums) is amortised over more tokens, while a decode tile's scores are
  /// one row per head; a prefill tile's scores grow with its query rows.
  /// (512: 4-8% faster than 256 at 32/8 heads and 2-4% at Gemma 3's
  /// 4/1 on Emerald Rapids, docs/perf/cpu.md.)
  int64_t decodeTileSize = 512;
  /// 0: by the prefill's products (prefillTileFor): 128 with AMX tiles,
  /// whose per-row softmax and tile write-back cost the same per KV tile
  /// whatever its length (12-18% faster than 64 on a Granite Rapids-class
  /// Xeon, docs/perf/cpu.md), else 64.
  int64_t prefillTileSize = 0;
  int64_t decodeSplits = 4;
  /// Rows of more vector chunks are unrolled by decode periods (see
  /// tq-lower-to-loops' max-unrolled-chunks).
  int64_t maxUnrolledChunks = 48;
  /// KV rows per fused score step (at most) and accumulators of the
  /// one-row weighted sum (see tq-lower-to-loops; 0: 32 where the CPU has
  /// AVX-512's 32 vector registers and they cover a decode kernel's row in
  /// one pass (V's dim x group <= 512), else 16 — measured 4-8% faster
  /// decode at 32 on Emerald Rapids at d128 x 4, 7-9% slower at d256 x 4,
  /// docs/perf/cpu.md).
  int64_t scoreRows = 4;
  int64_t accumulators = 0;
  /// Dot products of the fused score: f32 or i8 (see tq-lower-to-loops'
  /// score-dot; formats it does not apply to keep f32).
  std::string scoreDot = "f32";
  /// Multiply-adds of the decode kernels' weighted sum: f32, bf16 or i16
  /// (see tq-lower-to-loops' value-dot; formats it does not apply to keep
  /// f32).
  std::string valueDot = "f32";
  /// Lanes of the int8 decode score: rows, tokens or auto (tokens where
  /// the CPU has AVX-512 with VBMI, else rows; see tq-lower-to-loops'
  /// score-lanes: the same scores, tokens measured 1-11% faster on
  /// Emerald Rapids with head-major pools, docs/perf/cpu.md).
  std::string scoreLanes = "auto";
  /// The decode kernels' pair weighted sum decodes a token pair ahead:
  /// on, off or auto (on where the CPU has AVX-512 and LLVM keeps
  /// vpdpwssd whole, fast-dpwssd: Zen 4 and 5; see tq-lower-to-loops'
  /// pair-ahead; the same sums, measured 2-5% faster on Zen 4 and slower
  /// where vpdpwssd splits or registers are 16, docs/perf/cpu.md).
  std::string pairAhead = "auto";
  /// Where the fused products prefetch the next tile's rows: l1, l2 or
  /// auto (l2 on AMD's Zen CPUs with AVX-512, l1 elsewhere; see
  /// tq-lower-to-loops' prefetch: the same results, l2 measured 3-10%
  /// faster on a flushed Zen 4 decode, docs/perf/cpu.md).
  std::string prefetch = "auto";
  /// Prefill kernels' score and weighted sum as AMX-BF16 tile products
  /// (bf16 operands: lossy, like the other dot paths, so off unless
  /// asked): on, off or auto (on where the CPU has AMX-BF16; see
  /// tq-lower-to-loops' amx-tiles). A library with them asks Linux for
  /// the tile registers when it is loaded.
  std::string amx = "off";
  /// Build the naive pipeline instead (every cached row dequantised and
  /// un-rotated, no codebook fusion, no tiling): the dequantise-then-attend
  /// baseline of tq-bench.
  bool naive = false;
  /// How fused kernels read centroids (see tq-fuse-codebook).
  LookupStrategy lookup = LookupStrategy::tile;
  /// Centroid lookup of vector row decoding: none (select tree), avx2 or
  /// avx512 (vpermps); empty: the widest permute the CPU has.
  std::string centroidPermute;
  /// Knob values of single kernels (spec name -> knobs, see Tuning.h's
  /// kernelKnobs), over the library-wide options above; set them with
  /// setKernelKnobs or applyTuningDatabase.
  std::map<std::string, KnobValues> kernelKnobs;
  /// The C compiler driver used to link the shared library.
  std::string linker = "clang";
  /// The shared library's file name inside outputDir.
  std::string libraryName = "libtqkernels.so";
  /// Apply MLIR's pass manager and timing command-line options
  /// (--mlir-timing, --mlir-print-ir-after-all, ...) to every kernel's
  /// lowering; the tool must have registered them
  /// (registerPassManagerCLOptions, registerDefaultTimingManagerCLOptions).
  bool passManagerCLOptions = false;
  /// Kernels compiled at once, by threads with a context and target
  /// machine of their own (0: one per hardware thread; 1: one after
  /// another, in the caller's context). The library is the same whatever the count: objects are
  /// linked in spec order. With several, the pass manager's printing
  /// options interleave their output.
  unsigned jobs = 0;
};

/// Called before each kernel is compiled: (index, total, name), in spec
/// order (with several jobs, from the compiling threads, one call at a
/// time).
using KernelProgress = std::function<void(size_t, size_t, const std::string &)>;

/// The kernel's self-description the runtime checks, `<name>_info`:
/// {version (1; 2 for ggml decode kernels, which write %lse), kind,
/// head_dim, group, k_row_bytes, v_row_bytes (0 for append),
/// causal, window} as int64. GPU kernels append two entries.
SmallVector<int64_t> kernelInfo(const RuntimeKernelSpec &spec);

/// A context that can build, lower and translate kernels: every upstream
/// dialect and extension, the tq dialect, and the LLVM IR translations.
std::unique_ptr<MLIRContext> createKernelCompilerContext();

/// Compiles every spec, and every public function of `inputs` (IR given
/// by the user, e.g. `tq-aot --input`; each gets a C interface), and writes
/// the library. On failure returns false with `error` naming the kernel and
/// the reason.
bool writeKernelLibrary(MLIRContext &context,
                        const std::vector<RuntimeKernelSpec> &specs,
                        const KernelLibraryOptions &options,
                        const KernelProgress &progress, std::string &error,
                        ArrayRef<ModuleOp> inputs = {});

/// Replaces `auto` in `scoreDot` / `valueDot` with the dot paths of
/// `cpu` ("host": this machine): score i8 where the CPU has AVX2 or
/// better (VNNI where it has it); value bf16 on AMD Zen CPUs with
/// AVX512-BF16, else i16 with AVX2 or better (the faster of the two on
/// each vendor's CPUs measured, docs/perf/cpu.md); f32 elsewhere. Other
/// values are left as they are. False, with `error` naming the CPU, where
/// LLVM does not know it.
bool resolveAutoDotPaths(const std::string &cpu, std::string &scoreDot,
                         std::string &valueDot, std::string &error);

/// Whether code built for `cpu` (an LLVM CPU name or "host") runs on this
/// machine: every ISA feature the host lacks is one `cpu` lacks too. False
/// with `error` naming the CPU and the features this machine lacks, or
/// saying LLVM does not know the CPU.
bool cpuRunsOnHost(const std::string &cpu, std::string &error);

} // namespace mlir::tq

#endif // TQ_TARGET_KERNELLIBRARY_H
