//===- tq-aot.cpp - Ahead-of-time kernel library compiler -----------------===//
//
//   tq-aot --target=cpu [--chip=C] [--abi=runtime|ggml]
//          --kind=decode,prefill,append,dequantize
//          --k-format=F[,F...] [--v-format=G[,G...]] --head-dim=D[,D...]
//          [--gqa=N[,N...]] [--causal] [--window=W] [--softcap=C]
//          [--input=FILE.mlir ...] [--tuning-db=FILE] -o DIR
//   tq-aot --target=nvptx|amdgcn [--chip=C] [--block-warps=N]
//          [--tuning-db=FILE --gpu-device=NAME] ... -o DIR
//
// compiles the Cartesian product of the listed kinds, formats, head dims
// and GQA groups into a kernel library (see include/tq/Target/
// KernelLibrary.h), printing progress. `all` as a format list means every
// format. Without --v-format each K format is paired with itself.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Quant/Format.h"
#include "tq/Target/GpuKernelLibrary.h"
#include "tq/Target/KernelLibrary.h"
#include "tq/Target/Tuning.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "ToolOptions.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace mlir;
using namespace mlir::tq;
namespace cl = llvm::cl;

namespace {

/// Only this tool's options appear in --help (not LLVM's).
cl::OptionCategory toolOptions("tq-aot options");

cl::opt<std::string> target("target", cl::cat(toolOptions),
                            cl::desc("cpu | nvptx | amdgcn"), cl::init("cpu"));
cl::opt<std::string> chip("chip", cl::cat(toolOptions),
                          cl::desc("CPU name (default: host), optionally with "
                                   "+feature... (x86-64-v3+avxvnni); GPU "
                                   "chip: sm_80, sm_86, "
                                   "sm_89, sm_90a, gfx90a, gfx942, gfx1100"),
                          cl::init("host"));
cl::opt<std::string> kinds("kind", cl::cat(toolOptions),
                           cl::desc("append,decode,prefill"),
                           cl::init("decode"));
cl::opt<std::string> kFormats("k-format", cl::cat(toolOptions),
                              cl::desc("K formats (comma list, or all)"));
cl::list<std::string>
    inputFiles("input", cl::cat(toolOptions),
               cl::desc("MLIR files whose public functions are compiled too"));
cl::opt<std::string>
    vFormats("v-format", cl::cat(toolOptions),
             cl::desc("V formats (default: each K format with itself)"));
cl::opt<std::string> headDims("head-dim", cl::cat(toolOptions),
                              cl::desc("head dims (comma list)"));
cl::opt<unsigned> valueHeadDim(
    "v-head-dim", cl::cat(toolOptions),
    cl::desc("V's head dim when it differs from K's (attention kernels; "
             "e.g. DeepSeek MLA: --head-dim=576 --v-head-dim=512)"),
    cl::init(0));
cl::opt<bool> centredKeys(
    "centred-k", cl::cat(toolOptions),
    cl::desc("--abi=ggml: also build centred row kernels for the K formats "
             "(<name>_centred: encode x - c, decode + c, for a centre c per "
             "layer and head supplied at run time; attention is unchanged, "
             "softmax being shift-invariant)"));
cl::opt<std::string> pairList(
    "pairs", cl::cat(toolOptions),
    cl::desc("K:V format pairs (comma list) instead of the cross product of "
             "--k-format and --v-format, e.g. turbo3_0:turbo3_0,q8_0:turbo4_0"));
cl::opt<std::string> groups("gqa", cl::cat(toolOptions),
                            cl::desc("query heads per KV head"), cl::init("1"));
cl::opt<std::string> lookup(
    "lookup", cl::cat(toolOptions),
    cl::desc("centroid lookup of fused kernels: tile (decode each KV tile "
             "once per GQA group), select or lut"),
    cl::init("tile"));
cl::opt<bool> causal("causal", cl::cat(toolOptions),
                     cl::desc("causal masking"));
cl::opt<int64_t> window("window", cl::cat(toolOptions),
                        cl::desc("sliding window (0: none)"), cl::init(0));
cl::opt<float> softcap("softcap", cl::cat(toolOptions),
                       cl::desc("logit soft-cap (0: none)"), cl::init(0.0f));
cl::opt<int64_t> tileSize(
    "tile-size", cl::cat(toolOptions),
    cl::desc("KV tile of the flash loop (0: 512 for decode, 64 for "
             "prefill kernels)"),
    cl::init(0));
cl::opt<int64_t> splits("splits", cl::cat(toolOptions),
                        cl::desc("split-KV chunks of decode kernels"),
                        cl::init(4));
cl::opt<int64_t> maxUnrolledChunks(
    "max-unrolled-chunks", cl::cat(toolOptions),
    cl::desc("fused products unroll a row of at most this many 16-value "
             "chunks (values and QJL signs) whole; longer rows loop over "
             "decode periods, which bounds compile time at large head dims"),
    cl::init(48));
cl::opt<int64_t> scoreRows(
    "score-rows", cl::cat(toolOptions),
    cl::desc("at most this many KV rows per step of the fused score"),
    cl::init(4));
cl::opt<int64_t> accumulators(
    "accumulators", cl::cat(toolOptions),
    cl::desc("vector accumulators of the one-row weighted sum per token "
             "loop (0: 32 where --chip has AVX-512 and they hold a decode "
             "kernel's row in one pass, V's dim x group <= 512, and V's "
             "blocks have at least 64 values, else 16)"),
    cl::init(0));
cl::opt<std::string> scoreDot(
    "score-dot", cl::cat(toolOptions),
    cl::desc("dot products of the fused score: f32, i8 (key levels as "
             "bytes times the query quantised to int8; vpdpbusd where the "
             "CPU has AVX512-VNNI or AVX-VNNI, vpmaddubsw on 7-bit levels "
             "with AVX2 alone; formats with a scale per block and at most "
             "16 levels, no QJL), or auto (i8 where --chip has AVX2 or "
             "better, else f32)"),
    cl::init("f32"));
cl::opt<std::string> scoreLanes(
    "score-lanes", cl::cat(toolOptions),
    cl::desc("lanes of the int8 decode score: rows (a vector per chunk of "
             "a row, summed by a shuffle tree), tokens (four tokens a "
             "vector, the packed index fields gathered by vpmultishiftqb "
             "where the CPU has AVX512-VBMI, else by shifts; turbo, polar "
             "and tq3_0 formats, others keep rows), blocks (tokens, and "
             "rows of short scale blocks, tq3_0's, hold four blocks' sums "
             "in a token's lanes), shifts (tokens, or blocks for tq3_0, "
             "the fields of rows of one index plane or a 2-bit plane under "
             "a 1-bit one moved by whole-vector shifts instead of "
             "vpmultishiftqb, which shares Zen 4's multiply pipes with "
             "the dots); the scores are the same; auto: tokens (blocks for "
             "tq3_0 keys; shifts for turbo3_0, polar3 and tq3_0 keys on "
             "AMD Zen) where --chip has AVX-512 with VBMI, else rows"),
    cl::init("auto"));
cl::opt<std::string> pairAhead(
    "pair-ahead", cl::cat(toolOptions),
    cl::desc("the decode kernels' pair weighted sum (--value-dot bf16 or "
             "i16) decodes the next token pair while its dots take the "
             "current pair's: on, off (the same sums), or auto: on where "
             "--chip has AVX-512 and fast vpdpwssd (Zen 4, Zen 5)"),
    cl::init("auto"));
cl::opt<std::string> prefetch(
    "prefetch", cl::cat(toolOptions),
    cl::desc("where the fused products prefetch the next KV tile's rows: "
             "l1 (prefetcht0), l2 (prefetcht1; the same results), or auto: "
             "l2 where --chip is an AMD Zen with AVX-512 (measured faster "
             "there with the caches flushed between calls), else l1"),
    cl::init("auto"));
cl::opt<std::string> amx(
    "amx", cl::cat(toolOptions),
    cl::desc("the prefill kernels' score and weighted sum as AMX-BF16 tile "
             "products (bf16 operands, f32 sums; formats without QJL whose "
             "padded dim is a multiple of 32): on, off, or auto: on where "
             "--chip has AMX-BF16 (Sapphire Rapids and later). Lossy like "
             "the other dot paths, so off unless asked. The library asks "
             "Linux for the tile registers when it is loaded"),
    cl::init("off"));
cl::opt<std::string> valueDot(
    "value-dot", cl::cat(toolOptions),
    cl::desc("multiply-adds of the weighted sum: f32, bf16 (bf16 "
             "centroids and weights, vdpbf16ps where the CPU has "
             "AVX512-BF16) or i16 (int16 levels times fixed-point weights, "
             "vpdpwssd where it has AVX512-VNNI or AVX-VNNI, vpmaddwd with "
             "AVX2); formats with a scale per block and at most 16 levels, "
             "no QJL; or auto (bf16 where --chip is an AMD Zen with "
             "AVX512-BF16, else i16 where it has AVX2 or better, else f32: "
             "the faster measured on each vendor's CPUs)"),
    cl::init("f32"));
cl::opt<std::string> tuningDb(
    "tuning-db", cl::cat(toolOptions),
    cl::desc("SQLite tuning database (tqc.autotune / python -m tqc.tune): "
             "build each attention kernel with the knobs of its best "
             "recorded measurement for this tqc version and CPU, and say "
             "which record was used"));
cl::opt<int64_t> tuningContext(
    "tuning-context", cl::cat(toolOptions),
    cl::desc("with --tuning-db: use records of this context length's bucket "
             "(the power of two >= it; 0: the largest bucket recorded for "
             "each kernel)"),
    cl::init(0));
cl::opt<bool> printTuningTarget(
    "print-tuning-target", cl::cat(toolOptions),
    cl::desc("print the tuning database key of --chip's target (tqc "
             "version, triple, CPU, features and their hash; for a GPU "
             "target the chip and --gpu-device) as JSON and exit"));
cl::opt<std::string> gpuDevice(
    "gpu-device", cl::cat(toolOptions),
    cl::desc("GPU targets: the device the library will run on, as its "
             "driver names it (tqc.GpuRuntime.device_name, e.g. 'NVIDIA "
             "H100 80GB HBM3'): the tuning database's records are per "
             "device"));
cl::opt<unsigned> blockWarps(
    "block-warps", cl::cat(toolOptions),
    cl::desc("GPU targets: warps per block of the attention kernels (the "
             "block_warps knob; 0: the default, 4)"),
    cl::init(0));
cl::opt<std::string> outputDir("o", cl::cat(toolOptions),
                               cl::desc("output directory"));
cl::opt<unsigned> jobs(
    "jobs", cl::cat(toolOptions), cl::init(0),
    cl::desc("kernels compiled at once, each on its own thread (0: one per "
             "hardware thread; 1: one after another). The library is the "
             "same whatever the count"));
cl::opt<bool> quiet("quiet", cl::cat(toolOptions),
                    cl::desc("no progress output"));
cl::opt<std::string>
    abi("abi", cl::cat(toolOptions),
        cl::desc("runtime (kernels for libtq_runtime's tq_append / "
                 "tq_attention) or ggml (a kernel pack for ggml's SET_ROWS, "
                 "GET_ROWS and FLASH_ATTN_EXT: row encoders and decoders for "
                 "every format, and ggml attention kernels for every K/V "
                 "pair, head dim and GQA group; see docs/llama.cpp.md)"),
        cl::init("runtime"));

/// ggml's own types: ggml encodes and decodes them itself.
bool isGgmlNative(const std::string &format) {
  return format == "f16" || format == "q8_0";
}

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "tq-aot: error: " << message << "\n";
  std::exit(1);
}

std::vector<std::string> splitList(const std::string &list, const char *what) {
  std::vector<std::string> items;
  for (llvm::StringRef item : llvm::split(list, ','))
    if (!item.trim().empty())
      items.push_back(item.trim().str());
  if (items.empty())
    fail(llvm::Twine("--") + what + " is empty");
  return items;
}

std::vector<std::string> formatList(const std::string &list, const char *what) {
  std::vector<std::string> names = splitList(list, what);
  if (names.size() == 1 && names[0] == "all") {
    names.clear();
    for (const ::tq::quant::FormatInfo &info : ::tq::quant::allFormats())
      names.push_back(info.name);
  }
  for (const std::string &n : names) {
    bool known = false;
    for (const ::tq::quant::FormatInfo &info : ::tq::quant::allFormats())
      known |= n == info.name;
    if (!known)
      fail("unknown format '" + n + "' in --" + what +
           " (see 'tq-quant formats')");
  }
  return names;
}

std::vector<unsigned> numberList(const std::string &list, const char *what) {
  std::vector<unsigned> values;
  for (const std::string &item : splitList(list, what)) {
    unsigned v = 0;
    if (llvm::StringRef(item).getAsInteger(10, v) || v == 0)
      fail(llvm::Twine("--") + what + " takes positive integers, got '" + item +
           "'");
    values.push_back(v);
  }
  return values;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --mlir-timing, --mlir-print-ir-after-all, ... apply to every kernel.
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  ::tq::tools::parseCommandLine(argc, argv, "tq-aot",
                              "tq-aot: compile TurboQuant kernel libraries\n",
                              toolOptions);
  std::optional<GpuTarget> gpu;
  if (target == "nvptx" || target == "amdgcn") {
    std::string why;
    FailureOr<GpuTarget> t =
        GpuTarget::get(target, chip == "host" ? std::string() : chip.getValue(), why);
    if (failed(t))
      fail(why);
    gpu = *t;
  } else if (target != "cpu") {
    fail("unknown target '" + target + "' (cpu, nvptx or amdgcn)");
  }
  if (printTuningTarget) {
    TuningTarget key;
    std::string why;
    if (!gpu) {
      if (!cpuTuningTarget(chip, key, why))
        fail(why);
    } else {
      if (gpuDevice.empty())
        fail("--print-tuning-target: a GPU target's key names its device: "
             "give --gpu-device=NAME");
      key = gpuTuningTarget(*gpu, gpuDevice);
    }
    llvm::json::Object o{{"tqc_version", TQ_AOT_VERSION},
                         {"triple", key.triple},
                         {"cpu", key.cpu},
                         {"features", key.features},
                         {"features_hash", key.featuresHash}};
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(o)))
                 << "\n";
    return 0;
  }
  if (outputDir.empty())
    fail("give the output directory: -o DIR");
  if (gpu && !inputFiles.empty())
    fail("--input is only supported for --target=cpu");
  if (window < 0 || tileSize < 0 || splits <= 0 || maxUnrolledChunks < 0)
    fail("--window, --tile-size and --max-unrolled-chunks must be >= 0, "
         "--splits > 0");
  if (scoreRows < 1 || accumulators < 0)
    fail("--score-rows must be >= 1 and --accumulators >= 0 (0: by the "
         "CPU)");
  if (scoreDot != "f32" && scoreDot != "i8" && scoreDot != "auto")
    fail("--score-dot must be f32, i8 or auto, got '" + scoreDot + "'");
  if (scoreLanes != "rows" && scoreLanes != "tokens" &&
      scoreLanes != "blocks" && scoreLanes != "shifts" && scoreLanes != "auto")
    fail("--score-lanes must be rows, tokens, blocks, shifts or auto, got '" +
         scoreLanes + "'");
  if (pairAhead != "on" && pairAhead != "off" && pairAhead != "auto")
    fail("--pair-ahead must be on, off or auto, got '" + pairAhead + "'");
  if (prefetch != "l1" && prefetch != "l2" && prefetch != "auto")
    fail("--prefetch must be l1, l2 or auto, got '" + prefetch + "'");
  if (amx != "on" && amx != "off" && amx != "auto")
    fail("--amx must be on, off or auto, got '" + amx + "'");
  if (valueDot != "f32" && valueDot != "bf16" && valueDot != "i16" &&
      valueDot != "auto")
    fail("--value-dot must be f32, bf16, i16 or auto, got '" + valueDot +
         "'");
  if (!(softcap >= 0.0f && softcap <= kMaxSoftcap))
    fail(llvm::formatv("--softcap must be finite and in [0, {0}], got {1}",
                       llvm::format("%g", double(kMaxSoftcap)),
                       llvm::format("%g", double(softcap.getValue())))
             .str());

  const bool ggml = abi == "ggml";
  if (!ggml && abi != "runtime")
    fail("unknown --abi '" + abi + "' (runtime or ggml)");
  if (ggml) {
    if (gpu || !inputFiles.empty())
      fail("--abi=ggml builds CPU kernels for ggml's CPU backend: it takes "
           "neither a GPU --target nor --input");
    if (kinds.getNumOccurrences())
      fail("--kind does not apply to --abi=ggml: a pack holds every kernel "
           "ggml calls");
    if (causal || window != 0)
      fail("--abi=ggml kernels read causal and sliding-window masking from "
           "ggml's mask; drop --causal and --window");
  }

  if (centredKeys && !ggml)
    fail("--centred-k is for --abi=ggml packs");
  if (valueHeadDim && !ggml)
    fail("--v-head-dim is for --abi=ggml packs (the runtime's cache "
         "descriptor has one head dim)");

  std::vector<RuntimeKernelKind> kindList;
  for (const std::string &k : splitList(kinds, "kind")) {
    if (ggml)
      break;
    if (k == "append")
      kindList.push_back(RuntimeKernelKind::Append);
    else if (k == "dequantize")
      kindList.push_back(RuntimeKernelKind::Dequantize);
    else if (k == "decode")
      kindList.push_back(RuntimeKernelKind::Decode);
    else if (k == "prefill")
      kindList.push_back(RuntimeKernelKind::Prefill);
    else if (k == "combine")
      fail(gpu ? "kind 'combine' is built with every decode and prefill "
                 "kernel (<name>_combine); ask for decode or prefill"
               : "kind 'combine' has no kernel of its own on cpu: split-KV "
                 "partials are merged inside each decode kernel (tq.combine)");
    else
      fail("unknown kind '" + k + "' (append, dequantize, decode, prefill)");
  }
  // --pairs: K and V lists from the pairs; only the listed pairs become
  // attention kernels.
  std::set<std::pair<std::string, std::string>> pairs;
  if (!pairList.empty()) {
    if (!kFormats.empty() || !vFormats.empty())
      fail("--pairs replaces --k-format and --v-format; give one or the other");
    std::string ks, vs;
    for (const std::string &p : splitList(pairList, "pairs")) {
      size_t colon = p.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == p.size())
        fail("--pairs takes K:V pairs, got '" + p + "'");
      pairs.insert({p.substr(0, colon), p.substr(colon + 1)});
      ks += (ks.empty() ? "" : ",") + p.substr(0, colon);
      vs += (vs.empty() ? "" : ",") + p.substr(colon + 1);
    }
    kFormats = ks;
    vFormats = vs;
  }
  if (kFormats.empty() && inputFiles.empty())
    fail("nothing to compile: give --k-format/--head-dim specs or --input");
  if (!kFormats.empty() && headDims.empty())
    fail("--k-format needs --head-dim");
  std::vector<std::string> ks = kFormats.empty()
                                    ? std::vector<std::string>{}
                                    : formatList(kFormats, "k-format");
  std::vector<std::string> vs = vFormats.empty()
                                    ? std::vector<std::string>{}
                                    : formatList(vFormats, "v-format");
  std::vector<unsigned> dims = headDims.empty()
                                   ? std::vector<unsigned>{}
                                   : numberList(headDims, "head-dim");
  std::vector<unsigned> gqas = numberList(groups, "gqa");

  std::vector<RuntimeKernelSpec> specs;
  std::set<std::string> seen;
  auto add = [&](RuntimeKernelSpec spec) {
    if (seen.insert(spec.name()).second)
      specs.push_back(spec);
  };
  if (ggml) {
    // Rows of every non-ggml format, then attention for every pair.
    for (RuntimeKernelKind kind :
         {RuntimeKernelKind::Append, RuntimeKernelKind::Dequantize})
      for (unsigned d : dims)
        for (const auto *list : {&ks, &vs})
          for (const std::string &f : *list)
            if (!isGgmlNative(f)) {
              RuntimeKernelSpec spec;
              spec.kind = kind;
              // V rows are encoded at V's head dim.
              spec.headDim =
                  list == &vs && valueHeadDim ? valueHeadDim.getValue() : d;
              spec.keyFormat = f;
              add(spec);
              if (list == &ks && centredKeys) {
                RuntimeKernelSpec centred = spec;
                centred.centred = true;
                add(centred);
              }
              if (list == &ks && vs.empty() && valueHeadDim) {
                spec.headDim = valueHeadDim; // V in K's format
                add(spec);
              }
            }
    for (RuntimeKernelKind kind :
         {RuntimeKernelKind::GgmlDecode, RuntimeKernelKind::GgmlPrefill})
      kindList.push_back(kind);
  }
  for (RuntimeKernelKind kind : kindList)
    for (unsigned d : dims)
      for (const std::string &k : ks) {
        RuntimeKernelSpec spec;
        spec.kind = kind;
        spec.headDim = d;
        spec.keyFormat = k;
        if (!isAttentionKind(kind)) {
          add(spec);
          for (const std::string &v : vs) {
            spec.keyFormat = v;
            add(spec);
          }
          continue;
        }
        spec.causal = causal;
        spec.window = window;
        spec.softcap = softcap;
        spec.valueHeadDim = valueHeadDim == d ? 0 : valueHeadDim;
        for (unsigned g : gqas) {
          spec.group = g;
          if (vs.empty()) {
            spec.valueFormat = k;
            add(spec);
          }
          for (const std::string &v : vs) {
            if (!pairs.empty() && !pairs.count({k, v}))
              continue;
            spec.valueFormat = v;
            add(spec);
          }
        }
      }

  std::unique_ptr<MLIRContext> owned = createKernelCompilerContext();
  MLIRContext &context = *owned;

  KernelLibraryOptions options;
  options.outputDir = outputDir;
  options.cpu = chip;
  options.passManagerCLOptions = true;
  options.jobs = jobs;
  if (tileSize > 0)
    options.decodeTileSize = options.prefillTileSize = tileSize;
  options.decodeSplits = splits;
  options.maxUnrolledChunks = maxUnrolledChunks;
  options.scoreRows = scoreRows;
  options.accumulators = accumulators;
  options.scoreDot = scoreDot;
  options.valueDot = valueDot;
  options.scoreLanes = scoreLanes;
  options.pairAhead = pairAhead;
  options.prefetch = prefetch;
  options.amx = amx;
  if (target == "cpu") {
    // `auto`: the fastest dot paths the CPU has (said, so a pack's
    // configuration is never a guess).
    std::string why;
    if (!resolveAutoDotPaths(chip, options.scoreDot, options.valueDot, why))
      fail(why);
    if (scoreDot == "auto" || valueDot == "auto")
      llvm::errs() << "tq-aot: dot paths for cpu '" << chip << "': score "
                   << options.scoreDot << ", value " << options.valueDot
                   << "\n";
  }
  if (ggml)
    options.libraryName = "libtq_ggml_kernels.so";
  if (auto l = symbolizeLookupStrategy(lookup))
    options.lookup = *l;
  else
    fail("unknown --lookup '" + lookup + "' (tile, select, lut)");
  std::string error;
  if (tuningContext < 0)
    fail("--tuning-context must be >= 0");
  if (!gpu && (blockWarps || !gpuDevice.empty()))
    fail("--block-warps and --gpu-device apply to GPU targets");
  if (gpu && blockWarps)
    for (const RuntimeKernelSpec &spec : specs)
      if (isAttentionKind(spec.kind) &&
          !setGpuKernelKnobs(spec, {{"block_warps", std::to_string(blockWarps)}},
                             *gpu, options, error))
        fail("--block-warps: " + error);
  if (!tuningDb.empty()) {
    if (gpu && gpuDevice.empty())
      fail("--tuning-db with a GPU target: give --gpu-device=NAME (records "
           "are per device; python -m tqc.tune prints the name)");
    std::vector<std::string> report;
    if (!(gpu ? applyGpuTuningDatabase(tuningDb, TQ_AOT_VERSION, tuningContext,
                                       specs, *gpu, gpuDevice, options, report,
                                       error)
              : applyTuningDatabase(tuningDb, TQ_AOT_VERSION, tuningContext,
                                    specs, options, report, error)))
      fail(error);
    // Always printed (also with --quiet): which configuration each kernel
    // was built with is part of the result.
    for (const std::string &line : report)
      llvm::errs() << "tq-aot: tuning: " << line << "\n";
  }
  auto progress = [&](size_t i, size_t n, const std::string &name) {
    if (!quiet)
      llvm::errs() << "[" << (i + 1) << "/" << n << "] " << name << "\n";
  };
  std::vector<OwningOpRef<ModuleOp>> parsed;
  std::vector<ModuleOp> inputs;
  for (const std::string &file : inputFiles) {
    std::string diagnostics;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      llvm::raw_string_ostream os(diagnostics);
      os << diag << "\n";
      return success();
    });
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(file, &context);
    if (!module)
      fail("cannot parse '" + file + "': " + diagnostics);
    inputs.push_back(*module);
    parsed.push_back(std::move(module));
  }
  if (gpu) {
    if (!writeGpuKernelLibrary(context, specs, *gpu, options, progress, error))
      fail(error);
    if (!quiet)
      llvm::errs() << "wrote " << specs.size() << " kernel spec(s) for "
                   << gpu->chip() << " to " << outputDir << "\n";
    return 0;
  }
  if (!writeKernelLibrary(context, specs, options, progress, error, inputs))
    fail(error);
  if (!quiet)
    llvm::errs() << "wrote " << specs.size() + inputs.size() << " kernel(s) to "
                 << outputDir << "/" << options.libraryName << "\n";
  return 0;
}
