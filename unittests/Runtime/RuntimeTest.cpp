//===- RuntimeTest.cpp - The C runtime over tq-aot kernel libraries -------===//
//
// The kernel libraries are written by tq-aot in ctest fixtures
// (unittests/Runtime/CMakeLists.txt) into the directories the build passes
// as TQ_TEST_KERNELS_PLAIN / TQ_TEST_KERNELS_MASKED (environment variables
// of the same names override them). This binary links only the runtime and
// lib/Quant, so it also runs under ASan and UBSan.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"
#include "tq/tq_runtime.h"

#include "AmxGrant.h"

#include <gtest/gtest.h>


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

using namespace tq::quant;

namespace {

/// <dir>/libtqkernels.so, or empty when the library was not built.
std::string libraryPath(const char *variable, const char *builtIn) {
  const char *dir = std::getenv(variable);
  std::string path = std::string(dir ? dir : builtIn) + "/libtqkernels.so";
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return {};
  std::fclose(f);
  return path;
}

struct Runtime {
  tq_runtime *rt = nullptr;
  explicit Runtime(const std::string &path, uint32_t threads = 2) {
    tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof(o),
                               path.c_str(), threads, 0};
    EXPECT_EQ(tq_runtime_create(&o, nullptr, &rt), TQ_STATUS_OK) << path;
  }
  ~Runtime() { tq_runtime_destroy(rt); }
};

/// A batch of sequences in a paged (or contiguous) cache, with the float
/// rows kept for the reference.
struct Batch {
  std::string kFormat, vFormat;
  unsigned dim, kvHeads, qHeads;
  std::vector<unsigned> lengths, queries;
  uint32_t pageSize;
  bool contiguous = false;
  /// TQ_LAYOUT_HEAD_MAJOR: pages [kv head][slot] instead of [slot][kv head].
  bool headMajor = false;

  std::vector<std::vector<float>> k, v; // per sequence [len][KH][D]
  std::vector<uint8_t> kPool, vPool;
  std::vector<int32_t> indptr, indices, lastLen, seqLens;
  uint64_t numPages = 0;
  tq_kv_cache_v0 cache{};

  void build(uint64_t seed) {
    Format kf = *Format::get(kFormat, dim), vf = *Format::get(vFormat, dim);
    SplitMix64 rng(seed);
    indptr = {0};
    std::vector<int32_t> order;
    for (unsigned s = 0; s < lengths.size(); ++s) {
      unsigned pages =
          contiguous ? 1 : (lengths[s] + pageSize - 1) / pageSize;
      indptr.push_back(indptr.back() + int32_t(pages));
      lastLen.push_back(lengths[s] == 0
                            ? 0
                            : int32_t(lengths[s] - (pages - 1) * pageSize));
      seqLens.push_back(int32_t(lengths[s]));
    }
    // Pages in a shuffled order, plus two spares nobody owns.
    numPages = uint64_t(indptr.back()) + 2;
    SplitMix64 shuffle(seed ^ 0x5eed);
    std::vector<int32_t> perm(numPages);
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = perm.size(); i > 1; --i) // Fisher-Yates
      std::swap(perm[i - 1], perm[shuffle.next() % i]);
    indices.assign(perm.begin(), perm.begin() + indptr.back());
    if (contiguous)
      numPages = lengths.size();
    kPool.assign(numPages * pageSize * kvHeads * kf.rowBytes(), 0xCD);
    vPool.assign(numPages * pageSize * kvHeads * vf.rowBytes(), 0xCD);
    for (unsigned len : lengths) {
      std::vector<float> kr(size_t(len) * kvHeads * dim),
          vr(size_t(len) * kvHeads * dim);
      for (float &x : kr)
        x = float(rng.gaussian());
      for (float &x : vr)
        x = float(rng.gaussian());
      k.push_back(std::move(kr));
      v.push_back(std::move(vr));
    }
    cache.version = TQ_KV_CACHE_VERSION_0;
    cache.size = sizeof(cache);
    cache.k_format = kFormat.c_str();
    cache.v_format = vFormat.c_str();
    cache.head_dim = dim;
    cache.num_kv_heads = kvHeads;
    cache.page_size = pageSize;
    cache.layout = (contiguous ? TQ_LAYOUT_CONTIGUOUS : TQ_LAYOUT_PAGED) |
                   (headMajor ? TQ_LAYOUT_HEAD_MAJOR : 0u);
    cache.k_row_bytes = uint32_t(kf.rowBytes());
    cache.v_row_bytes = uint32_t(vf.rowBytes());
    cache.num_pages = numPages;
    cache.k_pages = kPool.data();
    cache.v_pages = vPool.data();
    cache.num_seqs = uint32_t(lengths.size());
    cache.indptr = indptr.data();
    cache.indices = indices.data();
    cache.last_page_len = lastLen.data();
    cache.seq_lens = seqLens.data();
  }

  /// Appends every sequence's rows in two chunks (exercising start > 0).
  void append(tq_runtime *rt) {
    for (uint32_t s = 0; s < lengths.size(); ++s) {
      unsigned first = lengths[s] / 2;
      ASSERT_EQ(tq_append(rt, &cache, s, 0, first, k[s].data(), v[s].data()),
                TQ_STATUS_OK);
      size_t offset = size_t(first) * kvHeads * dim;
      ASSERT_EQ(tq_append(rt, &cache, s, first, lengths[s] - first,
                          k[s].data() + offset, v[s].data() + offset),
                TQ_STATUS_OK);
    }
  }
};

/// Sequence s's K and V rows encoded by lib/Quant (what the append kernels
/// must have written), [len][KH][row bytes].
void encodeSequence(const Batch &b, unsigned s, const Format &kf,
                    const Format &vf, std::vector<uint8_t> &kc,
                    std::vector<uint8_t> &vc) {
  kc.assign(size_t(b.lengths[s]) * b.kvHeads * kf.rowBytes(), 0);
  vc.assign(size_t(b.lengths[s]) * b.kvHeads * vf.rowBytes(), 0);
  for (size_t r = 0; r < size_t(b.lengths[s]) * b.kvHeads; ++r) {
    EXPECT_TRUE(kf.encodeRow(std::span<const float>(b.k[s]).subspan(
                                 r * b.dim, b.dim),
                             std::span<uint8_t>(kc).subspan(
                                 r * kf.rowBytes(), kf.rowBytes()))
                    .ok());
    EXPECT_TRUE(vf.encodeRow(std::span<const float>(b.v[s]).subspan(
                                 r * b.dim, b.dim),
                             std::span<uint8_t>(vc).subspan(
                                 r * vf.rowBytes(), vf.rowBytes()))
                    .ok());
  }
}

/// Sequence s's rows of `out` (finite, no more than 1e-4 off) against
/// lib/Quant's reference over the rows the library encodes, with `options`.
void expectSequenceMatchesReference(const Batch &b, unsigned s,
                                    const std::vector<int32_t> &qIndptr,
                                    const std::vector<float> &q,
                                    const std::vector<float> &out,
                                    const AttentionOptions &options) {
  Format kf = *Format::get(b.kFormat, b.dim), vf = *Format::get(b.vFormat, b.dim);
  // Encode with the library, as the append kernel must have.
  std::vector<uint8_t> kc, vc;
  encodeSequence(b, s, kf, vf, kc, vc);
  AttentionShape shape{b.queries[s], b.qHeads, b.kvHeads, b.dim,
                       b.lengths[s]};
  size_t first = size_t(qIndptr[s]) * b.qHeads * b.dim;
  size_t count = size_t(b.queries[s]) * b.qHeads * b.dim;
  std::vector<double> ref(count);
  Status st = referenceAttentionQuantized(
      shape, options, std::span<const float>(q).subspan(first, count), kf, kc,
      vf, vc, ref);
  ASSERT_TRUE(st.ok()) << st.message();
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(std::isfinite(out[first + i])) << "sequence " << s;
    worst = std::max(worst, std::fabs(out[first + i] - ref[i]));
  }
  EXPECT_LT(worst, 1e-4) << "sequence " << s << " (" << b.lengths[s]
                         << " tokens, " << b.queries[s] << " queries)";
}

/// Runs attention over the batch and compares each sequence with
/// lib/Quant's reference over the same encoded rows.
std::vector<float> checkAttention(tq_runtime *rt, Batch &b, bool causal,
                                  unsigned window, float softcap,
                                  float scale = 0.0f) {
  std::vector<int32_t> qIndptr = {0};
  for (unsigned n : b.queries)
    qIndptr.push_back(qIndptr.back() + int32_t(n));
  SplitMix64 rng(99);
  std::vector<float> q(size_t(qIndptr.back()) * b.qHeads * b.dim);
  for (float &x : q)
    x = float(rng.gaussian());
  std::vector<float> out(q.size(), NAN);
  tq_attention_params_v0 p = {TQ_ATTENTION_PARAMS_VERSION_0,
                              sizeof(p),
                              b.qHeads,
                              causal ? 1u : 0u,
                              window,
                              softcap,
                              scale,
                              0,
                              qIndptr.data()};
  EXPECT_EQ(tq_attention(rt, &b.cache, &p, q.data(), out.data()),
            TQ_STATUS_OK);
  AttentionOptions o;
  o.scale = scale;
  o.causal = causal;
  o.window = window;
  o.softcap = softcap;
  for (unsigned s = 0; s < b.lengths.size(); ++s)
    if (b.queries[s] != 0)
      expectSequenceMatchesReference(b, s, qIndptr, q, out, o);
  return out;
}

class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    plain = libraryPath("TQ_TEST_KERNELS_PLAIN", TQ_TEST_KERNELS_PLAIN);
    masked = libraryPath("TQ_TEST_KERNELS_MASKED", TQ_TEST_KERNELS_MASKED);
    if (plain.empty() || masked.empty())
      GTEST_SKIP() << "kernel libraries not found under "
                   << TQ_TEST_KERNELS_PLAIN << " / " << TQ_TEST_KERNELS_MASKED
                   << " (ctest builds them first with tq-aot)";
  }
  std::string plain, masked;
};

Batch ragged(const char *k, const char *v, unsigned dim, unsigned group,
             uint32_t pageSize) {
  Batch b;
  b.kFormat = k;
  b.vFormat = v;
  b.dim = dim;
  b.kvHeads = 2;
  b.qHeads = 2 * group;
  b.lengths = {1, 17, 40, 0, 5};
  b.queries = {1, 1, 1, 0, 1};
  b.pageSize = pageSize;
  return b;
}

TEST_F(RuntimeTest, DecodeRaggedBatchesMatchReference) {
  Runtime r(plain);
  for (auto [k, v] : {std::pair{"turbo3_0", "q8_0"}, {"polar4", "q8_0"},
                      {"turbo3_0", "turbo3_0"}})
    for (unsigned dim : {64u, 96u})
      for (unsigned group : {1u, 3u}) {
        SCOPED_TRACE(std::string(k) + "/" + v + " d=" + std::to_string(dim) +
                     " g=" + std::to_string(group));
        Batch b = ragged(k, v, dim, group, 16);
        b.build(dim * 10 + group);
        b.append(r.rt);
        checkAttention(r.rt, b, false, 0, 0.0f);
      }
}

/// Sequences long enough that every split-KV chunk of a decode kernel runs
/// several 256-token flash tiles and a partial last one (tq-aot's default
/// decode tile), on both layouts.
TEST_F(RuntimeTest, DecodeSpansSeveralTiles) {
  Runtime r(plain);
  for (uint32_t pageSize : {16u, 0u}) {
    SCOPED_TRACE(pageSize ? "paged" : "contiguous");
    // (Contiguous: one "page" per sequence, room for the longest.)
    Batch b = ragged("turbo3_0", "turbo3_0", 64, 3, pageSize ? pageSize : 4096);
    b.contiguous = pageSize == 0;
    b.lengths = {2600, 1, 1290};
    b.queries = {1, 1, 1};
    b.build(11);
    b.append(r.rt);
    checkAttention(r.rt, b, false, 0, 0.0f);
  }
}

TEST_F(RuntimeTest, PrefillMatchesReference) {
  Runtime r(plain);
  Batch b = ragged("polar4", "q8_0", 96, 3, 16);
  b.queries = {1, 4, 7, 0, 2};
  b.build(7);
  b.append(r.rt);
  checkAttention(r.rt, b, false, 0, 0.0f);
}

/// A logit scale other than 1/sqrt(D) (as Gemma-style models use).
TEST_F(RuntimeTest, CustomLogitScale) {
  Runtime r(plain);
  Batch b = ragged("turbo3_0", "q8_0", 64, 3, 16);
  b.build(8);
  b.append(r.rt);
  checkAttention(r.rt, b, false, 0, 0.0f, 0.3f);
}

TEST_F(RuntimeTest, CausalWindowSoftcap) {
  Runtime r(masked);
  Batch b = ragged("tq3_0", "f16", 64, 2, 16);
  b.queries = {1, 3, 9, 0, 5};
  b.build(11);
  b.append(r.rt);
  checkAttention(r.rt, b, true, 8, 20.0f);
}

/// Page sizes 1, 16 and 128, and the contiguous layout, each token-major
/// and head-major: identical output.
TEST_F(RuntimeTest, PagedAndContiguousAgree) {
  Runtime r(plain);
  std::vector<float> first;
  for (int variant = 0; variant < 8; ++variant) {
    Batch b = ragged("turbo3_0", "q8_0", 64, 3, variant % 4 == 0   ? 1
                                               : variant % 4 == 1 ? 16
                                                                  : 128);
    b.contiguous = variant % 4 == 3;
    b.headMajor = variant >= 4;
    b.build(5);
    b.append(r.rt);
    std::vector<float> out = checkAttention(r.rt, b, false, 0, 0.0f);
    if (variant == 0)
      first = out;
    else
      EXPECT_EQ(out, first) << "variant " << variant;
  }
}

/// Runs checkAttention on runtimes of 1 and `threads` threads; expects
/// both to match the reference and (the witness that the tokens were split
/// and merged, which rounds differently) not to be bit for bit equal.
void checkSplitDecode(const std::string &library, Batch &b, unsigned threads,
                      bool causal = false, unsigned window = 0,
                      float softcap = 0.0f, bool expectSplit = true) {
  Runtime one(library, 1), many(library, threads);
  b.append(one.rt);
  std::vector<float> whole = checkAttention(one.rt, b, causal, window,
                                            softcap);
  std::vector<float> split = checkAttention(many.rt, b, causal, window,
                                            softcap);
  if (expectSplit)
    EXPECT_NE(split, whole) << "no decode was split over " << threads
                            << " threads";
  else
    EXPECT_EQ(split, whole);
}

/// One sequence with 2 kv heads on 4 or 8 threads: its decode's tokens are
/// split into page-aligned parts (2 or 4) whose outputs merge by their
/// log-sum-exp, on both layouts (and head-major, where a part of a
/// contiguous cache starts a head's rows further on).
TEST_F(RuntimeTest, DecodeSplitsTokensOverIdleThreads) {
  for (unsigned threads : {4u, 8u})
    for (uint32_t pageSize : {16u, 0u})
      for (bool headMajor : {false, true}) {
        if (headMajor && threads == 8)
          continue;
        SCOPED_TRACE(std::to_string(threads) + " threads, " +
                     (pageSize ? "paged" : "contiguous") +
                     (headMajor ? ", head-major" : ""));
        Batch b = ragged("turbo3_0", "turbo3_0", 64, 3,
                         pageSize ? pageSize : 1536);
        b.contiguous = pageSize == 0;
        b.headMajor = headMajor;
        b.lengths = {1500};
        b.queries = {1};
        b.build(21);
        checkSplitDecode(plain, b, threads);
      }
}

/// A decode split beside a prefill (which is never split) and a decode too
/// short to split, in one call.
TEST_F(RuntimeTest, SplitDecodesBesidePrefills) {
  Batch b = ragged("polar4", "q8_0", 96, 3, 16);
  b.lengths = {1500, 40, 300};
  b.queries = {1, 4, 1};
  b.build(22);
  checkSplitDecode(plain, b, 16);
}

/// A sliding window is relative to the last token: a window kernel's
/// tokens are never split (a part would window its own end).
TEST_F(RuntimeTest, WindowDecodesAreNotSplit) {
  Batch b = ragged("tq3_0", "f16", 64, 2, 16);
  b.lengths = {1500};
  b.queries = {1};
  b.build(23);
  checkSplitDecode(masked, b, 4, true, 8, 20.0f, /*expectSplit=*/false);
}

/// Append writes the library's bytes into the right slots and nothing else,
/// token-major and head-major.
TEST_F(RuntimeTest, AppendWritesLibraryBytesInPlace) {
  for (bool headMajor : {false, true}) {
    SCOPED_TRACE(headMajor ? "head-major" : "token-major");
    Runtime r(plain);
    Batch b = ragged("polar4", "q8_0", 96, 1, 16);
    b.headMajor = headMajor;
    b.build(3);
    std::vector<uint8_t> before = b.kPool;
    b.append(r.rt);
    Format kf = *Format::get("polar4", 96);
    std::vector<bool> written(b.kPool.size(), false);
    for (uint32_t s = 0; s < b.lengths.size(); ++s)
      for (unsigned t = 0; t < b.lengths[s]; ++t)
        for (unsigned h = 0; h < b.kvHeads; ++h) {
          size_t page =
              size_t(b.indices[size_t(b.indptr[s]) + t / b.pageSize]);
          size_t slot = t % b.pageSize;
          size_t at = (headMajor ? (page * b.kvHeads + h) * b.pageSize + slot
                                 : (page * b.pageSize + slot) * b.kvHeads + h) *
                      kf.rowBytes();
          // The header's helper says the same.
          EXPECT_EQ(tq_kv_cache_row_index(&b.cache, page, uint32_t(slot), h) *
                        kf.rowBytes(),
                    at);
          std::vector<uint8_t> want(kf.rowBytes());
          ASSERT_TRUE(kf.encodeRow(std::span<const float>(b.k[s]).subspan(
                                       (size_t(t) * b.kvHeads + h) * 96, 96),
                                   want)
                          .ok());
          EXPECT_EQ(0, std::memcmp(&b.kPool[at], want.data(), want.size()))
              << "seq " << s << " token " << t << " head " << h;
          for (size_t i = 0; i < want.size(); ++i)
            written[at + i] = true;
        }
    for (size_t i = 0; i < b.kPool.size(); ++i)
      if (!written[i])
        ASSERT_EQ(b.kPool[i], before[i]) << "byte " << i << " was touched";
  }
}

//===----------------------------------------------------------------------===//
// Malformed calls return a status and never crash
//===----------------------------------------------------------------------===//

TEST_F(RuntimeTest, CreateErrors) {
  tq_runtime *rt = reinterpret_cast<tq_runtime *>(1);
  tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof(o),
                             "/nonexistent/libtqkernels.so", 1, 0};
  EXPECT_EQ(tq_runtime_create(&o, nullptr, &rt), TQ_STATUS_UNAVAILABLE);
  EXPECT_EQ(rt, nullptr);
  // The message names the path and says why the loader refused it.
  EXPECT_NE(std::string(tq_last_error())
                .find("cannot load kernel library "
                      "'/nonexistent/libtqkernels.so': "),
            std::string::npos)
      << tq_last_error();
  EXPECT_NE(std::string(tq_last_error()).find("No such file"),
            std::string::npos)
      << tq_last_error();
  EXPECT_EQ(tq_runtime_create(nullptr, nullptr, &rt),
            TQ_STATUS_INVALID_ARGUMENT);
  o.size = 8;
  EXPECT_EQ(tq_runtime_create(&o, nullptr, &rt),
            TQ_STATUS_VERSION_MISMATCH);
  o.size = sizeof(o);
  o.version = 7;
  EXPECT_EQ(tq_runtime_create(&o, nullptr, &rt),
            TQ_STATUS_VERSION_MISMATCH);
  o.version = TQ_RUNTIME_OPTIONS_VERSION_0;
  o.library_path = nullptr;
  EXPECT_EQ(tq_runtime_create(&o, nullptr, &rt),
            TQ_STATUS_INVALID_ARGUMENT);
  tq_allocator_v0 bad = {TQ_ALLOCATOR_VERSION_0, 4, nullptr, nullptr,
                         nullptr};
  o.library_path = plain.c_str();
  EXPECT_EQ(tq_runtime_create(&o, &bad, &rt), TQ_STATUS_VERSION_MISMATCH);
  bad.size = sizeof(bad);
  EXPECT_EQ(tq_runtime_create(&o, &bad, &rt), TQ_STATUS_INVALID_ARGUMENT);
  // More threads than the runtime starts: refused before anything is
  // loaded or started, naming the limit.
  o.num_threads = TQ_RUNTIME_MAX_THREADS + 1;
  EXPECT_EQ(tq_runtime_create(&o, nullptr, &rt), TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(std::string(tq_last_error()).find("num_threads 4097 is above the "
                                              "limit of 4096"),
            std::string::npos)
      << tq_last_error();
  o.num_threads = 1;
  EXPECT_STREQ(tq_status_string(TQ_STATUS_OUT_OF_RANGE), "out of range");
  EXPECT_EQ(tq_runtime_abi_version(), TQ_RUNTIME_ABI_VERSION);
}

/// The caller's allocator of the allocator tests: counts what is live, so a
/// test can check nothing leaks, and fails allocation number `failAt`
/// (1-based; 0: none).
struct CountingAllocator {
  int live = 0, calls = 0, failAt = 0;
  static void *allocate(void *user, size_t bytes, size_t alignment) {
    auto *self = static_cast<CountingAllocator *>(user);
    if (++self->calls == self->failAt)
      return nullptr;
    ++self->live;
    return std::aligned_alloc(alignment,
                              (bytes + alignment - 1) / alignment * alignment);
  }
  static void release(void *user, void *p) {
    --static_cast<CountingAllocator *>(user)->live;
    std::free(p);
  }
};

TEST_F(RuntimeTest, CallerAllocatorIsUsedAndBalanced) {
  CountingAllocator counter;
  tq_allocator_v0 a = {TQ_ALLOCATOR_VERSION_0, sizeof(a), &counter,
                       CountingAllocator::allocate,
                       CountingAllocator::release};
  tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof(o),
                             plain.c_str(), 3, 0};
  tq_runtime *rt = nullptr;
  ASSERT_EQ(tq_runtime_create(&o, &a, &rt), TQ_STATUS_OK);
  EXPECT_GT(counter.live, 0);
  Batch b = ragged("turbo3_0", "q8_0", 64, 1, 16);
  b.build(1);
  b.append(rt);
  checkAttention(rt, b, false, 0, 0.0f);
  tq_runtime_destroy(rt);
  EXPECT_EQ(counter.live, 0);
}

/// The runtime's allocations failing one at a time (its state, the pool's,
/// the pool's worker handles): each is TQ_STATUS_OUT_OF_MEMORY with a
/// message, nothing leaks, and no thread is joined that never started (a
/// failed worker-handle allocation once joined num_workers handles from a
/// null array).
TEST_F(RuntimeTest, AllocationFailuresAreStatuses) {
  for (int failAt = 1; failAt <= 3; ++failAt) {
    CountingAllocator failing;
    failing.failAt = failAt;
    tq_allocator_v0 a = {TQ_ALLOCATOR_VERSION_0, sizeof(a), &failing,
                         CountingAllocator::allocate,
                         CountingAllocator::release};
    tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof(o),
                               plain.c_str(), 3, 0};
    tq_runtime *rt = reinterpret_cast<tq_runtime *>(1);
    EXPECT_EQ(tq_runtime_create(&o, &a, &rt), TQ_STATUS_OUT_OF_MEMORY)
        << "allocation " << failAt;
    EXPECT_EQ(rt, nullptr);
    EXPECT_NE(std::string(tq_last_error()), "") << "allocation " << failAt;
    EXPECT_EQ(failing.live, 0) << "allocation " << failAt;
  }
  EXPECT_NE(std::string(tq_last_error()).find("cannot allocate 2 worker "
                                              "handles"),
            std::string::npos)
      << tq_last_error();
}

/// A call's own allocations failing one at a time (the per-sequence plan,
/// the identity table, a split decode's partial sums): each call is
/// TQ_STATUS_OUT_OF_MEMORY with a message and gives back what it took; the
/// runtime then still runs the call, exactly.
TEST_F(RuntimeTest, CallAllocationFailuresAreStatuses) {
  CountingAllocator failing;
  tq_allocator_v0 a = {TQ_ALLOCATOR_VERSION_0, sizeof(a), &failing,
                       CountingAllocator::allocate, CountingAllocator::release};
  tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof(o),
                             plain.c_str(), 4, 0};
  tq_runtime *rt = nullptr;
  ASSERT_EQ(tq_runtime_create(&o, &a, &rt), TQ_STATUS_OK);
  const int held = failing.live;
  // A decode long enough to split over the threads (2 KV heads, 4 threads).
  Batch b = ragged("turbo3_0", "turbo3_0", 64, 3, 16);
  b.lengths = {1500};
  b.queries = {1};
  b.build(23);
  b.append(rt);
  std::vector<float> q(b.qHeads * b.dim, 0.5f), out(q.size());
  std::vector<int32_t> qIndptr = {0, 1};
  tq_attention_params_v0 p = {TQ_ATTENTION_PARAMS_VERSION_0,
                              sizeof(p), b.qHeads, 0, 0, 0.0f, 0.0f, 0,
                              qIndptr.data()};
  int failures = 0;
  for (int failAt = 1;; ++failAt) {
    failing.calls = 0;
    failing.failAt = failAt;
    tq_status status = tq_attention(rt, &b.cache, &p, q.data(), out.data());
    EXPECT_EQ(failing.live, held) << "allocation " << failAt;
    if (status == TQ_STATUS_OK)
      break;
    EXPECT_EQ(status, TQ_STATUS_OUT_OF_MEMORY) << "allocation " << failAt;
    EXPECT_NE(std::string(tq_last_error()).find("attention: cannot allocate"),
              std::string::npos)
        << tq_last_error();
    ++failures;
    ASSERT_LT(failAt, 16) << "a call that never stops allocating";
  }
  EXPECT_EQ(failures, 3); // plan, identity table, partial sums
  failing.calls = 0;
  failing.failAt = 1;
  EXPECT_EQ(tq_append(rt, &b.cache, 0, 1500, 0, nullptr, nullptr),
            TQ_STATUS_OK); // no rows: nothing allocated
  const size_t last = size_t(1499) * b.kvHeads * b.dim;
  EXPECT_EQ(tq_append(rt, &b.cache, 0, 1499, 1, b.k[0].data() + last,
                      b.v[0].data() + last),
            TQ_STATUS_OUT_OF_MEMORY);
  EXPECT_NE(std::string(tq_last_error()).find("append: cannot allocate"),
            std::string::npos)
      << tq_last_error();
  EXPECT_EQ(failing.live, held);
  failing.failAt = 0;
  checkAttention(rt, b, false, 0, 0.0f);
  tq_runtime_destroy(rt);
  EXPECT_EQ(failing.live, 0);
}

/// A valid call the descriptor tests break one field of: a 5-sequence
/// turbo3_0/q8_0 batch at head dim 64, its rows, queries and params.
struct ValidCall {
  Runtime r;
  Batch good;
  std::vector<float> rows, q, out;
  std::vector<int32_t> qIndptr = {0, 1, 2, 3, 3, 4};
  tq_attention_params_v0 p;
  ValidCall(const std::string &library, Batch batch)
      : r(library), good(std::move(batch)), rows(64 * 2 * 64, 0.5f),
        q(5 * 2 * 64, 0.1f), out(q.size(), 0.0f) {
    good.build(2);
    p = {TQ_ATTENTION_PARAMS_VERSION_0, sizeof(p), 2, 0, 0, 0.0f, 0.0f, 0,
         qIndptr.data()};
  }
};

TEST_F(RuntimeTest, MalformedDescriptorsAreRejected) {
  ValidCall call(plain, ragged("turbo3_0", "q8_0", 64, 1, 16));
  Runtime &r = call.r;
  Batch &good = call.good;
  std::vector<float> &rows = call.rows, &q = call.q, &out = call.out;
  tq_attention_params_v0 &p = call.p;
  auto attention = [&](const tq_kv_cache_v0 &c) {
    return tq_attention(r.rt, &c, &p, q.data(), out.data());
  };
  auto append = [&](const tq_kv_cache_v0 &c) {
    return tq_append(r.rt, &c, 1, 0, 1, rows.data(), rows.data());
  };
  auto expectBoth = [&](tq_kv_cache_v0 c, tq_status want, const char *what) {
    EXPECT_EQ(attention(c), want) << what;
    EXPECT_EQ(append(c), want) << what;
  };
  ASSERT_EQ(attention(good.cache), TQ_STATUS_OK);

  tq_kv_cache_v0 c = good.cache;
  c.version = 3;
  expectBoth(c, TQ_STATUS_VERSION_MISMATCH, "version");
  c = good.cache;
  c.size = 64;
  expectBoth(c, TQ_STATUS_VERSION_MISMATCH, "size");
  c = good.cache;
  c.k_pages = nullptr;
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "null pool");
  c = good.cache;
  c.k_format = nullptr;
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "null format");
  c = good.cache;
  c.indptr = nullptr;
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "null page table");
  c = good.cache;
  c.layout = 9;
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "layout");
  c = good.cache;
  c.layout = 2u | TQ_LAYOUT_HEAD_MAJOR; // the flag on no known layout
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "layout with the head-major flag");
  c = good.cache;
  c.head_dim = 0;
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "head dim 0");
  c = good.cache;
  c.head_dim = 80; // no kernel at this head dim
  expectBoth(c, TQ_STATUS_NOT_FOUND, "head dim mismatch");
  c = good.cache;
  c.k_row_bytes = 49; // the kernel's format writes 50-byte rows
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "row bytes mismatch");
  c = good.cache;
  c.k_format = "turbo9_0";
  expectBoth(c, TQ_STATUS_NOT_FOUND, "unknown format");
  c = good.cache;
  c.k_format = "../evil";
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "format not an identifier");
  std::vector<int32_t> badIndices = good.indices;
  badIndices[1] = int32_t(good.numPages);
  c = good.cache;
  c.indices = badIndices.data();
  expectBoth(c, TQ_STATUS_OUT_OF_RANGE, "page index out of range");
  badIndices[1] = -1;
  expectBoth(c, TQ_STATUS_OUT_OF_RANGE, "negative page index");
  std::vector<int32_t> badIndptr = good.indptr;
  std::swap(badIndptr[1], badIndptr[2]);
  c = good.cache;
  c.indptr = badIndptr.data();
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "decreasing indptr");
  // indptr is checked whole before a page index is read: with {0, 3, 1}
  // the table holds one index, and reading sequence 0's three would run
  // past it (found by tq-fuzz-runtime; the sanitized build reports it).
  std::vector<int32_t> shortIndptr = {0, 3, 1}, oneIndex = {0},
                       lastOfTwo = {1, 1};
  c = good.cache;
  c.num_seqs = 2;
  c.indptr = shortIndptr.data();
  c.indices = oneIndex.data();
  c.last_page_len = lastOfTwo.data();
  expectBoth(c, TQ_STATUS_INVALID_ARGUMENT, "indptr beyond its last entry");
  std::vector<int32_t> badLast = good.lastLen;
  badLast[1] = 17;
  c = good.cache;
  c.last_page_len = badLast.data();
  expectBoth(c, TQ_STATUS_OUT_OF_RANGE, "last page longer than a page");
  c = good.cache;
  c.num_pages = uint64_t(1) << 62;
  expectBoth(c, TQ_STATUS_OVERFLOW, "pool size overflows");

  // Call-level errors.
  EXPECT_EQ(tq_append(r.rt, &good.cache, 9, 0, 1, rows.data(), rows.data()),
            TQ_STATUS_OUT_OF_RANGE);
  EXPECT_EQ(tq_append(r.rt, &good.cache, 1, 30, 3, rows.data(), rows.data()),
            TQ_STATUS_OUT_OF_RANGE); // 2 pages of 16: capacity 32
  EXPECT_EQ(tq_append(r.rt, &good.cache, 1, 0, 1, nullptr, rows.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(tq_append(nullptr, &good.cache, 1, 0, 1, rows.data(), rows.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  // A format the library has no kernels for fails on the first call, even
  // one with no rows to write, and the message names the kernel.
  tq_kv_cache_v0 unserved = good.cache;
  unserved.k_format = "tq3_0";
  EXPECT_EQ(tq_append(r.rt, &unserved, 1, 0, 0, rows.data(), rows.data()),
            TQ_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(tq_last_error()).find("no kernel 'tq_append_tq3_0_d64'"),
            std::string::npos)
      << tq_last_error();
  EXPECT_EQ(tq_append(r.rt, &good.cache, 1, 0, 0, rows.data(), rows.data()),
            TQ_STATUS_OK);
  tq_attention_params_v0 bp = p;
  bp.num_q_heads = 3; // not a multiple of 2 kv heads
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  bp = p;
  bp.scale = -1.0f;
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  bp = p;
  bp.size = 16;
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
            TQ_STATUS_VERSION_MISMATCH);
  bp = p;
  bp.q_indptr = nullptr;
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  std::vector<int32_t> badQ = {0, 1, 0, 3, 3, 4};
  bp = p;
  bp.q_indptr = badQ.data();
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  bp = p;
  bp.causal = 1; // the plain library has no causal kernels
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  // The status alone does not say which kernel: tq_last_error does, with
  // the library it looked in.
  EXPECT_NE(std::string(tq_last_error())
                .find("no kernel 'tq_decode_turbo3_0_q8_0_d64_g1_causal' in '" +
                      plain + "'"),
            std::string::npos)
      << tq_last_error();
  // Soft-caps name kernels: a non-finite or huge one is refused before a
  // name is built from it (it used to overflow the conversion).
  for (float softcap : {INFINITY, NAN, 1.0e7f, 9.0e16f}) {
    bp = p;
    bp.softcap = softcap;
    EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
              TQ_STATUS_INVALID_ARGUMENT)
        << softcap;
  }
  bp = p;
  bp.softcap = 30.004f; // named by its bits; the library has none
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &bp, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_attention(r.rt, &good.cache, &p, nullptr, out.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  uint64_t tokens = 0;
  EXPECT_EQ(tq_kv_cache_tokens(&good.cache, 2, &tokens), TQ_STATUS_OK);
  EXPECT_EQ(tokens, 40u);
  EXPECT_EQ(tq_kv_cache_tokens(&good.cache, 5, &tokens),
            TQ_STATUS_OUT_OF_RANGE);
}

/// Every argument check records its cause for tq_last_error, so the
/// message after a failed call is that call's (each expected phrase
/// differs from the one before it: a stale message cannot pass).
TEST_F(RuntimeTest, ArgumentChecksSayTheirCause) {
  ValidCall call(plain, ragged("turbo3_0", "q8_0", 64, 1, 16));
  Runtime &r = call.r;
  Batch &good = call.good;
  std::vector<float> &rows = call.rows, &q = call.q, &out = call.out;
  tq_attention_params_v0 &p = call.p;
  auto says = [](tq_status got, tq_status want, const char *phrase) {
    EXPECT_EQ(got, want) << phrase;
    EXPECT_NE(std::string(tq_last_error()).find(phrase), std::string::npos)
        << "wanted '" << phrase << "', got '" << tq_last_error() << "'";
  };
  auto attention = [&](const tq_kv_cache_v0 &c,
                       const tq_attention_params_v0 &params) {
    return tq_attention(r.rt, &c, &params, q.data(), out.data());
  };
  tq_kv_cache_v0 c = good.cache;
  c.version = 3;
  says(attention(c, p), TQ_STATUS_VERSION_MISMATCH, "cache: version 3");
  c = good.cache;
  c.k_pages = nullptr;
  says(attention(c, p), TQ_STATUS_INVALID_ARGUMENT,
       "k_pages and v_pages must be set");
  c = good.cache;
  c.layout = 9;
  says(attention(c, p), TQ_STATUS_INVALID_ARGUMENT, "layout 9");
  c.layout = 0x200u; // an unknown flag
  says(attention(c, p), TQ_STATUS_INVALID_ARGUMENT, "layout 512");
  std::vector<int32_t> badIndices = good.indices;
  badIndices[1] = int32_t(good.numPages);
  c = good.cache;
  c.indices = badIndices.data();
  says(attention(c, p), TQ_STATUS_OUT_OF_RANGE, "indices[1] =");
  std::vector<int32_t> badIndptr = good.indptr;
  std::swap(badIndptr[1], badIndptr[2]);
  c = good.cache;
  c.indptr = badIndptr.data();
  says(attention(c, p), TQ_STATUS_INVALID_ARGUMENT,
       "indptr decreases at sequence");
  std::vector<int32_t> badLast = good.lastLen;
  badLast[1] = 17;
  c = good.cache;
  c.last_page_len = badLast.data();
  says(attention(c, p), TQ_STATUS_OUT_OF_RANGE, "last_page_len[1] = 17");
  tq_attention_params_v0 bp = p;
  bp.num_q_heads = 3;
  says(attention(good.cache, bp), TQ_STATUS_INVALID_ARGUMENT,
       "3 query heads");
  bp = p;
  bp.softcap = -1.0f;
  says(attention(good.cache, bp), TQ_STATUS_INVALID_ARGUMENT,
       "softcap -1");
  bp = p;
  bp.size = 8;
  says(attention(good.cache, bp), TQ_STATUS_VERSION_MISMATCH,
       "attention params: version");
  std::vector<int32_t> downIndptr = {0, 1, 0, 3, 3, 4};
  bp = p;
  bp.q_indptr = downIndptr.data();
  says(attention(good.cache, bp), TQ_STATUS_INVALID_ARGUMENT,
       "q_indptr decreases at sequence 1");
  says(tq_append(r.rt, &good.cache, 9, 0, 1, rows.data(), rows.data()),
       TQ_STATUS_OUT_OF_RANGE, "append: sequence 9");
  says(tq_append(r.rt, &good.cache, 1, 1000000, 1, rows.data(), rows.data()),
       TQ_STATUS_OUT_OF_RANGE, "append: rows [1000000, 1000001)");
  says(tq_append(r.rt, &good.cache, 1, 0, 1, nullptr, rows.data()),
       TQ_STATUS_INVALID_ARGUMENT, "k_rows and v_rows must be set");
  uint64_t tokens = 0;
  says(tq_kv_cache_tokens(&good.cache, 7, &tokens), TQ_STATUS_OUT_OF_RANGE,
       "tq_kv_cache_tokens: sequence 7");
  tq_runtime *rt = nullptr;
  says(tq_runtime_create(nullptr, nullptr, &rt), TQ_STATUS_INVALID_ARGUMENT,
       "options and out_runtime must be set");
}

TEST_F(RuntimeTest, CausalNeedsEnoughTokens) {
  Runtime r(masked);
  Batch b = ragged("tq3_0", "f16", 64, 2, 16);
  b.build(4);
  b.append(r.rt);
  std::vector<int32_t> qIndptr = {0, 2, 3, 4, 4, 5}; // 2 queries over 1 token
  std::vector<float> q(5 * 4 * 64, 0.1f), out(q.size());
  tq_attention_params_v0 p = {TQ_ATTENTION_PARAMS_VERSION_0,
                              sizeof(p),
                              4,
                              1,
                              8,
                              20.0f,
                              0.0f,
                              0,
                              qIndptr.data()};
  EXPECT_EQ(tq_attention(r.rt, &b.cache, &p, q.data(), out.data()),
            TQ_STATUS_OUT_OF_RANGE);
  EXPECT_NE(std::string(tq_last_error())
                .find("sequence 0 has 2 causal query rows but only 1 tokens"),
            std::string::npos)
      << tq_last_error();
}

// A call with nothing to do (no sequences, or no queries in any) still
// looks its kernels up and checks them against the cache, as tq_append does
// for zero rows: a configuration the library cannot serve fails on the
// first call, not on the first call with work. (Such calls used to return
// TQ_STATUS_OK before any lookup.)
TEST_F(RuntimeTest, CallsWithoutQueriesStillLookTheirKernelsUp) {
  Runtime r(plain);
  Batch b = ragged("turbo3_0", "q8_0", 64, 1, 16);
  b.build(2);
  std::vector<int32_t> noQueries = {0, 0, 0, 0, 0, 0};
  std::vector<float> q(1, 0.0f), out(1, 0.0f); // never read or written
  tq_attention_params_v0 p = {TQ_ATTENTION_PARAMS_VERSION_0,
                              sizeof(p),
                              2,
                              0,
                              0,
                              0.0f,
                              0.0f,
                              0,
                              noQueries.data()};
  tq_kv_cache_v0 noSequences = b.cache;
  noSequences.num_seqs = 0;
  for (const tq_kv_cache_v0 &base : {b.cache, noSequences}) {
    SCOPED_TRACE(base.num_seqs ? "no queries" : "no sequences");
    auto attention = [&](const tq_kv_cache_v0 &c,
                         const tq_attention_params_v0 &params) {
      return tq_attention(r.rt, &c, &params, q.data(), out.data());
    };
    EXPECT_EQ(attention(base, p), TQ_STATUS_OK);
    EXPECT_EQ(out[0], 0.0f);
    tq_attention_params_v0 bp = p;
    bp.causal = 1; // the plain library has no causal kernels
    EXPECT_EQ(attention(base, bp), TQ_STATUS_NOT_FOUND);
    // Neither kernel of the configuration exists, and the message names
    // both.
    std::string error = tq_last_error();
    EXPECT_NE(error.find("no kernel 'tq_decode_turbo3_0_q8_0_d64_g1_causal'"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("no kernel 'tq_prefill_turbo3_0_q8_0_d64_g1_causal'"),
              std::string::npos)
        << error;
    bp = p;
    bp.num_q_heads = 10; // group 5: not built
    EXPECT_EQ(attention(base, bp), TQ_STATUS_NOT_FOUND);
    tq_kv_cache_v0 c = base;
    c.k_format = "tq3_0"; // not in the plain library
    EXPECT_EQ(attention(c, p), TQ_STATUS_NOT_FOUND);
    c = base;
    c.k_row_bytes = 49; // the kernel's format writes 50-byte rows
    EXPECT_EQ(attention(c, p), TQ_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tq_last_error())
                  .find("kernel 'tq_decode_turbo3_0_q8_0_d64_g1' was built"),
              std::string::npos)
        << tq_last_error();
    // tq_attention_v1 runs the ggml kernels, which this library lacks.
    tq_attention_params_v1 v1 = {TQ_ATTENTION_PARAMS_VERSION_1,
                                 sizeof(v1), 2, 0.0f, 0.0f, 0,
                                 noQueries.data(), nullptr, nullptr,
                                 nullptr};
    EXPECT_EQ(tq_attention_v1(r.rt, &base, &v1, q.data(), out.data()),
              TQ_STATUS_NOT_FOUND);
    EXPECT_NE(std::string(tq_last_error())
                  .find("no kernel 'tq_ggml_decode_turbo3_0_q8_0_d64_g1'"),
              std::string::npos)
        << tq_last_error();
  }
}

} // namespace

namespace {

/// <dir>/libtq_ggml_kernels.so (tq-aot --abi=ggml), or empty.
std::string ggmlPackPath() {
  const char *dir = std::getenv("TQ_TEST_GGML_PACK");
  std::string path =
      std::string(dir ? dir : TQ_TEST_GGML_PACK) + "/libtq_ggml_kernels.so";
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return {};
  std::fclose(f);
  return path;
}

/// Half bits of a float (exact for the eighths and infinities used here).
uint16_t halfBits(float x) {
  if (std::isinf(x))
    return x < 0 ? 0xFC00 : 0x7C00;
  if (x == 0.0f)
    return 0;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const int32_t exp = int32_t((u >> 23) & 0xFF) - 127 + 15;
  return uint16_t(sign | (uint32_t(exp) << 10) | ((u >> 13) & 0x3FF));
}

/// tq_attention_v1 over a paged batch against lib/Quant's reference with
/// the same mask (f16 values), slopes and sinks; returns the output.
std::vector<float> checkEngineAttention(tq_runtime *rt, Batch &b,
                                        bool withMask, bool withSlopes,
                                        bool withSinks, uint64_t seed) {
  std::vector<int32_t> qIndptr = {0};
  for (unsigned n : b.queries)
    qIndptr.push_back(qIndptr.back() + int32_t(n));
  SplitMix64 rng(seed);
  std::vector<float> q(size_t(qIndptr.back()) * b.qHeads * b.dim);
  for (float &x : q)
    x = float(rng.gaussian());
  uint32_t stride = 48;
  for (unsigned n : b.lengths)
    stride = std::max(stride, n);
  // Query i of a sequence of n tokens sits at n - rows + i and sees the
  // tokens up to it, offset by eighths; the last row of every prefill
  // sees nothing (zeros, or its sinks).
  std::vector<float> mask(size_t(qIndptr.back()) * stride, -INFINITY);
  for (unsigned s = 0; s < b.lengths.size(); ++s)
    for (unsigned i = 0; i < b.queries[s]; ++i) {
      if (b.queries[s] > 1 && i + 1 == b.queries[s])
        continue;
      const unsigned position = b.lengths[s] - b.queries[s] + i;
      for (unsigned t = 0; t <= position; ++t)
        mask[(qIndptr[s] + i) * stride + t] =
            float(int(rng.next() % 17) - 16) / 8.0f;
    }
  std::vector<uint16_t> half;
  for (float m : mask)
    half.push_back(halfBits(m));
  std::vector<float> slopes, sinks;
  for (unsigned h = 0; h < b.qHeads; ++h) {
    slopes.push_back(0.25f * float(h + 1));
    sinks.push_back(h == 1 ? -INFINITY : float(rng.gaussian()));
  }
  std::vector<float> out(q.size(), NAN);
  tq_attention_params_v1 p = {TQ_ATTENTION_PARAMS_VERSION_1,
                              sizeof(p),
                              b.qHeads,
                              0.2f,
                              0.0f,
                              stride,
                              qIndptr.data(),
                              withMask ? half.data() : nullptr,
                              withSlopes ? slopes.data() : nullptr,
                              withSinks ? sinks.data() : nullptr};
  EXPECT_EQ(tq_attention_v1(rt, &b.cache, &p, q.data(), out.data()),
            TQ_STATUS_OK);
  for (unsigned s = 0; s < b.lengths.size(); ++s) {
    if (b.queries[s] == 0)
      continue;
    std::vector<float> seqMask;
    for (unsigned i = 0; i < b.queries[s] && withMask; ++i)
      for (unsigned t = 0; t < b.lengths[s]; ++t)
        seqMask.push_back(mask[(qIndptr[s] + i) * stride + t]);
    std::vector<float> seqSlopes = slopes;
    if (!withSlopes)
      seqSlopes.clear();
    if (!withMask) // slopes multiply the mask; without one they do nothing
      seqSlopes.clear();
    AttentionOptions o;
    o.scale = 0.2;
    o.mask = seqMask;
    o.slopes = seqSlopes;
    if (withSinks)
      o.sinks = sinks;
    expectSequenceMatchesReference(b, s, qIndptr, q, out, o);
  }
  return out;
}

class RuntimeEngineTest : public ::testing::Test {
protected:
  void SetUp() override {
    pack = ggmlPackPath();
    if (pack.empty())
      GTEST_SKIP() << "no ggml pack under " << TQ_TEST_GGML_PACK
                   << " (the runtime-ggml-pack fixture builds it)";
  }
  std::string pack;
};

Batch engineBatch(const char *k, const char *v, bool contiguous) {
  Batch b;
  b.kFormat = k;
  b.vFormat = v;
  b.dim = 64;
  b.kvHeads = 2;
  b.qHeads = 8;
  b.lengths = {1, 17, 40, 0, 33};
  b.queries = {1, 5, 1, 0, 7};
  b.pageSize = contiguous ? 48 : 16;
  b.contiguous = contiguous;
  return b;
}

// Masks, ALiBi slopes and sinks through the runtime's paged and contiguous
// caches: decode and prefill sequences in one call, a row that sees
// nothing, every option present or absent.
TEST_F(RuntimeEngineTest, MaskSlopesSinksOverPagedCaches) {
  Runtime r(pack);
  ASSERT_NE(r.rt, nullptr);
  uint64_t seed = 7;
  // (A ggml pack has no q8_0 / f16 row kernels: ggml encodes those.)
  for (auto [k, v] : {std::pair{"turbo3_0", "turbo4_0"},
                      std::pair{"turbo3_0", "turbo3_0"}})
    for (bool contiguous : {false, true}) {
      SCOPED_TRACE(std::string(k) + "/" + v +
                   (contiguous ? " contiguous" : " paged"));
      Batch b = engineBatch(k, v, contiguous);
      b.build(seed++);
      b.append(r.rt);
      checkEngineAttention(r.rt, b, true, true, true, seed++);
      checkEngineAttention(r.rt, b, true, false, false, seed++);
      checkEngineAttention(r.rt, b, false, false, true, seed++);
      checkEngineAttention(r.rt, b, false, false, false, seed++);
    }
}

// One decode sequence on 4 threads: its tokens split in two parts; the
// mask is offset to each part's tokens and the sinks enter one part only.
TEST_F(RuntimeEngineTest, SplitDecodeKeepsMaskSlopesAndSinks) {
  uint64_t seed = 31;
  for (bool contiguous : {false, true}) {
    SCOPED_TRACE(contiguous ? "contiguous" : "paged");
    Batch b = engineBatch("turbo3_0", "turbo4_0", contiguous);
    b.lengths = {1500};
    b.queries = {1};
    b.pageSize = contiguous ? 1536 : 16;
    b.build(seed++);
    Runtime one(pack, 1), many(pack, 4);
    ASSERT_NE(one.rt, nullptr);
    ASSERT_NE(many.rt, nullptr);
    b.append(one.rt);
    for (auto [mask, slopes, sinks] :
         {std::tuple{true, true, true}, {false, false, true},
          {true, false, false}}) {
      std::vector<float> whole =
          checkEngineAttention(one.rt, b, mask, slopes, sinks, seed);
      std::vector<float> split =
          checkEngineAttention(many.rt, b, mask, slopes, sinks, seed++);
      // (Split and merged, the sums round differently.)
      EXPECT_NE(split, whole) << "the decode was not split";
    }
  }
}

TEST_F(RuntimeEngineTest, BadCallsReturnTheirStatus) {
  Runtime r(pack);
  ASSERT_NE(r.rt, nullptr);
  Batch b = engineBatch("turbo3_0", "turbo4_0", false);
  b.build(1);
  b.append(r.rt);
  std::vector<int32_t> qIndptr = {0, 1, 6, 7, 7, 14};
  std::vector<float> q(14 * 8 * 64, 0.5f), out(q.size());
  std::vector<uint16_t> mask(14 * 40, 0);
  tq_attention_params_v1 p = {TQ_ATTENTION_PARAMS_VERSION_1,
                              sizeof(p),
                              8,
                              0.0f,
                              0.0f,
                              40,
                              qIndptr.data(),
                              mask.data(),
                              nullptr,
                              nullptr};
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &p, q.data(), out.data()),
            TQ_STATUS_OK);
  tq_attention_params_v1 bad = p;
  bad.size = 40;
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &bad, q.data(), out.data()),
            TQ_STATUS_VERSION_MISMATCH);
  bad = p;
  bad.mask_row_stride = 39; // sequence 2 holds 40 tokens
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &bad, q.data(), out.data()),
            TQ_STATUS_OUT_OF_RANGE);
  EXPECT_NE(std::string(tq_last_error())
                .find("sequence 2 holds 40 tokens, more than the mask's row "
                      "stride 39"),
            std::string::npos)
      << tq_last_error();
  bad = p;
  bad.mask_row_stride = 0;
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &bad, q.data(), out.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  bad = p;
  bad.softcap = 30.0f; // the pack has no soft-capped kernels
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &bad, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  for (float softcap : {INFINITY, NAN, 1.0e7f, -1.0f}) {
    bad = p;
    bad.softcap = softcap;
    EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &bad, q.data(), out.data()),
              TQ_STATUS_INVALID_ARGUMENT)
        << softcap;
  }
  bad = p;
  bad.num_q_heads = 6; // 3 per KV head: no g3 kernel
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &bad, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, nullptr, q.data(), out.data()),
            TQ_STATUS_INVALID_ARGUMENT);
  // The v0 entry point looks for the plain kernels, which a ggml pack
  // does not hold.
  tq_attention_params_v0 v0 = {TQ_ATTENTION_PARAMS_VERSION_0,
                               sizeof(v0), 8, 0, 0, 0.0f, 0.0f, 0,
                               qIndptr.data()};
  EXPECT_EQ(tq_attention(r.rt, &b.cache, &v0, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  // Calls without queries look their kernels up like calls with work.
  std::vector<int32_t> noQueries = {0, 0, 0, 0, 0, 0};
  tq_attention_params_v1 idle = p;
  idle.q_indptr = noQueries.data();
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &idle, q.data(), out.data()),
            TQ_STATUS_OK);
  tq_kv_cache_v0 noSequences = b.cache;
  noSequences.num_seqs = 0;
  EXPECT_EQ(tq_attention_v1(r.rt, &noSequences, &idle, q.data(), out.data()),
            TQ_STATUS_OK);
  idle.softcap = 30.0f;
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &idle, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_attention_v1(r.rt, &noSequences, &idle, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  idle = p;
  idle.q_indptr = noQueries.data();
  idle.num_q_heads = 6;
  EXPECT_EQ(tq_attention_v1(r.rt, &noSequences, &idle, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
  v0.q_indptr = noQueries.data();
  EXPECT_EQ(tq_attention(r.rt, &noSequences, &v0, q.data(), out.data()),
            TQ_STATUS_NOT_FOUND);
}

// A library whose ggml decode kernel predates %lse (calling convention 1)
// is refused before anything runs (its stand-in aborts if called).
TEST(RuntimeEngine, OlderCallingConventionIsRefused) {
  Runtime r(TQ_TEST_PREV_CONVENTION_PACK);
  ASSERT_NE(r.rt, nullptr);
  Batch b = engineBatch("turbo3_0", "turbo3_0", false);
  b.queries = {1, 1, 1, 0, 1};
  b.build(5);
  std::vector<int32_t> qIndptr = {0, 1, 2, 3, 3, 4};
  std::vector<float> q(4 * 8 * 64, 0.5f), out(q.size());
  tq_attention_params_v1 p = {TQ_ATTENTION_PARAMS_VERSION_1,
                              sizeof(p), 8, 0.0f, 0.0f, 0, qIndptr.data(),
                              nullptr, nullptr, nullptr};
  EXPECT_EQ(tq_attention_v1(r.rt, &b.cache, &p, q.data(), out.data()),
            TQ_STATUS_VERSION_MISMATCH);
  // The runtime decode kernel from before it wrote its lse (convention 1).
  tq_attention_params_v0 v0 = {TQ_ATTENTION_PARAMS_VERSION_0,
                               sizeof(v0), 8, 0, 0, 0.0f, 0.0f, 0,
                               qIndptr.data()};
  EXPECT_EQ(tq_attention(r.rt, &b.cache, &v0, q.data(), out.data()),
            TQ_STATUS_VERSION_MISMATCH);
  EXPECT_NE(std::string(tq_last_error()).find("calling convention 1"),
            std::string::npos)
      << tq_last_error();
}


#ifdef TQ_TEST_AMX_GRANT
// Where Linux refuses the AMX tile grant the runtime must return
// TQ_STATUS_UNAVAILABLE naming the kernel, not call it (an AMX
// instruction without the grant is SIGILL); the control child, allowed
// the grant, runs the same call.
TEST(RuntimeAmx, RefusedTileGrantMakesAmxKernelsUnavailable) {
  using namespace tq::test;
  std::string library = libraryPath("TQ_TEST_KERNELS_AMX", TQ_TEST_KERNELS_AMX);
  if (library.empty())
    GTEST_SKIP() << "no library under " << TQ_TEST_KERNELS_AMX
                 << " (ctest builds it first with tq-aot --amx=auto)";
  if (!libraryHasAmxKernels(TQ_TEST_KERNELS_AMX))
    GTEST_SKIP() << "this CPU has no AMX-BF16: tq-aot --amx=auto built the "
                    "prefill kernels without tiles";
  if (tilesGranted())
    GTEST_SKIP() << "this process already holds the AMX grant, which a "
                    "child would inherit";
  auto prefill = [&](bool refused) -> int {
    tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof(o),
                               library.c_str(), 1, 0};
    tq_runtime *rt = nullptr;
    if (tq_runtime_create(&o, nullptr, &rt) != TQ_STATUS_OK)
      return 2;
    // Several query rows in every sequence: prefill kernels only.
    Batch b = ragged("turbo3_0", "turbo3_0", 64, 2, 16);
    b.lengths = {4, 17, 40, 0, 5};
    b.queries = {2, 5, 9, 0, 3};
    b.build(21);
    b.append(rt);
    std::vector<float> q(19 * b.qHeads * b.dim, 0.25f), out(q.size(), NAN);
    std::vector<int32_t> qIndptr = {0, 2, 7, 16, 16, 19};
    tq_attention_params_v0 p = {TQ_ATTENTION_PARAMS_VERSION_0,
                                sizeof(p),
                                b.qHeads,
                                0,
                                0,
                                0.0f,
                                0.0f,
                                0,
                                qIndptr.data()};
    tq_status status = tq_attention(rt, &b.cache, &p, q.data(), out.data());
    std::string error = status == TQ_STATUS_OK ? "" : tq_last_error();
    std::fprintf(stderr, "runtime, tile requests %s: status %s %s\n",
                 refused ? "refused" : "allowed", tq_status_string(status),
                 error.c_str());
    tq_runtime_destroy(rt);
    if (!refused)
      return status == TQ_STATUS_OK && std::isfinite(out[5 * b.qHeads * b.dim])
                 ? 0
                 : 3;
    bool named = error.find("kernel 'tq_prefill_turbo3_0_turbo3_0_d64_g2'") !=
                     std::string::npos &&
                 error.find("uses AMX tiles") != std::string::npos;
    return status == TQ_STATUS_UNAVAILABLE && named ? 0 : 4;
  };
  expectGrantedRunsAndRefusedIsUnavailable(prefill, "runtime");
}
#endif

} // namespace
