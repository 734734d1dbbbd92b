//===- GpuEmulator.cpp - Running tq-gpu-to-host kernels on host threads ---===//

#include "GpuEmulator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "llvm/ExecutionEngine/JITSymbol.h"
#include "llvm/ExecutionEngine/Orc/Shared/ExecutorAddress.h"

namespace tq::test {

namespace {

/// A reusable barrier for `count` threads whose waiters give up after a
/// timeout and mark the launch failed (then every later wait returns at
/// once).
class TimedBarrier {
public:
  TimedBarrier(unsigned count, std::chrono::milliseconds timeout,
               std::atomic<bool> &failed)
      : count_(count), timeout_(timeout), failed_(failed) {}

  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (failed_)
      return;
    const uint64_t generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, timeout_, [&] {
          return generation_ != generation || failed_;
        })) {
      failed_ = true;
      cv_.notify_all();
    }
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  unsigned count_, waiting_ = 0;
  std::chrono::milliseconds timeout_;
  uint64_t generation_ = 0;
  std::atomic<bool> &failed_;
};

/// What the threads of one block share.
struct Block {
  unsigned warpSize;
  std::atomic<bool> failed{false};
  TimedBarrier all;
  std::vector<std::unique_ptr<TimedBarrier>> warps;
  std::vector<float> slots; // one shuffle slot per thread

  Block(unsigned warpSize, unsigned numWarps,
        std::chrono::milliseconds timeout)
      : warpSize(warpSize), all(warpSize * numWarps, timeout, failed),
        slots(warpSize * numWarps) {
    for (unsigned w = 0; w < numWarps; ++w)
      warps.push_back(
          std::make_unique<TimedBarrier>(warpSize, timeout, failed));
  }
};

thread_local Block *currentBlock = nullptr;
thread_local unsigned currentThread = 0;

enum class Mode { Xor, Up, Down, Idx };

/// Every lane of the warp publishes its value, then reads its source
/// lane's (its own when the source is outside [0, width)).
float shuffle(Mode mode, float value, int32_t offset, int32_t width) {
  Block &b = *currentBlock;
  const unsigned lane = currentThread % b.warpSize;
  const unsigned warp = currentThread / b.warpSize;
  TimedBarrier &sync = *b.warps[warp];
  b.slots[currentThread] = value;
  sync.wait();
  int64_t source = lane;
  switch (mode) {
  case Mode::Xor:
    source = int64_t(lane ^ uint32_t(offset));
    break;
  case Mode::Up:
    source = int64_t(lane) - offset;
    break;
  case Mode::Down:
    source = int64_t(lane) + offset;
    break;
  case Mode::Idx:
    source = offset;
    break;
  }
  float result = value;
  if (source >= 0 && source < width && source < int64_t(b.warpSize))
    result = b.slots[warp * b.warpSize + unsigned(source)];
  // Nobody overwrites a slot before every lane has read.
  sync.wait();
  return result;
}

void tq_emu_barrier() { currentBlock->all.wait(); }
float tq_emu_shuffle_xor_f32(float v, int32_t o, int32_t w) {
  return shuffle(Mode::Xor, v, o, w);
}
float tq_emu_shuffle_up_f32(float v, int32_t o, int32_t w) {
  return shuffle(Mode::Up, v, o, w);
}
float tq_emu_shuffle_down_f32(float v, int32_t o, int32_t w) {
  return shuffle(Mode::Down, v, o, w);
}
float tq_emu_shuffle_idx_f32(float v, int32_t o, int32_t w) {
  return shuffle(Mode::Idx, v, o, w);
}

} // namespace

llvm::orc::SymbolMap emulatorSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  auto add = [&](const char *name, auto *fn) {
    map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                           llvm::JITSymbolFlags::Exported};
  };
  add("tq_emu_barrier", &tq_emu_barrier);
  add("tq_emu_shuffle_xor_f32", &tq_emu_shuffle_xor_f32);
  add("tq_emu_shuffle_up_f32", &tq_emu_shuffle_up_f32);
  add("tq_emu_shuffle_down_f32", &tq_emu_shuffle_down_f32);
  add("tq_emu_shuffle_idx_f32", &tq_emu_shuffle_idx_f32);
  return map;
}

std::string runGrid(const Launch &launch, const ThreadBody &body) {
  const unsigned threads = launch.warpSize * launch.warps;
  // 16-byte alignment of each workgroup buffer adds at most 15 bytes each.
  std::vector<uint8_t> arena(size_t(launch.workgroupBytes) + 1024);
  Memref1 arenaRef = view(arena);
  for (int64_t z = 0; z < launch.grid[2]; ++z)
    for (int64_t y = 0; y < launch.grid[1]; ++y)
      for (int64_t x = 0; x < launch.grid[0]; ++x) {
        std::fill(arena.begin(), arena.end(), uint8_t(0xFF));
        Block block(launch.warpSize, launch.warps,
                    std::chrono::milliseconds(launch.timeoutMs));
        auto run = [&](unsigned t) {
          currentBlock = &block;
          currentThread = t;
          Memref1 local = arenaRef;
          body(x, y, z, t, &local);
          currentBlock = nullptr;
        };
        if (threads == 1) {
          run(0);
        } else {
          std::vector<std::thread> pool;
          for (unsigned t = 0; t < threads; ++t)
            pool.emplace_back(run, t);
          for (std::thread &t : pool)
            t.join();
        }
        if (block.failed)
          return "block (" + std::to_string(x) + ", " + std::to_string(y) +
                 ", " + std::to_string(z) +
                 "): a barrier or shuffle timed out (not every thread of "
                 "the block or warp reached it)";
      }
  return "";
}

} // namespace tq::test
