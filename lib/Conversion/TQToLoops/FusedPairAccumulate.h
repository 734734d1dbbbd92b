//===- FusedPairAccumulate.h - Weighted sum two tokens at a time -*- C++ -*-===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDPAIRACCUMULATE_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDPAIRACCUMULATE_H

#include "VectorRowDecoder.h"

#include "tq/Conversion/TQToLoops/TQToLoops.h"

namespace mlir::tq {

/// emitFusedAccumulate's result (probs is tensor<queries x query_heads x
/// tokens x f32>) by 16-bit pair products
/// (ValueDot::BF16 or I16; see FusedPairAccumulate.cpp), or failure
/// (nothing emitted) where the values' format does not fit the path
/// (VectorRowDecoder::hasScaledCodes: a QJL residual, no scales or
/// codebook indices, blocks or a width that are not multiples of 16).
FailureOr<Value> emitFusedPairAccumulate(OpBuilder &b, Location loc,
                                         Value probs,
                                         const VectorRowDecoder &values,
                                         int64_t kvHeads, int64_t group,
                                         const TQToLoopsOptions &options);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDPAIRACCUMULATE_H
