//===- AmxTileProducts.h - Prefill products on AMX tiles --------*- C++ -*-===//
//
// With several query rows (prefill) a tile's score and weighted sum are
// matrix products of a kv head's query rows with the tile's decoded rows;
// where the CPU has AMX-BF16 they run as tdpbf16ps on 16x16 f32 tiles,
// over the rows decoded once per tile to bf16 in the layouts tiles load.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_AMXTILEPRODUCTS_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_AMXTILEPRODUCTS_H

#include "VectorRowDecoder.h"

namespace mlir::tq {

/// Whether the AMX products serve `rows` (a VectorRowDecoder of the
/// tile's cache) for an operand of `queryRows` query rows (dynamic:
/// ShapedType::kDynamic): several query rows, a width of whole 32-value
/// tile columns, no QJL residual.
bool amxTilesApply(const VectorRowDecoder &rows, int64_t queryRows);

/// emitFusedScore's scores, by AMX tiles (bf16 queries and keys, f32
/// sums); failure where amxTilesApply does not hold.
FailureOr<Value> emitAmxScore(OpBuilder &b, Location loc, Value query,
                              VectorRowDecoder &keys, int64_t kvHeads,
                              int64_t group);

/// emitFusedAccumulate's weighted sums, by AMX tiles (bf16 weights and
/// values, f32 sums); failure where amxTilesApply does not hold.
FailureOr<Value> emitAmxAccumulate(OpBuilder &b, Location loc, Value probs,
                                   VectorRowDecoder &values, int64_t kvHeads,
                                   int64_t group);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_AMXTILEPRODUCTS_H
