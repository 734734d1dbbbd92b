//===- FusedTileProducts.h - Products over decoded rows ---------*- C++ -*-===//
//
// The two products of a flash-attention tile with each packed K / V row
// decoded once, in vector registers, and used straight away by every query
// row and every query head of its GQA group: no decoded tile is written to
// memory and read back (the `tile` lookup's gather + dense product).
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDTILEPRODUCTS_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDTILEPRODUCTS_H

#include "VectorRowDecoder.h"

#include "tq/Conversion/TQToLoops/TQToLoops.h"

namespace mlir::tq {

/// Lanes per vector chunk of a row of `width` values (16 where it divides
/// the width, else 8, else the whole row).
int64_t fusedChunkLanes(int64_t width);

/// scores[i, h, t] = <query[i, h, :], K(t, h / group)>: tensor<queries x
/// query_heads x tokens x f32>. `query` is tensor<queries x query_heads x
/// width x f32> with query_heads = kvHeads * group. With a QJL residual
/// (tqprod) the score adds scale * ||r|| * sqrt(pi/2)/m * <S q, sign>, S q
/// computed once per call.
/// A row of more than `options.maxUnrolledChunks` vector chunks (values
/// and signs) is visited by decode periods (VectorRowDecoder::DecodePeriod),
/// a loop over them with one unrolled, where the row has them; a step
/// takes at most `options.scoreRows` rows.
Value emitFusedScore(OpBuilder &b, Location loc, Value query,
                     VectorRowDecoder &keys, int64_t kvHeads, int64_t group,
                     const TQToLoopsOptions &options);

/// out[i, h, :] = sum_t probs[i, h, t] V(t, h / group): tensor<queries x
/// query_heads x width x f32>. With one (static) query row the output
/// stays in registers across the tokens, a few chunks of the row at a
/// time; otherwise (or with a QJL residual, whose signs are summed next to
/// the values and projected by S^T once per call) each decoded row updates
/// every query row in memory.
/// One query row keeps `options.accumulators` vectors per token loop.
Value emitFusedAccumulate(OpBuilder &b, Location loc, Value probs,
                          VectorRowDecoder &values, int64_t kvHeads,
                          int64_t group, const TQToLoopsOptions &options);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDTILEPRODUCTS_H
