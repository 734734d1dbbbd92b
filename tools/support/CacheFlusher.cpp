//===- CacheFlusher.cpp - Evict caches between timed calls ----------------===//

#include "CacheFlusher.h"

#include <algorithm>
#include <atomic>
#include <thread>

using namespace tq::tools;

CacheFlusher::CacheFlusher(size_t mib, unsigned threads)
    : data_(mib << 17, 1), threads_(std::max(1u, threads)) {}

void CacheFlusher::flush() {
  if (data_.empty())
    return;
  // The sum keeps the reads from being optimised away.
  std::atomic<uint64_t> sink{0};
  auto work = [&](unsigned w) {
    const size_t n = data_.size();
    uint64_t s = 0;
    for (size_t i = n * w / threads_; i < n * (w + 1) / threads_; i += 8)
      s += data_[i];
    sink += s;
  };
  std::vector<std::thread> workers;
  for (unsigned w = 1; w < threads_; ++w)
    workers.emplace_back(work, w);
  work(0);
  for (std::thread &t : workers)
    t.join();
}
