//===- TQTypes.cpp - Types of the tq dialect ------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tq;
namespace quant = ::tq::quant;

#define GET_TYPEDEF_CLASSES
#include "tq/Dialect/TQ/IR/TQTypes.cpp.inc"

void TQDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "tq/Dialect/TQ/IR/TQTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// CacheType
//===----------------------------------------------------------------------===//

Type CacheType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  FormatAttr format;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/true,
                                /*withTrailingX=*/false) ||
      parser.parseComma() || parser.parseAttribute(format) ||
      parser.parseGreater())
    return {};
  return CacheType::getChecked(
      [&] { return parser.emitError(parser.getNameLoc()); },
      parser.getContext(), shape, format);
}

void CacheType::print(AsmPrinter &printer) const {
  printer << '<';
  llvm::interleave(
      getShape(), printer,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          printer << '?';
        else
          printer << d;
      },
      "x");
  printer << ", ";
  printer.printAttribute(getFormat());
  printer << '>';
}

LogicalResult CacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                ArrayRef<int64_t> shape, FormatAttr format) {
  if (shape.size() != 3)
    return emitError() << "cache shape is tokens x kv_heads x head_dim, got "
                       << shape.size() << " dimensions";
  if (ShapedType::isDynamic(shape[1]) || shape[1] <= 0)
    return emitError() << "cache kv_heads must be a static positive size";
  if (ShapedType::isDynamic(shape[2]) || shape[2] <= 0)
    return emitError() << "cache head_dim must be a static positive size";
  if (!ShapedType::isDynamic(shape[0]) && shape[0] < 0)
    return emitError() << "cache tokens must be non-negative";
  if (!format)
    return emitError() << "cache needs a #tq.format";
  if (failed(format.getFormat(unsigned(shape[2]), emitError)))
    return failure();
  return success();
}

quant::Format CacheType::getQuantFormat() const {
  FailureOr<quant::Format> format = getFormat().getFormat(getHeadDim());
  assert(succeeded(format) && "verified cache types have a valid format");
  return *format;
}

unsigned CacheType::getPaddedDim() const {
  return getQuantFormat().paddedDim();
}

int64_t CacheType::getRowBytes() const {
  return int64_t(getQuantFormat().rowBytes());
}

RankedTensorType CacheType::getBytesType() const {
  return RankedTensorType::get(
      {getNumTokens(), getNumKvHeads(), getRowBytes()},
      IntegerType::get(getContext(), 8));
}

RankedTensorType CacheType::getRotatedType() const {
  return RankedTensorType::get(
      {getNumTokens(), getNumKvHeads(), int64_t(getPaddedDim())},
      Float32Type::get(getContext()));
}

RankedTensorType CacheType::getValuesType() const {
  return RankedTensorType::get(
      {getNumTokens(), getNumKvHeads(), int64_t(getHeadDim())},
      Float32Type::get(getContext()));
}
