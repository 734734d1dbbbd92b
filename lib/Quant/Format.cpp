//===- Format.cpp - Format lookup and row encode/decode -------------------===//
//
// Format::get parses a format name, builds its FormatSpec for one head dim
// and hands rows to the family's codec. Input validation lives here, once:
// the codecs assume finite input and exactly sized spans.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Format.h"
#include "Codecs/Codecs.h"

#include <cmath>
#include <string>
#include <vector>

namespace tq::quant {

namespace {

constexpr unsigned kMaxHeadDim = 4096;

constexpr FormatInfo kFormats[] = {
    {"tq3_0", FormatFamily::Tq3,
     "32-value blocks, block WHT32, 3-bit amax-scaled codebook (14 B)"},
    {"tq3_0_legacy", FormatFamily::Tq3Legacy,
     "tq3_0 layout with a 2-bit codebook and residual-sign bits (14 B)"},
    {"turbo2_0", FormatFamily::Turbo,
     "128-value groups, two-sided WHT128, 2-bit, corrected L2 norm (34 B)"},
    {"turbo3_0", FormatFamily::Turbo,
     "128-value groups, two-sided WHT128, 3-bit, corrected L2 norm (50 B)"},
    {"turbo4_0", FormatFamily::Turbo,
     "128-value groups, two-sided WHT128, 4-bit, corrected L2 norm (68 B)"},
    {"polar1", FormatFamily::Polar,
     "PolarQuant: fp16 L2 norm, seeded WHT over the head, 1-bit Lloyd-Max"},
    {"polar2", FormatFamily::Polar,
     "PolarQuant: fp16 L2 norm, seeded WHT over the head, 2-bit Lloyd-Max"},
    {"polar3", FormatFamily::Polar,
     "PolarQuant: fp16 L2 norm, seeded WHT over the head, 3-bit Lloyd-Max"},
    {"polar4", FormatFamily::Polar,
     "PolarQuant: fp16 L2 norm, seeded WHT over the head, 4-bit Lloyd-Max"},
    {"tqprod2", FormatFamily::TqProd,
     "TurboQuant_prod: 1-bit polar + 1-bit QJL residual + fp16 residual norm"},
    {"tqprod3", FormatFamily::TqProd,
     "TurboQuant_prod: 2-bit polar + 1-bit QJL residual + fp16 residual norm"},
    {"tqprod4", FormatFamily::TqProd,
     "TurboQuant_prod: 3-bit polar + 1-bit QJL residual + fp16 residual norm"},
    {"haar4", FormatFamily::Haar,
     "dense Haar rotation, 4-bit Lloyd-Max in uint8 indices, f32 L2 scale"},
    {"q8_0", FormatFamily::Q8_0, "ggml q8_0: 32 int8 values + fp16 scale"},
    {"f16", FormatFamily::F16, "IEEE half per value (uncompressed baseline)"},
};

/// Trailing decimal digit of a name like "polar3" or "turbo3_0".
unsigned bitWidthOf(std::string_view name, FormatFamily family) {
  size_t pos = family == FormatFamily::Turbo ? name.size() - 3
                                             : name.size() - 1;
  return unsigned(name[pos] - '0');
}

Result<FormatSpec> makeSpec(const FormatInfo &info, unsigned headDim) {
  using namespace detail;
  std::string_view name = info.name;
  switch (info.family) {
  case FormatFamily::Tq3:
    return makeTq3Spec(false, headDim);
  case FormatFamily::Tq3Legacy:
    return makeTq3Spec(true, headDim);
  case FormatFamily::Turbo:
    return makeTurboSpec(bitWidthOf(name, info.family), headDim);
  case FormatFamily::Polar:
    return makePolarSpec(bitWidthOf(name, info.family), headDim);
  case FormatFamily::TqProd:
    return makeTqProdSpec(bitWidthOf(name, info.family), headDim);
  case FormatFamily::Haar:
    return makeHaarSpec(headDim);
  case FormatFamily::Q8_0:
    return makeQ8_0Spec(headDim);
  case FormatFamily::F16:
    return makeF16Spec(headDim);
  }
  return Status::error("unhandled format family");
}

const char *describeNonFinite(float v) {
  return std::isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf");
}

} // namespace

double detail::robustNorm(std::span<const float> x) {
  float sumSq = 0.0f;
  for (float v : x)
    sumSq += v * v;
  if (std::isfinite(sumSq))
    return std::sqrt(double(sumSq));
  double amax = 0;
  for (float v : x)
    amax = std::fmax(amax, std::fabs(double(v)));
  double acc = 0;
  for (float v : x) {
    double t = double(v) / amax;
    acc += t * t;
  }
  return amax * std::sqrt(acc);
}

std::span<const FormatInfo> allFormats() { return kFormats; }

Result<Format> Format::get(std::string_view name, unsigned headDim) {
  const FormatInfo *info = nullptr;
  for (const FormatInfo &f : kFormats)
    if (name == f.name)
      info = &f;
  if (!info) {
    std::string known;
    for (const FormatInfo &f : kFormats)
      known += (known.empty() ? "" : ", ") + std::string(f.name);
    return Status::error("unknown format '" + std::string(name) +
                         "' (known: " + known + ")");
  }
  if (headDim == 0 || headDim > kMaxHeadDim)
    return Status::error("head dim " + std::to_string(headDim) +
                         " is outside [1, " + std::to_string(kMaxHeadDim) +
                         "]");
  Result<FormatSpec> spec = makeSpec(*info, headDim);
  if (!spec)
    return Status::error(std::string(info->name) + ": " +
                         spec.status().message());
  return Format(std::make_shared<const FormatSpec>(std::move(*spec)));
}

Status Format::encodeRow(std::span<const float> x, std::span<uint8_t> out,
                         EncodeStats *stats) const {
  const FormatSpec &s = *spec_;
  if (x.size() != s.headDim)
    return Status::error("row has " + std::to_string(x.size()) +
                         " values, format expects head dim " +
                         std::to_string(s.headDim));
  if (out.size() != s.rowBytes())
    return Status::error("output has " + std::to_string(out.size()) +
                         " bytes, a row needs " + std::to_string(s.rowBytes()));
  for (size_t j = 0; j < x.size(); ++j)
    if (!std::isfinite(x[j]))
      return Status::error("element " + std::to_string(j) + " is " +
                           describeNonFinite(x[j]) +
                           "; only finite values can be encoded");
  std::vector<float> row(s.paddedDim, 0.0f);
  std::copy(x.begin(), x.end(), row.begin());
  std::vector<uint8_t> bytes(s.rowBytes(), 0);
  EncodeStats local;
  switch (s.family) {
  case FormatFamily::Tq3:
  case FormatFamily::Tq3Legacy:
    detail::encodeTq3(s, row, bytes, local);
    break;
  case FormatFamily::Turbo:
    detail::encodeTurbo(s, row, bytes, local);
    break;
  case FormatFamily::Polar:
  case FormatFamily::TqProd:
    detail::encodePolar(s, row, bytes, local);
    break;
  case FormatFamily::Haar:
    detail::encodeHaar(s, row, bytes, local);
    break;
  case FormatFamily::Q8_0:
    detail::encodeQ8_0(s, row, bytes, local);
    break;
  case FormatFamily::F16:
    detail::encodeF16(s, row, bytes, local);
    break;
  }
  std::copy(bytes.begin(), bytes.end(), out.begin());
  if (stats) {
    stats->blocks += local.blocks;
    stats->saturatedBlocks += local.saturatedBlocks;
  }
  return Status::success();
}

Status Format::decodeRow(std::span<const uint8_t> in, std::span<float> out,
                         Domain domain) const {
  const FormatSpec &s = *spec_;
  if (in.size() != s.rowBytes())
    return Status::error("input has " + std::to_string(in.size()) +
                         " bytes, a row needs " + std::to_string(s.rowBytes()));
  size_t want = domain == Domain::Rotated ? s.paddedDim : s.headDim;
  if (out.size() != want)
    return Status::error("output has " + std::to_string(out.size()) +
                         " values, expected " + std::to_string(want));
  std::vector<float> row(s.paddedDim, 0.0f);
  switch (s.family) {
  case FormatFamily::Tq3:
  case FormatFamily::Tq3Legacy:
    detail::decodeTq3(s, in, row, domain);
    break;
  case FormatFamily::Turbo:
    detail::decodeTurbo(s, in, row, domain);
    break;
  case FormatFamily::Polar:
  case FormatFamily::TqProd:
    detail::decodePolar(s, in, row, domain);
    break;
  case FormatFamily::Haar:
    detail::decodeHaar(s, in, row, domain);
    break;
  case FormatFamily::Q8_0:
    detail::decodeQ8_0(s, in, row, domain);
    break;
  case FormatFamily::F16:
    detail::decodeF16(s, in, row, domain);
    break;
  }
  std::copy(row.begin(), row.begin() + want, out.begin());
  return Status::success();
}

} // namespace tq::quant
