//===- Attention.h - Reference attention in double precision ----*- C++ -*-===//
//
// The oracle every kernel test compares against. Layouts (row-major,
// float32):
//   Q   [numQueries][numQHeads][headDim]
//   K   [numKeys][numKvHeads][headDim]
//   V   [numKeys][numKvHeads][vDim]     (vDim = headDim unless set)
//   out [numQueries][numQHeads][vDim]   (double)
//   mask (optional) [numQueries][numKeys], added to the logits
//
// Query head h reads KV head h / (numQHeads / numKvHeads) (GQA). Query i sits
// at position numKeys - numQueries + i (queries are the last positions), so
// causal masking lets it see keys j <= that position, and a sliding window W
// further restricts to position - j < W. Logits are
//   s = scale * <q, k>;  s = softcap * tanh(s / softcap) if softcap > 0;
//   s += slope[h] * mask   (slope 1 without ALiBi slopes)
// With attention sinks, sinks[h] is one more logit of head h whose value
// row is zero: it enters only the softmax's denominator. A query that can
// see no key gets an all-zero output.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_ATTENTION_H
#define TQ_QUANT_ATTENTION_H

#include "tq/Quant/Format.h"
#include "tq/Quant/Status.h"

#include <cstddef>
#include <cstdint>
#include <span>

namespace tq::quant {

struct AttentionShape {
  unsigned numQueries = 1;
  unsigned numQHeads = 1;
  unsigned numKvHeads = 1;
  unsigned headDim = 0;
  unsigned numKeys = 0;
  /// V's head dim when it differs from K's (0: headDim); out rows have it.
  unsigned valueHeadDim = 0;
  unsigned vDim() const { return valueHeadDim ? valueHeadDim : headDim; }
};

struct AttentionOptions {
  /// Logit scale; 0 means 1 / sqrt(headDim).
  double scale = 0.0;
  bool causal = false;
  /// Sliding window in positions; 0 means unlimited.
  unsigned window = 0;
  /// Logit soft-cap; 0 means none.
  double softcap = 0.0;
  /// Optional additive mask [numQueries][numKeys]; -inf hides a key.
  std::span<const float> mask = {};
  /// Optional ALiBi slopes [numQHeads], multiplying the mask (needs one).
  std::span<const float> slopes = {};
  /// Optional attention-sink logits [numQHeads]; -inf is no sink.
  std::span<const float> sinks = {};
};

/// Checks the shape (non-zero sizes, numQHeads a multiple of numKvHeads,
/// numQueries <= numKeys when causal) and the span sizes.
Status validateAttention(const AttentionShape &shape,
                         const AttentionOptions &options, size_t qSize,
                         size_t kSize, size_t vSize, size_t outSize);

/// Exact attention over float inputs, computed in double.
Status referenceAttention(const AttentionShape &shape,
                          const AttentionOptions &options,
                          std::span<const float> q, std::span<const float> k,
                          std::span<const float> v, std::span<double> out);

/// Attention over a quantised cache: kCache / vCache hold numKeys x
/// numKvHeads rows encoded with kFormat / vFormat (rowBytes each, same
/// order as K and V above). Each row is decoded to the original domain and
/// the result computed in double.
Status referenceAttentionQuantized(const AttentionShape &shape,
                                   const AttentionOptions &options,
                                   std::span<const float> q,
                                   const Format &kFormat,
                                   std::span<const uint8_t> kCache,
                                   const Format &vFormat,
                                   std::span<const uint8_t> vCache,
                                   std::span<double> out);

} // namespace tq::quant

#endif // TQ_QUANT_ATTENTION_H
