//===- Format.h - Compressed KV block formats -------------------*- C++ -*-===//
//
// A Format turns one head vector (a K or V row of headDim floats) into a
// fixed number of bytes and back. Its FormatSpec fixes every byte: block
// length, scale rule and scalar type, where each bit of each index lives,
// the rotation, the codebook and the optional QJL residual. The compiler
// reads the spec for compile-time constants; the runtime and the tests call
// encodeRow / decodeRow.
//
// Rows are zero-padded to paddedDim (a multiple of blockLen) and split into
// paddedDim / blockLen consecutive blocks of bytesPerBlock bytes each.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_FORMAT_H
#define TQ_QUANT_FORMAT_H

#include "tq/Quant/Codebook.h"
#include "tq/Quant/Qjl.h"
#include "tq/Quant/Rotation.h"
#include "tq/Quant/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tq::quant {

/// The encoder family; formats of one family share their algorithm.
enum class FormatFamily {
  Tq3,       ///< tq3_0: block WHT32, amax scale, 3-bit codebook.
  Tq3Legacy, ///< tq3_0_legacy: 2-bit codebook + residual-sign bits.
  Turbo,     ///< turbo2/3/4_0: L2-normalised, two-sided WHT128, corrected norm.
  Polar,     ///< polarB: L2 norm, seeded WHT over the padded head, Lloyd-Max.
  TqProd,    ///< tqprodB: (B-1)-bit polar + 1-bit QJL of the residual.
  Haar,      ///< haar4: dense Haar rotation, uint8 indices, f32 scale.
  Q8_0,      ///< q8_0: ggml's 32-value int8 blocks with an fp16 scale.
  F16,       ///< f16: IEEE half per value.
};

/// How the per-block scale is derived from the input.
enum class ScaleRule {
  /// scale = amax(rotated block) / max |centroid| (tq3_0).
  AmaxOverMaxCentroid,
  /// scale = ||x|| / ||C[idx]|| (turbo: corrects the norm for the
  /// codebook's shrinkage so the reconstruction keeps the input norm).
  L2Corrected,
  /// scale = ||x|| (polar, tqprod).
  L2,
  /// scale = ||x||; decode reconstructs C[idx] / ||C[idx]|| * scale (haar4).
  L2Renormalised,
  /// scale = amax / 127, linear int8 values (q8_0).
  AmaxOver127,
  /// No scale (f16).
  None,
};

enum class ScalarType { F16, F32 };

/// Domain of a decoded vector: the input's own, or the rotated one the
/// indices live in (centroid * scale, before the inverse rotation).
enum class Domain { Original, Rotated };

/// A packed bit field holding `bits` bits per element, element j at bit
/// j * bits from byteOffset, least significant bit first. As part of an
/// index, a plane supplies index bits [shift, shift + bits).
struct BitPlane {
  unsigned byteOffset = 0;
  unsigned bits = 0;
  unsigned shift = 0;
};

/// Everything that fixes the bytes of one block.
struct FormatSpec {
  std::string name;
  FormatFamily family = FormatFamily::F16;
  /// Logical head dim of a row and the zero-padded dim it is encoded at.
  unsigned headDim = 0;
  unsigned paddedDim = 0;
  unsigned blockLen = 0;
  unsigned bytesPerBlock = 0;

  ScaleRule scaleRule = ScaleRule::None;
  ScalarType scaleType = ScalarType::F16;
  unsigned scaleOffset = 0;

  /// Codebook index: its width and the planes its bits are spread over.
  unsigned indexBits = 0;
  std::vector<BitPlane> indexPlanes;
  std::optional<Codebook> codebook;
  /// Rotation of one block (dim == blockLen); nullopt for q8_0 and f16.
  std::optional<Rotation> rotation;

  /// TurboQuant_prod residual: fp16 ||r|| and the QJL sign plane.
  std::optional<unsigned> residualNormOffset;
  std::optional<BitPlane> qjlPlane;
  std::shared_ptr<const QjlProjection> qjl;

  /// tq3_0_legacy's residual-sign bits (written on encode, ignored on
  /// decode, as the original implementation does).
  std::optional<BitPlane> residualSignPlane;

  /// Bytes whose value is fixed (turbo4's zero rnorm field): offset, size.
  std::vector<std::pair<unsigned, unsigned>> zeroFields;

  unsigned blocksPerRow() const { return paddedDim / blockLen; }
  size_t rowBytes() const { return size_t(blocksPerRow()) * bytesPerBlock; }
  /// Storage bits per logical value of a row: rowBytes * 8 / headDim.
  double bitsPerValue() const { return double(rowBytes()) * 8.0 / headDim; }
  /// True where each block of a row is one scale times codebook levels
  /// of at most 16 entries, with no QJL residual, blocks of at least 32
  /// values (a multiple of 16) and a padded dim that is a multiple of 16:
  /// the rows the integer and bf16 dot-product paths take
  /// (tq-lower-to-loops score-dot=i8, value-dot=bf16|i16), which apply
  /// each block's scale to the block's sum. Blocks under 64 values
  /// (tq3_0) take the int8 score by token lanes only, i.e. with one query
  /// row (by row lanes it was slower than f32: docs/perf/cpu.md).
  bool isScaledCodesRow() const {
    return codebook && codebook->centroids.size() <= 16 && !qjl &&
           scaleRule != ScaleRule::None && blockLen >= 32 &&
           blockLen % 16 == 0 && paddedDim % 16 == 0;
  }
  /// Scaled-codes rows of blocks under 64 values (tq3_0's 32): the int8
  /// score by row lanes, the pair sums in chunks narrower than 64 lanes
  /// and the pair sums on AVX2 were slower than f32 for them, so those
  /// keep f32 (docs/perf/cpu.md, session #21).
  bool hasShortScaleBlocks() const {
    return isScaledCodesRow() && blockLen < 64;
  }
};

/// What an encode observed that the caller may want to report.
struct EncodeStats {
  size_t blocks = 0;
  /// Blocks whose scale or norm overflowed its scalar type and was
  /// saturated to the largest finite value.
  size_t saturatedBlocks = 0;
};

/// A named format instantiated for one head dim.
class Format {
public:
  /// Looks up a format by name ("turbo3_0", "polar4", ...) for rows of
  /// headDim values. Fails with a message naming the problem.
  static Result<Format> get(std::string_view name, unsigned headDim);

  const FormatSpec &spec() const { return *spec_; }
  const std::string &name() const { return spec_->name; }
  unsigned headDim() const { return spec_->headDim; }
  unsigned paddedDim() const { return spec_->paddedDim; }
  unsigned blockLen() const { return spec_->blockLen; }
  unsigned bytesPerBlock() const { return spec_->bytesPerBlock; }
  size_t rowBytes() const { return spec_->rowBytes(); }
  double bitsPerValue() const { return spec_->bitsPerValue(); }
  /// True when decoding to Domain::Rotated differs from Domain::Original.
  bool hasRotation() const { return spec_->rotation.has_value(); }

  /// Encodes one row: x.size() == headDim, out.size() == rowBytes.
  /// Non-finite input is rejected (naming the element) and out is untouched.
  Status encodeRow(std::span<const float> x, std::span<uint8_t> out,
                   EncodeStats *stats = nullptr) const;
  /// Decodes one row. Original: out.size() == headDim. Rotated:
  /// out.size() == paddedDim (centroid * scale per value, no inverse
  /// rotation; equals Original for formats without a rotation).
  Status decodeRow(std::span<const uint8_t> in, std::span<float> out,
                   Domain domain = Domain::Original) const;

private:
  explicit Format(std::shared_ptr<const FormatSpec> spec)
      : spec_(std::move(spec)) {}
  std::shared_ptr<const FormatSpec> spec_;
};

/// One row of the format table.
struct FormatInfo {
  const char *name;
  FormatFamily family;
  const char *summary;
};

/// Every format name Format::get accepts, in display order.
std::span<const FormatInfo> allFormats();

} // namespace tq::quant

#endif // TQ_QUANT_FORMAT_H
