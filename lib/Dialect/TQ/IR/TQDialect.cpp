//===- TQDialect.cpp - The tq dialect -------------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::tq;

#include "tq/Dialect/TQ/IR/TQDialect.cpp.inc"
#include "tq/Dialect/TQ/IR/TQEnums.cpp.inc"

namespace {
/// Prints long rotation and codebook attributes once, as aliases at the top
/// of the module (#rotation, #codebook), instead of at every use.
struct TQOpAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (auto rotation = dyn_cast<RotationAttr>(attr)) {
      if (!rotation.getSigns1())
        return AliasResult::NoAlias;
      os << "rotation";
      return AliasResult::FinalAlias;
    }
    if (isa<CodebookAttr>(attr)) {
      os << "codebook";
      return AliasResult::FinalAlias;
    }
    return AliasResult::NoAlias;
  }
};
} // namespace

void TQDialect::initialize() {
  addInterfaces<TQOpAsmInterface>();
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "tq/Dialect/TQ/IR/TQOps.cpp.inc"
      >();
}
