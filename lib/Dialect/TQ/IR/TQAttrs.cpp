//===- TQAttrs.cpp - Attributes of the tq dialect -------------------------===//
//
// Verification of #tq.format, #tq.codebook and #tq.rotation delegates to the
// format library, so IR accepts exactly what the library can materialise.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

#define GET_ATTRDEF_CLASSES
#include "tq/Dialect/TQ/IR/TQAttrs.cpp.inc"

void TQDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tq/Dialect/TQ/IR/TQAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// FormatAttr
//===----------------------------------------------------------------------===//

LogicalResult FormatAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef name) {
  for (const quant::FormatInfo &info : quant::allFormats())
    if (name == info.name)
      return success();
  std::string known;
  for (const quant::FormatInfo &info : quant::allFormats())
    known += (known.empty() ? "" : ", ") + std::string(info.name);
  return emitError() << "unknown format '" << name << "' (known: " << known
                     << ")";
}

FailureOr<quant::Format>
FormatAttr::getFormat(unsigned headDim,
                      function_ref<InFlightDiagnostic()> emitError) const {
  quant::Result<quant::Format> format =
      quant::Format::get(getName(), headDim);
  if (!format) {
    if (emitError)
      emitError() << format.status().message();
    return failure();
  }
  return *format;
}

//===----------------------------------------------------------------------===//
// CodebookAttr
//===----------------------------------------------------------------------===//

LogicalResult
CodebookAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     unsigned bits, DenseF32ArrayAttr centroids,
                     DenseF32ArrayAttr thresholds) {
  if (!centroids || !thresholds)
    return emitError() << "codebook needs centroids and thresholds";
  if (bits < 1 || bits > 8)
    return emitError() << "codebook bits must be in [1, 8], got " << bits;
  if (centroids.size() != (int64_t(1) << bits))
    return emitError() << "a " << bits << "-bit codebook has "
                       << (1 << bits) << " centroids, got "
                       << centroids.size();
  if (thresholds.size() != centroids.size() - 1)
    return emitError() << "codebook with " << centroids.size()
                       << " centroids needs " << centroids.size() - 1
                       << " thresholds, got " << thresholds.size();
  quant::Result<quant::Codebook> cb = quant::Codebook::literal(
      std::vector<float>(centroids.asArrayRef().begin(),
                         centroids.asArrayRef().end()),
      std::vector<float>(thresholds.asArrayRef().begin(),
                         thresholds.asArrayRef().end()));
  if (!cb)
    return emitError() << "invalid codebook: " << cb.status().message();
  return success();
}

CodebookAttr CodebookAttr::get(MLIRContext *context,
                               const quant::Codebook &codebook) {
  return get(context, codebook.bits,
             DenseF32ArrayAttr::get(context, codebook.centroids),
             DenseF32ArrayAttr::get(context, codebook.thresholds));
}

//===----------------------------------------------------------------------===//
// RotationAttr
//===----------------------------------------------------------------------===//

namespace {
std::vector<int8_t> toVector(DenseI8ArrayAttr attr) {
  if (!attr)
    return {};
  return std::vector<int8_t>(attr.asArrayRef().begin(),
                             attr.asArrayRef().end());
}

/// Builds the library rotation the parameters describe.
quant::Result<quant::Rotation> buildRotation(RotationKind kind, unsigned dim,
                                             unsigned block,
                                             DenseI8ArrayAttr signs1,
                                             DenseI8ArrayAttr signs2,
                                             uint64_t seed) {
  using quant::Status;
  switch (kind) {
  case RotationKind::identity:
    if (signs1 || signs2 || block != 0 || seed != 0)
      return Status::error("identity rotation takes only a dim");
    if (dim == 0)
      return Status::error("rotation dim must be positive");
    return quant::Rotation::identity(dim);
  case RotationKind::hadamard:
    if (!signs1)
      return Status::error("hadamard rotation needs signs1");
    if (block != dim)
      return Status::error("hadamard rotation has block == dim (" +
                           std::to_string(dim) + "), got block " +
                           std::to_string(block));
    if (signs1.size() != int64_t(dim))
      return Status::error("signs1 has " + std::to_string(signs1.size()) +
                           " entries, expected dim " + std::to_string(dim));
    if (seed != 0)
      return Status::error("hadamard rotation takes literal signs, not a seed");
    return quant::Rotation::hadamard(toVector(signs1), toVector(signs2));
  case RotationKind::block_hadamard:
    if (!signs1)
      return Status::error("block_hadamard rotation needs signs1");
    if (signs1.size() != int64_t(block))
      return Status::error("signs1 has " + std::to_string(signs1.size()) +
                           " entries, expected block " +
                           std::to_string(block));
    if (seed != 0)
      return Status::error(
          "block_hadamard rotation takes literal signs, not a seed");
    return quant::Rotation::blockHadamard(dim, toVector(signs1),
                                          toVector(signs2));
  case RotationKind::haar:
    if (signs1 || signs2 || block != 0)
      return Status::error("haar rotation takes a dim and a seed only");
    return quant::Rotation::haar(dim, seed);
  }
  return Status::error("unknown rotation kind");
}
} // namespace

LogicalResult
RotationAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     RotationKind kind, unsigned dim, unsigned block,
                     DenseI8ArrayAttr signs1, DenseI8ArrayAttr signs2,
                     uint64_t seed) {
  // Haar rotations are checked without drawing the matrix.
  if (kind == RotationKind::haar) {
    if (signs1 || signs2 || block != 0)
      return emitError() << "haar rotation takes a dim and a seed only";
    if (dim == 0 || dim > 4096)
      return emitError() << "haar rotation dim " << dim
                         << " is outside [1, 4096]";
    return success();
  }
  quant::Result<quant::Rotation> r =
      buildRotation(kind, dim, block, signs1, signs2, seed);
  if (!r)
    return emitError() << r.status().message();
  return success();
}

quant::Rotation RotationAttr::materialize() const {
  quant::Result<quant::Rotation> r = buildRotation(
      getKind(), getDim(), getBlock(), getSigns1(), getSigns2(), getSeed());
  assert(r.ok() && "verified rotation attributes materialise");
  return std::move(*r);
}

RotationAttr RotationAttr::get(MLIRContext *context,
                               const quant::Rotation &rotation) {
  auto signs = [&](const std::vector<int8_t> &s) -> DenseI8ArrayAttr {
    return s.empty() ? DenseI8ArrayAttr() : DenseI8ArrayAttr::get(context, s);
  };
  switch (rotation.kind()) {
  case quant::RotationKind::Identity:
    return get(context, RotationKind::identity, rotation.dim(), 0, {}, {}, 0);
  case quant::RotationKind::Hadamard:
    return get(context, RotationKind::hadamard, rotation.dim(),
               rotation.blockSize(), signs(rotation.signs1()),
               signs(rotation.signs2()), 0);
  case quant::RotationKind::BlockHadamard:
    return get(context, RotationKind::block_hadamard, rotation.dim(),
               rotation.blockSize(), signs(rotation.signs1()),
               signs(rotation.signs2()), 0);
  case quant::RotationKind::Haar:
    return get(context, RotationKind::haar, rotation.dim(), 0, {}, {},
               rotation.seed());
  }
  return {};
}
