//===- Attention.cpp - Reference attention in double precision ------------===//
//
// The oracle for every kernel test. It favours obviously-correct code over
// speed: one straightforward loop nest (attendRows) computes every
// (query, head) pair in double, and the quantised entry point decodes the
// cache to floats and reuses it.
//
// Validation covers shapes, span sizes, the scale and soft-cap, and the mask
// (each entry must be finite or -inf). The contents of q, k and v are NOT
// checked for NaN/Inf: that would cost as much as a pass over the inputs on
// every call. A non-finite input propagates instead of being hidden: a NaN
// logit makes that (query, head) output all NaN rather than "fully masked"
// zeros, and NaN/Inf in v reaches every output that gives it weight.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Attention.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tq::quant {

namespace {

/// Element counts of the four operands, each known not to overflow size_t.
struct AttentionSizes {
  size_t q = 0;      ///< numQueries * numQHeads * headDim
  size_t out = 0;    ///< numQueries * numQHeads * vDim
  size_t kv = 0;     ///< numKeys * numKvHeads * headDim (K)
  size_t v = 0;      ///< numKeys * numKvHeads * vDim
  size_t kvRows = 0; ///< numKeys * numKvHeads
  size_t mask = 0;   ///< numQueries * numKeys
  size_t qHeads = 0; ///< numQHeads (slopes, sinks)
};

/// a * b, or false on size_t overflow.
bool checkedMul(size_t a, size_t b, size_t &result) {
  return !__builtin_mul_overflow(a, b, &result);
}

std::string str(size_t v) { return std::to_string(v); }

/// Checks everything about the shape and options that does not depend on
/// the operand spans, and computes the operand sizes.
Result<AttentionSizes> checkShape(const AttentionShape &shape,
                                  const AttentionOptions &options) {
  auto nonZero = [](unsigned v, const char *name) -> Status {
    if (v == 0)
      return Status::error(std::string("attention: ") + name +
                           " must be non-zero");
    return Status::success();
  };
  for (Status s :
       {nonZero(shape.numQueries, "numQueries"),
        nonZero(shape.numQHeads, "numQHeads"),
        nonZero(shape.numKvHeads, "numKvHeads"),
        nonZero(shape.headDim, "headDim"), nonZero(shape.numKeys, "numKeys")})
    if (!s.ok())
      return s;

  if (shape.numQHeads % shape.numKvHeads != 0)
    return Status::error("attention: numQHeads (" + str(shape.numQHeads) +
                         ") must be a multiple of numKvHeads (" +
                         str(shape.numKvHeads) + ")");
  if (options.causal && shape.numQueries > shape.numKeys)
    return Status::error("attention: causal attention needs numQueries (" +
                         str(shape.numQueries) + ") <= numKeys (" +
                         str(shape.numKeys) + ")");
  if (!std::isfinite(options.scale) || options.scale < 0.0)
    return Status::error("attention: scale must be finite and non-negative "
                         "(0 means 1/sqrt(headDim)), got " +
                         std::to_string(options.scale));
  if (!std::isfinite(options.softcap) || options.softcap < 0.0)
    return Status::error("attention: softcap must be finite and non-negative "
                         "(0 means none), got " +
                         std::to_string(options.softcap));

  AttentionSizes sizes;
  size_t qRows = 0;
  if (!checkedMul(shape.numQueries, shape.numQHeads, qRows) ||
      !checkedMul(qRows, shape.headDim, sizes.q) ||
      !checkedMul(shape.numKeys, shape.numKvHeads, sizes.kvRows) ||
      !checkedMul(sizes.kvRows, shape.headDim, sizes.kv) ||
      !checkedMul(sizes.kvRows, shape.vDim(), sizes.v) ||
      !checkedMul(qRows, shape.vDim(), sizes.out) ||
      !checkedMul(shape.numQueries, shape.numKeys, sizes.mask))
    return Status::error("attention: operand sizes overflow size_t");
  sizes.qHeads = shape.numQHeads;
  return sizes;
}

/// "attention: <name> has <actual> <unit>, expected <expected> (<formula>)".
Status checkSize(const char *name, size_t actual, size_t expected,
                 const char *unit, const std::string &formula) {
  if (actual == expected)
    return Status::success();
  return Status::error(std::string("attention: ") + name + " has " +
                       str(actual) + " " + unit + ", expected " +
                       str(expected) + " (" + formula + ")");
}

/// Checks q, out and the optional mask; shared by both entry points.
Status checkCommonSpans(const AttentionSizes &sizes,
                        const AttentionOptions &options, size_t qSize,
                        size_t outSize) {
  if (Status s = checkSize("q", qSize, sizes.q, "elements",
                           "numQueries * numQHeads * headDim");
      !s.ok())
    return s;
  if (Status s = checkSize("out", outSize, sizes.out, "elements",
                           "numQueries * numQHeads * vDim");
      !s.ok())
    return s;
  for (auto [span, name] : {std::pair{options.slopes, "slopes"},
                             std::pair{options.sinks, "sinks"}})
    if (!span.empty())
      if (Status s = checkSize(name, span.size(), sizes.qHeads, "elements",
                               "numQHeads");
          !s.ok())
        return s;
  if (!options.slopes.empty() && options.mask.empty())
    return Status::error("attention: slopes scale the mask, but there is no "
                         "mask");
  for (float sink : options.sinks)
    if (std::isnan(sink) || sink == std::numeric_limits<float>::infinity())
      return Status::error("attention: a sink is NaN or +inf");
  if (options.mask.empty())
    return Status::success();
  if (Status s = checkSize("mask", options.mask.size(), sizes.mask, "elements",
                           "numQueries * numKeys");
      !s.ok())
    return s;
  // -inf hides a key; NaN or +inf would turn the whole softmax into NaN.
  for (size_t i = 0; i < options.mask.size(); ++i) {
    float m = options.mask[i];
    if (std::isnan(m) || m == std::numeric_limits<float>::infinity())
      return Status::error("attention: mask element " + str(i) +
                           " is NaN or +inf (only finite values and -inf "
                           "are allowed)");
  }
  return Status::success();
}

/// The attention loop nest. Preconditions (checked by the callers): the
/// shape is valid and every span has its documented size.
void attendRows(const AttentionShape &shape, const AttentionOptions &options,
                std::span<const float> q, std::span<const float> k,
                std::span<const float> v, std::span<double> out) {
  const size_t d = shape.headDim, dv = shape.vDim();
  const unsigned group = shape.numQHeads / shape.numKvHeads;
  const double scale =
      options.scale > 0.0 ? options.scale : 1.0 / std::sqrt(double(d));
  const double negInf = -std::numeric_limits<double>::infinity();

  std::vector<double> logits(shape.numKeys);
  std::vector<double> acc(dv);
  for (unsigned i = 0; i < shape.numQueries; ++i) {
    // Queries are the last numQueries positions of the key sequence.
    const int64_t position =
        int64_t(shape.numKeys) - int64_t(shape.numQueries) + int64_t(i);
    for (unsigned h = 0; h < shape.numQHeads; ++h) {
      const unsigned kvHead = h / group;
      std::span<const float> qRow =
          q.subspan((size_t(i) * shape.numQHeads + h) * d, d);
      std::span<double> outRow =
          out.subspan((size_t(i) * shape.numQHeads + h) * dv, dv);

      // Logits; an invisible key gets -inf and so zero weight.
      double maxLogit = negInf;
      bool sawNaN = false;
      for (unsigned j = 0; j < shape.numKeys; ++j) {
        double &s = logits[j];
        s = negInf;
        if (options.causal && int64_t(j) > position)
          continue;
        if (options.window != 0 &&
            position - int64_t(j) >= int64_t(options.window))
          continue;
        std::span<const float> kRow =
            k.subspan((size_t(j) * shape.numKvHeads + kvHead) * d, d);
        double dotQK = 0.0;
        for (size_t c = 0; c < d; ++c)
          dotQK += double(qRow[c]) * double(kRow[c]);
        s = scale * dotQK;
        if (options.softcap > 0.0)
          s = options.softcap * std::tanh(s / options.softcap);
        if (!options.mask.empty())
          s += (options.slopes.empty() ? 1.0 : double(options.slopes[h])) *
               double(options.mask[size_t(i) * shape.numKeys + j]);
        sawNaN |= std::isnan(s);
        if (s > maxLogit)
          maxLogit = s;
      }

      // A NaN logit (from non-finite q or k) must not be mistaken for a
      // fully masked row below; make it visible in the output instead.
      if (sawNaN) {
        for (double &o : outRow)
          o = std::numeric_limits<double>::quiet_NaN();
        continue;
      }

      // No visible key (or all masked to -inf): the output is zero (with
      // or without a sink, whose value row is zero).
      if (maxLogit == negInf) {
        for (double &o : outRow)
          o = 0.0;
        continue;
      }
      const double sink =
          options.sinks.empty() ? negInf : double(options.sinks[h]);
      if (sink > maxLogit)
        maxLogit = sink;

      // Stable softmax: subtract the max so every exponent is <= 0.
      double denom = sink == negInf ? 0.0 : std::exp(sink - maxLogit);
      for (double &a : acc)
        a = 0.0;
      for (unsigned j = 0; j < shape.numKeys; ++j) {
        if (logits[j] == negInf)
          continue;
        double w = std::exp(logits[j] - maxLogit);
        denom += w;
        std::span<const float> vRow =
            v.subspan((size_t(j) * shape.numKvHeads + kvHead) * dv, dv);
        for (size_t c = 0; c < dv; ++c)
          acc[c] += w * double(vRow[c]);
      }
      // denom >= 1: the max term (a key's or the sink's) contributes exp(0).
      for (size_t c = 0; c < dv; ++c)
        outRow[c] = acc[c] / denom;
    }
  }
}

/// Decodes numRows rows of `cache` (rowBytes each) into headDim floats each.
Status decodeCache(const Format &format, std::span<const uint8_t> cache,
                   size_t numRows, const char *name,
                   std::vector<float> &decoded) {
  const size_t rowBytes = format.rowBytes();
  const size_t d = format.headDim();
  decoded.assign(numRows * d, 0.0f);
  for (size_t row = 0; row < numRows; ++row) {
    Status s = format.decodeRow(cache.subspan(row * rowBytes, rowBytes),
                                std::span<float>(decoded).subspan(row * d, d),
                                Domain::Original);
    if (!s.ok())
      return Status::error(std::string("attention: decoding ") + name +
                           " row " + str(row) + ": " + s.message());
  }
  return Status::success();
}

} // namespace

Status validateAttention(const AttentionShape &shape,
                         const AttentionOptions &options, size_t qSize,
                         size_t kSize, size_t vSize, size_t outSize) {
  Result<AttentionSizes> sizes = checkShape(shape, options);
  if (!sizes.ok())
    return sizes.status();
  if (Status s = checkSize("k", kSize, sizes->kv, "elements",
                           "numKeys * numKvHeads * headDim");
      !s.ok())
    return s;
  if (Status s = checkSize("v", vSize, sizes->v, "elements",
                           "numKeys * numKvHeads * vDim");
      !s.ok())
    return s;
  return checkCommonSpans(*sizes, options, qSize, outSize);
}

Status referenceAttention(const AttentionShape &shape,
                          const AttentionOptions &options,
                          std::span<const float> q, std::span<const float> k,
                          std::span<const float> v, std::span<double> out) {
  if (Status s = validateAttention(shape, options, q.size(), k.size(), v.size(),
                                   out.size());
      !s.ok())
    return s;
  attendRows(shape, options, q, k, v, out);
  return Status::success();
}

Status referenceAttentionQuantized(
    const AttentionShape &shape, const AttentionOptions &options,
    std::span<const float> q, const Format &kFormat,
    std::span<const uint8_t> kCache, const Format &vFormat,
    std::span<const uint8_t> vCache, std::span<double> out) {
  Result<AttentionSizes> sizes = checkShape(shape, options);
  if (!sizes.ok())
    return sizes.status();
  if (Status s = checkCommonSpans(*sizes, options, q.size(), out.size());
      !s.ok())
    return s;

  struct CacheOperand {
    const char *name;
    const Format &format;
    std::span<const uint8_t> bytes;
    unsigned dim;
  };
  for (const CacheOperand &c :
       {CacheOperand{"kCache", kFormat, kCache, shape.headDim},
        CacheOperand{"vCache", vFormat, vCache, shape.vDim()}}) {
    if (c.format.headDim() != c.dim)
      return Status::error(std::string("attention: ") + c.name + " format '" +
                           c.format.name() + "' has headDim " +
                           str(c.format.headDim()) + ", expected " +
                           str(c.dim));
    size_t expected = 0;
    if (!checkedMul(sizes->kvRows, c.format.rowBytes(), expected))
      return Status::error(std::string("attention: ") + c.name +
                           " size overflows size_t");
    if (Status s = checkSize(c.name, c.bytes.size(), expected, "bytes",
                             "numKeys * numKvHeads * rowBytes " +
                                 str(c.format.rowBytes()) + " of '" +
                                 c.format.name() + "'");
        !s.ok())
      return s;
  }

  std::vector<float> k, v;
  if (Status s = decodeCache(kFormat, kCache, sizes->kvRows, "kCache", k);
      !s.ok())
    return s;
  if (Status s = decodeCache(vFormat, vCache, sizes->kvRows, "vCache", v);
      !s.ok())
    return s;
  attendRows(shape, options, q, k, v, out);
  return Status::success();
}

} // namespace tq::quant
