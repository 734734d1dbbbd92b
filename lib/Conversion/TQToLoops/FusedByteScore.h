//===- FusedByteScore.h - The fused score by int8 dot products --*- C++ -*-===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDBYTESCORE_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDBYTESCORE_H

#include "VectorRowDecoder.h"

#include "tq/Conversion/TQToLoops/TQToLoops.h"

namespace mlir::tq {

namespace bytescore {

/// The one-row lane scores' layout: a token per 128-bit lane of a vector,
/// steps of 16 tokens in four groups.
inline constexpr int64_t kLaneTokens = 4;
inline constexpr int64_t kStepTokens = 16;
inline constexpr int64_t kGroups = kStepTokens / kLaneTokens;

/// The query quantised to int8 (lanes in the keys' decode order), and per
/// query row and head the factor sq * sc and per block b of the keys the
/// offset (M + 1) * sum_{j in b} q8_j (tensor<rows x heads x blocks>).
struct ByteQuery {
  Value bytes, factors, offsets;
};

/// The largest magnitude of a level byte before its offset: 127 (levels
/// in 1..255) or, narrow, 63 (levels in 1..127).
int32_t maxLevel(bool narrow);

/// Unsigned-byte levels of a codebook: round(C / sc) + M + 1, sc =
/// max |C| / M (returned), M = maxLevel(narrow), as bit patterns of
/// signed bytes.
float levelBytes(ArrayRef<float> levels, bool narrow,
                 SmallVectorImpl<int8_t> &table);

/// `query` (tensor<rows x heads x width x f32>) quantised to int8 once per
/// call, lane l holding value order[l] (where `reordered`), with the
/// factors and block offsets of ByteQuery (blocks of blockLen values,
/// levelOffset = M + 1).
ByteQuery quantiseQuery(OpBuilder &b, Location loc, Value query,
                        ArrayRef<int64_t> order, bool reordered,
                        int64_t blockLen, int64_t blocks, float levelScale,
                        int32_t levelOffset);

/// Integer block sums `exact` as f32 scores: exact * (factors * scales),
/// lane by lane, in the order every lane layout of the score rounds them
/// (so row, token and block lanes give the same scores bit for bit).
Value scaledSums(OpBuilder &b, Location loc, Value exact, Value factors,
                 Value scales);

/// A 16-lane shuffle of x and y taking, in every 128-bit lane, the 32-bit
/// lanes `lanePattern` (0-3: x's, 4-7: y's of that lane).
Value interleaveInLanes(OpBuilder &b, Location loc, Value x, Value y,
                        ArrayRef<int64_t> lanePattern);

/// `bytes` (the query bytes, tensor<rows x heads x width x i8>, width a
/// multiple of 16) copied once per group of four tokens with each run of
/// 16 bytes repeated to the four lanes: tensor<4 x rows x heads x width/16
/// x 64 x i8>. A dot's query operand is then one full-width load, where a
/// 16-byte broadcast load (vbroadcasti32x4) is a load plus a shuffle on
/// AMD Zen 4, whose shuffle pipes the level bytes' decoding already fills
/// (eight per token at four heads, head dim 128). Each group's dots read
/// their own copy: reads of one copy by all four groups are the same
/// loads, which LLVM merges into one value per query vector kept live
/// across the step's groups (64 vectors at head dim 256, four heads):
/// those spilled the groups' accumulators. Distinct copies keep each query
/// vector's life to one group, at width x heads x 16 bytes per call.
Value queryPerGroup(OpBuilder &b, Location loc, Value bytes);

/// What the one-row lane scores (token lanes, block lanes) share: the
/// query quantised with its lanes in `order` and copied per group of four
/// tokens (queryPerGroup), the scores' tensor, the level lookup, and with
/// two index planes (`lowBits` > 0: the first's bits) the masks that join
/// their fields.
struct LaneScoreInputs {
  ByteQuery query;
  Value groupQueries, scores, lowMask, highMask;
  DenseI8ArrayAttr lookup;
};
LaneScoreInputs prepareLaneScore(OpBuilder &b, Location loc, Value query,
                                 const VectorRowDecoder &codes,
                                 ArrayRef<int64_t> order, int64_t lowBits,
                                 bool narrow);

/// `scores` with the step's 16 token scores of query head `heads[hh]`,
/// `totals[hh]`, from token `t` on (the last step's past the tokens
/// dropped).
Value writeStepScores(OpBuilder &b, Location loc, Value scores,
                      ArrayRef<Value> totals, ArrayRef<Value> heads, Value t);

/// `chain` plus the int8 dots of `levels` (level vector `vector` of a
/// row) with query head `head`'s bytes of the same values, from group
/// `group`'s copy.
Value queryDot(OpBuilder &b, Location loc, const LaneScoreInputs &in,
               Value chain, Value levels, int64_t group, Value head,
               int64_t vector, bool narrow);

/// 64 level bytes: the index fields at `offsets[p]` of plane p's bytes
/// `planes[p]` gathered by tq.select_bits (two planes joined by the
/// masks), then tq.byte_lookup.
Value levelVector(OpBuilder &b, Location loc, const LaneScoreInputs &in,
                  ArrayRef<Value> planes,
                  ArrayRef<SmallVector<int8_t, 64>> offsets);

/// The lane plan of rows of `spec`: `shifts` from `shiftPlan` where
/// `wantShifts` and it fits, else `select` from `selectPlan`; the query's
/// lane order of the one taken, empty where neither fits.
template <typename ShiftT, typename SelectT, typename ShiftFn,
          typename SelectFn>
ArrayRef<int64_t>
chooseLanePlan(const ::tq::quant::FormatSpec &spec, bool wantShifts,
               ShiftFn shiftPlan, SelectFn selectPlan,
               std::optional<ShiftT> &shifts, std::optional<SelectT> &select) {
  if (wantShifts)
    shifts = shiftPlan(spec);
  if (shifts)
    return shifts->order;
  select = selectPlan(spec);
  return select ? ArrayRef<int64_t>(select->order) : ArrayRef<int64_t>();
}

/// `bytes` as 16-bit words shifted by `by` bits (right where positive):
/// each byte's bits move within it, the vacated ones taking the
/// neighbour's (vpsrlw / vpsllw).
Value shiftWords(OpBuilder &b, Location loc, Value bytes, int64_t by);

/// The lookup table of tq.byte_lookup `lookup` (an index of a 2-bit field
/// under a high bit at bit 2) for indices whose high bit is at bit 3.
DenseI8ArrayAttr highBitAtThree(OpBuilder &b, DenseI8ArrayAttr lookup);

/// A 1-bit index plane spread for shifted 2-bit fields: of each 128-bit
/// lane of `bits`, the lower (or `upper`) 8 bytes' nibbles, byte m's low
/// nibble at lane byte 2m and its high one at 2m + 1, so that bit f of
/// lane byte i is bit 4i + f of those 8 bytes; `raised` is the same two
/// bits higher (one shift down by 4, an in-lane interleave, one shift up
/// by 2).
struct SpreadBits {
  Value bits, raised;
};
SpreadBits spreadToNibbles(OpBuilder &b, Location loc, Value bits, bool upper);

/// Level vector f of `fields` (64 bytes of packed `fieldBits`-bit fields):
/// each byte's field f moved to its low bits by one shift, with `high`
/// (if any; 2-bit fields) the spread plane's bit f joined above it, at
/// bit 2 for even f (`in.lookup`) or 3 for odd (`oddLookup`), then
/// looked up.
Value shiftedLevelVector(OpBuilder &b, Location loc, const LaneScoreInputs &in,
                         DenseI8ArrayAttr oddLookup, Value fields,
                         int64_t fieldBits, int64_t f, const SpreadBits *high);

} // namespace bytescore

/// emitFusedScore's result (tensor<queries x query_heads x tokens x f32>)
/// by int8 dot products (ScoreDot::I8; see FusedByteScore.cpp), or
/// failure where the keys' format does not fit
/// (VectorRowDecoder::hasScaledCodes) or has more scale blocks than a sum
/// tree has lanes (the caller then takes the f32 score).
FailureOr<Value> emitFusedByteScore(OpBuilder &b, Location loc, Value query,
                                    const VectorRowDecoder &keys,
                                    int64_t kvHeads, int64_t group,
                                    const TQToLoopsOptions &options);

/// The same scores with each token's sum in lanes of its own
/// (TQToLoopsOptions::tokenLaneScore; see TokenLaneScore.cpp), or failure
/// where the query has several rows or the keys' planes do not fit (the
/// caller then takes the row lanes).
FailureOr<Value> emitTokenLaneScore(OpBuilder &b, Location loc, Value query,
                                    const VectorRowDecoder &keys,
                                    int64_t kvHeads, int64_t group,
                                    const TQToLoopsOptions &options);

/// The same scores for rows of short scale blocks, four blocks' sums in
/// the 32-bit lanes of a token's (see BlockLaneScore.cpp), or failure
/// where the format does not fit (emitTokenLaneScore then takes them).
/// Whether rows of `spec` fit the block lanes with shifted fields
/// (score-lanes=shifts for short blocks; see BlockLaneScore.cpp), and with
/// two index planes.
std::optional<bool> shiftQuadPlanes(const ::tq::quant::FormatSpec &spec);

FailureOr<Value> emitBlockLaneScore(OpBuilder &b, Location loc, Value query,
                                    const VectorRowDecoder &keys,
                                    int64_t kvHeads, int64_t group,
                                    const TQToLoopsOptions &options);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDBYTESCORE_H
