//===- CacheFlusher.h - Evict caches between timed calls --------*- C++ -*-===//
//
// Timing tools (tq-bench, tq-run) call flush() before a timed kernel call
// so the call finds its KV cache in memory, as a decode step of a real
// model does: each layer reads its own cache and the layers between evict
// it. Every thread reads its share of a buffer larger than the last-level
// cache, one load per 64-byte line.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_TOOLS_SUPPORT_CACHEFLUSHER_H
#define TQ_TOOLS_SUPPORT_CACHEFLUSHER_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tq::tools {

/// The largest data or unified cache the OS reports for CPU 0 (Linux
/// sysfs, else sysconf), in bytes; 0 when neither says.
size_t lastLevelCacheBytes();

/// The flush size `--flush-mib=auto` reads: twice the last-level cache,
/// rounded up to MiB, and at least 64 MiB (a buffer the size of the cache
/// leaves part of the KV in it under adaptive replacement).
size_t autoFlushMiB();

/// The machine's physical memory in bytes (sysconf); 0 when unknown.
size_t physicalMemoryBytes();

/// "" when a tool may allocate `bytes` for `what`, else the error to print:
/// more than `share` of physical memory (where it is known) would end in
/// an allocation failure or the OOM killer mid-run instead of a message.
std::string memoryNeedError(const std::string &what, double bytes,
                            double share = 0.8);

/// Parses a `--flush-mib` value: "auto" (autoFlushMiB()) or a count of MiB
/// (0: no flush) that memoryNeedError allows. std::nullopt on anything
/// else, with the message for the tool's error line in `*error`.
std::optional<size_t> parseFlushMiB(const std::string &text,
                                    std::string *error);

class CacheFlusher {
public:
  /// Reads `mib` MiB on `threads` threads per flush; 0 MiB flushes nothing.
  CacheFlusher(size_t mib, unsigned threads);

  void flush();
  bool enabled() const { return !data_.empty(); }

private:
  std::vector<uint64_t> data_;
  unsigned threads_;
};

} // namespace tq::tools

#endif // TQ_TOOLS_SUPPORT_CACHEFLUSHER_H
