//===- RuntimeFuzzer.cpp - The runtime's entry points on any descriptor ----===//
//
// tq_append, tq_attention, tq_attention_v1 and tq_kv_cache_tokens with
// descriptors built from the fuzzer's bytes, over a small kernel library
// ($TQ_FUZZ_KERNELS, default: the one ctest builds). Every field is drawn
// (versions, sizes, format names, head dims, row bytes, page tables, query
// layouts, masks), but the buffers always have the sizes the descriptor
// claims: what the runtime cannot check (a pointer to too little memory)
// is the caller's contract, everything else must be a status.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "tq/tq_runtime.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using tq::fuzz::FuzzInput;

constexpr size_t kMaxBytes = 1 << 20;

tq_runtime *runtime() {
  static tq_runtime *rt = [] {
    const char *path = std::getenv("TQ_FUZZ_KERNELS");
    tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof o,
                               path ? path : TQ_FUZZ_DEFAULT_KERNELS, 1, 0};
    tq_runtime *r = nullptr;
    if (tq_runtime_create(&o, nullptr, &r) != TQ_STATUS_OK)
      std::abort(); // no library: nothing to fuzz
    return r;
  }();
  return rt;
}

const char *formatName(FuzzInput &in) {
  static const char *const names[] = {"turbo3_0", "polar4", "q8_0",
                                      "turbo3_0", "tq3_0",  "",
                                      "Turbo3_0", "../x",   nullptr};
  return names[in.below(sizeof names / sizeof names[0])];
}

/// Row bytes of the plain library's formats at head dims 64 and 96.
uint32_t rowBytesOf(const char *format, uint32_t dim) {
  if (!format)
    return 0;
  std::string f = format;
  if (f == "turbo3_0" || f == "polar4")
    return dim == 64 ? (f == "turbo3_0" ? 26 : 34) : (f == "turbo3_0" ? 38 : 50);
  if (f == "q8_0")
    return dim / 32 * 34;
  return dim;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzInput in(data, size);
  tq_runtime *rt = runtime();

  tq_kv_cache_v0 c{};
  c.version = in.mostly(TQ_KV_CACHE_VERSION_0);
  c.size = in.mostly(uint32_t(sizeof c));
  c.k_format = formatName(in);
  c.v_format = in.below(2) ? c.k_format : formatName(in);
  static const uint32_t dims[] = {64, 96, 0, 65, 128};
  c.head_dim = in.below(4) ? dims[in.below(2)] : dims[in.below(5)];
  c.num_kv_heads = in.mostly(1u + in.below(3));
  c.page_size = in.mostly(1u + in.below(16));
  c.layout = in.mostly((in.below(2) ? TQ_LAYOUT_PAGED : TQ_LAYOUT_CONTIGUOUS) |
                       (in.below(2) ? TQ_LAYOUT_HEAD_MAJOR : 0u));
  c.k_row_bytes = in.mostly(rowBytesOf(c.k_format, c.head_dim));
  c.v_row_bytes = in.mostly(rowBytesOf(c.v_format, c.head_dim));
  c.num_pages = in.below(9);
  c.num_seqs = in.mostly(in.below(4));
  // The pools hold what the descriptor claims (bounded: a claim too large
  // to allocate is clamped, keeping the caller's side of the contract).
  using Wide = unsigned __int128; // no product of drawn fields overflows
  const Wide perPage = Wide(c.page_size) * c.num_kv_heads *
                       (Wide(c.k_row_bytes) + c.v_row_bytes);
  if (perPage && Wide(c.num_pages) * perPage > kMaxBytes)
    c.num_pages = uint64_t(kMaxBytes / perPage);
  std::vector<uint8_t> kPool(size_t(Wide(c.num_pages) * c.page_size *
                                    c.num_kv_heads * c.k_row_bytes) + 1),
      vPool(size_t(Wide(c.num_pages) * c.page_size * c.num_kv_heads *
                   c.v_row_bytes) + 1);
  c.k_pages = in.below(16) ? kPool.data() : nullptr;
  c.v_pages = vPool.data();
  const uint32_t seqs = c.num_seqs < 64 ? c.num_seqs : 64;
  std::vector<int32_t> indptr(seqs + 1), indices(64), last(seqs + 1),
      lens(seqs + 1);
  for (uint32_t s = 1; s <= seqs; ++s)
    indptr[s] = in.below(4) ? int32_t(uint32_t(indptr[s - 1]) + in.below(3))
                            : in.take<int32_t>();
  for (int32_t &i : indices)
    i = in.below(4) ? int32_t(in.below(uint32_t(c.num_pages) + 1))
                    : in.take<int32_t>();
  for (uint32_t s = 0; s < seqs; ++s) {
    last[s] = in.below(4) ? int32_t(in.below(c.page_size + 1))
                          : in.take<int32_t>();
    lens[s] = in.below(4) ? int32_t(in.below(c.page_size + 2))
                          : in.take<int32_t>();
  }
  // indices must hold indptr[num_seqs] entries: a larger claim is clamped.
  if (seqs && indptr[seqs] > 64)
    indptr[seqs] = 64;
  if (c.num_seqs > seqs)
    c.num_seqs = seqs;
  c.indptr = indptr.data();
  c.indices = indices.data();
  c.last_page_len = last.data();
  c.seq_lens = lens.data();

  uint64_t tokens = 0;
  (void)tq_kv_cache_tokens(&c, in.below(4), in.below(8) ? &tokens : nullptr);

  const uint32_t heads = c.num_kv_heads * (1u + in.below(3));
  switch (in.below(3)) {
  case 0: {
    const uint32_t rows = in.below(5);
    const Wide floats = Wide(rows) * c.num_kv_heads * c.head_dim;
    if (floats * 4 > kMaxBytes)
      return 0;
    std::vector<float> k(size_t(floats) + 1, 0.5f), v(size_t(floats) + 1, -0.25f);
    if (!in.below(8))
      k[0] = NAN;
    (void)tq_append(rt, &c, in.below(4), in.below(40), rows,
                    in.below(16) ? k.data() : nullptr, v.data());
    return 0;
  }
  default:
    break;
  }
  // Queries: q_indptr over num_seqs + 1 entries, q and out as large as its
  // largest entry says.
  std::vector<int32_t> qIndptr(seqs + 1);
  int32_t rows = 0;
  for (uint32_t s = 1; s <= seqs; ++s) {
    qIndptr[s] = in.below(4) ? int32_t(uint32_t(qIndptr[s - 1]) + in.below(3))
                             : in.take<int32_t>();
    rows = qIndptr[s] > rows ? qIndptr[s] : rows;
  }
  if (!in.below(16))
    qIndptr[0] = 1;
  // num_q_heads is drawn first: q and out hold rows x num_q_heads x
  // head_dim floats, whatever it is.
  const uint32_t qHeads = in.mostly(heads);
  const Wide qFloats = Wide(rows) * qHeads * c.head_dim;
  if (rows > 4096 || qHeads > 4096 || qFloats * 4 > kMaxBytes)
    return 0;
  std::vector<float> q(size_t(qFloats) + 1, 0.1f), out(q.size(), 0.0f);
  if (!in.below(8))
    q[0] = INFINITY;
  if (in.below(2)) {
    tq_attention_params_v0 p{};
    p.version = in.mostly(TQ_ATTENTION_PARAMS_VERSION_0);
    p.size = in.mostly(uint32_t(sizeof p));
    p.num_q_heads = qHeads;
    p.causal = in.below(2);
    p.window = in.below(4) ? 0 : in.below(8);
    p.softcap = in.below(4) ? 0.0f : in.anyFloat();
    p.scale = in.below(4) ? 0.0f : in.anyFloat();
    p.q_indptr = in.below(16) ? qIndptr.data() : nullptr;
    (void)tq_attention(rt, &c, &p, q.data(), out.data());
    return 0;
  }
  tq_attention_params_v1 p{};
  p.version = in.mostly(TQ_ATTENTION_PARAMS_VERSION_1);
  p.size = in.mostly(uint32_t(sizeof p));
  p.num_q_heads = qHeads;
  p.scale = in.below(4) ? 0.0f : in.anyFloat();
  p.softcap = in.below(4) ? 0.0f : in.anyFloat();
  p.q_indptr = qIndptr.data();
  p.mask_row_stride = in.below(4) ? 0 : in.below(80);
  std::vector<uint16_t> mask(size_t(rows) * p.mask_row_stride + 1,
                             in.take<uint16_t>());
  std::vector<float> slopes(uint64_t(qHeads) + 1, in.anyFloat()),
      sinks(uint64_t(qHeads) + 1, in.anyFloat());
  // The mask, slopes and sinks cover what the call claims: rows x stride
  // and num_q_heads entries.
  p.mask = p.mask_row_stride && in.below(2) ? mask.data() : nullptr;
  p.slopes = in.below(2) ? slopes.data() : nullptr;
  p.sinks = in.below(2) ? sinks.data() : nullptr;
  (void)tq_attention_v1(rt, &c, &p, q.data(), out.data());
  return 0;
}
