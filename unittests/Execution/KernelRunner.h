//===- KernelRunner.h - JIT-compile and run attention kernels ---*- C++ -*-===//
//
// Test support: builds an attention kernel from a spec, runs a pipeline
// down to LLVM, JIT-compiles it with MLIR's ExecutionEngine and calls it on
// host buffers. Nothing here computes attention: results come from the
// compiled IR alone.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_UNITTESTS_EXECUTION_KERNELRUNNER_H
#define TQ_UNITTESTS_EXECUTION_KERNELRUNNER_H

#include "tq/Pipelines/AttentionKernel.h"
#include "tq/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tq::test {

/// A context for tests that JIT-compile: every dialect and extension (tq
/// included) and the LLVM translations loaded, the native target
/// initialised.
std::unique_ptr<mlir::MLIRContext> makeJitContext();

/// A compiled kernel: call run() with the buffers of its spec.
class CompiledKernel {
public:
  /// q [Q][H][D], k/v packed rows [N][KH][rowBytes], mask [Q][N] (empty
  /// when the spec has none), out [Q][H][D].
  void run(std::vector<float> &q, std::vector<uint8_t> &k,
           std::vector<uint8_t> &v, std::vector<float> &mask,
           std::vector<float> &out) const;
  /// Kernels with engine options (spec.maskF16, slopes, sinks): mask
  /// [Q][N] half bits, slopes and sinks [H] (empty when the spec has none).
  /// With spec.lse, lse [Q][H] receives each row's log-sum-exp.
  void runEngine(std::vector<float> &q, std::vector<uint8_t> &k,
                 std::vector<uint8_t> &v, std::vector<uint16_t> &mask,
                 std::vector<float> &slopes, std::vector<float> &sinks,
                 std::vector<float> &out,
                 std::vector<float> *lse = nullptr) const;
  /// Paged kernels: kPool / vPool hold numPages pages of the spec's page
  /// size; table lists this sequence's pages.
  void runPaged(std::vector<float> &q, std::vector<uint8_t> &kPool,
                std::vector<uint8_t> &vPool, int64_t numPages,
                std::vector<int32_t> &table, int64_t numTokens,
                std::vector<float> &mask, std::vector<float> &out) const;

private:
  friend class KernelRunner;
  mlir::tq::AttentionKernelSpec spec_;
  int64_t keyRowBytes_ = 0, valueRowBytes_ = 0;
  std::unique_ptr<mlir::ExecutionEngine> engine_;
  void *entry_ = nullptr;
};

/// A compiled encoder kernel.
class CompiledEncoder {
public:
  /// rows [N][KH][D] float -> out [N][KH][rowBytes].
  void run(std::vector<float> &rows, std::vector<uint8_t> &out) const;

private:
  friend class KernelRunner;
  mlir::tq::QuantizeKernelSpec spec_;
  int64_t rowBytes_ = 0;
  std::unique_ptr<mlir::ExecutionEngine> engine_;
  void *entry_ = nullptr;
};

/// What the fused tq-level IR of a kernel does with rotations.
struct RotationCount {
  /// tq.rotate ops.
  unsigned ops = 0;
  /// Vectors rotated: each tq.rotate transforms every row of its operand.
  int64_t rows = 0;
};

class KernelRunner {
public:
  KernelRunner();
  ~KernelRunner();

  std::unique_ptr<CompiledEncoder>
  compileEncoder(const mlir::tq::QuantizeKernelSpec &spec, std::string &error);

  /// Runs only the fusion pipeline and counts the rotations left.
  std::optional<RotationCount>
  countRotations(const mlir::tq::AttentionKernelSpec &spec,
                 const mlir::tq::TQPipelineOptions &options,
                 std::string &error);

  /// Builds, lowers and JIT-compiles; on failure returns null and sets
  /// error.
  std::unique_ptr<CompiledKernel>
  compile(const mlir::tq::AttentionKernelSpec &spec,
          const mlir::tq::TQPipelineOptions &options, std::string &error);

private:
  /// A diagnostic handler appending every message to `out`.
  static std::function<mlir::LogicalResult(mlir::Diagnostic &)>
  collectInto(std::string &out);
  /// Lowers `module` to LLVM and JIT-compiles it; returns the entry
  /// point `name` (its C interface) or null with error set.
  std::unique_ptr<mlir::ExecutionEngine>
  jit(mlir::ModuleOp module, const mlir::tq::TQPipelineOptions &options,
      const std::string &name, void *&entry, std::string &diagnostics,
      std::string &error);
  /// A module holding the kernel of `spec`, or null (diagnostics emitted).
  mlir::OwningOpRef<mlir::ModuleOp>
  buildModule(const mlir::tq::AttentionKernelSpec &spec);

  std::unique_ptr<mlir::MLIRContext> context_;
};

} // namespace tq::test

#endif // TQ_UNITTESTS_EXECUTION_KERNELRUNNER_H
