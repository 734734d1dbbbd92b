//===- QjlLowering.h - The QJL residual's shared IR pieces ------*- C++ -*-===//
//
// tqprod rows carry a 1-bit QJL sketch of their residual. Every lowering
// that reads them (element-wise and fused) uses the same constant, the
// same projection matrix S and the same S q of the queries.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_QJLLOWERING_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_QJLLOWERING_H

#include "tq/Quant/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::tq {

/// sqrt(pi/2) / m, the QJL estimator's constant (spec.qjl must be set).
float qjlConstant(const ::tq::quant::FormatSpec &spec);

/// The QJL projection S (m x dim) as a constant tensor.
Value qjlMatrix(OpBuilder &b, Location loc,
                const ::tq::quant::FormatSpec &spec);

/// S q of every query row and head: tensor<rows x heads x m> from
/// tensor<rows x heads x dim> (loops (i, h, r, d)).
Value projectQueriesByQjl(OpBuilder &b, Location loc, Value queries,
                          const ::tq::quant::FormatSpec &spec);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_QJLLOWERING_H
