//===- TQDialect.cpp - The tq dialect -------------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"

using namespace mlir;
using namespace mlir::tq;

#include "tq/Dialect/TQ/IR/TQDialect.cpp.inc"
#include "tq/Dialect/TQ/IR/TQEnums.cpp.inc"

void TQDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "tq/Dialect/TQ/IR/TQOps.cpp.inc"
      >();
}
