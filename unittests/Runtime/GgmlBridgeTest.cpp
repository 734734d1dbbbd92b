//===- GgmlBridgeTest.cpp - tq_ggml_* over a tq-aot --abi=ggml pack -------===//
//
// The packs are written by tq-aot in ctest fixtures (CMakeLists.txt) into
// TQ_TEST_GGML_PACK / TQ_TEST_GGML_PACK_SOFTCAP. Tensors are laid out as
// llama.cpp lays them out: Q [D, queries, heads, streams] viewed from a
// token-major buffer, K/V [D, n_kv, kv heads, streams] with one token's
// heads next to each other, an f16 mask [n_kv, padded queries, 1,
// streams], dst [D, heads, queries, streams]. Results are checked against
// lib/Quant's double-precision attention with ggml's semantics (mask
// scaled by ALiBi slopes, sinks).
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Half.h"
#include "tq/Quant/Random.h"
#include "tq/tq_ggml.h"

#include "AmxGrant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

using namespace tq::quant;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::string packPath(const char *variable, const char *builtIn) {
  const char *dir = std::getenv(variable);
  return std::string(dir ? dir : builtIn) + "/libtq_ggml_kernels.so";
}

/// Whether the pack at `path` was built (its fixture ran).
bool packBuilt(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (f)
    std::fclose(f);
  return f != nullptr;
}

struct Pack {
  tq_ggml_pack *pack = nullptr;
  char error[512] = "";
  explicit Pack(const std::string &path) {
    EXPECT_EQ(tq_ggml_pack_open(path.c_str(), &pack, error, sizeof error),
              TQ_STATUS_OK)
        << error;
  }
  ~Pack() { tq_ggml_pack_close(pack); }
};

/// How the mask hides keys.
enum class MaskKind { None, Causal, Window, Padding, Band, AllHidden, Alibi };

struct Case {
  std::string kFormat, vFormat;
  unsigned dim, kvHeads, group, queries, tokens, streams = 1;
  MaskKind mask = MaskKind::Causal;
  bool sinks = false;
  float softcap = 0.0f;
  float maxBias = 0.0f;
  unsigned threads = 2;
  unsigned vDim = 0; // V's head dim when it differs (MLA)
  unsigned dv() const { return vDim ? vDim : dim; }
};

/// ggml's ALiBi slope of head h.
double slope(float maxBias, unsigned heads, unsigned h) {
  if (maxBias <= 0.0f)
    return 1.0;
  const unsigned log2 = 1u << unsigned(std::floor(std::log2(double(heads))));
  const float m0 = std::pow(2.0f, -maxBias / float(log2));
  const float m1 = std::pow(2.0f, -(maxBias / 2.0f) / float(log2));
  return h < log2 ? std::pow(m0, float(h + 1))
                  : std::pow(m1, float(2 * (h - log2) + 1));
}

/// The mask entry of query i (at position tokens - queries + i) and key t.
float maskValue(const Case &c, unsigned stream, unsigned i, unsigned t) {
  const unsigned position = c.tokens - c.queries + i;
  switch (c.mask) {
  case MaskKind::None:
    return 0.0f;
  case MaskKind::Causal:
    // Stream 1 sees only its own second half (two sequences sharing a
    // buffer, as llama-perplexity batches them).
    if (stream == 1 && t < c.tokens / 2)
      return kNegInf;
    return t <= position ? 0.0f : kNegInf;
  case MaskKind::Window:
    return t <= position && position - t < 40 ? 0.0f : kNegInf;
  case MaskKind::Padding:
    // The last 70 slots are padding nobody sees; query 0 sees nothing.
    return i == 0 || t + 70 >= c.tokens ? kNegInf : 0.0f;
  case MaskKind::Band:
    // Only the middle third is seen (hidden tokens before and after it, as
    // a sliding-window layer's cache has them), some of it with a bias.
    return t >= c.tokens / 3 && t < 2 * c.tokens / 3
               ? (t % 5 == 0 ? -1.5f : 0.0f)
               : kNegInf;
  case MaskKind::AllHidden:
    return kNegInf;
  case MaskKind::Alibi:
    return t <= position ? -float(position - t) : kNegInf;
  }
  return 0.0f;
}

struct Tensors {
  std::vector<float> q, out, sinks;
  std::vector<uint8_t> k, v;
  std::vector<uint16_t> mask;
  unsigned paddedQueries = 0;
  size_t kRowBytes = 0, vRowBytes = 0;
};

/// Encodes random K/V with the reference encoder and fills Q, the mask and
/// the sinks.
Tensors makeTensors(const Case &c, uint64_t seed) {
  Format kf = *Format::get(c.kFormat, c.dim),
         vf = *Format::get(c.vFormat, c.dv());
  Tensors t;
  t.kRowBytes = kf.rowBytes();
  t.vRowBytes = vf.rowBytes();
  SplitMix64 rng(seed);
  const unsigned heads = c.kvHeads * c.group;
  const size_t rows = size_t(c.streams) * c.tokens * c.kvHeads;
  t.k.resize(rows * t.kRowBytes);
  t.v.resize(rows * t.vRowBytes);
  for (size_t r = 0; r < rows; ++r) {
    for (int side = 0; side < 2; ++side) {
      const Format &f = side ? vf : kf;
      std::vector<float> x(f.headDim());
      for (float &e : x)
        e = float(rng.gaussian()) * (side ? 1.0f : 2.0f);
      auto bytes = std::span<uint8_t>(side ? t.v : t.k)
                       .subspan(r * f.rowBytes(), f.rowBytes());
      EXPECT_TRUE(f.encodeRow(x, bytes).ok());
    }
  }
  t.q.resize(size_t(c.streams) * c.queries * heads * c.dim);
  for (float &e : t.q)
    e = float(rng.gaussian());
  t.paddedQueries = (c.queries + 63) / 64 * 64;
  if (c.mask != MaskKind::None) {
    t.mask.resize(size_t(c.streams) * t.paddedQueries * c.tokens,
                  floatToHalf(kNegInf));
    for (unsigned s = 0; s < c.streams; ++s)
      for (unsigned i = 0; i < c.queries; ++i)
        for (unsigned k = 0; k < c.tokens; ++k)
          t.mask[(size_t(s) * t.paddedQueries + i) * c.tokens + k] =
              floatToHalf(maskValue(c, s, i, k));
  }
  if (c.sinks)
    for (unsigned h = 0; h < heads; ++h)
      t.sinks.push_back(float(rng.gaussian()) + 1.0f);
  t.out.assign(size_t(c.streams) * c.queries * heads * c.dv(), NAN);
  return t;
}

/// ggml's FLASH_ATTN_EXT: lib/Quant's double-precision reference per
/// stream, over the rows its decoder reconstructs, with the f16 mask
/// widened, ggml's ALiBi slopes and the sinks.
std::vector<double> reference(const Case &c, const Tensors &t, float scale) {
  const unsigned heads = c.kvHeads * c.group, D = c.dim;
  Format kf = *Format::get(c.kFormat, D), vf = *Format::get(c.vFormat, c.dv());
  std::vector<double> out(t.out.size(), 0.0);
  std::vector<float> slopes;
  if (c.maxBias > 0.0f)
    for (unsigned h = 0; h < heads; ++h)
      slopes.push_back(float(slope(c.maxBias, heads, h)));
  const size_t qCount = size_t(c.queries) * heads * D;
  const size_t outCount = size_t(c.queries) * heads * c.dv();
  for (unsigned s = 0; s < c.streams; ++s) {
    std::vector<float> mask;
    for (unsigned i = 0; i < c.queries && !t.mask.empty(); ++i)
      for (unsigned k = 0; k < c.tokens; ++k)
        mask.push_back(halfToFloat(
            t.mask[(size_t(s) * t.paddedQueries + i) * c.tokens + k]));
    AttentionOptions o;
    o.scale = scale;
    o.softcap = c.softcap;
    o.mask = mask;
    o.slopes = slopes;
    o.sinks = t.sinks;
    const size_t kRows = size_t(c.tokens) * c.kvHeads;
    Status status = referenceAttentionQuantized(
        AttentionShape{c.queries, heads, c.kvHeads, D, c.tokens, c.dv()}, o,
        std::span<const float>(t.q).subspan(s * qCount, qCount), kf,
        std::span<const uint8_t>(t.k).subspan(s * kRows * t.kRowBytes,
                                              kRows * t.kRowBytes),
        vf,
        std::span<const uint8_t>(t.v).subspan(s * kRows * t.vRowBytes,
                                              kRows * t.vRowBytes),
        std::span<double>(out).subspan(s * outCount, outCount));
    EXPECT_TRUE(status.ok()) << status.message();
  }
  return out;
}

/// The call as llama.cpp's CPU backend makes it.
tq_ggml_attention_v0 describe(const Case &c, Tensors &t, float scale) {
  const unsigned heads = c.kvHeads * c.group, D = c.dim;
  tq_ggml_attention_v0 call{};
  call.version = TQ_GGML_ATTENTION_VERSION_0;
  call.size = sizeof call;
  call.k_format = c.kFormat.c_str();
  call.v_format = c.vFormat.c_str();
  const uint64_t qRow = uint64_t(heads) * D * 4;
  call.q = {t.q.data(),
            {D, c.queries, heads, c.streams},
            {4, qRow, uint64_t(D) * 4, qRow * c.queries}};
  auto cache = [&](std::vector<uint8_t> &bytes, size_t rowBytes,
                   unsigned dim) {
    const uint64_t token = rowBytes * c.kvHeads;
    return tq_ggml_tensor_v0{bytes.data(),
                             {dim, c.tokens, c.kvHeads, c.streams},
                             {rowBytes, token, rowBytes, token * c.tokens}};
  };
  call.k = cache(t.k, t.kRowBytes, D);
  call.v = cache(t.v, t.vRowBytes, c.dv());
  if (!t.mask.empty()) {
    const uint64_t row = uint64_t(c.tokens) * 2;
    call.mask = {t.mask.data(),
                 {c.tokens, t.paddedQueries, 1, c.streams},
                 {2, row, row * t.paddedQueries, row * t.paddedQueries}};
  }
  if (!t.sinks.empty())
    call.sinks = {t.sinks.data(), {heads, 1, 1, 1}, {4, 4 * heads, 4 * heads,
                                                     4 * heads}};
  const uint64_t oRow = uint64_t(c.dv()) * 4;
  call.dst = {t.out.data(),
              {c.dv(), heads, c.queries, c.streams},
              {4, oRow, oRow * heads, oRow * heads * c.queries}};
  call.scale = scale;
  call.max_bias = c.maxBias;
  call.softcap = c.softcap;
  return call;
}

/// What ggml_barrier is to ggml: returns once all n threads arrived;
/// reusable; counts its calls.
struct ThreadBarrier {
  explicit ThreadBarrier(unsigned n) : n(n) {}
  static void wait(void *self) { static_cast<ThreadBarrier *>(self)->arrive(); }
  void arrive() {
    std::unique_lock<std::mutex> lock(mutex);
    ++calls;
    const unsigned gen = generation;
    if (++count == n) {
      count = 0;
      ++generation;
      ready.notify_all();
    } else {
      ready.wait(lock, [&] { return gen != generation; });
    }
  }
  std::mutex mutex;
  std::condition_variable ready;
  unsigned n, count = 0, generation = 0, calls = 0;
};

/// How check() hands the threads their work.
enum class Threads {
  Plain,     // tq_ggml_flash_attn_ext
  Shared,    // tq_ggml_flash_attn_ext_threads with the scratch it asks for
  NoScratch, // ... with a scratch one byte too small: must not split
};

/// Runs the call on c.threads threads and compares with the reference.
/// With shared threads, expects the barrier to be called by every thread
/// exactly when the bridge asked for scratch (a split), else never.
void check(const tq_ggml_pack *pack, const Case &c, uint64_t seed,
           Threads how = Threads::Plain) {
  SCOPED_TRACE(c.kFormat + "/" + c.vFormat + " d" + std::to_string(c.dim) +
               " g" + std::to_string(c.group) + " q" +
               std::to_string(c.queries) + " n" + std::to_string(c.tokens) +
               " mask " + std::to_string(int(c.mask)) + " threads " +
               std::to_string(c.threads));
  Tensors t = makeTensors(c, seed);
  const float scale = 1.0f / std::sqrt(float(c.dim));
  tq_ggml_attention_v0 call = describe(c, t, scale);
  uint64_t scratchBytes = 0;
  if (how != Threads::Plain) {
    ASSERT_EQ(tq_ggml_flash_attn_ext_scratch(pack, &call, c.threads,
                                             &scratchBytes),
              TQ_STATUS_OK);
    if (how == Threads::NoScratch && scratchBytes > 0)
      --scratchBytes;
  }
  std::vector<float> scratch(scratchBytes / 4 + 1, NAN);
  ThreadBarrier barrier(c.threads);
  tq_ggml_threads_v0 shared{TQ_GGML_THREADS_VERSION_0,
                            sizeof(tq_ggml_threads_v0),
                            scratch.data(),
                            scratchBytes,
                            &ThreadBarrier::wait,
                            &barrier};
  std::vector<tq_status> statuses(c.threads);
  std::vector<std::string> errors(c.threads, std::string(512, '\0'));
  std::vector<std::thread> threads;
  for (unsigned ith = 0; ith < c.threads; ++ith)
    threads.emplace_back([&, ith] {
      statuses[ith] =
          how == Threads::Plain
              ? tq_ggml_flash_attn_ext(pack, &call, ith, c.threads,
                                       errors[ith].data(), 512)
              : tq_ggml_flash_attn_ext_threads(pack, &call, ith, c.threads,
                                               &shared, errors[ith].data(),
                                               512);
    });
  for (std::thread &th : threads)
    th.join();
  for (unsigned ith = 0; ith < c.threads; ++ith)
    ASSERT_EQ(statuses[ith], TQ_STATUS_OK) << errors[ith].c_str();
  const bool split = how == Threads::Shared && scratchBytes > 0;
  EXPECT_EQ(barrier.calls, split ? c.threads : 0u);
  std::vector<double> ref = reference(c, t, scale);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(std::isfinite(t.out[i])) << "element " << i;
    worst = std::max(worst, std::fabs(t.out[i] - ref[i]));
  }
  EXPECT_LT(worst, 1e-4);
}

class GgmlBridge : public ::testing::Test {
protected:
  void SetUp() override {
    path = packPath("TQ_TEST_GGML_PACK", TQ_TEST_GGML_PACK);
    if (!packBuilt(path))
      GTEST_SKIP() << "no ggml pack at " << path
                   << " (the runtime-ggml-pack fixture did not run)";
  }
  std::string path;
};

TEST_F(GgmlBridge, AttentionMatchesDoublePrecisionReference) {
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  uint64_t seed = 1;
  for (const char *k : {"turbo3_0", "q8_0"})
    for (const char *v : {"turbo4_0", "turbo3_0"})
      for (unsigned group : {1u, 4u})
        for (unsigned queries : {1u, 7u, 64u})
          check(p.pack,
                Case{k, v, 64, 2, group, queries, 300, 2, MaskKind::Causal},
                seed++);
}

TEST_F(GgmlBridge, MaskPatternsSinksAlibiAndThreads) {
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  uint64_t seed = 100;
  for (MaskKind mask : {MaskKind::None, MaskKind::Window, MaskKind::Padding,
                        MaskKind::Band, MaskKind::AllHidden})
    for (unsigned queries : {1u, 7u}) {
      Case c{"turbo3_0", "turbo3_0", 64, 1, 4, queries, 333, 1, mask};
      // (The flash loop skips the tiles the mask hides whole; the sinks
      // still enter.)
      c.sinks = mask == MaskKind::Band;
      check(p.pack, c, seed++);
    }
  for (unsigned threads : {1u, 3u, 4u}) {
    Case c{"turbo3_0", "turbo4_0", 64, 2, 1, 64, 257, 2, MaskKind::Causal};
    c.threads = threads;
    c.sinks = true;
    check(p.pack, c, seed++);
  }
  // A row that sees nothing but its sink: zeros, as in ggml.
  Case hidden{"q8_0", "turbo3_0", 64, 1, 4, 7, 100, 1, MaskKind::AllHidden};
  hidden.sinks = true;
  check(p.pack, hidden, seed++);
  // Hidden cells whose K bytes decode to NaN (a stale or garbage row the
  // mask hides) change nothing.
  {
    Case c{"turbo3_0", "turbo3_0", 64, 1, 4, 7, 333, 1, MaskKind::Padding};
    Tensors t = makeTensors(c, seed++);
    std::vector<double> ref = reference(c, t, 0.125f);
    for (unsigned k = c.tokens - 70; k < c.tokens; ++k)
      std::fill_n(t.k.begin() + k * t.kRowBytes, t.kRowBytes, 0xFF);
    tq_ggml_attention_v0 call = describe(c, t, 0.125f);
    char error[512];
    ASSERT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
              TQ_STATUS_OK)
        << error;
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(t.out[i], ref[i], 1e-4) << "element " << i;
  }
  Case alibi{"turbo3_0", "turbo3_0", 64, 2, 4, 7, 200, 1, MaskKind::Alibi};
  alibi.maxBias = 8.0f;
  check(p.pack, alibi, seed++);
}

// A one-row decode over fewer KV heads than threads splits each head's
// tokens into parts (at least 256 tokens each) merged by log-sum-exp after
// the caller's barrier: the same answer as the whole head, for masks that
// hide whole parts, sinks (which enter one part only) and ALiBi.
TEST_F(GgmlBridge, SplitDecodeMergesPartsAfterTheBarrier) {
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  uint64_t seed = 300;
  for (const char *k : {"turbo3_0", "q8_0"})
    for (MaskKind mask : {MaskKind::Causal, MaskKind::Window,
                          MaskKind::Padding, MaskKind::Band, MaskKind::None,
                          MaskKind::AllHidden})
      for (unsigned threads : {2u, 3u, 4u}) {
        Case c{k, "turbo4_0", 64, 1, 4, 1, 1100, 1, mask};
        c.threads = threads;
        c.sinks = mask == MaskKind::Window || mask == MaskKind::Band ||
                  mask == MaskKind::AllHidden;
        check(p.pack, c, seed++, Threads::Shared);
      }
  // Two streams of two KV heads: 4 heads, 2 parts each on 8 threads.
  Case streams{"turbo3_0", "turbo3_0", 64, 2, 4, 1, 600, 2, MaskKind::Causal};
  streams.threads = 8;
  check(p.pack, streams, seed++, Threads::Shared);
  Case alibi{"turbo3_0", "turbo3_0", 64, 1, 4, 1, 900, 1, MaskKind::Alibi};
  alibi.maxBias = 8.0f;
  alibi.threads = 3;
  check(p.pack, alibi, seed++, Threads::Shared);
  // A scratch smaller than asked for: the call runs whole, no barrier.
  Case small{"turbo3_0", "turbo3_0", 64, 1, 4, 1, 1100, 1, MaskKind::Causal};
  small.threads = 2;
  check(p.pack, small, seed++, Threads::NoScratch);
}

TEST_F(GgmlBridge, SplitOnlyWhereItPays) {
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  auto scratchFor = [&](Case c, unsigned nth) {
    Tensors t = makeTensors(c, 1);
    tq_ggml_attention_v0 call = describe(c, t, 0.125f);
    uint64_t bytes = 99;
    EXPECT_EQ(tq_ggml_flash_attn_ext_scratch(p.pack, &call, nth, &bytes),
              TQ_STATUS_OK);
    return bytes;
  };
  Case c{"turbo3_0", "turbo3_0", 64, 1, 4, 1, 1100, 1, MaskKind::Causal};
  // 1 head, 2 threads: 2 parts of 4 query rows x (64 outputs + lse).
  EXPECT_EQ(scratchFor(c, 2), 2u * 4 * 65 * 4);
  EXPECT_EQ(scratchFor(c, 1), 0u);  // one thread: nothing to split over
  Case shortHead = c;
  shortHead.tokens = 400;           // < 2 x 256 tokens: one part
  EXPECT_EQ(scratchFor(shortHead, 4), 0u);
  Case prefill = c;
  prefill.queries = 7;              // prefill splits query rows instead
  EXPECT_EQ(scratchFor(prefill, 4), 0u);
  Case twoHeads{"turbo3_0", "turbo3_0", 64, 2, 4, 1, 1100, 1,
                MaskKind::Causal};
  EXPECT_EQ(scratchFor(twoHeads, 2), 0u);  // a head per thread already

  // Bad thread descriptions.
  Tensors t = makeTensors(c, 1);
  tq_ggml_attention_v0 call = describe(c, t, 0.125f);
  char error[512];
  EXPECT_EQ(tq_ggml_flash_attn_ext_threads(p.pack, &call, 0, 1, nullptr,
                                           error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  tq_ggml_threads_v0 bad{TQ_GGML_THREADS_VERSION_0, 8, nullptr, 0, nullptr,
                         nullptr};
  EXPECT_EQ(tq_ggml_flash_attn_ext_threads(p.pack, &call, 0, 1, &bad, error,
                                           sizeof error),
            TQ_STATUS_VERSION_MISMATCH);
  bad.size = sizeof bad;
  EXPECT_EQ(tq_ggml_flash_attn_ext_threads(p.pack, &call, 0, 1, &bad, error,
                                           sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(error, "barrier"), nullptr) << error;
  EXPECT_EQ(tq_ggml_flash_attn_ext_scratch(p.pack, &call, 2, nullptr),
            TQ_STATUS_INVALID_ARGUMENT);
}

TEST(GgmlBridgeSoftcap, SoftcapKernels) {
  std::string path =
      packPath("TQ_TEST_GGML_PACK_SOFTCAP", TQ_TEST_GGML_PACK_SOFTCAP);
  if (!packBuilt(path))
    GTEST_SKIP() << "no ggml pack at " << path;
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  for (unsigned queries : {1u, 7u}) {
    Case c{"tq3_0", "f16", 128, 1, 2, queries, 150, 1, MaskKind::Causal};
    c.softcap = 30.0f;
    check(p.pack, c, 7 + queries);
  }
}

/// The int8 score by block lanes reads tq3_0 keys at d128 four blocks (56
/// bytes) at a time as 64 bytes, masked past the row. With the cache's
/// last row against an unreadable page the call must neither fault nor
/// change its output (the int8 score's error against f32 is DotPath's
/// to bound).
TEST(GgmlBridgeQuads, KeysEndingAtAnUnreadablePage) {
#if defined(__linux__)
  std::string path =
      packPath("TQ_TEST_GGML_PACK_QUADS", TQ_TEST_GGML_PACK_QUADS);
  if (!packBuilt(path))
    GTEST_SKIP() << "no ggml pack at " << path;
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  Case c{"tq3_0", "tq3_0", 128, 1, 2, 1, 150, 1, MaskKind::None};
  Tensors t = makeTensors(c, 11);
  const float scale = 1.0f / std::sqrt(float(c.dim));
  tq_ggml_attention_v0 call = describe(c, t, scale);
  char error[512];
  ASSERT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
            TQ_STATUS_OK)
      << error;
  const std::vector<float> expected = t.out;
  for (float x : expected)
    ASSERT_TRUE(std::isfinite(x));

  // The keys copied to end where a page without access begins.
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t readable = (t.k.size() + page - 1) / page * page;
  void *map = mmap(nullptr, readable + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto *base = static_cast<uint8_t *>(map);
  ASSERT_EQ(mprotect(base + readable, page, PROT_NONE), 0);
  uint8_t *keys = base + readable - t.k.size();
  std::memcpy(keys, t.k.data(), t.k.size());
  call.k.data = keys;
  std::fill(t.out.begin(), t.out.end(), NAN);
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
            TQ_STATUS_OK)
      << error;
  EXPECT_EQ(t.out, expected);
  munmap(map, readable + page);
#else
  GTEST_SKIP() << "needs mmap and mprotect (Linux)";
#endif
}

TEST(GgmlBridgeMla, KeyAndValueHeadDimsDiffer) {
  std::string path = packPath("TQ_TEST_GGML_PACK_MLA", TQ_TEST_GGML_PACK_MLA);
  if (!packBuilt(path))
    GTEST_SKIP() << "no ggml pack at " << path;
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  // DeepSeek's MLA shape: K rows of 576, V rows of 512.
  for (unsigned queries : {1u, 7u}) {
    Case c{"q8_0", "turbo3_0", 576, 1, 2, queries, 140, 1, MaskKind::Causal};
    c.vDim = 512;
    check(p.pack, c, 31 + queries);
  }
  // A pair at other dims names --v-head-dim in its command.
  Case c{"q8_0", "turbo3_0", 576, 1, 2, 1, 10, 1, MaskKind::Causal};
  c.vDim = 448;
  Tensors t = makeTensors(c, 3);
  tq_ggml_attention_v0 call = describe(c, t, 0.1f);
  char error[512];
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
            TQ_STATUS_NOT_FOUND);
  EXPECT_NE(std::strstr(error, "tq_ggml_decode_q8_0_turbo3_0_d576_dv448_g2"),
            nullptr)
      << error;
  EXPECT_NE(std::strstr(error, "--v-head-dim=448"), nullptr) << error;
}

TEST_F(GgmlBridge, RowsAreTheReferenceEncodersBytes) {
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  SplitMix64 rng(9);
  for (const char *name : {"turbo3_0", "turbo4_0"}) {
    Format f = *Format::get(name, 64);
    uint32_t bytes = 0;
    ASSERT_EQ(tq_ggml_row_bytes(p.pack, name, 64, &bytes), TQ_STATUS_OK);
    EXPECT_EQ(bytes, f.rowBytes());
    const int rows = 5;
    std::vector<float> x(rows * 64);
    for (float &e : x)
      e = float(rng.gaussian()) * 3.0f;
    std::vector<uint8_t> got(rows * bytes), want(rows * bytes);
    ASSERT_EQ(tq_ggml_quantize(p.pack, name, 64, x.data(), got.data(),
                               int64_t(x.size())),
              TQ_STATUS_OK);
    std::vector<float> decoded(x.size()), ref(x.size());
    for (int r = 0; r < rows; ++r) {
      ASSERT_TRUE(f.encodeRow(std::span<const float>(x).subspan(r * 64, 64),
                              std::span<uint8_t>(want).subspan(r * bytes,
                                                               bytes))
                      .ok());
      ASSERT_TRUE(f.decodeRow(std::span<const uint8_t>(want).subspan(
                                  r * bytes, bytes),
                              std::span<float>(ref).subspan(r * 64, 64))
                      .ok());
    }
    EXPECT_EQ(got, want) << name;
    ASSERT_EQ(tq_ggml_dequantize(p.pack, name, 64, got.data(), decoded.data(),
                                 int64_t(x.size())),
              TQ_STATUS_OK);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(decoded[i], ref[i], 1e-5f) << name << " value " << i;
  }
}

TEST_F(GgmlBridge, CentredKeysAttendAsTheOriginals) {
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  // Keys with a large shared direction per head (as QK-normed models have),
  // two KV heads per token row, each centred by its own vector.
  const unsigned D = 64, heads = 2, tokens = 90, group = 4;
  Format f = *Format::get("turbo3_0", D);
  SplitMix64 rng(77);
  std::vector<float> centre(heads * D), x(tokens * heads * D);
  for (float &c : centre)
    c = float(rng.gaussian()) * 6.0f;
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = centre[i % (heads * D)] + float(rng.gaussian());
  std::vector<uint8_t> bytes(tokens * heads * f.rowBytes());
  ASSERT_EQ(tq_ggml_quantize_centred(p.pack, "turbo3_0", D, centre.data(),
                                     heads, x.data(), bytes.data(),
                                     int64_t(x.size())),
            TQ_STATUS_OK);
  // Each row is the reference encoder's bytes of x - c.
  for (size_t r = 0; r < tokens * heads; ++r) {
    std::vector<float> shifted(D);
    for (unsigned d = 0; d < D; ++d)
      shifted[d] = x[r * D + d] - centre[(r % heads) * D + d];
    std::vector<uint8_t> want(f.rowBytes());
    ASSERT_TRUE(f.encodeRow(shifted, want).ok());
    ASSERT_TRUE(std::equal(want.begin(), want.end(),
                           bytes.begin() + r * f.rowBytes()))
        << "row " << r;
  }
  // Decoding adds the centre back.
  std::vector<float> decoded(x.size()), plain(x.size());
  ASSERT_EQ(tq_ggml_dequantize_centred(p.pack, "turbo3_0", D, centre.data(),
                                       heads, bytes.data(), decoded.data(),
                                       int64_t(x.size())),
            TQ_STATUS_OK);
  ASSERT_EQ(tq_ggml_dequantize(p.pack, "turbo3_0", D, bytes.data(),
                               plain.data(), int64_t(x.size())),
            TQ_STATUS_OK);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(decoded[i], plain[i] + centre[i % (heads * D)], 1e-5f);
  // Attention over the centred rows read as plain turbo3_0 equals the
  // reference over the decoded (un-centred) keys: the shift q.c is the
  // same for every key of a query.
  Case c{"turbo3_0", "turbo3_0", D, heads, group, 5, tokens, 1,
         MaskKind::Causal};
  Tensors t = makeTensors(c, 78);
  t.k = bytes;
  tq_ggml_attention_v0 call = describe(c, t, 0.125f);
  char error[512];
  ASSERT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
            TQ_STATUS_OK)
      << error;
  std::vector<float> mask;
  for (unsigned i = 0; i < c.queries; ++i)
    for (unsigned k = 0; k < tokens; ++k)
      mask.push_back(halfToFloat(t.mask[i * tokens + k]));
  AttentionOptions o;
  o.scale = 0.125;
  o.mask = mask;
  std::vector<double> ref(t.out.size());
  Format vf = *Format::get("turbo3_0", D);
  std::vector<float> v(tokens * heads * D);
  for (size_t r = 0; r < tokens * heads; ++r)
    ASSERT_TRUE(vf.decodeRow(std::span<const uint8_t>(t.v).subspan(
                                 r * vf.rowBytes(), vf.rowBytes()),
                             std::span<float>(v).subspan(r * D, D))
                    .ok());
  ASSERT_TRUE(referenceAttention(AttentionShape{c.queries, heads * group,
                                                heads, D, tokens},
                                 o, t.q, decoded, v, ref)
                  .ok());
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(t.out[i] - ref[i]));
  EXPECT_LT(worst, 1e-4);
  // Errors: no centred kernel, centres that do not divide the rows.
  EXPECT_EQ(tq_ggml_quantize_centred(p.pack, "turbo4_0", D, centre.data(), 1,
                                     x.data(), bytes.data(), D),
            TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_ggml_quantize_centred(p.pack, "turbo3_0", D, centre.data(), 4,
                                     x.data(), bytes.data(), 2 * D),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(tq_ggml_quantize_centred(p.pack, "turbo3_0", D, nullptr, 1,
                                     x.data(), bytes.data(), D),
            TQ_STATUS_INVALID_ARGUMENT);
}

TEST_F(GgmlBridge, ErrorsNameTheCause) {
  Pack p(path);
  ASSERT_NE(p.pack, nullptr);
  char error[512];
  // Row kernels: unknown format or head dim, a count that is not whole rows.
  uint32_t bytes;
  EXPECT_EQ(tq_ggml_row_bytes(p.pack, "polar3", 64, &bytes),
            TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_ggml_row_bytes(p.pack, "turbo3_0", 96, &bytes),
            TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_ggml_row_bytes(p.pack, "bad name", 64, &bytes),
            TQ_STATUS_INVALID_ARGUMENT);
  std::vector<float> x(100);
  std::vector<uint8_t> y(1000);
  EXPECT_EQ(tq_ggml_quantize(p.pack, "turbo3_0", 64, x.data(), y.data(), 100),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(tq_ggml_quantize(p.pack, "turbo3_0", 64, x.data(), y.data(), 0),
            TQ_STATUS_OK);
  EXPECT_EQ(tq_ggml_quantize(nullptr, "turbo3_0", 64, x.data(), y.data(), 64),
            TQ_STATUS_INVALID_ARGUMENT);

  Case c{"turbo3_0", "turbo3_0", 64, 1, 4, 1, 100, 1, MaskKind::Causal};
  Tensors t = makeTensors(c, 5);
  tq_ggml_attention_v0 call = describe(c, t, 0.125f);
  // A pair the pack lacks: the message names the kernel and the command.
  call.v_format = "polar4";
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
            TQ_STATUS_NOT_FOUND);
  EXPECT_NE(std::strstr(error, "tq_ggml_decode_turbo3_0_polar4_d64_g4"),
            nullptr)
      << error;
  EXPECT_NE(std::strstr(error, "tq-aot --abi=ggml --k-format=turbo3_0 "
                               "--v-format=polar4 --head-dim=64 --gqa=4"),
            nullptr)
      << error;
  call.v_format = "turbo3_0";
  // A soft-cap the pack was not built for.
  call.softcap = 50.0f;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
            TQ_STATUS_NOT_FOUND);
  EXPECT_NE(std::strstr(error, "--softcap=50"), nullptr) << error;
  call.softcap = 0.0f;
  // Bad calls.
  tq_ggml_attention_v0 bad = call;
  bad.size = 8;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_VERSION_MISMATCH);
  bad = call;
  bad.v.ne[0] = 32; // dst still has 64 values per row
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(error, "dst must be"), nullptr) << error;
  bad = call;
  bad.scale = NAN;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  bad = call;
  bad.mask.ne[0] = 10;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  // Sinks: one f32 per query head, contiguous, every extent positive
  // (found by tq-fuzz-ggml-bridge: a sinks tensor with an empty dimension,
  // or strided, was read as 4 contiguous floats).
  std::vector<float> sinkValues(4, -1.0f);
  tq_ggml_attention_v0 sunk = call;
  sunk.sinks.data = sinkValues.data();
  for (int i = 0; i < 4; ++i) {
    sunk.sinks.ne[i] = i == 0 ? 4 : 1;
    sunk.sinks.nb[i] = i == 0 ? 4 : 16;
  }
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &sunk, 0, 1, error, sizeof error),
            TQ_STATUS_OK)
      << error;
  bad = sunk;
  bad.sinks.ne[1] = 0;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(error, "extents must be positive"), nullptr) << error;
  bad = sunk;
  bad.sinks.nb[0] = 8;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(error, "sinks must be contiguous f32"), nullptr)
      << error;
  bad = call;
  bad.mask.ne[3] = 0;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  bad = call;
  bad.q.ne[2] = 6; // 6 query heads over 1 KV head: no g6 kernel
  bad.dst.ne[1] = 6;
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &bad, 0, 1, error, sizeof error),
            TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 0, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 2, 2, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, nullptr, 0, 1, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
}

// A pack whose decode kernel predates the %lse output is refused before
// any kernel runs (its stand-in aborts if called), with a message saying
// to rebuild it.
TEST(GgmlBridgeOpen, PackOfAnOlderCallingConventionIsRefused) {
  Pack p(TQ_TEST_PREV_CONVENTION_PACK);
  ASSERT_NE(p.pack, nullptr);
  Case c{"turbo3_0", "turbo3_0", 64, 1, 4, 1, 100, 1, MaskKind::Causal};
  Tensors t = makeTensors(c, 3);
  tq_ggml_attention_v0 call = describe(c, t, 0.125f);
  char error[512] = "";
  EXPECT_EQ(tq_ggml_flash_attn_ext(p.pack, &call, 0, 1, error, sizeof error),
            TQ_STATUS_VERSION_MISMATCH);
  EXPECT_NE(std::strstr(error, "rebuild the pack"), nullptr) << error;
  EXPECT_NE(std::strstr(error, "tq_ggml_decode_turbo3_0_turbo3_0_d64_g4"),
            nullptr)
      << error;
  uint64_t bytes;
  EXPECT_EQ(tq_ggml_flash_attn_ext_scratch(p.pack, &call, 2, &bytes),
            TQ_STATUS_VERSION_MISMATCH);
}

TEST(GgmlBridgeOpen, MissingPackSaysHowToBuildOne) {
  tq_ggml_pack *pack = reinterpret_cast<tq_ggml_pack *>(1);
  char error[512];
  EXPECT_EQ(tq_ggml_pack_open("/nonexistent/libtq_ggml_kernels.so", &pack,
                              error, sizeof error),
            TQ_STATUS_UNAVAILABLE);
  EXPECT_EQ(pack, nullptr);
  EXPECT_NE(std::strstr(error, "/nonexistent/libtq_ggml_kernels.so"), nullptr);
  EXPECT_NE(std::strstr(error, "tq-aot --abi=ggml"), nullptr);
  EXPECT_EQ(tq_ggml_pack_open(nullptr, &pack, error, sizeof error),
            TQ_STATUS_INVALID_ARGUMENT);
  tq_ggml_pack_close(nullptr);
}


#ifdef TQ_TEST_AMX_GRANT
// A pack kernel with AMX tiles where Linux refused the grant: the bridge
// returns TQ_STATUS_UNAVAILABLE saying so (it used to take it for a
// calling-convention mismatch), never calls it; allowed, the same call
// runs (see AmxGrant.h).
TEST(GgmlBridgeAmx, RefusedTileGrantMakesAmxKernelsUnavailable) {
  using namespace tq::test;
  const std::string path =
      packPath("TQ_TEST_GGML_PACK_AMX", TQ_TEST_GGML_PACK_AMX);
  if (!libraryHasAmxKernels(TQ_TEST_GGML_PACK_AMX))
    GTEST_SKIP() << "this CPU has no AMX-BF16 (or ctest did not build "
                 << TQ_TEST_GGML_PACK_AMX << "): no kernel with tiles";
  if (tilesGranted())
    GTEST_SKIP() << "this process already holds the AMX grant, which a "
                    "child would inherit";
  auto prefill = [&](bool refused) -> int {
    tq_ggml_pack *pack = nullptr;
    char error[512] = "";
    if (tq_ggml_pack_open(path.c_str(), &pack, error, sizeof error) !=
        TQ_STATUS_OK)
      return 2;
    // Seven query rows: the prefill kernel.
    Case c{"turbo3_0", "turbo3_0", 64, 1, 4, 7, 100, 1, MaskKind::Causal};
    Tensors t = makeTensors(c, 9);
    tq_ggml_attention_v0 call = describe(c, t, 0.125f);
    tq_status status =
        tq_ggml_flash_attn_ext(pack, &call, 0, 1, error, sizeof error);
    std::fprintf(stderr, "bridge, tile requests %s: status %s %s\n",
                 refused ? "refused" : "allowed", tq_status_string(status),
                 status == TQ_STATUS_OK ? "" : error);
    tq_ggml_pack_close(pack);
    if (!refused)
      return status == TQ_STATUS_OK && std::isfinite(t.out[0]) ? 0 : 3;
    bool named =
        std::strstr(error, "tq_ggml_prefill_turbo3_0_turbo3_0_d64_g4") &&
        std::strstr(error, "uses AMX tiles") && std::strstr(error, "--amx=off");
    return status == TQ_STATUS_UNAVAILABLE && named ? 0 : 4;
  };
  expectGrantedRunsAndRefusedIsUnavailable(prefill, "ggml bridge");
}
#endif

} // namespace
