//===- TQ.td - Everything of the tq dialect ----------------*- tablegen -*-===//

#ifndef TQ_DIALECT_TQ_IR_TQ_TD
#define TQ_DIALECT_TQ_IR_TQ_TD

include "tq/Dialect/TQ/IR/TQDialect.td"
include "tq/Dialect/TQ/IR/TQEnums.td"
include "tq/Dialect/TQ/IR/TQAttrs.td"
include "tq/Dialect/TQ/IR/TQTypes.td"
include "tq/Dialect/TQ/IR/TQOps.td"

#endif // TQ_DIALECT_TQ_IR_TQ_TD
