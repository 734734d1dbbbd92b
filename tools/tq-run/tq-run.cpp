//===- tq-run.cpp - Run TurboQuant attention kernels on files -------------===//
//
//   tq-run attention --k-format F --v-format G --head-dim D --q-heads H
//          --kv-heads KH [--causal] [--window W] [--softcap C] [--scale S]
//          [--page-size P] [--head-major] [--library DIR] [--num-threads N]
//          --q Q.f32 --k K.f32 --v V.f32 --out O.f32
//
// Q is [n_q][H][D], K and V are [n_kv][KH][D] (little-endian float32,
// row-major). K/V are appended into a paged cache through the append
// kernels, then decode (n_q = 1) or prefill (n_q > 1; causal queries are
// the last n_q positions) runs, and O ([n_q][H][D]) is written. Kernels
// come from --library (a tq-aot directory) or are compiled on the fly into
// a temporary one.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Npy.h"
#include "tq/Target/KernelLibrary.h"
#include "tq/tq_runtime.h"

#include "CacheFlusher.h"
#include "TimingSamples.h"

#include "ToolOptions.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

using namespace mlir;
using namespace mlir::tq;
namespace cl = llvm::cl;

namespace {

/// Only this tool's options appear in --help (not LLVM's).
cl::OptionCategory toolOptions("tq-run options");

cl::opt<std::string> command(cl::Positional, cl::cat(toolOptions),
                             cl::desc("<command: attention>"), cl::Required);
cl::opt<std::string> kFormat("k-format", cl::cat(toolOptions),
                             cl::desc("K cache format"), cl::Required);
cl::opt<std::string> vFormat("v-format", cl::cat(toolOptions),
                             cl::desc("V cache format"), cl::Required);
cl::opt<unsigned> headDim("head-dim", cl::cat(toolOptions),
                          cl::desc("head dim D"), cl::Required);
cl::opt<unsigned> qHeads("q-heads", cl::cat(toolOptions),
                         cl::desc("query heads H"), cl::Required);
cl::opt<unsigned> kvHeads("kv-heads", cl::cat(toolOptions),
                          cl::desc("KV heads KH"), cl::Required);
cl::opt<bool> causal("causal", cl::cat(toolOptions),
                     cl::desc("causal masking"));
cl::opt<unsigned> window("window", cl::cat(toolOptions),
                         cl::desc("sliding window (0: none)"), cl::init(0));
cl::opt<float> softcap("softcap", cl::cat(toolOptions),
                       cl::desc("logit soft-cap (0: none)"), cl::init(0.0f));
cl::opt<float> scale("scale", cl::cat(toolOptions),
                     cl::desc("logit scale (default 1/sqrt(D))"),
                     cl::init(0.0f));
cl::opt<unsigned> pageSize("page-size", cl::cat(toolOptions),
                           cl::desc("tokens per page"), cl::init(16));
cl::opt<bool> headMajor(
    "head-major", cl::cat(toolOptions),
    cl::desc("pages head-major (TQ_LAYOUT_HEAD_MAJOR: [kv head][slot] "
             "instead of [slot][kv head])"));
cl::opt<std::string> library("library", cl::cat(toolOptions),
                             cl::desc("tq-aot kernel library directory"));
cl::opt<unsigned> threads("num-threads", cl::cat(toolOptions),
                          cl::desc("worker threads (0: all)"), cl::init(0));
cl::opt<std::string> qFile("q", cl::cat(toolOptions),
                           cl::desc("Q.f32 [n_q][H][D]"), cl::Required);
cl::opt<std::string> kFile("k", cl::cat(toolOptions),
                           cl::desc("K.f32 [n_kv][KH][D]"), cl::Required);
cl::opt<std::string> vFile("v", cl::cat(toolOptions),
                           cl::desc("V.f32 [n_kv][KH][D]"), cl::Required);
cl::opt<std::string> outFile("out", cl::cat(toolOptions),
                             cl::desc("O.f32 [n_q][H][D]"), cl::Required);
cl::opt<bool> checkResult(
    "check", cl::cat(toolOptions),
    cl::desc("also compute lib/Quant's double-precision attention over the "
             "cache the append kernels wrote; print the largest difference "
             "and fail if it exceeds --tolerance"));
cl::opt<double> tolerance("tolerance", cl::cat(toolOptions),
                          cl::desc("--check limit"), cl::init(1e-4));
cl::opt<unsigned>
    repeat("repeat", cl::cat(toolOptions),
           cl::desc("time this many extra attention calls and print the "
                    "best and the median (0: none)"),
           cl::init(0));
cl::opt<std::string> flushMiBOpt(
    "flush-mib", cl::cat(toolOptions),
    cl::desc("with --repeat: MiB read on every thread before each timed "
             "call, so the call finds its KV in memory as a model's layer "
             "does; 'auto': twice the last-level cache, at least 64 (0: "
             "warm caches)"),
    cl::init("0"));

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "tq-run: error: " << message << "\n";
  std::exit(1);
}

/// Rows of `heads` x `dim` floats from raw float32 or an .npy of shape
/// (rows, heads, dim); fails on a missing file, a partial row, a shape
/// that disagrees with the options, or non-finite values.
std::vector<float> readRows(const std::string &path, size_t heads, size_t dim,
                            const char *what) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    fail("cannot open '" + path + "': " + buffer.getError().message());
  const size_t width = heads * dim;
  size_t bytes = (*buffer)->getBufferSize();
  auto data = std::span<const uint8_t>(
      reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()), bytes);
  std::vector<float> v;
  if (::tq::quant::isNpy(data)) {
    auto array = ::tq::quant::parseNpy(data);
    if (!array)
      fail(llvm::Twine(what) + " file '" + path +
           "': " + array.status().message());
    const std::vector<size_t> &shape = array->shape;
    if (shape.size() != 3 || shape[1] != heads || shape[2] != dim)
      fail(llvm::Twine(what) + " file '" + path + "' has shape " +
           ::tq::quant::describeShape(shape) + "; the options say (rows, " +
           llvm::Twine(heads) + ", " + llvm::Twine(dim) + ")");
    if (shape[0] == 0)
      fail(llvm::Twine(what) + " file '" + path + "' has no rows");
    v = std::move(array->values);
  } else {
    if (bytes == 0)
      fail(llvm::Twine(what) + " file '" + path + "' is empty");
    if (bytes % (width * 4) != 0)
      fail(llvm::Twine(what) + " file '" + path + "' has " +
           llvm::Twine(bytes) + " bytes, not a whole number of rows of " +
           llvm::Twine(width) + " float32");
    v.resize(bytes / 4);
    std::memcpy(v.data(), data.data(), bytes);
  }
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      fail(llvm::Twine(what) + " file '" + path + "': value " + llvm::Twine(i) +
           " (row " + llvm::Twine(i / width) + ") is not finite");
  return v;
}

/// Runs `call` (a runtime entry point) and fails with what it was, its
/// status and the runtime's message (every failing runtime call sets one).
template <typename Call> void check(const char *what, Call &&call) {
  tq_status status = call();
  if (status == TQ_STATUS_OK)
    return;
  std::string said = tq_last_error();
  fail(llvm::Twine(what) + " failed: " + tq_status_string(status) +
       (said.empty() ? "" : ": " + said));
}

/// Compiles the kernels this run needs into `dir`.
void compileKernels(const std::string &dir, bool prefill) {
  std::unique_ptr<MLIRContext> owned = createKernelCompilerContext();
  MLIRContext &context = *owned;
  std::vector<RuntimeKernelSpec> specs;
  RuntimeKernelSpec append;
  append.kind = RuntimeKernelKind::Append;
  append.headDim = headDim;
  append.keyFormat = kFormat;
  specs.push_back(append);
  if (vFormat != kFormat) {
    append.keyFormat = vFormat;
    specs.push_back(append);
  }
  RuntimeKernelSpec attention;
  attention.kind =
      prefill ? RuntimeKernelKind::Prefill : RuntimeKernelKind::Decode;
  attention.keyFormat = kFormat;
  attention.valueFormat = vFormat;
  attention.headDim = headDim;
  attention.group = qHeads / kvHeads;
  attention.causal = causal;
  attention.window = window;
  attention.softcap = softcap;
  specs.push_back(attention);
  KernelLibraryOptions options;
  options.outputDir = dir;
  std::string error;
  if (!writeKernelLibrary(context, specs, options, nullptr, error))
    fail("compiling kernels: " + error);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ::tq::tools::parseCommandLine(argc, argv, "tq-run",
                              "tq-run: run TurboQuant attention on files\n\n"
                              "  Q is [n_q][H][D], K and V are [n_kv][KH][D],"
                              " O is [n_q][H][D]\n  (little-endian float32, "
                              "row-major).\n",
                              toolOptions);
  if (command != "attention")
    fail("unknown command '" + command + "' (attention)");
  for (const std::string &f : {kFormat.getValue(), vFormat.getValue()})
    if (!::tq::quant::Format::get(f, headDim))
      fail(::tq::quant::Format::get(f, headDim).status().message());
  if (kvHeads == 0 || qHeads == 0 || qHeads % kvHeads != 0)
    fail("--q-heads must be a positive multiple of --kv-heads");
  std::string flushError;
  std::optional<size_t> flushMiB =
      ::tq::tools::parseFlushMiB(flushMiBOpt, &flushError);
  if (!flushMiB)
    fail(flushError);
  if (pageSize == 0)
    fail("--page-size must be positive");
  if (softcap < 0.0f || scale < 0.0f || !std::isfinite(scale))
    fail("--softcap and --scale must be finite and non-negative");

  const size_t d = headDim;
  std::vector<float> q = readRows(qFile, qHeads, d, "Q");
  std::vector<float> k = readRows(kFile, kvHeads, d, "K");
  std::vector<float> v = readRows(vFile, kvHeads, d, "V");
  if (k.size() != v.size())
    fail("K and V hold different numbers of tokens");
  const size_t nq = q.size() / (qHeads * d), nkv = k.size() / (kvHeads * d);
  if (causal && nq > nkv)
    fail("causal attention needs n_q (" + llvm::Twine(nq) + ") <= n_kv (" +
         llvm::Twine(nkv) + ")");

  std::string dir = library;
  llvm::SmallString<128> temp;
  if (dir.empty()) {
    if (llvm::sys::fs::createUniqueDirectory("tq-run", temp))
      fail("cannot create a temporary directory");
    dir = temp.str().str();
    compileKernels(dir, nq > 1);
  }
  std::string lib = dir + "/libtqkernels.so";
  tq_runtime_options_v0 options = {TQ_RUNTIME_OPTIONS_VERSION_0,
                                   sizeof(tq_runtime_options_v0), lib.c_str(),
                                   threads, 0};
  tq_runtime *rt = nullptr;
  check("loading the kernel library",
        [&] { return tq_runtime_create(&options, nullptr, &rt); });

  auto kf = ::tq::quant::Format::get(kFormat, headDim);
  auto vf = ::tq::quant::Format::get(vFormat, headDim);
  const uint32_t pages = uint32_t((nkv + pageSize - 1) / pageSize);
  std::vector<uint8_t> kPool(size_t(pages) * pageSize * kvHeads *
                             kf->rowBytes());
  std::vector<uint8_t> vPool(size_t(pages) * pageSize * kvHeads *
                             vf->rowBytes());
  std::vector<int32_t> indptr = {0, int32_t(pages)}, indices(pages);
  for (uint32_t p = 0; p < pages; ++p)
    indices[p] = int32_t(p);
  std::vector<int32_t> lastLen = {int32_t(nkv - size_t(pages - 1) * pageSize)};
  tq_kv_cache_v0 cache = {};
  cache.version = TQ_KV_CACHE_VERSION_0;
  cache.size = sizeof(cache);
  cache.k_format = kFormat.c_str();
  cache.v_format = vFormat.c_str();
  cache.head_dim = headDim;
  cache.num_kv_heads = kvHeads;
  cache.page_size = pageSize;
  cache.layout = TQ_LAYOUT_PAGED | (headMajor ? TQ_LAYOUT_HEAD_MAJOR : 0u);
  cache.k_row_bytes = uint32_t(kf->rowBytes());
  cache.v_row_bytes = uint32_t(vf->rowBytes());
  cache.num_pages = pages;
  cache.k_pages = kPool.data();
  cache.v_pages = vPool.data();
  cache.num_seqs = 1;
  cache.indptr = indptr.data();
  cache.indices = indices.data();
  cache.last_page_len = lastLen.data();
  check("append", [&] {
    return tq_append(rt, &cache, 0, 0, uint32_t(nkv), k.data(), v.data());
  });

  std::vector<int32_t> qIndptr = {0, int32_t(nq)};
  tq_attention_params_v0 params = {TQ_ATTENTION_PARAMS_VERSION_0,
                                   sizeof(params),
                                   qHeads,
                                   causal ? 1u : 0u,
                                   window,
                                   softcap,
                                   scale,
                                   0,
                                   qIndptr.data()};
  std::vector<float> out(q.size());
  check("attention", [&] {
    return tq_attention(rt, &cache, &params, q.data(), out.data());
  });
  if (repeat > 0) {
    ::tq::tools::CacheFlusher flusher(
        *flushMiB, threads ? threads : std::thread::hardware_concurrency());
    ::tq::tools::TimingSamples times;
    for (unsigned r = 0; r < repeat; ++r) {
      flusher.flush();
      auto start = std::chrono::steady_clock::now();
      check("attention", [&] {
        return tq_attention(rt, &cache, &params, q.data(), out.data());
      });
      times.add(std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start)
                    .count());
    }
    llvm::outs() << (nq == 1 ? "decode" : "prefill") << ": "
                 << llvm::format("%.3f", times.best() * 1e3)
                 << " ms per call (" << nkv << " tokens, best of " << repeat
                 << ", median " << llvm::format("%.3f", times.median() * 1e3)
                 << " ms, "
                 << (flusher.enabled() ? "caches flushed" : "warm caches")
                 << ")\n";
  }
  tq_runtime_destroy(rt);
  if (checkResult) {
    // Gather the rows the append kernels wrote, in token order.
    auto gather = [&](const std::vector<uint8_t> &pool, size_t rowBytes) {
      std::vector<uint8_t> rows(nkv * kvHeads * rowBytes);
      for (size_t t = 0; t < nkv; ++t) {
        for (uint32_t h = 0; h < kvHeads; ++h) {
          uint64_t row = tq_kv_cache_row_index(
              &cache, uint64_t(indices[t / pageSize]),
              uint32_t(t % pageSize), h);
          std::memcpy(&rows[(t * kvHeads + h) * rowBytes],
                      &pool[row * rowBytes], rowBytes);
        }
      }
      return rows;
    };
    std::vector<uint8_t> kRows = gather(kPool, kf->rowBytes());
    std::vector<uint8_t> vRows = gather(vPool, vf->rowBytes());
    ::tq::quant::AttentionShape shape{unsigned(nq), qHeads, kvHeads, headDim,
                                      unsigned(nkv)};
    ::tq::quant::AttentionOptions opts;
    opts.scale = scale;
    opts.causal = causal;
    opts.window = window;
    opts.softcap = softcap;
    std::vector<double> ref(out.size());
    ::tq::quant::Status s = ::tq::quant::referenceAttentionQuantized(
        shape, opts, q, *kf, kRows, *vf, vRows, ref);
    if (!s)
      fail("reference attention: " + s.message());
    double worst = 0;
    for (size_t i = 0; i < out.size(); ++i)
      worst = std::max(worst, std::fabs(out[i] - ref[i]));
    llvm::outs() << "max |kernel - reference| = " << llvm::format("%.3e", worst)
                 << " over " << out.size() << " values\n";
    // And how far the compressed cache moves the result from exact
    // attention over the float K/V.
    std::vector<double> exact(out.size());
    if (::tq::quant::referenceAttention(shape, opts, q, k, v, exact)) {
      double err = 0, norm = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        err += (out[i] - exact[i]) * (out[i] - exact[i]);
        norm += exact[i] * exact[i];
      }
      llvm::outs() << "relative error vs exact attention = "
                   << llvm::format("%.4f", std::sqrt(err / norm)) << "\n";
    }
    if (!(worst <= tolerance))
      fail("kernel output differs from the reference by " +
           std::to_string(worst) + " (tolerance " +
           std::to_string(double(tolerance)) + ")");
  }
  if (!temp.empty())
    llvm::sys::fs::remove_directories(temp);

  std::error_code ec;
  std::string partial = outFile + ".tmp-tq-run";
  {
    llvm::raw_fd_ostream os(partial, ec, llvm::sys::fs::OF_None);
    if (ec)
      fail("cannot create '" + outFile + "': " + ec.message());
    // O in the inputs' kind: an .npy (rows, heads, dim) or raw float32.
    if (llvm::StringRef(outFile).ends_with(".npy")) {
      const size_t shape[] = {out.size() / (size_t(qHeads) * d),
                              size_t(qHeads), d};
      std::vector<uint8_t> npy = ::tq::quant::writeNpy(shape, out);
      os.write(reinterpret_cast<const char *>(npy.data()), npy.size());
    } else {
      os.write(reinterpret_cast<const char *>(out.data()), out.size() * 4);
    }
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(partial);
      fail("cannot write '" + outFile + "'");
    }
  }
  if (llvm::sys::fs::rename(partial, outFile)) {
    llvm::sys::fs::remove(partial);
    fail("cannot write '" + outFile + "'");
  }
  return 0;
}
