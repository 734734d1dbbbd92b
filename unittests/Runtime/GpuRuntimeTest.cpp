//===- GpuRuntimeTest.cpp - The CUDA / HIP runtime's contract -------------===//
//
// Everywhere: argument and version checks, and a missing driver reported
// as TQ_STATUS_UNAVAILABLE (never a crash). With a CUDA driver present
// (a GPU machine), decode through the PTX library built by the ctest
// fixture must match lib/Quant's reference and append must write
// lib/Quant's bytes; without one those tests are skipped with the reason. The full per-format sweep is tq-gpu-check.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Random.h"
#include "tq/tq_runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace tq::quant;

namespace {

tq_gpu_options_v0 options(uint32_t backend, const char *dir,
                          const char *driver = nullptr) {
  return {TQ_GPU_OPTIONS_VERSION_0, sizeof(tq_gpu_options_v0), backend, 0,
          dir, driver, 0, 0};
}

/// The page table of a paged cache: CSR indptr / indices, last page fill.
struct PageTable {
  std::vector<int32_t> indptr, indices, last;
};

/// A paged turbo3_0 K/V cache descriptor over device pools.
tq_kv_cache_v0 pagedTurbo3Cache(unsigned dim, unsigned kvHeads, uint32_t page,
                                const PageTable &table, void *kPool,
                                void *vPool) {
  tq_kv_cache_v0 c{};
  c.version = TQ_KV_CACHE_VERSION_0;
  c.size = sizeof(c);
  c.k_format = c.v_format = "turbo3_0";
  c.head_dim = dim;
  c.num_kv_heads = kvHeads;
  c.page_size = page;
  c.layout = TQ_LAYOUT_PAGED;
  c.k_row_bytes = c.v_row_bytes =
      uint32_t(Format::get("turbo3_0", dim)->rowBytes());
  c.num_pages = table.indices.size();
  c.k_pages = static_cast<uint8_t *>(kPool);
  c.v_pages = static_cast<uint8_t *>(vPool);
  c.num_seqs = uint32_t(table.last.size());
  c.indptr = table.indptr.data();
  c.indices = table.indices.data();
  c.last_page_len = table.last.data();
  return c;
}

/// The status and the cause tq_last_error names (each phrase differs from
/// the one before it, so a stale message cannot pass).
static void expectCause(tq_status got, tq_status want, const char *phrase) {
  EXPECT_EQ(got, want) << phrase;
  EXPECT_NE(std::string(tq_last_error()).find(phrase), std::string::npos)
      << "wanted '" << phrase << "', got '" << tq_last_error() << "'";
}

TEST(GpuRuntimeTest, CreateRejectsBadOptions) {
  tq_gpu_runtime *rt = reinterpret_cast<tq_gpu_runtime *>(0x1);
  expectCause(tq_gpu_runtime_create(nullptr, nullptr, &rt),
              TQ_STATUS_INVALID_ARGUMENT,
              "options and out_runtime must be set");
  tq_gpu_options_v0 o = options(TQ_BACKEND_CUDA, "/tmp");
  o.version = 7;
  expectCause(tq_gpu_runtime_create(&o, nullptr, &rt),
              TQ_STATUS_VERSION_MISMATCH, "GPU options: version 7");
  EXPECT_EQ(rt, nullptr);
  o = options(TQ_BACKEND_CUDA, "/tmp");
  expectCause(tq_gpu_runtime_create(&o, nullptr, nullptr),
              TQ_STATUS_INVALID_ARGUMENT,
              "options and out_runtime must be set");
  o.size = 8;
  expectCause(tq_gpu_runtime_create(&o, nullptr, &rt),
              TQ_STATUS_VERSION_MISMATCH, "size 8");
  o = options(3, "/tmp");
  expectCause(tq_gpu_runtime_create(&o, nullptr, &rt),
              TQ_STATUS_INVALID_ARGUMENT, "backend 3 is neither");
  o = options(TQ_BACKEND_HIP, nullptr);
  expectCause(tq_gpu_runtime_create(&o, nullptr, &rt),
              TQ_STATUS_INVALID_ARGUMENT, "library_dir must be set");
  o = options(TQ_BACKEND_CUDA, "/tmp");
  o.device = -1;
  expectCause(tq_gpu_runtime_create(&o, nullptr, &rt),
              TQ_STATUS_INVALID_ARGUMENT, "device -1 is negative");
  std::string longDir(5000, 'd');
  o = options(TQ_BACKEND_CUDA, longDir.c_str());
  expectCause(tq_gpu_runtime_create(&o, nullptr, &rt),
              TQ_STATUS_INVALID_ARGUMENT, "library_dir is too long (5000");
  o = options(TQ_BACKEND_CUDA, "/tmp");
  tq_allocator_v0 bad = {5, sizeof(tq_allocator_v0), nullptr, nullptr,
                         nullptr};
  EXPECT_EQ(tq_gpu_runtime_create(&o, &bad, &rt), TQ_STATUS_VERSION_MISMATCH);
}

TEST(GpuRuntimeTest, MissingDriverIsUnavailable) {
  for (uint32_t backend : {TQ_BACKEND_CUDA, TQ_BACKEND_HIP}) {
    tq_gpu_options_v0 o =
        options(backend, "/tmp", "/nonexistent/libgpu-driver.so");
    tq_gpu_runtime *rt = nullptr;
    EXPECT_EQ(tq_gpu_runtime_create(&o, nullptr, &rt), TQ_STATUS_UNAVAILABLE);
    EXPECT_EQ(rt, nullptr);
    // The cause names the driver that could not be loaded.
    EXPECT_NE(std::string(tq_last_error()).find("/nonexistent/libgpu-driver.so"),
              std::string::npos)
        << tq_last_error();
  }
  // A library that is not a GPU driver (no cuInit / hipInit) likewise.
  tq_gpu_options_v0 o = options(TQ_BACKEND_CUDA, "/tmp", "libm.so.6");
  tq_gpu_runtime *rt = nullptr;
  EXPECT_EQ(tq_gpu_runtime_create(&o, nullptr, &rt), TQ_STATUS_UNAVAILABLE);
  EXPECT_NE(std::string(tq_last_error()).find("no CUDA driver"),
            std::string::npos)
      << tq_last_error();
}

TEST(GpuRuntimeTest, NullRuntimeCallsAreRejected) {
  void *p = nullptr;
  float x = 0.0f;
  expectCause(tq_gpu_malloc(nullptr, 16, &p), TQ_STATUS_INVALID_ARGUMENT,
              "tq_gpu_malloc:");
  expectCause(tq_gpu_free(nullptr, &x), TQ_STATUS_INVALID_ARGUMENT,
              "tq_gpu_free:");
  expectCause(tq_gpu_copy_to_device(nullptr, &x, &x, 4),
              TQ_STATUS_INVALID_ARGUMENT, "tq_gpu_copy_to_device:");
  expectCause(tq_gpu_copy_to_host(nullptr, &x, &x, 4),
              TQ_STATUS_INVALID_ARGUMENT, "tq_gpu_copy_to_host:");
  expectCause(tq_gpu_attention(nullptr, nullptr, nullptr, &x, &x),
              TQ_STATUS_INVALID_ARGUMENT, "tq_gpu_attention:");
  expectCause(tq_gpu_append(nullptr, nullptr, 0, 0, 1, &x, &x),
              TQ_STATUS_INVALID_ARGUMENT, "tq_gpu_append:");
  char name[64];
  expectCause(tq_gpu_device_name(nullptr, name, sizeof name),
              TQ_STATUS_INVALID_ARGUMENT, "tq_gpu_device_name:");
  tq_gpu_runtime_destroy(nullptr); // a no-op
}

/// A CUDA runtime over the ctest fixture's PTX library; the test is skipped
/// (with the reason) where no driver or library is present.
class CudaDevice : public ::testing::Test {
protected:
  void SetUp() override {
    tq_gpu_options_v0 o = options(TQ_BACKEND_CUDA, TQ_TEST_KERNELS_NVPTX);
    tq_status created = tq_gpu_runtime_create(&o, nullptr, &rt);
    if (created == TQ_STATUS_UNAVAILABLE)
      GTEST_SKIP() << "no CUDA driver (libcuda.so.1) or no PTX library in "
                   << TQ_TEST_KERNELS_NVPTX;
    ASSERT_EQ(created, TQ_STATUS_OK);
  }
  void TearDown() override { tq_gpu_runtime_destroy(rt); }

  tq_gpu_runtime *rt = nullptr;
};

TEST_F(CudaDevice, NamesItsDevice) {
  char name[256];
  ASSERT_EQ(tq_gpu_device_name(rt, name, sizeof name), TQ_STATUS_OK);
  EXPECT_GT(std::strlen(name), 0u);
  char tiny[4];
  ASSERT_EQ(tq_gpu_device_name(rt, tiny, sizeof tiny), TQ_STATUS_OK);
  EXPECT_LT(std::strlen(tiny), sizeof tiny); // truncated, still terminated
  EXPECT_EQ(tq_gpu_device_name(rt, name, 0), TQ_STATUS_INVALID_ARGUMENT);
}

/// Decode of a ragged paged batch on a CUDA device against the reference.
TEST_F(CudaDevice, DecodeMatchesReference) {
  const unsigned dim = 64, kvHeads = 2, group = 2, qHeads = kvHeads * group;
  const uint32_t page = 16;
  const std::vector<unsigned> lengths = {1, 40, 200};
  Format kf = *Format::get("turbo3_0", dim), vf = *Format::get("turbo3_0", dim);
  std::vector<int32_t> indptr = {0}, indices, last;
  for (unsigned len : lengths) {
    unsigned pages = (len + page - 1) / page;
    indptr.push_back(indptr.back() + int32_t(pages));
    last.push_back(int32_t(len - (pages - 1) * page));
  }
  const size_t numPages = size_t(indptr.back());
  for (size_t i = 0; i < numPages; ++i)
    indices.push_back(int32_t(numPages - 1 - i)); // reversed order
  const size_t rb = kf.rowBytes();
  std::vector<uint8_t> pool(numPages * page * kvHeads * rb);
  std::vector<std::vector<uint8_t>> rows(lengths.size());
  SplitMix64 rng(3);
  std::vector<float> x(dim);
  std::vector<uint8_t> enc(rb);
  for (size_t s = 0; s < lengths.size(); ++s)
    for (unsigned t = 0; t < lengths[s]; ++t)
      for (unsigned h = 0; h < kvHeads; ++h) {
        for (float &f : x)
          f = float(rng.gaussian());
        ASSERT_TRUE(kf.encodeRow(x, enc).ok());
        rows[s].insert(rows[s].end(), enc.begin(), enc.end());
        size_t slot = (size_t(indices[indptr[s] + t / page]) * page +
                       t % page) * kvHeads + h;
        std::memcpy(&pool[slot * rb], enc.data(), rb);
      }
  std::vector<float> q(lengths.size() * qHeads * dim), out(q.size());
  for (float &f : q)
    f = float(rng.gaussian());
  void *dPool = nullptr, *dQ = nullptr, *dOut = nullptr;
  ASSERT_EQ(tq_gpu_malloc(rt, pool.size(), &dPool), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_malloc(rt, q.size() * 4, &dQ), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_malloc(rt, q.size() * 4, &dOut), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_copy_to_device(rt, dPool, pool.data(), pool.size()),
            TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_copy_to_device(rt, dQ, q.data(), q.size() * 4),
            TQ_STATUS_OK);
  const PageTable table{indptr, indices, last};
  // K = V rows.
  tq_kv_cache_v0 c = pagedTurbo3Cache(dim, kvHeads, page, table, dPool, dPool);
  std::vector<int32_t> qIndptr = {0, 1, 2, 3};
  tq_attention_params_v0 p = {TQ_ATTENTION_PARAMS_VERSION_0,
                              sizeof(p), qHeads, 0, 0, 0.0f, 0.0f, 0,
                              qIndptr.data()};
  ASSERT_EQ(tq_gpu_attention(rt, &c, &p, static_cast<const float *>(dQ),
                             static_cast<float *>(dOut)),
            TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_copy_to_host(rt, out.data(), dOut, out.size() * 4),
            TQ_STATUS_OK);
  for (size_t s = 0; s < lengths.size(); ++s) {
    AttentionShape shape{1, qHeads, kvHeads, dim, lengths[s]};
    std::vector<double> ref(size_t(qHeads) * dim);
    ASSERT_TRUE(referenceAttentionQuantized(
                    shape, {}, std::span(q).subspan(s * qHeads * dim, ref.size()),
                    kf, rows[s], vf, rows[s], ref)
                    .ok());
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(out[s * qHeads * dim + i], ref[i], 2e-3) << "seq " << s;
  }
  tq_gpu_free(rt, dPool);
  tq_gpu_free(rt, dQ);
  tq_gpu_free(rt, dOut);
}

/// Append on a CUDA device: the pool holds exactly Format::encodeRow's
/// bytes in the slots of positions 3 .. 21 (pages in reverse order), and
/// malformed calls get tq_append's statuses.
TEST_F(CudaDevice, AppendWritesLibraryBytes) {
  const unsigned dim = 64, kvHeads = 2, page = 8, start = 3, count = 19;
  Format f = *Format::get("turbo3_0", dim);
  const size_t rb = f.rowBytes();
  std::vector<int32_t> indptr = {0, 3}, indices = {2, 1, 0}, last = {8};
  std::vector<float> k(size_t(count) * kvHeads * dim), v(k.size());
  SplitMix64 rng(5);
  for (float &x : k)
    x = float(rng.gaussian());
  for (float &x : v)
    x = float(rng.gaussian());
  const size_t poolBytes = 3 * page * kvHeads * rb;
  std::vector<uint8_t> wantK(poolBytes, 0), wantV(poolBytes, 0);
  for (unsigned t = 0; t < count; ++t)
    for (unsigned h = 0; h < kvHeads; ++h) {
      const unsigned pos = start + t;
      size_t slot =
          (size_t(indices[pos / page]) * page + pos % page) * kvHeads + h;
      size_t row = (size_t(t) * kvHeads + h) * dim;
      ASSERT_TRUE(f.encodeRow(std::span(k).subspan(row, dim),
                              std::span(wantK).subspan(slot * rb, rb))
                      .ok());
      ASSERT_TRUE(f.encodeRow(std::span(v).subspan(row, dim),
                              std::span(wantV).subspan(slot * rb, rb))
                      .ok());
    }
  void *dK = nullptr, *dV = nullptr, *dKPool = nullptr, *dVPool = nullptr;
  ASSERT_EQ(tq_gpu_malloc(rt, k.size() * 4, &dK), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_malloc(rt, v.size() * 4, &dV), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_malloc(rt, poolBytes, &dKPool), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_malloc(rt, poolBytes, &dVPool), TQ_STATUS_OK);
  std::vector<uint8_t> zeros(poolBytes, 0);
  ASSERT_EQ(tq_gpu_copy_to_device(rt, dK, k.data(), k.size() * 4),
            TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_copy_to_device(rt, dV, v.data(), v.size() * 4),
            TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_copy_to_device(rt, dKPool, zeros.data(), poolBytes),
            TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_copy_to_device(rt, dVPool, zeros.data(), poolBytes),
            TQ_STATUS_OK);
  const PageTable table{indptr, indices, last};
  tq_kv_cache_v0 c =
      pagedTurbo3Cache(dim, kvHeads, page, table, dKPool, dVPool);
  const float *kRows = static_cast<const float *>(dK),
              *vRows = static_cast<const float *>(dV);
  EXPECT_EQ(tq_gpu_append(rt, &c, 1, start, count, kRows, vRows),
            TQ_STATUS_OUT_OF_RANGE);
  EXPECT_EQ(tq_gpu_append(rt, &c, 0, 10, 15, kRows, vRows),
            TQ_STATUS_OUT_OF_RANGE);
  EXPECT_EQ(tq_gpu_append(rt, &c, 0, start, count, nullptr, vRows),
            TQ_STATUS_INVALID_ARGUMENT);
  tq_kv_cache_v0 other = c;
  other.head_dim = 80;
  other.k_row_bytes = other.v_row_bytes = uint32_t(
      Format::get("turbo3_0", 80)->rowBytes());
  EXPECT_EQ(tq_gpu_append(rt, &other, 0, start, count, kRows, vRows),
            TQ_STATUS_NOT_FOUND);
  ASSERT_EQ(tq_gpu_append(rt, &c, 0, start, count, kRows, vRows),
            TQ_STATUS_OK);
  std::vector<uint8_t> gotK(poolBytes), gotV(poolBytes);
  ASSERT_EQ(tq_gpu_copy_to_host(rt, gotK.data(), dKPool, poolBytes),
            TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_copy_to_host(rt, gotV.data(), dVPool, poolBytes),
            TQ_STATUS_OK);
  EXPECT_EQ(gotK, wantK);
  EXPECT_EQ(gotV, wantV);
  for (void *p : {dK, dV, dKPool, dVPool})
    tq_gpu_free(rt, p);
}

/// Calls with nothing to do (zero rows, no queries, no sequences) launch
/// nothing but look their kernels up, as the CPU runtime's do: a
/// configuration the PTX library (turbo3_0, d64, g2, append and decode)
/// lacks fails on the first call.
TEST_F(CudaDevice, CallsWithNothingToDoStillLookTheirKernelsUp) {
  const unsigned dim = 64, kvHeads = 1, page = 8;
  const size_t poolBytes = size_t(page) * kvHeads *
                           Format::get("turbo3_0", dim)->rowBytes();
  void *dKPool = nullptr, *dVPool = nullptr, *dQ = nullptr;
  ASSERT_EQ(tq_gpu_malloc(rt, poolBytes, &dKPool), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_malloc(rt, poolBytes, &dVPool), TQ_STATUS_OK);
  ASSERT_EQ(tq_gpu_malloc(rt, 2 * dim * sizeof(float), &dQ), TQ_STATUS_OK);
  const PageTable table{{0, 1}, {0}, {3}};
  tq_kv_cache_v0 c =
      pagedTurbo3Cache(dim, kvHeads, page, table, dKPool, dVPool);
  float *q = static_cast<float *>(dQ);
  EXPECT_EQ(tq_gpu_append(rt, &c, 0, 0, 0, q, q), TQ_STATUS_OK);
  tq_kv_cache_v0 other = c;
  other.head_dim = 80; // no append kernel at d80
  other.k_row_bytes = other.v_row_bytes =
      uint32_t(Format::get("turbo3_0", 80)->rowBytes());
  EXPECT_EQ(tq_gpu_append(rt, &other, 0, 0, 0, q, q), TQ_STATUS_NOT_FOUND);
  std::vector<int32_t> noQueries = {0, 0};
  tq_attention_params_v0 p = {TQ_ATTENTION_PARAMS_VERSION_0,
                              sizeof(p), 2, 0, 0, 0.0f, 0.0f, 0,
                              noQueries.data()};
  EXPECT_EQ(tq_gpu_attention(rt, &c, &p, q, q), TQ_STATUS_OK);
  tq_kv_cache_v0 none = c;
  none.num_seqs = 0;
  EXPECT_EQ(tq_gpu_attention(rt, &none, &p, q, q), TQ_STATUS_OK);
  tq_attention_params_v0 bad = p;
  bad.causal = 1; // the library has no causal kernels
  EXPECT_EQ(tq_gpu_attention(rt, &c, &bad, q, q), TQ_STATUS_NOT_FOUND);
  EXPECT_EQ(tq_gpu_attention(rt, &none, &bad, q, q), TQ_STATUS_NOT_FOUND);
  bad = p;
  bad.num_q_heads = 4; // group 4: not built
  EXPECT_EQ(tq_gpu_attention(rt, &none, &bad, q, q), TQ_STATUS_NOT_FOUND);
  for (void *ptr : {dKPool, dVPool, dQ})
    tq_gpu_free(rt, ptr);
}

} // namespace
