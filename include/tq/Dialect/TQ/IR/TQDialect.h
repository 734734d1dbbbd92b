//===- TQDialect.h - The tq dialect -----------------------------*- C++ -*-===//
//
// Declares the tq dialect, its enums, attributes, types and operations.
// Include this one header to use the dialect.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_DIALECT_TQ_IR_TQDIALECT_H
#define TQ_DIALECT_TQ_IR_TQDIALECT_H

#include "tq/Quant/Codebook.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Rotation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tq/Dialect/TQ/IR/TQDialect.h.inc"
#include "tq/Dialect/TQ/IR/TQEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tq/Dialect/TQ/IR/TQAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "tq/Dialect/TQ/IR/TQTypes.h.inc"

#define GET_OP_CLASSES
#include "tq/Dialect/TQ/IR/TQOps.h.inc"

#endif // TQ_DIALECT_TQ_IR_TQDIALECT_H
