//===- VectorGather.h - Whole-row vector decode of packed rows --*- C++ -*-===//
//
// Decodes a cache to the rotated domain one row at a time with vector ops:
// the row's bytes are read as one vector, every bit plane is expanded to
// one lane per value by a constant shuffle, shifted and masked with
// constant per-lane amounts, and the centroid is picked by a binary select
// tree over the (at most 16) codebook levels (one bit test per index bit),
// then scaled. LLVM turns
// this into SIMD code, where the element-wise loop nest stays scalar.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_VECTORGATHER_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_VECTORGATHER_H

#include "RowDecoding.h"

namespace mlir::tq {

/// tensor<tokens x kv_heads x padded x f32>: scale * C[idx] for formats
/// whose values are exactly that (tq3_0, tq3_0_legacy, turbo, polar) with
/// at most 16 codebook levels, d * int8 for q8_0, the halves of f16;
/// failure for the others (haar4, tqprod: the caller falls back to the
/// element-wise lowering). `decoder` must be precomputed.
FailureOr<Value> emitVectorGather(OpBuilder &b, Location loc,
                                  const RowDecoder &decoder, int64_t kvHeads);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_VECTORGATHER_H
