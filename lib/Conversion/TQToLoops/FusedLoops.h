//===- FusedLoops.h - Loops and reductions of the fused products -*- C++ -*-===//
//
// The pieces the fused score and weighted sum (FusedTileProducts,
// FusedByteScore) share: loops over a GQA group's heads, over a row's
// chunks and decode periods, over the cache rows of a tile in steps of
// decoded rows, and the shuffle tree that sums many vectors at once.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDLOOPS_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDLOOPS_H

#include "VectorRowDecoder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::tq::fused {

Value indexConst(OpBuilder &b, Location loc, int64_t v);

/// Query heads of a GQA group that one unrolled loop body serves: the
/// largest divisor of `group` no larger than `cap`. The group's blocks run
/// in a loop, so the IR's size depends on the block, never on the group
/// (the unrolled body of a 128-head MLA group would be 128 chains of
/// multiply-adds and as many tensor writes, whose bufferization analysis
/// grows with the cube of their number).
int64_t headBlock(int64_t group, int64_t cap);

/// The query heads of one block: the first's index in the cache, and in
/// kv head `kvh`'s group; heads[hh] = first + hh.
struct HeadBlock {
  Value inGroup;
  SmallVector<Value> heads;
};

/// A block body: the state after the block's heads.
using HeadBlockBody =
    function_ref<Value(OpBuilder &, Location, const HeadBlock &, Value)>;

/// Runs `body` over kv head `kvh`'s group in blocks of `block` heads,
/// carrying `state`: straight-line where one block is the whole group,
/// else a loop over the blocks.
Value forEachHeadBlock(OpBuilder &b, Location loc, Value kvh, int64_t group,
                       int64_t block, Value state, HeadBlockBody body);

/// Chunks [first, first + count) of a row from its bytes `row`,
/// `lanes` values each; a single row scale is left to the caller (it
/// scales one scalar per head instead of every value).
SmallVector<Value> decodeChunks(OpBuilder &b, Location loc,
                                const VectorRowDecoder &rows,
                                const RowBytes &row,
                                int64_t lanes, int64_t first,
                                int64_t count);

/// `x` times the scale of row (t, kvHead), bytes `row`, where decodeChunks
/// left it out.
Value applyRowScale(OpBuilder &b, Location loc, const VectorRowDecoder &rows,
                    Value x, const RowBytes &row, Value t, Value kvHead);

/// The horizontal sums of the vectors of `parts` (equal widths w, f32 or
/// integers), lane k of the result holding part k's (lanes past
/// parts.size() are zero).
/// Where n, parts.size() rounded up to a power of two (zero parts fill
/// the gap), is no larger than w, one shuffle tree serves all of them:
/// each round adds the low and high halves of every lane group of two
/// vectors into one (n - 1 adds in all), then the groups of the last
/// vector are halved until each is one lane — about 4n ops where n
/// separate reductions take about 2n log2(w).
Value sumTree(OpBuilder &b, Location loc, ArrayRef<Value> parts);

/// tensor<blocks x length x f32>: at [blk, t] the scale of block blk of
/// row (t, kvh) (VectorRowDecoder::scaleOfBlock) for t < tokens, zero
/// from there to `length`. Strided reads of the rows, once per call and
/// kv head, so the products' loops read contiguous scales.
Value blockScalesOfRows(OpBuilder &b, Location loc,
                        const VectorRowDecoder &rows, Value tokens,
                        Value length, Value kvh);

/// Lanes [first, first + count) of a 1-D vector.
Value sliceLanes(OpBuilder &b, Location loc, Value v, int64_t first,
              int64_t count);

/// The vector whose lane l is scalars[mask[l]].
Value spreadScalars(OpBuilder &b, Location loc, ArrayRef<Value> scalars,
                    ArrayRef<int64_t> mask);

/// The vector (hh, r) -> perRow[r] for `group` heads (lane hh * rows + r).
Value repeatPerHead(OpBuilder &b, Location loc, ArrayRef<Value> perRow,
                    int64_t group);

/// The vector (hh, r) -> perHead[hh] for `rows` rows (lane hh * rows + r).
Value repeatPerRow(OpBuilder &b, Location loc, ArrayRef<Value> perHead,
                   int64_t rows);

/// Rows a score step takes: up to `most` (the largest power of two not
/// above it), while their horizontal sums (perRow each, padded to a power
/// of two) fit one sum tree of `lanes` lanes. More rows per step make the
/// tree cheaper per sum and give the core independent multiply-add chains
/// to overlap.
int64_t scoreRowsPerStep(int64_t perRow, int64_t lanes, int64_t most);

Value readChunk(OpBuilder &b, Location loc, Value tensor, Value i, Value h,
                Value offset, int64_t lanes);

/// The shortest period a rolled loop takes: enough chunks for the chains
/// of multiply-adds to overlap.
constexpr int64_t kMinPeriodChunks = 8;

/// How the products visit one part of a row (its values, or its signs):
/// `periods` times `chunks` chunks, period k's values k * chunks * lanes
/// on. Every period runs the decode code of period `reference`, on the
/// row moved (k - reference) * bytes on. One period: the whole part,
/// unrolled.
struct ChunkLoop {
  int64_t periods = 1, chunks = 0, bytes = 0, reference = 0;
  /// Each index plane's stride where planes move apart (else empty).
  SmallVector<int64_t, 2> planeBytes;
  /// The chunk whose decode code decodes chunk c of every period.
  int64_t decodeChunk(int64_t c) const { return reference * chunks + c; }
};

/// Where one period starts (all null for a part visited whole).
struct PeriodStart {
  Value bytes, values;
  SmallVector<Value, 2> planeBytes;
  /// `row` from the period on.
  RowBytes of(OpBuilder &b, Location loc, const RowBytes &row) const {
    return bytes ? row.movedBy(b, loc, bytes, planeBytes) : row;
  }
  /// Value `offset` of the period, in the row (index).
  Value value(OpBuilder &b, Location loc, int64_t offset) const {
    Value at = indexConst(b, loc, offset);
    return values ? arith::AddIOp::create(b, loc, values, at).getResult() : at;
  }
};

/// The loops over a row's values and signs: whole where the row has at
/// most `maxUnrolled` chunks (or does not repeat), else by periods.
/// (Unrolled whole, a tqprod row at head dim 576, 1024 values and 1024
/// signs, took 22 s to compile.)
std::pair<ChunkLoop, ChunkLoop> chunkLoops(const VectorRowDecoder &rows,
                                           int64_t lanes,
                                           int64_t maxUnrolled);

/// Carries `state` through the periods of `loop`: `body` updates it for
/// one period. Straight-line for one period; else an scf.for, null
/// entries of `state` (chains not started) starting at zero vectors of
/// `lanes`.
SmallVector<Value>
forEachPeriod(OpBuilder &b, Location loc, const ChunkLoop &loop,
              int64_t lanes, SmallVector<Value> state,
              function_ref<void(OpBuilder &, Location, const PeriodStart &,
                                SmallVector<Value> &)>
                  body);

Value writeChunk(OpBuilder &b, Location loc, Value chunk, Value tensor,
                 Value i, Value h, Value offset);

/// for x in [0, n) carrying `init`; body returns the next state.
Value forEach(OpBuilder &b, Location loc, Value n, Value init,
              function_ref<Value(OpBuilder &, Location, Value, Value)> body);

/// out[i, h, l] = in[i, h, order[l]] for a tensor<rows x heads x width>.
Value permuteRows(OpBuilder &b, Location loc, Value in,
                  ArrayRef<int64_t> order);

/// The inverse of a lane order.
SmallVector<int64_t> inverseOrder(ArrayRef<int64_t> order);

Value splatF32(OpBuilder &b, Location loc, Value scalar, int64_t lanes);

/// One decoded row of a loop step: its token, packed bytes (for what else
/// the row carries) and value chunks (none where the body decodes them);
/// `valid` (i1) is false for the padding row of a step past the last
/// token (a repeat of the last row, whose weights the body must zero),
/// null when every row is valid.
struct DecodedRow {
  Value t, valid;
  RowBytes row;
  SmallVector<Value> chunks;
};

/// A kv head's state update with the step's decoded rows.
using RowsBody = function_ref<Value(OpBuilder &, Location, Value kvh,
                                    ArrayRef<DecodedRow> rows, Value state)>;

/// Loops (t in steps of `step`, kv head) over the cache rows of `rows`,
/// carrying `init`: each row is decoded once (every chunk, unless
/// `decode` is false: then the body decodes them where it uses them) and
/// handed to `body` with the other rows of its step, and the same rows of
/// the next range are prefetched meanwhile.
Value forEachDecodedRows(OpBuilder &b, Location loc, VectorRowDecoder &rows,
                         int64_t kvHeads, int64_t lanes, int64_t step,
                         Value init, RowsBody body, bool decode = true);

} // namespace mlir::tq::fused

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_FUSEDLOOPS_H
