//===- FusedByteScore.h - The fused score by int8 dot products --*- C++ -*-===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDBYTESCORE_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDBYTESCORE_H

#include "VectorRowDecoder.h"

#include "tq/Conversion/TQToLoops/TQToLoops.h"

namespace mlir::tq {

/// emitFusedScore's result (tensor<queries x query_heads x tokens x f32>)
/// by int8 dot products (ScoreDot::I8; see FusedByteScore.cpp), or
/// failure where the keys' format does not fit
/// (VectorRowDecoder::hasScaledCodes) or has more scale blocks than a sum
/// tree has lanes (the caller then takes the f32 score).
FailureOr<Value> emitFusedByteScore(OpBuilder &b, Location loc, Value query,
                                    const VectorRowDecoder &keys,
                                    int64_t kvHeads, int64_t group,
                                    const TQToLoopsOptions &options);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDBYTESCORE_H
