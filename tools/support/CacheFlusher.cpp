//===- CacheFlusher.cpp - Evict caches between timed calls ----------------===//

#include "CacheFlusher.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <thread>
#include <unistd.h>

using namespace tq::tools;

/// A sysfs cache size such as "48K", "2048K" or "260M", in bytes; 0 when
/// it is not one.
static size_t parseCacheSize(const std::string &text) {
  size_t value = 0, i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
       ++i)
    value = value * 10 + size_t(text[i] - '0');
  if (i == 0)
    return 0;
  switch (i < text.size() ? text[i] : ' ') {
  case 'K':
    return value << 10;
  case 'M':
    return value << 20;
  case 'G':
    return value << 30;
  default:
    return value;
  }
}

size_t tq::tools::lastLevelCacheBytes() {
  size_t largest = 0;
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 16; ++i) {
    std::ifstream typeFile(base + std::to_string(i) + "/type");
    std::ifstream sizeFile(base + std::to_string(i) + "/size");
    std::string type, size;
    if (!(typeFile >> type) || !(sizeFile >> size))
      break;
    if (type != "Instruction")
      largest = std::max(largest, parseCacheSize(size));
  }
  if (largest)
    return largest;
#ifdef _SC_LEVEL3_CACHE_SIZE
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE,
                   _SC_LEVEL2_CACHE_SIZE}) {
    long bytes = sysconf(name);
    if (bytes > 0)
      largest = std::max(largest, size_t(bytes));
  }
#endif
  return largest;
}

size_t tq::tools::autoFlushMiB() {
  const size_t mib = size_t(1) << 20;
  return std::max<size_t>(64, (2 * lastLevelCacheBytes() + mib - 1) / mib);
}

size_t tq::tools::physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

std::string tq::tools::memoryNeedError(const std::string &what, double bytes,
                                       double share) {
  const double memory = double(physicalMemoryBytes());
  if (memory == 0 || bytes <= share * memory)
    return "";
  char text[256];
  std::snprintf(text, sizeof text,
                "%s needs about %.1f GiB, more than %.0f%% of this machine's "
                "%.1f GiB",
                what.c_str(), bytes / double(1 << 30), share * 100,
                memory / double(1 << 30));
  return text;
}

std::optional<size_t> tq::tools::parseFlushMiB(const std::string &text,
                                               std::string *error) {
  size_t mib;
  if (text == "auto") {
    mib = autoFlushMiB();
  } else if (text.empty() || text.size() > 7 ||
             !std::all_of(text.begin(), text.end(), [](char c) {
               return std::isdigit(static_cast<unsigned char>(c));
             })) {
    *error = "bad --flush-mib '" + text + "' (a count of MiB or 'auto')";
    return std::nullopt;
  } else {
    mib = size_t(std::stoul(text));
  }
  *error = memoryNeedError("--flush-mib " + std::to_string(mib),
                           double(mib) * (1 << 20));
  if (!error->empty())
    return std::nullopt;
  return mib;
}

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
