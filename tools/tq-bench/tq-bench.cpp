//===- tq-bench.cpp - Decode throughput against the machine's limits ------===//
//
// A benchmark, not a test. For each format and context length it times
// decode steps (and causal prefill blocks) through the runtime and
// reports, side by side in the same run:
//   - the compressed kernel (tq-aot's fused, tiled, split-KV decode),
//   - the f16 flash-attention baseline (the same harness, f16 K/V),
//   - the dequantise-then-attend baseline (the naive pipeline: every cached
//     row decoded and un-rotated, then dense attention),
// with bytes of KV read per step, achieved GB/s as a share of a memory
// bandwidth probe, and the time relative to the roofline
// max(bytes / bandwidth, flops / FMA rate), both probed in the same run.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"
#include "tq/Target/KernelLibrary.h"
#include "tq/tq_runtime.h"

#include "CacheFlusher.h"
#include "TimingSamples.h"

#include "llvm/ADT/StringExtras.h"
#include "ToolOptions.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

using namespace mlir;
using namespace mlir::tq;
namespace cl = llvm::cl;
using Clock = std::chrono::steady_clock;

namespace {

/// Only this tool's options appear in --help (not LLVM's).
cl::OptionCategory toolOptions("tq-bench options");

cl::opt<std::string> formats("formats", cl::cat(toolOptions),
                             cl::desc("K/V formats to measure"),
                             cl::init("turbo3_0,polar4,q8_0"));
cl::opt<std::string> contexts("contexts", cl::cat(toolOptions),
                              cl::desc("context lengths"),
                              cl::init("1024,4096,16384,65536"));
cl::opt<unsigned> headDim("head-dim", cl::cat(toolOptions),
                          cl::desc("head dim"), cl::init(128));
cl::opt<unsigned> qHeads("q-heads", cl::cat(toolOptions),
                         cl::desc("query heads"), cl::init(32));
cl::opt<unsigned> kvHeads("kv-heads", cl::cat(toolOptions),
                          cl::desc("KV heads"), cl::init(8));
cl::opt<unsigned> numThreads("num-threads", cl::cat(toolOptions),
                             cl::desc("0: all CPUs"), cl::init(0));
cl::opt<unsigned> repeat("repeat", cl::cat(toolOptions),
                         cl::desc("timing rounds (each times every kernel of a "
                                   "context once)"),
                         cl::init(3));
cl::opt<std::string> lookup(
    "lookup", cl::cat(toolOptions),
    cl::desc("centroid lookup of fused kernels: tile (decode each KV tile "
             "once per GQA group), select or lut"),
    cl::init("tile"));
cl::opt<unsigned> flushMiB(
    "flush-mib", cl::cat(toolOptions),
    cl::desc("MiB read on every thread before each timed call, so the call "
             "finds its KV in memory as a model's layer does (0: keep "
             "caches warm)"),
    cl::init(64));
cl::opt<bool> skipNaive("skip-naive", cl::cat(toolOptions),
                        cl::desc("skip the dequantise-then-attend baseline"));
cl::opt<unsigned> prefillRows(
    "prefill-rows", cl::cat(toolOptions),
    cl::desc("query rows of a causal prefill block (0: no prefill table)"),
    cl::init(64));
cl::opt<std::string> prefillContexts(
    "prefill-contexts", cl::cat(toolOptions),
    cl::desc("context lengths of the prefill table (the block's last row "
             "sees all of them)"),
    cl::init("1024,4096,16384"));
cl::opt<std::string> report("report", cl::cat(toolOptions),
                            cl::desc("also write the markdown report here"));

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "tq-bench: error: " << message << "\n";
  std::exit(1);
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

unsigned threadCount() {
  return numThreads ? numThreads
                    : std::max(1u, std::thread::hardware_concurrency());
}

/// The seconds `work(w)` takes when run on every thread w at once; the
/// shortest of `rounds` tries (on a shared machine one round can catch a
/// neighbour's burst).
double fastestParallelRun(int rounds,
                          const std::function<void(unsigned)> &work) {
  const unsigned t = threadCount();
  double best = 1e30;
  for (int round = 0; round < rounds; ++round) {
    auto start = Clock::now();
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < t; ++w)
      workers.emplace_back(work, w);
    for (auto &w : workers)
      w.join();
    best = std::min(best, seconds(start, Clock::now()));
  }
  return best;
}

/// Read bandwidth: every thread sums its share of a 512 MiB buffer.
double probeBandwidth() {
  const size_t n = (512u << 20) / sizeof(uint64_t);
  std::vector<uint64_t> data(n, 1);
  const unsigned t = threadCount();
  std::atomic<uint64_t> sink{0};
  double time = fastestParallelRun(3, [&](unsigned w) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t begin = n * w / t, end = n * (w + 1) / t;
    for (size_t i = begin; i + 4 <= end; i += 4) {
      s0 += data[i];
      s1 += data[i + 1];
      s2 += data[i + 2];
      s3 += data[i + 3];
    }
    sink += s0 + s1 + s2 + s3;
  });
  return double(n * 8) / time;
}

/// Peak multiply-add rate (flops, counting a multiply-add as 2): each
/// thread runs independent chains the compiler vectorises with the host's
/// widest FMA (tq-bench is built with -march=native, like the kernels).
/// Best of five rounds: one round on the shared machine read half the
/// peak. A round lasts ~10 ms per thread: with ~1 ms rounds the probe at
/// start-up read half the peak in every run of 2026-11-22 (the threads
/// could share one core until the scheduler spread them), which only the
/// probe after the kernels corrected.
double probeFma() {
  const int chains = 64, iterations = 10000000;
  std::atomic<double> sink{0};
  double time = fastestParallelRun(5, [&](unsigned) {
    float acc[chains];
    for (int c = 0; c < chains; ++c)
      acc[c] = float(c);
    for (int i = 0; i < iterations; ++i)
      for (int c = 0; c < chains; ++c)
        acc[c] = acc[c] * 0.999999f + 1e-7f;
    double s = 0;
    for (float a : acc)
      s += a;
    sink = sink + s;
  });
  return 2.0 * chains * double(iterations) * threadCount() / time;
}

struct Library {
  std::string dir;
  tq_runtime *rt = nullptr;
};

Library buildLibrary(MLIRContext &context, const std::vector<std::string> &fs,
                     bool naive, bool withPrefill) {
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("tq-bench", dir))
    fail("cannot create a temporary directory");
  std::vector<RuntimeKernelSpec> specs;
  for (const std::string &f : fs) {
    RuntimeKernelSpec s;
    s.kind = RuntimeKernelKind::Decode;
    s.keyFormat = s.valueFormat = f;
    s.headDim = headDim;
    s.group = qHeads / kvHeads;
    specs.push_back(s);
    if (withPrefill) {
      s.kind = RuntimeKernelKind::Prefill;
      s.causal = true;
      specs.push_back(s);
    }
  }
  KernelLibraryOptions options;
  options.outputDir = dir.str().str();
  options.naive = naive;
  if (auto l = symbolizeLookupStrategy(lookup))
    options.lookup = *l;
  else
    fail("unknown --lookup '" + lookup + "' (tile, select, lut)");
  std::string error;
  auto progress = [&](size_t i, size_t n, const std::string &name) {
    llvm::errs() << "  compiling [" << (i + 1) << "/" << n << "] " << name
                 << (naive ? " (naive)" : "") << "\n";
  };
  if (!writeKernelLibrary(context, specs, options, progress, error))
    fail(error);
  Library lib;
  lib.dir = options.outputDir;
  std::string so = lib.dir + "/libtqkernels.so";
  tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof(o),
                             so.c_str(), numThreads, 0};
  if (tq_runtime_create(&o, nullptr, &lib.rt) != TQ_STATUS_OK)
    fail("cannot load " + so);
  return lib;
}

/// A contiguous cache of one sequence of `tokens` rows in `format`: its K
/// pool holds 1024 distinct encoded Gaussian rows tiled over the context,
/// its V pool a copy. Shared by the kernels timed over it.
struct Pools {
  Pools(const std::string &format, uint64_t tokens);
  size_t rowBytes;
  std::vector<uint8_t> k, v;
  /// The generator past the rows: each case draws its queries from a copy.
  ::tq::quant::SplitMix64 rng{42};
};

Pools::Pools(const std::string &format, uint64_t tokens) {
  auto f = ::tq::quant::Format::get(format, headDim);
  rowBytes = f->rowBytes();
  const size_t tokenBytes = kvHeads * rowBytes;
  std::vector<uint8_t> distinct(1024 * tokenBytes);
  std::vector<float> row(headDim);
  for (size_t r = 0; r < 1024 * size_t(kvHeads); ++r) {
    for (float &x : row)
      x = float(rng.gaussian());
    (void)f->encodeRow(
        row, std::span<uint8_t>(distinct).subspan(r * rowBytes, rowBytes));
  }
  k.resize(tokens * tokenBytes);
  for (uint64_t t = 0; t < tokens; ++t)
    std::memcpy(&k[t * tokenBytes], &distinct[(t % 1024) * tokenBytes],
                tokenBytes);
  v = k;
}

/// One point of a table: a kernel library over `pools` (a context of
/// `tokens` rows) and `rows` query rows (1: a decode step; more: a causal
/// prefill block at the end of the context), timed one call at a time.
/// Holds pointers into itself (the descriptor), so it is never moved.
class Case {
public:
  Case(tq_runtime *rt, std::string format, std::string kernel,
       uint64_t tokens, uint32_t rows, std::shared_ptr<Pools> pools);
  Case(const Case &) = delete;
  Case &operator=(const Case &) = delete;

  /// Times one call and keeps the sample.
  void timeOnce();
  const ::tq::tools::TimingSamples &times() const { return times_; }
  uint64_t kvBytes() const { return pools_->k.size() + pools_->v.size(); }

  const std::string format, kernel;
  const uint64_t ctx;

private:
  void call();

  tq_runtime *rt_;
  std::shared_ptr<Pools> pools_;
  std::vector<float> q_, out_;
  int32_t lens_[1];
  int32_t qIndptr_[2];
  tq_kv_cache_v0 cache_ = {};
  tq_attention_params_v0 params_ = {};
  ::tq::tools::TimingSamples times_;
};

Case::Case(tq_runtime *rt, std::string formatName, std::string kernelName,
           uint64_t tokens, uint32_t rows, std::shared_ptr<Pools> pools)
    : format(std::move(formatName)), kernel(std::move(kernelName)),
      ctx(tokens), rt_(rt), pools_(std::move(pools)) {
  lens_[0] = int32_t(tokens);
  cache_.version = TQ_KV_CACHE_VERSION_0;
  cache_.size = sizeof(cache_);
  cache_.k_format = cache_.v_format = format.c_str();
  cache_.head_dim = headDim;
  cache_.num_kv_heads = kvHeads;
  cache_.page_size = uint32_t(tokens);
  cache_.layout = TQ_LAYOUT_CONTIGUOUS;
  cache_.k_row_bytes = cache_.v_row_bytes = uint32_t(pools_->rowBytes);
  cache_.num_pages = 1;
  cache_.k_pages = pools_->k.data();
  cache_.v_pages = pools_->v.data();
  cache_.num_seqs = 1;
  cache_.seq_lens = lens_;
  q_.resize(size_t(rows) * qHeads * headDim);
  out_.resize(q_.size());
  ::tq::quant::SplitMix64 rng = pools_->rng;
  for (float &x : q_)
    x = float(rng.gaussian());
  qIndptr_[0] = 0;
  qIndptr_[1] = int32_t(rows);
  params_ = {TQ_ATTENTION_PARAMS_VERSION_0,
             sizeof(params_),
             qHeads,
             rows > 1 ? 1u : 0u,
             0,
             0.0f,
             0.0f,
             0,
             qIndptr_};
  call(); // untimed: checks the call and warms the pools
}

void Case::call() {
  if (tq_attention(rt_, &cache_, &params_, q_.data(), out_.data()) !=
      TQ_STATUS_OK)
    fail("attention failed for " + format + " (" + kernel + ")");
}

void Case::timeOnce() {
  auto start = Clock::now();
  call();
  times_.add(seconds(start, Clock::now()));
}

/// A row of a table: what a timed Case leaves once its pools are freed.
struct Measured {
  std::string format, kernel;
  uint64_t ctx, kvBytes;
  double best, median;
};

/// Times the cases of one context round-robin: each round calls every case
/// once, starting one case later than the round before, so a burst of
/// other work on the machine, or the frequency it runs at, falls on all of
/// them alike instead of on whichever was timed at that moment. Caches
/// are flushed before every call.
void timeInterleaved(std::vector<std::unique_ptr<Case>> &cases,
                     ::tq::tools::CacheFlusher &flusher) {
  const size_t n = cases.size();
  for (unsigned r = 0; r < repeat; ++r)
    for (size_t i = 0; i < n; ++i) {
      flusher.flush();
      cases[(r + i) % n]->timeOnce();
    }
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ::tq::tools::parseCommandLine(argc, argv, "tq-bench",
                              "tq-bench: decode throughput vs roofline\n",
                              toolOptions);
  if (kvHeads == 0 || qHeads % kvHeads != 0)
    fail("--q-heads must be a multiple of --kv-heads");
  if (repeat == 0)
    fail("--repeat must be at least 1");
  std::vector<std::string> fs;
  for (llvm::StringRef f : llvm::split(formats, ','))
    if (!f.empty()) {
      if (!::tq::quant::Format::get(f, headDim))
        fail("unknown format '" + f + "'");
      fs.push_back(f.str());
    }
  std::vector<uint64_t> ctxs;
  for (llvm::StringRef c : llvm::split(contexts, ',')) {
    uint64_t v;
    if (c.getAsInteger(10, v) || v == 0)
      fail("bad context '" + c + "'");
    ctxs.push_back(v);
  }
  std::vector<uint64_t> prefillCtxs;
  if (prefillRows > 0)
    for (llvm::StringRef c : llvm::split(prefillContexts, ',')) {
      uint64_t v;
      if (c.getAsInteger(10, v) || v < prefillRows)
        fail("bad prefill context '" + c + "' (at least --prefill-rows)");
      prefillCtxs.push_back(v);
    }
  std::vector<std::string> withBaseline = fs;
  if (std::find(fs.begin(), fs.end(), "f16") == fs.end())
    withBaseline.push_back("f16");

  std::unique_ptr<MLIRContext> owned = createKernelCompilerContext();
  MLIRContext &context = *owned;

  llvm::errs() << "probing memory bandwidth and FMA throughput ("
               << threadCount() << " threads)...\n";
  const double bandwidthBefore = probeBandwidth();
  const double fmaBefore = probeFma();
  llvm::errs() << "building kernels...\n";
  Library fused =
      buildLibrary(context, withBaseline, false, !prefillCtxs.empty());
  Library naive;
  if (!skipNaive)
    naive = buildLibrary(context, fs, true, false);

  // Every point is timed first; the probes run again afterwards and the
  // faster reading of each sets the roofline (a probe disturbed by other
  // work on the machine would otherwise flatter every kernel).
  // The cases of one context share each format's pools, are built
  // together and timed round-robin (timeInterleaved); their rows are kept
  // and the pools freed before the next context's are built.
  std::vector<Measured> decode, prefill;
  ::tq::tools::CacheFlusher flusher(flushMiB, threadCount());
  auto kernelName = [](const std::string &f) {
    return f == "f16" ? "f16 baseline (fused)" : "fused";
  };
  auto measure = [&](std::vector<Measured> &table, uint64_t ctx,
                     uint32_t rows) {
    std::vector<std::unique_ptr<Case>> cases;
    for (const std::string &f : withBaseline) {
      auto pools = std::make_shared<Pools>(f, ctx);
      cases.push_back(std::make_unique<Case>(fused.rt, f, kernelName(f), ctx,
                                             rows, pools));
      // The naive library holds the requested decode formats only.
      bool requested = std::find(fs.begin(), fs.end(), f) != fs.end();
      if (rows == 1 && !skipNaive && requested)
        cases.push_back(std::make_unique<Case>(
            naive.rt, f, "dequantise-then-attend", ctx, rows, pools));
    }
    llvm::errs() << "  context " << ctx << (rows > 1 ? " (prefill)" : "")
                 << ": " << cases.size() << " kernels x " << repeat
                 << " rounds\n";
    timeInterleaved(cases, flusher);
    for (const auto &c : cases)
      table.push_back({c->format, c->kernel, c->ctx, c->kvBytes(),
                       c->times().best(), c->times().median()});
  };
  for (uint64_t ctx : ctxs)
    measure(decode, ctx, 1);
  for (uint64_t ctx : prefillCtxs)
    measure(prefill, ctx, prefillRows);
  llvm::errs() << "probing again...\n";
  const double bandwidthAfter = probeBandwidth();
  const double fmaAfter = probeFma();
  const double bandwidth = std::max(bandwidthBefore, bandwidthAfter);
  const double fma = std::max(fmaBefore, fmaAfter);

  std::string text;
  llvm::raw_string_ostream md(text);
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  auto gb = [](double v) { return llvm::format("%.1f", v / 1e9); };
  auto ms = [](double s) { return llvm::format("%.2f", s * 1e3); };
  // The roofline: the larger of the bytes' read time and the arithmetic's
  // multiply-add time, both at the probed rates; a case's best time is
  // set against it.
  auto xRoofline = [&](const Measured &m, double flops) {
    double bound = std::max(double(m.kvBytes) / bandwidth, flops / fma);
    return llvm::format("%.1f", m.best / bound);
  };
  md << "## Decode, " << date << ", " << llvm::sys::getHostCPUName() << ", "
     << threadCount() << " threads\n\n"
     << "head dim " << headDim << ", " << qHeads << " query heads, " << kvHeads
     << " KV heads, one query; " << repeat
     << (repeat == 1 ? " round" : " rounds")
     << ", each timing every kernel of a context once (round-robin)"
     << (flushMiB ? ", caches flushed before every call (" +
                        std::to_string(flushMiB) + " MiB read)"
                  : std::string(", warm caches"))
     << "; best and median step. Probed in this run, before / after the "
        "kernels (the larger sets the roofline): read bandwidth "
     << gb(bandwidthBefore) << " / " << gb(bandwidthAfter)
     << " GB/s, multiply-add " << gb(fmaBefore) << " / " << gb(fmaAfter)
     << " GFLOP/s.\n\n"
     << "| format | context | kernel | ms/step | median | KV MB/step | GB/s "
        "| % of bandwidth | x roofline |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  for (const Measured &m : decode) {
    double flops = 4.0 * qHeads * double(m.ctx) * headDim;
    double rate = m.kvBytes / m.best;
    md << "| " << m.format << " | " << m.ctx << " | " << m.kernel << " | "
       << ms(m.best) << " | " << ms(m.median) << " | "
       << llvm::format("%.2f", m.kvBytes / 1e6) << " | "
       << llvm::format("%.2f", rate / 1e9) << " | "
       << llvm::format("%.1f", 100.0 * rate / bandwidth) << " | "
       << xRoofline(m, flops) << " |\n";
  }
  if (!prefill.empty()) {
    // The block's rows sit at the last positions: row i sees ctx - rows +
    // i + 1 keys.
    md << "\n### Prefill (causal block of " << prefillRows
       << " query rows at the end of the context)\n\n"
       << "| format | context | kernel | ms/block | median | KV MB | GFLOP/s "
          "| x roofline |\n|---|---|---|---|---|---|---|---|\n";
    for (const Measured &m : prefill) {
      double keys = double(prefillRows) * double(m.ctx) -
                    double(prefillRows) * (prefillRows - 1) / 2.0;
      double flops = 4.0 * qHeads * keys * headDim;
      md << "| " << m.format << " | " << m.ctx << " | " << m.kernel
         << " | " << ms(m.best) << " | " << ms(m.median) << " | "
         << llvm::format("%.2f", m.kvBytes / 1e6) << " | "
         << llvm::format("%.1f", flops / m.best / 1e9) << " | "
         << xRoofline(m, flops) << " |\n";
    }
  }
  md.flush();
  llvm::outs() << text;
  if (!report.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(report, ec, llvm::sys::fs::OF_Append);
    if (ec)
      fail("cannot write '" + report + "': " + ec.message());
    out << text << "\n";
  }
  tq_runtime_destroy(fused.rt);
  if (naive.rt)
    tq_runtime_destroy(naive.rt);
  llvm::sys::fs::remove_directories(fused.dir);
  if (!naive.dir.empty())
    llvm::sys::fs::remove_directories(naive.dir);
  return 0;
}
