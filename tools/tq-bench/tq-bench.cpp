//===- tq-bench.cpp - Decode throughput against the machine's limits ------===//
//
// A benchmark, not a test. For each format and context length it times
// decode steps (and causal prefill blocks) through the runtime and
// reports, side by side in the same run:
//   - the compressed kernel (tq-aot's fused, tiled, split-KV decode),
//   - the f16 flash-attention baseline (the same harness, f16 K/V),
//   - the dequantise-then-attend baseline (the naive pipeline: every cached
//     row decoded and un-rotated, then dense attention),
//   - variants of the fused kernel with other knob values (--variants),
//   - ggml's CPU flash attention (FLASH_ATTN_EXT) over f16 and q4_0 K/V,
//     in a contiguous and in llama.cpp's cache layout (--ggml-bench: a
//     library of integrations/llama.cpp/bench-ggml, dlopened, so tq-bench
//     never links ggml),
// with bytes of KV read per step, achieved GB/s as a share of a memory
// bandwidth probe, the time relative to the roofline
// max(bytes / bandwidth, flops / FMA rate), both probed in the same run,
// and relative to the bandwidth floor bytes / bandwidth alone.
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
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
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
#include <optional>
#include <set>
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
cl::opt<std::string> flushMiBOpt(
    "flush-mib", cl::cat(toolOptions),
    cl::desc("MiB read on every thread before each timed call, so the call "
             "finds its KV in memory as a model's layer does; 'auto': twice "
             "the last-level cache, at least 64 (0: keep caches warm)"),
    cl::init("auto"));
cl::opt<bool> headMajor(
    "head-major", cl::cat(toolOptions),
    cl::desc("tqc's pools head-major (TQ_LAYOUT_HEAD_MAJOR: each KV head's "
             "rows consecutive); =false: a token's heads adjacent, as in "
             "llama.cpp's cache"),
    cl::init(true));
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
cl::opt<std::string> variantsOpt(
    "variants", cl::cat(toolOptions),
    cl::desc("more fused kernels, timed in the same rounds as rows 'fused "
             "(LABEL)': LABEL:knob=value[,knob=value...][;LABEL2:...], "
             "knobs as tq-aot --tuning-db's (tile_size, splits, lookup, ...), "
             "and cpu=NAME: the variant's kernels built for that LLVM CPU "
             "(one whose instructions this machine has)"),
    cl::value_desc("variants"));
cl::opt<std::string> ggmlBench(
    "ggml-bench", cl::cat(toolOptions),
    cl::desc("ggml baselines library (libtq_bench_ggml.so, built by "
             "integrations/llama.cpp/build.sh); default: the build "
             "directory's llama.cpp/lib/libtq_bench_ggml.so when it exists; "
             "'off': no ggml rows"),
    cl::value_desc("path"));

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

/// Read bandwidth: every thread sums its share of a buffer of 512 MiB or
/// four times the last-level cache, whichever is larger, so the reads
/// come from memory even where that cache holds hundreds of MiB.
double probeBandwidth() {
  const size_t bytes = std::max<size_t>(
      size_t(512) << 20, 4 * ::tq::tools::lastLevelCacheBytes());
  const size_t n = bytes / sizeof(uint64_t);
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

/// "name: knob=value,..." for each decode kernel of the library in `dir`
/// as its kernels.json records it: the knobs it was built with, the ones
/// the CPU chose included (a variant names only those it sets).
std::vector<std::string> decodeKnobsAsBuilt(const std::string &dir) {
  std::vector<std::string> lines;
  auto buffer = llvm::MemoryBuffer::getFile(dir + "/kernels.json");
  if (!buffer)
    return lines;
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return lines;
  }
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *kernels = root ? root->getArray("kernels") : nullptr;
  if (!kernels)
    return lines;
  for (const llvm::json::Value &k : *kernels) {
    const llvm::json::Object *kernel = k.getAsObject();
    if (!kernel || kernel->getString("kind") != "decode")
      continue;
    std::vector<std::string> knobs;
    if (const llvm::json::Object *values = kernel->getObject("knobs"))
      for (const auto &[name, value] : *values)
        if (std::optional<llvm::StringRef> text = value.getAsString())
          knobs.push_back(name.str() + "=" + text->str());
    llvm::sort(knobs);
    lines.push_back(kernel->getString("name").value_or("?").str() + ": " +
                    llvm::join(knobs, ","));
  }
  return lines;
}

/// The kernels of a library over formats `fs`: a decode kernel per format
/// and, with `withPrefill`, a causal prefill kernel.
std::vector<RuntimeKernelSpec> benchSpecs(const std::vector<std::string> &fs,
                                          bool withPrefill) {
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
  return specs;
}

/// The library-wide options (--lookup; the naive pipeline with `naive`).
KernelLibraryOptions libraryOptions(bool naive) {
  KernelLibraryOptions options;
  options.naive = naive;
  if (auto l = symbolizeLookupStrategy(lookup))
    options.lookup = *l;
  else
    fail("unknown --lookup '" + lookup + "' (tile, select, lut)");
  return options;
}

/// Compiles `specs` into a library in a new temporary directory and loads
/// it; `tag` names it in the progress lines.
Library buildLibrary(MLIRContext &context,
                     const std::vector<RuntimeKernelSpec> &specs,
                     KernelLibraryOptions options, const std::string &tag) {
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("tq-bench", dir))
    fail("cannot create a temporary directory");
  options.outputDir = dir.str().str();
  std::string error;
  auto progress = [&](size_t i, size_t n, const std::string &name) {
    llvm::errs() << "  compiling [" << (i + 1) << "/" << n << "] " << name
                 << (tag.empty() ? "" : " (" + tag + ")") << "\n";
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

/// A --variants entry: the fused kernels of the requested formats built
/// with `knobs` over the library-wide options, in a library of their own
/// (a kernel's name is its spec's, so it cannot share the default one).
struct Variant {
  std::string label;
  KnobValues knobs;
  /// The specs that have every knob of the variant (a decode-only knob
  /// such as splits leaves the prefill kernels out).
  std::vector<RuntimeKernelSpec> specs;
  KernelLibraryOptions options;
  Library lib;

  bool has(const std::string &format, bool prefill) const {
    for (const RuntimeKernelSpec &s : specs)
      if (s.keyFormat == format &&
          (s.kind == RuntimeKernelKind::Prefill) == prefill)
        return true;
    return false;
  }
};

/// Parses --variants and checks every knob against the kernels' own knobs
/// (kernelKnobs: names, then legal values through setKernelKnobs), before
/// anything is probed or compiled. The knob names are the library's, not
/// a list kept here.
std::vector<Variant> parseVariants(const std::string &text,
                                   const std::vector<std::string> &fs,
                                   bool withPrefill) {
  std::vector<Variant> variants;
  if (llvm::StringRef(text).trim().empty())
    return variants;
  const std::vector<RuntimeKernelSpec> all = benchSpecs(fs, withPrefill);
  // Each spec's knob names.
  std::vector<std::set<std::string>> specKnobs;
  std::vector<std::string> allNames;
  for (const RuntimeKernelSpec &spec : all) {
    std::vector<KnobInfo> knobs;
    std::string error;
    if (!kernelKnobs(spec, libraryOptions(false).cpu, knobs, error))
      fail("--variants: " + error);
    specKnobs.emplace_back();
    for (const KnobInfo &k : knobs) {
      specKnobs.back().insert(k.name);
      if (!llvm::is_contained(allNames, k.name))
        allNames.push_back(k.name);
    }
  }
  const std::string usage = " (LABEL:knob=value[,knob=value...][;...])";
  for (llvm::StringRef entry : llvm::split(text, ';')) {
    entry = entry.trim();
    if (entry.empty())
      continue;
    auto [label, list] = entry.split(':');
    label = label.trim();
    if (label.empty() || !entry.contains(':') || list.trim().empty())
      fail("bad --variants entry '" + entry + "'" + usage);
    for (char c : label)
      if (!llvm::isAlnum(c) && !llvm::StringRef("_.+-").contains(c))
        fail("bad --variants label '" + label +
             "' (letters, digits and _ . + - only)");
    for (const Variant &v : variants)
      if (v.label == label)
        fail("--variants: label '" + label + "' given twice");
    Variant v;
    v.label = label.str();
    // `cpu=`: the CPU the variant's kernels are built for (empty: the
    // host, as the fused rows).
    std::string cpu;
    for (llvm::StringRef kv : llvm::split(list, ',')) {
      kv = kv.trim();
      auto [name, value] = kv.split('=');
      name = name.trim();
      value = value.trim();
      if (name.empty() || value.empty() || !kv.contains('='))
        fail("bad knob '" + kv + "' in --variants entry '" + label + "'" +
             usage);
      if (v.knobs.count(name.str()) || (name == "cpu" && !cpu.empty()))
        fail("--variants '" + label + "': knob " + name + " given twice");
      if (name == "cpu") {
        // Not a kernel knob: the variant's kernels are built for this CPU
        // (its features decide the lowerings and `auto`), which must run
        // here.
        std::string error;
        if (!cpuRunsOnHost(value.str(), error))
          fail("--variants '" + label + "': " + error);
        cpu = value.str();
        continue;
      }
      if (!llvm::is_contained(allNames, name))
        fail("--variants '" + label + "': unknown knob '" + name +
             "' (knobs of these kernels: " + llvm::join(allNames, ", ") + ")");
      v.knobs[name.str()] = value.str();
    }
    v.options = libraryOptions(false);
    if (!cpu.empty())
      v.options.cpu = cpu;
    for (size_t i = 0; i < all.size(); ++i) {
      const RuntimeKernelSpec &spec = all[i];
      std::string missing;
      for (const auto &[name, value] : v.knobs)
        if (!specKnobs[i].count(name))
          missing = name;
      if (!missing.empty()) {
        llvm::errs() << "variant " << v.label << ": no "
                     << (spec.kind == RuntimeKernelKind::Prefill ? "prefill"
                                                                 : "decode")
                     << " kernel of " << spec.keyFormat << " (" << missing
                     << " is not one of " << spec.name() << "'s knobs)\n";
        continue;
      }
      std::string error;
      if (!setKernelKnobs(spec, v.knobs, v.options, error))
        fail("--variants '" + label + "': " + error);
      v.specs.push_back(spec);
    }
    if (v.specs.empty())
      fail("--variants '" + label + "': no kernel has all of its knobs");
    variants.push_back(std::move(v));
  }
  return variants;
}

/// A contiguous cache of one sequence of `tokens` rows in `format`: its K
/// pool holds 1024 distinct encoded Gaussian rows tiled over the context
/// (per head, head-major with --head-major), its V pool a copy. Shared by
/// the kernels timed over it.
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
    for (size_t h = 0; h < kvHeads; ++h)
      std::memcpy(&k[headMajor ? (h * tokens + t) * rowBytes
                               : t * tokenBytes + h * rowBytes],
                  &distinct[(t % 1024) * tokenBytes + h * rowBytes], rowBytes);
  v = k;
}

/// One point of a table: a kernel timed one call at a time.
class Timed {
public:
  Timed(std::string format, std::string kernel, uint64_t tokens)
      : format(std::move(format)), kernel(std::move(kernel)), ctx(tokens) {}
  Timed(const Timed &) = delete;
  Timed &operator=(const Timed &) = delete;
  virtual ~Timed() = default;

  /// Times one call and keeps the sample.
  void timeOnce() {
    auto start = Clock::now();
    call();
    times_.add(seconds(start, Clock::now()));
    settle();
  }
  const ::tq::tools::TimingSamples &times() const { return times_; }
  /// Bytes of K and V the call reads.
  virtual uint64_t kvBytes() const = 0;

  const std::string format, kernel;
  const uint64_t ctx;

protected:
  virtual void call() = 0;
  /// Runs after each timed call, untimed.
  virtual void settle() {}

private:
  ::tq::tools::TimingSamples times_;
};

/// A tqc kernel over `pools` (a context of `tokens` rows) and `rows` query
/// rows (1: a decode step; more: a causal prefill block at the end of the
/// context). Holds pointers into itself (the descriptor), so it is never
/// moved.
class Case : public Timed {
public:
  Case(tq_runtime *rt, std::string format, std::string kernel, uint64_t tokens,
       uint32_t rows, std::shared_ptr<Pools> pools);

  uint64_t kvBytes() const override {
    return pools_->k.size() + pools_->v.size();
  }

private:
  void call() override;

  tq_runtime *rt_;
  std::shared_ptr<Pools> pools_;
  std::vector<float> q_, out_;
  int32_t lens_[1];
  int32_t qIndptr_[2];
  tq_kv_cache_v0 cache_ = {};
  tq_attention_params_v0 params_ = {};
};

Case::Case(tq_runtime *rt, std::string formatName, std::string kernelName,
           uint64_t tokens, uint32_t rows, std::shared_ptr<Pools> pools)
    : Timed(std::move(formatName), std::move(kernelName), tokens), rt_(rt),
      pools_(std::move(pools)) {
  lens_[0] = int32_t(tokens);
  cache_.version = TQ_KV_CACHE_VERSION_0;
  cache_.size = sizeof(cache_);
  cache_.k_format = cache_.v_format = format.c_str();
  cache_.head_dim = headDim;
  cache_.num_kv_heads = kvHeads;
  cache_.page_size = uint32_t(tokens);
  cache_.layout =
      TQ_LAYOUT_CONTIGUOUS | (headMajor ? TQ_LAYOUT_HEAD_MAJOR : 0u);
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

/// The C API of integrations/llama.cpp/bench-ggml (tq-bench-ggml.h),
/// resolved from the dlopened library.
struct GgmlBench {
  static constexpr int kAbiVersion = 1;
  std::string path, description;
  int (*abiVersion)();
  const char *(*describe)();
  void *(*create)(const char *type, const char *layout, int headDim, int qHeads,
                  int kvHeads, int64_t context, int rows, int threads);
  int (*run)(void *);
  void (*idle)(void *);
  uint64_t (*bytes)(const void *);
  void (*destroy)(void *);
  const char *(*error)();
};

/// Loads the library at `path`; false with `why` when it cannot be loaded
/// or is not one (a missing symbol, another ABI version).
bool loadGgmlBench(const std::string &path, GgmlBench &api, std::string &why) {
  std::string error;
  auto lib =
      llvm::sys::DynamicLibrary::getPermanentLibrary(path.c_str(), &error);
  if (!lib.isValid()) {
    why = "cannot load " + path + ": " + error;
    return false;
  }
  bool ok = true;
  auto get = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        lib.getAddressOfSymbol(name));
    if (!fn && ok) {
      why = path + " has no symbol " + name +
            " (not a tq-bench ggml library, or an older one: rebuild it "
            "with integrations/llama.cpp/bench-ggml/build.sh)";
      ok = false;
    }
  };
  get(api.abiVersion, "tqbg_abi_version");
  get(api.describe, "tqbg_describe");
  get(api.create, "tqbg_create");
  get(api.run, "tqbg_run");
  get(api.idle, "tqbg_idle");
  get(api.bytes, "tqbg_bytes");
  get(api.destroy, "tqbg_destroy");
  get(api.error, "tqbg_error");
  if (!ok)
    return false;
  if (api.abiVersion() != GgmlBench::kAbiVersion) {
    why = path + " has ABI version " + std::to_string(api.abiVersion()) +
          ", tq-bench needs " + std::to_string(GgmlBench::kAbiVersion) +
          " (rebuild it with integrations/llama.cpp/bench-ggml/build.sh)";
    return false;
  }
  api.path = path;
  api.description = api.describe();
  return true;
}

/// ggml's CPU FLASH_ATTN_EXT over `type` K/V in `layout` (contiguous or
/// cache), at the shape of the other rows, through the bench library. The
/// library's threadpool is paused after each call (untimed), so its
/// workers sleep instead of polling while the other kernels are timed;
/// the timed call includes waking them.
class GgmlCase : public Timed {
public:
  /// Null with `why` when the library cannot build the case.
  static std::unique_ptr<GgmlCase> create(const GgmlBench &api,
                                          const std::string &type,
                                          const std::string &layout,
                                          uint64_t tokens, uint32_t rows,
                                          std::string &why) {
    void *h = api.create(type.c_str(), layout.c_str(), int(headDim),
                         int(qHeads), int(kvHeads), int64_t(tokens), int(rows),
                         int(threadCount()));
    if (!h) {
      why = api.error();
      return nullptr;
    }
    std::unique_ptr<GgmlCase> c(new GgmlCase(api, h, type, layout, tokens));
    c->call(); // untimed: checks the call and warms the caches
    c->settle();
    return c;
  }
  ~GgmlCase() override { api_.destroy(h_); }

  uint64_t kvBytes() const override { return api_.bytes(h_); }

private:
  GgmlCase(const GgmlBench &api, void *h, const std::string &type,
           const std::string &layout, uint64_t tokens)
      : Timed(type, "ggml " + type + " (" + layoutName(layout) + ")", tokens),
        api_(api), h_(h) {}
  static std::string layoutName(const std::string &layout) {
    return layout == "cache" ? "cache layout" : layout;
  }
  void call() override {
    if (api_.run(h_) != 0)
      fail(kernel + " failed at context " + std::to_string(ctx) + ": " +
           api_.error());
  }
  void settle() override { api_.idle(h_); }

  const GgmlBench &api_;
  void *h_;
};

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
void timeInterleaved(std::vector<std::unique_ptr<Timed>> &cases,
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
  std::string flushError;
  std::optional<size_t> flushMiB =
      ::tq::tools::parseFlushMiB(flushMiBOpt, &flushError);
  if (!flushMiB)
    fail(flushError);
  std::vector<std::string> fs;
  for (llvm::StringRef f : llvm::split(formats, ','))
    if (!f.empty()) {
      auto format = ::tq::quant::Format::get(f, headDim);
      if (!format)
        fail(format.status().message());
      fs.push_back(f.str());
    }
  // A context is one page of the runtime's cache (a 32-bit slot count).
  auto parseContext = [](llvm::StringRef c, uint64_t least,
                         const llvm::Twine &what) {
    uint64_t v;
    if (c.getAsInteger(10, v) || v < least || v > UINT32_MAX)
      fail("bad " + what + " '" + c + "' (" + llvm::Twine(least) + " to " +
           llvm::Twine(UINT32_MAX) + " tokens)");
    return v;
  };
  std::vector<uint64_t> ctxs;
  for (llvm::StringRef c : llvm::split(contexts, ','))
    ctxs.push_back(parseContext(c, 1, "context"));
  std::vector<uint64_t> prefillCtxs;
  if (prefillRows > 0)
    for (llvm::StringRef c : llvm::split(prefillContexts, ','))
      prefillCtxs.push_back(parseContext(
          c, prefillRows, "prefill context (at least --prefill-rows)"));
  std::vector<std::string> withBaseline = fs;
  if (std::find(fs.begin(), fs.end(), "f16") == fs.end())
    withBaseline.push_back("f16");
  const bool withPrefill = !prefillCtxs.empty();
  // What one context's cases hold at once: every format's K and V pools
  // and ggml's f16 and q4_0 baselines (both layouts: at most f16's bytes
  // each, twice), refused up front rather than failing mid-run.
  {
    double tokenBytes = 0;
    for (const std::string &f : withBaseline)
      tokenBytes +=
          2.0 * kvHeads * ::tq::quant::Format::get(f, headDim)->rowBytes();
    tokenBytes += 4 * 2.0 * kvHeads * headDim * 2;
    uint64_t largest = 0;
    for (uint64_t c : ctxs)
      largest = std::max(largest, c);
    for (uint64_t c : prefillCtxs)
      largest = std::max(largest, c);
    if (std::string e = ::tq::tools::memoryNeedError(
            "context " + std::to_string(largest) +
                " (every format's K and V pools and ggml's baselines)",
            tokenBytes * double(largest));
        !e.empty())
      fail(e);
  }
  // The report's file is opened now: a run that cannot write it stops
  // before its timing, not after.
  std::unique_ptr<llvm::raw_fd_ostream> reportFile;
  if (!report.empty()) {
    std::error_code ec;
    reportFile = std::make_unique<llvm::raw_fd_ostream>(
        report, ec, llvm::sys::fs::OF_Append);
    if (ec)
      fail("cannot write '" + report + "': " + ec.message());
  }

  std::unique_ptr<MLIRContext> owned = createKernelCompilerContext();
  MLIRContext &context = *owned;
  std::vector<Variant> variants = parseVariants(variantsOpt, fs, withPrefill);

  // The ggml baselines: the library given, or the build directory's when
  // it has one; `ggmlNote` says in the report why there are none.
  GgmlBench ggml;
  bool withGgml = false;
  std::string ggmlNote;
  if (ggmlBench == "off") {
    ggmlNote = "--ggml-bench=off";
  } else if (!ggmlBench.empty()) {
    if (!loadGgmlBench(ggmlBench, ggml, ggmlNote))
      fail("--ggml-bench: " + ggmlNote);
    withGgml = true;
  } else {
    llvm::SmallString<256> path;
    if (const char *dir = std::getenv("TQC_LLAMA_DIR"); dir && *dir) {
      path = dir;
    } else {
      // <build>/bin/tq-bench -> <build>/llama.cpp
      path = llvm::sys::fs::getMainExecutable(
          argv[0], reinterpret_cast<void *>(&threadCount));
      llvm::sys::path::remove_filename(path);
      llvm::sys::path::remove_filename(path);
      llvm::sys::path::append(path, "llama.cpp");
    }
    llvm::sys::path::append(path, "lib", "libtq_bench_ggml.so");
    if (!llvm::sys::fs::exists(path)) {
      ggmlNote = "no library at " + path.str().str() +
                 "; integrations/llama.cpp/build.sh builds it";
    } else if (loadGgmlBench(path.str().str(), ggml, ggmlNote)) {
      withGgml = true;
    } else {
      llvm::errs() << "tq-bench: warning: no ggml baselines: " << ggmlNote
                   << "\n";
    }
  }
  // ggml cases a library could not build (e.g. a head dim not a multiple
  // of q4_0's block): each reason once, in the report.
  std::vector<std::string> ggmlSkipped;

  llvm::errs() << "probing memory bandwidth and FMA throughput ("
               << threadCount() << " threads)...\n";
  const double bandwidthBefore = probeBandwidth();
  const double fmaBefore = probeFma();
  llvm::errs() << "building kernels...\n";
  Library fused = buildLibrary(context, benchSpecs(withBaseline, withPrefill),
                               libraryOptions(false), "");
  Library naive;
  if (!skipNaive)
    naive = buildLibrary(context, benchSpecs(fs, false), libraryOptions(true),
                         "naive");
  for (Variant &v : variants)
    v.lib = buildLibrary(context, v.specs, v.options, "variant " + v.label);

  // Every point is timed first; the probes run again afterwards and the
  // faster reading of each sets the roofline (a probe disturbed by other
  // work on the machine would otherwise flatter every kernel).
  // The cases of one context share each format's pools, are built
  // together and timed round-robin (timeInterleaved); their rows are kept
  // and the pools freed before the next context's are built.
  std::vector<Measured> decode, prefill;
  ::tq::tools::CacheFlusher flusher(*flushMiB, threadCount());
  auto kernelName = [](const std::string &f) {
    return f == "f16" ? "f16 baseline (fused)" : "fused";
  };
  auto measure = [&](std::vector<Measured> &table, uint64_t ctx,
                     uint32_t rows) {
    std::vector<std::unique_ptr<Timed>> cases;
    for (const std::string &f : withBaseline) {
      auto pools = std::make_shared<Pools>(f, ctx);
      cases.push_back(std::make_unique<Case>(fused.rt, f, kernelName(f), ctx,
                                             rows, pools));
      // The naive and variant libraries hold the requested formats only.
      bool requested = std::find(fs.begin(), fs.end(), f) != fs.end();
      if (rows == 1 && !skipNaive && requested)
        cases.push_back(std::make_unique<Case>(
            naive.rt, f, "dequantise-then-attend", ctx, rows, pools));
      for (const Variant &v : variants)
        if (requested && v.has(f, rows > 1))
          cases.push_back(std::make_unique<Case>(
              v.lib.rt, f, "fused (" + v.label + ")", ctx, rows, pools));
    }
    if (withGgml)
      for (const char *type : {"f16", "q4_0"})
        for (const char *layout : {"contiguous", "cache"}) {
          std::string why;
          if (auto c = GgmlCase::create(ggml, type, layout, ctx, rows, why)) {
            cases.push_back(std::move(c));
          } else {
            std::string note =
                std::string("ggml ") + type + " (" + layout + "): " + why;
            if (!llvm::is_contained(ggmlSkipped, note)) {
              llvm::errs() << "tq-bench: warning: " << note << "\n";
              ggmlSkipped.push_back(note);
            }
          }
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
  // The bandwidth floor: the KV bytes' read time alone at the probed
  // bandwidth, and the best time against it.
  auto floorColumns = [&](const Measured &m) {
    double floor = double(m.kvBytes) / bandwidth;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::format("%.3f", floor * 1e3) << " | "
       << llvm::format("%.1f", m.best / floor);
    return text;
  };
  md << "## Decode, " << date << ", " << llvm::sys::getHostCPUName() << ", "
     << threadCount() << " threads\n\n"
     << "head dim " << headDim << ", " << qHeads << " query heads, " << kvHeads
     << " KV heads, one query; tqc's pools "
     << (headMajor ? "head-major (TQ_LAYOUT_HEAD_MAJOR)"
                   : "token-major (a token's heads adjacent)")
     << "; " << repeat
     << (repeat == 1 ? " round" : " rounds")
     << ", each timing every kernel of a context once (round-robin)"
     << (*flushMiB ? ", caches flushed before every call (" +
                         std::to_string(*flushMiB) + " MiB read; last-level "
                         "cache " +
                         std::to_string(::tq::tools::lastLevelCacheBytes() >>
                                        20) +
                         " MiB)"
                  : std::string(", warm caches"))
     << "; best and median step. Probed in this run, before / after the "
        "kernels (the larger sets the roofline): read bandwidth "
     << gb(bandwidthBefore) << " / " << gb(bandwidthAfter)
     << " GB/s, multiply-add " << gb(fmaBefore) << " / " << gb(fmaAfter)
     << " GFLOP/s. `floor ms`: the KV bytes' read time at that bandwidth "
        "alone; `x floor`: the best step over it.\n\n";
  if (!variants.empty()) {
    md << "Variants (fused kernels with other knob values, in the same "
          "rounds):";
    for (const Variant &v : variants) {
      std::vector<std::string> knobs;
      if (v.options.cpu != libraryOptions(false).cpu)
        knobs.push_back("cpu=" + v.options.cpu);
      for (const auto &[name, value] : v.knobs)
        knobs.push_back(name + "=" + value);
      md << " " << v.label << ": " << llvm::join(knobs, ",") << ";";
    }
    md << "\n\n";
    // The knobs each variant's decode kernels were built with, the CPU's
    // choices included (a variant's own knobs leave the rest to them).
    md << "Variants' decode kernels as built:\n";
    for (const Variant &v : variants)
      for (const std::string &line : decodeKnobsAsBuilt(v.lib.dir))
        md << "- " << v.label << " " << line << "\n";
    md << "\n";
  }
  if (withGgml) {
    md << "ggml baselines: ggml's CPU FLASH_ATTN_EXT (" << ggml.description
       << ", " << ggml.path
       << "), f32 query, f16 mask, f32 accumulation, f16 and q4_0 K/V, "
          "contiguous ([D, context, KV heads]) and in llama.cpp's cache "
          "layout (the rows of all KV heads of a cell consecutive, viewed "
          "and permuted as llama_kv_cache::get_k); "
       << threadCount()
       << " threads of ggml's threadpool, paused after each call";
    for (const std::string &note : ggmlSkipped)
      md << "; not measured: " << note;
    md << ".\n\n";
  } else {
    md << "ggml baselines: not included (" << ggmlNote << ").\n\n";
  }
  md << "| format | context | kernel | ms/step | median | KV MB/step | GB/s "
        "| % of bandwidth | x roofline | floor ms | x floor |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Measured &m : decode) {
    double flops = 4.0 * qHeads * double(m.ctx) * headDim;
    double rate = m.kvBytes / m.best;
    md << "| " << m.format << " | " << m.ctx << " | " << m.kernel << " | "
       << ms(m.best) << " | " << ms(m.median) << " | "
       << llvm::format("%.2f", m.kvBytes / 1e6) << " | "
       << llvm::format("%.2f", rate / 1e9) << " | "
       << llvm::format("%.1f", 100.0 * rate / bandwidth) << " | "
       << xRoofline(m, flops) << " | " << floorColumns(m) << " |\n";
  }
  if (!prefill.empty()) {
    // The block's rows sit at the last positions: row i sees ctx - rows +
    // i + 1 keys.
    md << "\n### Prefill (causal block of " << prefillRows
       << " query rows at the end of the context)\n\n"
       << "| format | context | kernel | ms/block | median | KV MB | GFLOP/s "
          "| x roofline | floor ms | x floor |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const Measured &m : prefill) {
      double keys = double(prefillRows) * double(m.ctx) -
                    double(prefillRows) * (prefillRows - 1) / 2.0;
      double flops = 4.0 * qHeads * keys * headDim;
      md << "| " << m.format << " | " << m.ctx << " | " << m.kernel << " | "
         << ms(m.best) << " | " << ms(m.median) << " | "
         << llvm::format("%.2f", m.kvBytes / 1e6) << " | "
         << llvm::format("%.1f", flops / m.best / 1e9) << " | "
         << xRoofline(m, flops) << " | " << floorColumns(m) << " |\n";
    }
  }
  md.flush();
  llvm::outs() << text;
  if (reportFile) {
    *reportFile << text << "\n";
    reportFile->flush();
    if (std::error_code ec = reportFile->error()) {
      reportFile->clear_error();
      fail("cannot write '" + report + "': " + ec.message());
    }
  }
  tq_runtime_destroy(fused.rt);
  if (naive.rt)
    tq_runtime_destroy(naive.rt);
  llvm::sys::fs::remove_directories(fused.dir);
  if (!naive.dir.empty())
    llvm::sys::fs::remove_directories(naive.dir);
  for (Variant &v : variants) {
    tq_runtime_destroy(v.lib.rt);
    llvm::sys::fs::remove_directories(v.lib.dir);
  }
  return 0;
}
