//===- GpuEmulator.h - Running tq-gpu-to-host kernels on host threads -----===//
//
// tq-gpu-to-host turns each GPU kernel into a host function for one GPU
// thread (trailing arguments: block x, y, z, thread id, workgroup arena).
// runGrid runs the blocks one after another and, within a block, one host
// thread per GPU thread, concurrently, so barriers and warp shuffles work
// as on a GPU: emulatorSymbols() provides tq_emu_barrier (every thread of
// the block) and tq_emu_shuffle_<mode>_f32 (the threads of one warp).
//
// A barrier or shuffle that not every thread it waits for reaches (a
// divergent barrier, a shuffle in warp-divergent code) would hang on a GPU;
// here the waiters time out, the launch reports the failure, and the
// kernel runs on with undefined values.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_UNITTESTS_EXECUTION_GPUEMULATOR_H
#define TQ_UNITTESTS_EXECUTION_GPUEMULATOR_H

#include "llvm/ExecutionEngine/Orc/Mangling.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tq::test {

/// MLIR's descriptor of a 1-D memref.
struct Memref1 {
  void *allocated, *aligned;
  int64_t offset, size, stride;
};
template <typename T> Memref1 view(std::vector<T> &v) {
  return {v.data(), v.data(), 0, int64_t(v.size()), 1};
}

/// The emulator's functions, for ExecutionEngine::registerSymbols.
llvm::orc::SymbolMap emulatorSymbols(llvm::orc::MangleAndInterner interner);

struct Launch {
  int64_t grid[3] = {1, 1, 1};
  unsigned warpSize = 1, warps = 1;
  /// Workgroup memory of the kernel (bytes; the arena adds alignment).
  int64_t workgroupBytes = 0;
  /// How long a thread waits at a barrier or shuffle for the others.
  unsigned timeoutMs = 10000;
};

/// One GPU thread: calls the kernel's host function with these ids.
using ThreadBody = std::function<void(int64_t bx, int64_t by, int64_t bz,
                                      int64_t thread, Memref1 *arena)>;

/// Runs every block of the grid. The arena is filled with NaN bytes
/// before each block (workgroup memory starts undefined). Returns empty,
/// or what went wrong (a barrier or shuffle timed out).
std::string runGrid(const Launch &launch, const ThreadBody &body);

} // namespace tq::test

#endif // TQ_UNITTESTS_EXECUTION_GPUEMULATOR_H
