//===- GgmlBridgeFuzzer.cpp - The ggml bridge on any descriptor -----------===//
//
// tq_ggml.h's entry points (row bytes, the row kernels plain and centred,
// FLASH_ATTN_EXT alone, planned and split over threads) with formats,
// head dims, value counts and ggml tensor descriptors (extents, byte
// strides, mask, sinks, scale, soft-cap, ALiBi bias) built from the
// fuzzer's bytes, over a small kernel pack ($TQ_FUZZ_GGML_PACK, default:
// the one ctest builds for the bridge test: K turbo3_0 or q8_0, V
// turbo4_0 or turbo3_0, head dim 64, one or four query heads per KV head).
// Every buffer is as large as its descriptor claims (the bytes from the
// first element to the end of the last, as ggml computes them): what the
// bridge cannot check (a pointer to too little memory) is llama.cpp's
// contract, everything else must be a status.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "tq/tq_ggml.h"

#include <cmath>
#include <cstdlib>
#include <vector>

namespace {

using tq::fuzz::FuzzInput;
using Wide = unsigned __int128; // no product of drawn fields overflows

constexpr size_t kMaxBytes = 1 << 22;
/// Query rows x heads x tokens a computing call may take (the bridge does
/// what it is asked, however long; the planning call takes any size).
constexpr Wide kMaxWork = Wide(1) << 20;
constexpr uint32_t kHeadDim = 64;

const tq_ggml_pack *pack() {
  static tq_ggml_pack *p = [] {
    const char *path = std::getenv("TQ_FUZZ_GGML_PACK");
    tq_ggml_pack *opened = nullptr;
    if (tq_ggml_pack_open(path ? path : TQ_FUZZ_DEFAULT_GGML_PACK, &opened,
                          nullptr, 0) != TQ_STATUS_OK)
      std::abort(); // no pack: nothing to fuzz
    return opened;
  }();
  return p;
}

const char *formatName(FuzzInput &in) {
  static const char *const names[] = {"turbo3_0", "q8_0",     "turbo4_0",
                                      "turbo3_0", "turbo4_0", "f16",
                                      "",         "../x",     nullptr};
  return names[in.below(sizeof names / sizeof names[0])];
}

/// The pack's row bytes of `format` at `dim` (0: not in the pack).
uint32_t rowBytesOf(const char *format, uint32_t dim = kHeadDim) {
  uint32_t bytes = 0;
  if (tq_ggml_row_bytes(pack(), format, dim, &bytes) != TQ_STATUS_OK)
    return 0;
  return bytes;
}

/// Row kernels: num_values floats in, num_values / head_dim rows out (and
/// back), centre_rows x head_dim centre floats.
void rowKernels(FuzzInput &in) {
  const char *format = formatName(in);
  static const uint32_t dims[] = {kHeadDim, kHeadDim, 128, 0, 63};
  const uint32_t dim = dims[in.below(5)];
  // The rows' buffer holds what the format's rows take (the caller's
  // contract); a format the pack lacks writes nothing.
  const uint32_t rowBytes = rowBytesOf(format, dim);
  const int64_t rows = in.below(6);
  const int64_t values = in.mostly(rows * int64_t(dim));
  if (values < 0 || Wide(values) * 4 > kMaxBytes)
    return;
  const Wide outBytes = dim ? Wide(values / dim) * rowBytes : 0;
  if (outBytes > kMaxBytes)
    return;
  std::vector<float> x(size_t(values) + 1, 0.5f);
  if (!in.below(8))
    x[0] = NAN;
  std::vector<uint8_t> y(size_t(outBytes) + 1, uint8_t(in.take<uint8_t>()));
  uint32_t bytes = 0;
  (void)tq_ggml_row_bytes(in.below(16) ? pack() : nullptr, format, dim,
                          in.below(16) ? &bytes : nullptr);
  const uint32_t centreRows = in.mostly(1u + in.below(3));
  const Wide centreFloats = Wide(centreRows) * dim;
  if (centreFloats * 4 > kMaxBytes)
    return;
  std::vector<float> centre(size_t(centreFloats) + 1, in.anyFloat());
  float *xp = in.below(16) ? x.data() : nullptr;
  uint8_t *yp = in.below(16) ? y.data() : nullptr;
  switch (in.below(4)) {
  case 0:
    (void)tq_ggml_quantize(pack(), format, dim, xp, yp, values);
    break;
  case 1:
    (void)tq_ggml_dequantize(pack(), format, dim, yp, xp, values);
    break;
  case 2:
    (void)tq_ggml_quantize_centred(pack(), format, dim,
                                   in.below(16) ? centre.data() : nullptr,
                                   centreRows, xp, yp, values);
    break;
  default:
    (void)tq_ggml_dequantize_centred(pack(), format, dim,
                                     in.below(16) ? centre.data() : nullptr,
                                     centreRows, yp, xp, values);
    break;
  }
}

/// A tensor's extents and byte strides: mostly ggml's contiguous layout
/// for `ne` with elements of `elementBytes` (rows of `rowBytes` between
/// tokens, for row formats), each field sometimes anything.
tq_ggml_tensor_v0 tensorOf(FuzzInput &in, const int64_t (&ne)[4],
                           uint64_t elementBytes, uint64_t rowBytes) {
  tq_ggml_tensor_v0 t{};
  for (int i = 0; i < 4; ++i)
    t.ne[i] = in.below(16) ? ne[i] : int64_t(in.below(5)) - 1;
  uint64_t stride = elementBytes;
  t.nb[0] = in.mostly(stride);
  stride = rowBytes ? rowBytes : stride * uint64_t(t.ne[0] > 0 ? t.ne[0] : 1);
  for (int i = 1; i < 4; ++i) {
    // Padded strides as ggml's views have; sometimes any.
    t.nb[i] = in.below(8) ? stride + 4 * in.below(2) * in.below(5)
                          : uint64_t(in.below(4)) * in.below(4096);
    stride = t.nb[i] * uint64_t(t.ne[i] > 0 ? t.ne[i] : 1);
  }
  return t;
}

/// Bytes from a tensor's first element to the end of its last (0 for an
/// empty one); `last` the bytes the bridge reads at the last position (a
/// whole row for row formats).
Wide extentOf(const tq_ggml_tensor_v0 &t, uint64_t last, bool rows) {
  Wide end = last;
  for (int i = rows ? 1 : 0; i < 4; ++i) {
    if (t.ne[i] <= 0)
      return 0;
    end += Wide(t.ne[i] - 1) * t.nb[i];
  }
  return end;
}

void noBarrier(void *) {}

void flashAttention(FuzzInput &in) {
  tq_ggml_attention_v0 c{};
  c.version = in.mostly(TQ_GGML_ATTENTION_VERSION_0);
  c.size = in.mostly(uint32_t(sizeof c));
  c.k_format = formatName(in);
  c.v_format = formatName(in);
  const uint32_t kRow = rowBytesOf(c.k_format), vRow = rowBytesOf(c.v_format);
  static const int64_t queries[] = {1, 1, 2, 3, 17, 64};
  const int64_t nq = queries[in.below(6)];
  const int64_t kvHeads = 1 + in.below(2);
  const int64_t group = in.below(2) ? 4 : 1 + in.below(4);
  const int64_t heads = kvHeads * group, streams = 1 + in.below(2);
  static const int64_t contexts[] = {1, 7, 64, 256, 513, 600};
  const int64_t nkv = contexts[in.below(6)];
  const int64_t d = in.below(8) ? kHeadDim : in.below(130);
  const int64_t qne[4] = {d, nq, heads, streams};
  const int64_t kne[4] = {d, nkv, kvHeads, in.below(4) ? 1 : streams};
  const int64_t dne[4] = {d, heads, nq, streams};
  c.q = tensorOf(in, qne, 4, 0);
  c.k = tensorOf(in, kne, kRow, kRow * (in.below(2) ? 1 : kvHeads));
  c.v = tensorOf(in, kne, vRow, vRow * (in.below(2) ? 1 : kvHeads));
  c.dst = tensorOf(in, dne, 4, 0);
  const int64_t mne[4] = {nkv + 4 * in.below(2), nq + 3 * in.below(2),
                          in.below(4) ? 1 : heads, 1};
  tq_ggml_tensor_v0 mask = tensorOf(in, mne, 2, 0);
  const int64_t sne[4] = {heads, 1, 1, 1};
  tq_ggml_tensor_v0 sinks = tensorOf(in, sne, 4, 0);
  c.scale = in.below(4) ? 0.125f : in.anyFloat();
  c.max_bias = in.below(4) ? 0.0f : in.anyFloat();
  c.softcap = in.below(4) ? 0.0f : in.anyFloat();

  // The buffers each descriptor claims; a claim too large to allocate
  // ends the case (the caller's side of the contract).
  const Wide qBytes = extentOf(c.q, 4, false),
             dBytes = extentOf(c.dst, 4, false);
  const Wide kBytes = extentOf(c.k, kRow, true),
             vBytes = extentOf(c.v, vRow, true);
  const Wide mBytes = extentOf(mask, 2, false),
             sBytes = extentOf(sinks, 4, false);
  for (Wide bytes : {qBytes, dBytes, kBytes, vBytes, mBytes, sBytes})
    if (bytes > kMaxBytes)
      return;
  std::vector<float> q(size_t(qBytes / 4) + 1, 0.25f),
      dst(size_t(dBytes / 4) + 1, 0.0f),
      sinkValues(size_t(sBytes / 4) + 1, in.anyFloat());
  std::vector<uint8_t> k(size_t(kBytes) + 1, uint8_t(in.take<uint8_t>())),
      v(size_t(vBytes) + 1, uint8_t(in.take<uint8_t>()));
  std::vector<uint16_t> maskValues(size_t(mBytes / 2) + 1, in.take<uint16_t>());
  c.q.data = in.below(16) ? q.data() : nullptr;
  c.k.data = k.data();
  c.v.data = v.data();
  c.dst.data = dst.data();
  if (in.below(2)) {
    c.mask = mask;
    c.mask.data = maskValues.data();
  }
  if (!in.below(4)) {
    c.sinks = sinks;
    c.sinks.data = sinkValues.data();
  }

  const uint32_t nth = in.mostly(1u + in.below(4));
  uint64_t scratchBytes = 0;
  (void)tq_ggml_flash_attn_ext_scratch(in.below(16) ? pack() : nullptr, &c, nth,
                                       in.below(16) ? &scratchBytes : nullptr);
  // Computing calls only where the work is bounded.
  Wide work = 1;
  for (int64_t n : {c.q.ne[1], c.q.ne[2], c.q.ne[3], c.k.ne[1]})
    work *= Wide(n > 0 ? n : 0);
  if (work > kMaxWork || nth > 64 || scratchBytes > kMaxBytes)
    return;
  char error[256];
  if (in.below(2)) {
    // Sometimes one call more, with ith = nth.
    const uint32_t calls = nth + in.below(2);
    for (uint32_t ith = 0; ith < calls; ++ith)
      (void)tq_ggml_flash_attn_ext(pack(), &c, ith, nth, error, sizeof error);
    return;
  }
  // Split over threads, run one after another with a barrier that waits
  // for nothing: the merges may read parts not yet written (zeros), never
  // outside the scratch.
  std::vector<float> scratch(scratchBytes / 4 + 1, 0.0f);
  tq_ggml_threads_v0 t{};
  t.version = in.mostly(TQ_GGML_THREADS_VERSION_0);
  t.size = in.mostly(uint32_t(sizeof t));
  t.scratch = in.below(16) ? scratch.data() : nullptr;
  t.scratch_bytes =
      in.below(8) ? scratchBytes : in.below(uint32_t(scratchBytes) + 1);
  t.barrier = in.below(16) ? noBarrier : nullptr;
  for (uint32_t ith = 0; ith < nth; ++ith)
    (void)tq_ggml_flash_attn_ext_threads(
        pack(), &c, ith, nth, in.below(16) ? &t : nullptr, error, sizeof error);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzInput in(data, size);
  if (in.below(3) == 0)
    rowKernels(in);
  else
    flashAttention(in);
  return 0;
}
