//===- tq-gpu-check.cpp - GPU kernels against the CPU reference -----------===//
//
//   tq-gpu-check --library DIR [--backend cuda|hip] [--device N]
//                [--filter TEXT] [--bench] [--contexts 1024,...]
//                [--batches 1,...] [--repeat N]
//
// Loads a GPU kernel library written by tq-aot through the runtime's GPU
// backend and, for every attention kernel in DIR/kernels.json, runs a
// ragged paged batch (decode: one query per sequence; prefill: several,
// aligned to the last positions) and compares each output with lib/Quant's
// reference attention over the same encoded cache. Every append kernel
// writes rows into a paged pool through tq_gpu_append; the pool must then
// hold exactly Format::encodeRow's bytes in those slots and nothing else.
// With --bench it then times decode steps at each context x batch and
// prints the compressed bytes read per step and the achieved GB/s. Needs
// only the runtime and lib/Quant (no LLVM), so it builds on a GPU machine
// from the working tree.
// Exit: 0 all pass, 1 a mismatch, 2 usage / setup error, 77 no driver.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"
#include "tq/Quant/Stats.h"
#include "tq/Version.h"
#include "tq/tq_runtime.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace tq::quant;

namespace {

[[noreturn]] void fail(const std::string &message, int code = 2) {
  std::fprintf(stderr, "tq-gpu-check: error: %s\n", message.c_str());
  std::exit(code);
}

struct KernelEntry {
  std::string name, kind, kFormat, vFormat;
  unsigned headDim = 0, group = 0;
  bool causal = false;
  unsigned window = 0;
  float softcap = 0.0f;
};

/// The entries of kernels.json with role `role` (flat objects inside
/// "kernels").
std::vector<KernelEntry> readKernels(const std::string &dir,
                                     const std::string &role) {
  std::ifstream in(dir + "/kernels.json");
  if (!in)
    fail("cannot read " + dir + "/kernels.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<KernelEntry> out;
  const std::regex field("\"(\\w+)\": (\"[^\"]*\"|[-0-9.e+]+|true|false)");
  size_t at = text.find("\"kernels\"");
  while (at != std::string::npos) {
    size_t open = text.find('{', at), close = text.find('}', open);
    if (open == std::string::npos || close == std::string::npos)
      break;
    std::map<std::string, std::string> f;
    std::string object = text.substr(open, close - open);
    for (std::sregex_iterator it(object.begin(), object.end(), field), end;
         it != end; ++it) {
      std::string v = (*it)[2];
      if (v.size() >= 2 && v.front() == '"')
        v = v.substr(1, v.size() - 2);
      f[(*it)[1]] = v;
    }
    at = close;
    if (f["role"] != role)
      continue;
    KernelEntry e;
    e.name = f["name"];
    e.kind = f["kind"];
    e.kFormat = f["k_format"];
    e.vFormat = f["v_format"];
    e.headDim = unsigned(std::stoul(f["head_dim"]));
    e.group = unsigned(std::stoul(f["group"]));
    e.causal = f["causal"] == "true";
    e.window = unsigned(std::stoul(f["window"]));
    e.softcap = std::stof(f["softcap"]);
    out.push_back(e);
  }
  return out;
}

std::vector<unsigned> numbers(const char *list) {
  std::vector<unsigned> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    out.push_back(unsigned(std::stoul(item)));
  return out;
}

/// Device buffer owned by the runtime's allocator.
struct DeviceBuffer {
  tq_gpu_runtime *rt;
  void *ptr = nullptr;
  DeviceBuffer(tq_gpu_runtime *rt, size_t bytes) : rt(rt) {
    if (tq_gpu_malloc(rt, bytes ? bytes : 1, &ptr) != TQ_STATUS_OK)
      fail("device allocation of " + std::to_string(bytes) + " bytes failed");
  }
  ~DeviceBuffer() { tq_gpu_free(rt, ptr); }
  template <typename T> void upload(const std::vector<T> &v) {
    if (tq_gpu_copy_to_device(rt, ptr, v.data(), v.size() * sizeof(T)) !=
        TQ_STATUS_OK)
      fail("copy to device failed");
  }
};

/// A paged cache of `lengths` tokens per sequence, pages shuffled, with the
/// rows encoded by lib/Quant (what the append kernels write).
struct PagedBatch {
  Format kf, vf;
  unsigned dim, kvHeads, pageSize;
  std::vector<unsigned> lengths;
  std::vector<std::vector<float>> k, v;          // [len][KH][D]
  std::vector<std::vector<uint8_t>> kRows, vRows; // encoded, same order
  std::vector<uint8_t> kPool, vPool;
  std::vector<int32_t> indptr{0}, indices, lastLen;

  PagedBatch(const KernelEntry &e, unsigned kvHeads, unsigned pageSize,
             std::vector<unsigned> lens, uint64_t seed, bool quick = false)
      : kf(*Format::get(e.kFormat, e.headDim)),
        vf(*Format::get(e.vFormat, e.headDim)), dim(e.headDim),
        kvHeads(kvHeads), pageSize(pageSize), lengths(std::move(lens)) {
    SplitMix64 rng(seed);
    uint64_t pages = 0;
    for (unsigned len : lengths) {
      unsigned p = (len + pageSize - 1) / pageSize;
      indptr.push_back(indptr.back() + int32_t(p));
      lastLen.push_back(len ? int32_t(len - (p - 1) * pageSize) : 0);
      pages += p;
    }
    for (uint64_t i = 0; i < pages; ++i)
      indices.push_back(int32_t((i * 7919) % pages)); // a fixed permutation
    const size_t kb = kf.rowBytes(), vb = vf.rowBytes();
    kPool.assign((pages ? pages : 1) * pageSize * kvHeads * kb, 0);
    vPool.assign((pages ? pages : 1) * pageSize * kvHeads * vb, 0);
    // quick: encode 512 distinct rows and repeat them (benchmarks).
    std::vector<float> row(dim);
    std::vector<uint8_t> kr(kb), vr(vb);
    std::vector<std::vector<uint8_t>> kCycle, vCycle;
    for (unsigned s = 0; s < lengths.size(); ++s) {
      std::vector<float> ks, vs;
      std::vector<uint8_t> ke, ve;
      for (unsigned t = 0; t < lengths[s]; ++t)
        for (unsigned h = 0; h < kvHeads; ++h) {
          const size_t n = size_t(t) * kvHeads + h;
          if (!quick || kCycle.size() < 512) {
            for (float &x : row)
              x = float(rng.gaussian());
            if (!kf.encodeRow(row, kr).ok())
              fail("encode failed");
            if (!quick)
              ks.insert(ks.end(), row.begin(), row.end());
            for (float &x : row)
              x = float(rng.gaussian());
            if (!vf.encodeRow(row, vr).ok())
              fail("encode failed");
            if (!quick)
              vs.insert(vs.end(), row.begin(), row.end());
            if (quick) {
              kCycle.push_back(kr);
              vCycle.push_back(vr);
            }
          }
          const std::vector<uint8_t> &kk = quick ? kCycle[n % kCycle.size()] : kr;
          const std::vector<uint8_t> &vv = quick ? vCycle[n % vCycle.size()] : vr;
          if (!quick) {
            ke.insert(ke.end(), kk.begin(), kk.end());
            ve.insert(ve.end(), vv.begin(), vv.end());
          }
          const uint64_t page = uint64_t(indices[indptr[s] + t / pageSize]);
          const uint64_t slot = (page * pageSize + t % pageSize) * kvHeads + h;
          std::memcpy(&kPool[slot * kb], kk.data(), kb);
          std::memcpy(&vPool[slot * vb], vv.data(), vb);
        }
      k.push_back(std::move(ks));
      v.push_back(std::move(vs));
      kRows.push_back(std::move(ke));
      vRows.push_back(std::move(ve));
    }
  }

  tq_kv_cache_v0 descriptor(const KernelEntry &e, void *kDev, void *vDev) {
    tq_kv_cache_v0 c{};
    c.version = TQ_KV_CACHE_VERSION_0;
    c.size = sizeof(c);
    c.k_format = e.kFormat.c_str();
    c.v_format = e.vFormat.c_str();
    c.head_dim = dim;
    c.num_kv_heads = kvHeads;
    c.page_size = pageSize;
    c.layout = TQ_LAYOUT_PAGED;
    c.k_row_bytes = uint32_t(kf.rowBytes());
    c.v_row_bytes = uint32_t(vf.rowBytes());
    c.num_pages = kPool.size() / (size_t(pageSize) * kvHeads * kf.rowBytes());
    c.k_pages = static_cast<uint8_t *>(kDev);
    c.v_pages = static_cast<uint8_t *>(vDev);
    c.num_seqs = uint32_t(lengths.size());
    c.indptr = indptr.data();
    c.indices = indices.data();
    c.last_page_len = lastLen.data();
    return c;
  }
};

tq_attention_params_v0 paramsFor(const KernelEntry &e, unsigned qHeads,
                                 const std::vector<int32_t> &qIndptr) {
  return {TQ_ATTENTION_PARAMS_VERSION_0,
          sizeof(tq_attention_params_v0),
          qHeads,
          e.causal ? 1u : 0u,
          e.window,
          e.softcap,
          0.0f,
          0,
          qIndptr.data()};
}

/// Runs one kernel on a ragged batch and returns the worst error against
/// the reference (or a negative value when the runtime call failed).
double checkKernel(tq_gpu_runtime *rt, const KernelEntry &e) {
  const unsigned kvHeads = 2, qHeads = kvHeads * e.group;
  const bool prefill = e.kind == "prefill";
  std::vector<unsigned> lengths = {1, 17, 300, 0, 1000};
  std::vector<unsigned> queries =
      prefill ? std::vector<unsigned>{1, 3, 5, 0, 2}
              : std::vector<unsigned>{1, 1, 1, 0, 1};
  PagedBatch b(e, kvHeads, 16, lengths, 7);
  DeviceBuffer kDev(rt, b.kPool.size()), vDev(rt, b.vPool.size());
  kDev.upload(b.kPool);
  vDev.upload(b.vPool);
  std::vector<int32_t> qIndptr = {0};
  for (unsigned n : queries)
    qIndptr.push_back(qIndptr.back() + int32_t(n));
  SplitMix64 rng(11);
  std::vector<float> q(size_t(qIndptr.back()) * qHeads * e.headDim);
  for (float &x : q)
    x = float(rng.gaussian());
  DeviceBuffer qDev(rt, q.size() * 4), outDev(rt, q.size() * 4);
  qDev.upload(q);
  tq_kv_cache_v0 cache = b.descriptor(e, kDev.ptr, vDev.ptr);
  tq_attention_params_v0 p = paramsFor(e, qHeads, qIndptr);
  tq_status status =
      tq_gpu_attention(rt, &cache, &p, static_cast<const float *>(qDev.ptr),
                       static_cast<float *>(outDev.ptr));
  if (status != TQ_STATUS_OK) {
    std::printf("  %s: %s\n", e.name.c_str(), tq_status_string(status));
    return -1.0;
  }
  std::vector<float> out(q.size());
  if (tq_gpu_copy_to_host(rt, out.data(), outDev.ptr, out.size() * 4) !=
      TQ_STATUS_OK)
    return -1.0;
  double worst = 0.0;
  for (unsigned s = 0; s < lengths.size(); ++s) {
    if (queries[s] == 0)
      continue;
    AttentionShape shape{queries[s], qHeads, kvHeads, e.headDim, lengths[s]};
    AttentionOptions o;
    o.causal = e.causal;
    o.window = e.window;
    o.softcap = e.softcap;
    std::vector<double> ref(size_t(queries[s]) * qHeads * e.headDim);
    std::span<const float> qs(q.data() + size_t(qIndptr[s]) * qHeads * e.headDim,
                              ref.size());
    if (!referenceAttentionQuantized(shape, o, qs, b.kf, b.kRows[s], b.vf,
                                     b.vRows[s], ref)
             .ok())
      return -1.0;
    for (size_t i = 0; i < ref.size(); ++i) {
      double got = out[size_t(qIndptr[s]) * qHeads * e.headDim + i];
      double err = std::fabs(got - ref[i]) / std::max(1.0, std::fabs(ref[i]));
      if (!(err <= worst))
        worst = std::isnan(err) ? INFINITY : err;
    }
  }
  return worst;
}

/// Runs the append kernel of `e` (K and V in its format) for rows 5..45 of
/// a sequence in a shuffled paged pool of 16-token pages and returns the
/// number of pool bytes that differ from what lib/Quant writes (or -1 when
/// the runtime call failed).
long checkAppend(tq_gpu_runtime *rt, const KernelEntry &e) {
  const unsigned kvHeads = 2, page = 16, pages = 4, start = 5, count = 41;
  const Format f = *Format::get(e.kFormat, e.headDim);
  const size_t rb = f.rowBytes(), dim = e.headDim;
  std::vector<int32_t> indptr = {0, int32_t(pages)}, indices = {2, 0, 3, 1},
                       lastLen = {int32_t(start + count - 3 * page)};
  std::vector<uint8_t> kPool(pages * page * kvHeads * rb, 0xEE);
  std::vector<uint8_t> vPool = kPool, kWant = kPool, vWant = kPool;
  std::vector<float> k = makeOutlierSample(count * kvHeads, e.headDim, 3),
                     v = makeOutlierSample(count * kvHeads, e.headDim, 4);
  for (unsigned t = 0; t < count; ++t)
    for (unsigned h = 0; h < kvHeads; ++h) {
      const unsigned pos = start + t;
      const size_t slot =
          (size_t(indices[pos / page]) * page + pos % page) * kvHeads + h;
      const size_t row = size_t(t) * kvHeads + h;
      if (!f.encodeRow(std::span<const float>(k).subspan(row * dim, dim),
                       std::span<uint8_t>(kWant).subspan(slot * rb, rb))
               .ok() ||
          !f.encodeRow(std::span<const float>(v).subspan(row * dim, dim),
                       std::span<uint8_t>(vWant).subspan(slot * rb, rb))
               .ok())
        return -1;
    }
  DeviceBuffer kDev(rt, kPool.size()), vDev(rt, vPool.size()),
      kRows(rt, k.size() * 4), vRows(rt, v.size() * 4);
  kDev.upload(kPool);
  vDev.upload(vPool);
  kRows.upload(k);
  vRows.upload(v);
  tq_kv_cache_v0 c{};
  c.version = TQ_KV_CACHE_VERSION_0;
  c.size = sizeof(c);
  c.k_format = c.v_format = e.kFormat.c_str();
  c.head_dim = e.headDim;
  c.num_kv_heads = kvHeads;
  c.page_size = page;
  c.layout = TQ_LAYOUT_PAGED;
  c.k_row_bytes = c.v_row_bytes = uint32_t(rb);
  c.num_pages = pages;
  c.k_pages = static_cast<uint8_t *>(kDev.ptr);
  c.v_pages = static_cast<uint8_t *>(vDev.ptr);
  c.num_seqs = 1;
  c.indptr = indptr.data();
  c.indices = indices.data();
  c.last_page_len = lastLen.data();
  tq_status status = tq_gpu_append(rt, &c, 0, start, count,
                                   static_cast<const float *>(kRows.ptr),
                                   static_cast<const float *>(vRows.ptr));
  if (status != TQ_STATUS_OK) {
    std::printf("  %s: %s\n", e.name.c_str(), tq_status_string(status));
    return -1;
  }
  if (tq_gpu_copy_to_host(rt, kPool.data(), kDev.ptr, kPool.size()) !=
          TQ_STATUS_OK ||
      tq_gpu_copy_to_host(rt, vPool.data(), vDev.ptr, vPool.size()) !=
          TQ_STATUS_OK)
    return -1;
  long differing = 0;
  for (size_t i = 0; i < kPool.size(); ++i)
    differing += (kPool[i] != kWant[i]) + (vPool[i] != vWant[i]);
  return differing;
}

/// Times decode steps; prints bytes per step and GB/s.
void benchKernel(tq_gpu_runtime *rt, const KernelEntry &e,
                 const std::vector<unsigned> &contexts,
                 const std::vector<unsigned> &batches, unsigned repeat) {
  const unsigned kvHeads = 8, qHeads = kvHeads * e.group;
  for (unsigned ctx : contexts)
    for (unsigned batch : batches) {
      PagedBatch b(e, kvHeads, 64, std::vector<unsigned>(batch, ctx), 5,
                   /*quick=*/true);
      DeviceBuffer kDev(rt, b.kPool.size()), vDev(rt, b.vPool.size());
      kDev.upload(b.kPool);
      vDev.upload(b.vPool);
      std::vector<int32_t> qIndptr;
      for (unsigned i = 0; i <= batch; ++i)
        qIndptr.push_back(int32_t(i));
      std::vector<float> q(size_t(batch) * qHeads * e.headDim, 0.5f);
      DeviceBuffer qDev(rt, q.size() * 4), outDev(rt, q.size() * 4);
      qDev.upload(q);
      tq_kv_cache_v0 cache = b.descriptor(e, kDev.ptr, vDev.ptr);
      tq_attention_params_v0 p = paramsFor(e, qHeads, qIndptr);
      auto step = [&] {
        return tq_gpu_attention(rt, &cache, &p,
                                static_cast<const float *>(qDev.ptr),
                                static_cast<float *>(outDev.ptr));
      };
      if (step() != TQ_STATUS_OK)
        fail("benchmark launch failed for " + e.name, 1);
      auto t0 = std::chrono::steady_clock::now();
      for (unsigned r = 0; r < repeat; ++r)
        step();
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - t0)
                      .count() /
                  repeat;
      double bytes = double(batch) * ctx * kvHeads *
                     double(b.kf.rowBytes() + b.vf.rowBytes());
      std::printf("bench %s ctx=%u batch=%u: %.4f ms, %.1f MB KV, %.1f GB/s\n",
                  e.name.c_str(), ctx, batch, ms, bytes / 1e6,
                  bytes / (ms * 1e6));
    }
}

} // namespace

int main(int argc, char **argv) {
  std::string library, backend = "cuda", filter;
  int device = 0;
  bool bench = false;
  unsigned repeat = 20;
  std::vector<unsigned> contexts = {1024, 8192, 32768, 131072},
                        batches = {1, 8, 64};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--version") {
      std::printf("tq-gpu-check (tqc %s (git %s))\n", TQC_VERSION,
                  TQC_GIT_REVISION);
      return 0;
    }
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        fail("missing value after " + a);
      return argv[++i];
    };
    if (a == "--library")
      library = value();
    else if (a == "--backend")
      backend = value();
    else if (a == "--device")
      device = std::atoi(value());
    else if (a == "--filter")
      filter = value();
    else if (a == "--bench")
      bench = true;
    else if (a == "--contexts")
      contexts = numbers(value());
    else if (a == "--batches")
      batches = numbers(value());
    else if (a == "--repeat")
      repeat = unsigned(std::max(1, std::atoi(value())));
    else if (a == "--help" || a == "-h") {
      std::printf("usage: tq-gpu-check --library DIR [--backend cuda|hip] "
                  "[--device N] [--filter TEXT] [--bench] [--contexts LIST] "
                  "[--batches LIST] [--repeat N]\n");
      return 0;
    } else
      fail("unknown option '" + a + "'");
  }
  if (library.empty())
    fail("--library DIR is required");
  if (backend != "cuda" && backend != "hip")
    fail("--backend must be cuda or hip");
  std::vector<KernelEntry> kernels = readKernels(library, "attention");
  std::vector<KernelEntry> appends = readKernels(library, "append");
  if (kernels.empty() && appends.empty())
    fail("no attention or append kernels in " + library + "/kernels.json");

  tq_gpu_options_v0 o = {TQ_GPU_OPTIONS_VERSION_0,
                         sizeof(o),
                         backend == "cuda" ? TQ_BACKEND_CUDA : TQ_BACKEND_HIP,
                         device,
                         library.c_str(),
                         nullptr,
                         0,
                         0};
  tq_gpu_runtime *rt = nullptr;
  tq_status status = tq_gpu_runtime_create(&o, nullptr, &rt);
  if (status == TQ_STATUS_UNAVAILABLE) {
    std::printf("tq-gpu-check: skipped: no %s driver or no library in %s\n",
                backend.c_str(), library.c_str());
    return 77;
  }
  if (status != TQ_STATUS_OK)
    fail(std::string("creating the GPU runtime failed: ") +
         tq_status_string(status));
  unsigned failures = 0, checked = 0;
  for (const KernelEntry &e : kernels) {
    if (!filter.empty() && e.name.find(filter) == std::string::npos)
      continue;
    double err = checkKernel(rt, e);
    bool ok = err >= 0.0 && err <= 2e-3;
    failures += !ok;
    ++checked;
    std::printf("%s %s max_rel_err=%.3g\n", ok ? "PASS" : "FAIL",
                e.name.c_str(), err);
  }
  for (const KernelEntry &e : appends) {
    if (!filter.empty() && e.name.find(filter) == std::string::npos)
      continue;
    long differing = checkAppend(rt, e);
    bool ok = differing == 0;
    failures += !ok;
    ++checked;
    std::printf("%s %s differing_bytes=%ld\n", ok ? "PASS" : "FAIL",
                e.name.c_str(), differing);
  }
  std::printf("%u kernels checked, %u failed\n", checked, failures);
  if (bench)
    for (const KernelEntry &e : kernels)
      if (e.kind == "decode" &&
          (filter.empty() || e.name.find(filter) != std::string::npos))
        benchKernel(rt, e, contexts, batches, repeat);
  tq_gpu_runtime_destroy(rt);
  return failures ? 1 : 0;
}
