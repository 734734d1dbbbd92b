//===- FusedTileProducts.cpp - Products over rows decoded in registers ----===//

#include "FusedTileProducts.h"

#include "LoopBuilders.h"
#include "QjlLowering.h"
#include "RowDecoding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tq;

namespace {

Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Query heads of a GQA group that one unrolled loop body serves: the
/// largest divisor of `group` no larger than `cap`. The group's blocks run
/// in a loop, so the IR's size depends on the block, never on the group
/// (the unrolled body of a 128-head MLA group would be 128 chains of
/// multiply-adds and as many tensor writes, whose bufferization analysis
/// grows with the cube of their number).
int64_t headBlock(int64_t group, int64_t cap) {
  for (int64_t block = std::min(group, cap); block > 1; --block)
    if (group % block == 0)
      return block;
  return 1;
}

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
                       int64_t block, Value state, HeadBlockBody body) {
  auto run = [&](OpBuilder &b, Location loc, Value inGroup, Value state) {
    HeadBlock heads;
    heads.inGroup = inGroup;
    Value first = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, kvh, indexConst(b, loc, group)),
        inGroup);
    for (int64_t hh = 0; hh < block; ++hh)
      heads.heads.push_back(
          hh == 0 ? first
                  : arith::AddIOp::create(b, loc, first, indexConst(b, loc, hh))
                        .getResult());
    return body(b, loc, heads, state);
  };
  if (block == group)
    return run(b, loc, indexConst(b, loc, 0), state);
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), indexConst(b, loc, group),
      indexConst(b, loc, block), ValueRange{state},
      [&](OpBuilder &b, Location loc, Value inGroup, ValueRange state) {
        scf::YieldOp::create(b, loc, run(b, loc, inGroup, state[0]));
      });
  return loop.getResult(0);
}

/// Chunks [first, first + count) of a row from its bytes `row`,
/// `lanes` values each; a single row scale is left to the caller (it
/// scales one scalar per head instead of every value).
SmallVector<Value> decodeChunks(OpBuilder &b, Location loc,
                                const VectorRowDecoder &rows,
                                const RowBytes &row,
                                int64_t lanes, int64_t first,
                                int64_t count) {
  SmallVector<Value> chunks;
  for (int64_t c = first; c < first + count; ++c)
    chunks.push_back(rows.decode(b, loc, row, c * lanes, lanes,
                                 /*applyScale=*/!rows.hasRowScale()));
  return chunks;
}

/// `x` times the scale of row (t, kvHead), bytes `row`, where decodeChunks
/// left it out.
Value applyRowScale(OpBuilder &b, Location loc, const VectorRowDecoder &rows,
                    Value x, const RowBytes &row, Value t, Value kvHead) {
  if (!rows.hasRowScale())
    return x;
  return arith::MulFOp::create(b, loc, x,
                               rows.rowScale(b, loc, row, t, kvHead));
}

/// The horizontal sums of the vectors of `parts` (equal widths w), lane k
/// of the result holding part k's (lanes past parts.size() are zero).
/// Where n, parts.size() rounded up to a power of two (zero parts fill
/// the gap), is no larger than w, one shuffle tree serves all of them:
/// each round adds the low and high halves of every lane group of two
/// vectors into one (n - 1 adds in all), then the groups of the last
/// vector are halved until each is one lane — about 4n ops where n
/// separate reductions take about 2n log2(w).
Value sumTree(OpBuilder &b, Location loc, ArrayRef<Value> parts) {
  const int64_t w = cast<VectorType>(parts.front().getType()).getDimSize(0);
  const int64_t n = int64_t(llvm::PowerOf2Ceil(uint64_t(parts.size())));
  if (n == 1 || n > w) {
    SmallVector<Value> sums;
    for (Value part : parts)
      sums.push_back(vector::ReductionOp::create(
          b, loc, vector::CombiningKind::ADD, part,
          arith::FastMathFlags::reassoc));
    return vector::FromElementsOp::create(
        b, loc, VectorType::get({int64_t(sums.size())}, b.getF32Type()),
        sums);
  }
  // Lanes [g * size + from, g * size + from + len) of every group g of
  // `groups` groups of `size` lanes, from operand `operand` (0 or 1).
  auto lanesOf = [](SmallVector<int64_t> &mask, int64_t operand,
                    int64_t width, int64_t groups, int64_t size,
                    int64_t from, int64_t len) {
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t l = 0; l < len; ++l)
        mask.push_back(operand * width + g * size + from + l);
  };
  SmallVector<Value> level(parts);
  // Zero parts fill the tree up to a power of two.
  if (int64_t(level.size()) < n)
    level.resize(n, arith::ConstantOp::create(
                        b, loc,
                        DenseElementsAttr::get(
                            cast<VectorType>(parts.front().getType()),
                            0.0f)));
  int64_t groups = 1;
  while (level.size() > 1) {
    const int64_t size = w / groups, half = size / 2;
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2) {
      SmallVector<int64_t> lo, hi;
      for (int64_t operand : {0, 1}) {
        lanesOf(lo, operand, w, groups, size, 0, half);
        lanesOf(hi, operand, w, groups, size, half, half);
      }
      Value a = vector::ShuffleOp::create(b, loc, level[i], level[i + 1], lo);
      Value c = vector::ShuffleOp::create(b, loc, level[i], level[i + 1], hi);
      next.push_back(arith::AddFOp::create(b, loc, a, c));
    }
    level = std::move(next);
    groups *= 2;
  }
  // One vector of n groups (part k's partial sums in group k).
  Value v = level.front();
  for (int64_t size = w / n; size > 1; size /= 2) {
    const int64_t width = n * size;
    SmallVector<int64_t> lo, hi;
    lanesOf(lo, 0, width, n, size, 0, size / 2);
    lanesOf(hi, 0, width, n, size, size / 2, size / 2);
    Value low = vector::ShuffleOp::create(b, loc, v, v, lo);
    Value high = vector::ShuffleOp::create(b, loc, v, v, hi);
    v = arith::AddFOp::create(b, loc, low, high);
  }
  return v;
}

/// Lanes [first, first + count) of a 1-D vector.
Value sliceLanes(OpBuilder &b, Location loc, Value v, int64_t first,
              int64_t count) {
  if (first == 0 && cast<VectorType>(v.getType()).getDimSize(0) == count)
    return v;
  return vector::ExtractStridedSliceOp::create(
      b, loc, v, ArrayRef<int64_t>{first}, ArrayRef<int64_t>{count},
      ArrayRef<int64_t>{1});
}

/// The vector (hh, r) -> perRow[r] for `group` heads (lane hh * rows + r).
Value repeatPerHead(OpBuilder &b, Location loc, ArrayRef<Value> perRow,
                    int64_t group) {
  const int64_t rows = perRow.size();
  Value packed = vector::FromElementsOp::create(
      b, loc, VectorType::get({rows}, b.getF32Type()), perRow);
  SmallVector<int64_t> mask;
  for (int64_t hh = 0; hh < group; ++hh)
    for (int64_t r = 0; r < rows; ++r)
      mask.push_back(r);
  return vector::ShuffleOp::create(b, loc, packed, packed, mask);
}

/// Rows a score step takes: up to `most` (the largest power of two not
/// above it), while their horizontal sums (perRow each, padded to a power
/// of two) fit one sum tree of `lanes` lanes. More rows per step make the
/// tree cheaper per sum and give the core independent multiply-add chains
/// to overlap.
int64_t scoreRowsPerStep(int64_t perRow, int64_t lanes, int64_t most) {
  const int64_t padded = int64_t(llvm::PowerOf2Ceil(uint64_t(perRow)));
  int64_t step = 1;
  while (2 * step <= most && 2 * step * padded <= lanes)
    step *= 2;
  return step;
}

Value readChunk(OpBuilder &b, Location loc, Value tensor, Value i, Value h,
                Value offset, int64_t lanes) {
  Value zero = f32Const(b, loc, 0.0f);
  return vector::TransferReadOp::create(
      b, loc, VectorType::get({lanes}, b.getF32Type()), tensor,
      ValueRange{i, h, offset}, zero, ArrayRef<bool>{true});
}

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
                                           int64_t maxUnrolled) {
  ChunkLoop values{1, rows.width() / lanes, 0, 0, {}};
  ChunkLoop signs{1, rows.qjlRows() / lanes, 0, 0, {}};
  if (values.chunks + signs.chunks <= maxUnrolled)
    return {values, signs};
  const int64_t minValues = kMinPeriodChunks * lanes;
  if (auto period = rows.valuePeriod(lanes, minValues))
    values = {rows.width() / period->values, period->values / lanes,
              period->bytes, period->reference, period->planeBytes};
  if (auto period = rows.signPeriod(lanes, minValues))
    signs = {rows.qjlRows() / period->values, period->values / lanes,
             period->bytes, period->reference, {}};
  return {values, signs};
}

/// Carries `state` through the periods of `loop`: `body` updates it for
/// one period. Straight-line for one period; else an scf.for, null
/// entries of `state` (chains not started) starting at zero vectors of
/// `lanes`.
SmallVector<Value>
forEachPeriod(OpBuilder &b, Location loc, const ChunkLoop &loop,
              int64_t lanes, SmallVector<Value> state,
              function_ref<void(OpBuilder &, Location, const PeriodStart &,
                                SmallVector<Value> &)>
                  body) {
  if (loop.periods == 1) {
    body(b, loc, PeriodStart{}, state);
    return state;
  }
  for (Value &v : state)
    if (!v)
      v = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(VectorType::get({lanes}, b.getF32Type()),
                                 0.0f));
  auto periods = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), indexConst(b, loc, loop.periods),
      indexConst(b, loc, 1), state,
      [&](OpBuilder &b, Location loc, Value k, ValueRange carried) {
        // (k - reference) * stride.
        auto moved = [&](int64_t stride) -> Value {
          Value bytes =
              arith::MulIOp::create(b, loc, k, indexConst(b, loc, stride));
          if (!loop.reference)
            return bytes;
          return arith::SubIOp::create(
              b, loc, bytes, indexConst(b, loc, loop.reference * stride));
        };
        SmallVector<Value, 2> planeBytes;
        // (Planes that all move with the row need no bases of their own.)
        if (llvm::any_of(loop.planeBytes,
                         [&](int64_t s) { return s != loop.bytes; }))
          for (int64_t stride : loop.planeBytes)
            planeBytes.push_back(moved(stride));
        PeriodStart start{
            moved(loop.bytes),
            arith::MulIOp::create(b, loc, k,
                                  indexConst(b, loc, loop.chunks * lanes)),
            planeBytes};
        SmallVector<Value> next(carried.begin(), carried.end());
        body(b, loc, start, next);
        scf::YieldOp::create(b, loc, next);
      });
  return SmallVector<Value>(periods.getResults());
}

Value writeChunk(OpBuilder &b, Location loc, Value chunk, Value tensor,
                 Value i, Value h, Value offset) {
  return vector::TransferWriteOp::create(b, loc, chunk, tensor,
                                         ValueRange{i, h, offset},
                                         ArrayRef<bool>{true})
      .getResult();
}

/// for x in [0, n) carrying `init`; body returns the next state.
Value forEach(OpBuilder &b, Location loc, Value n, Value init,
              function_ref<Value(OpBuilder &, Location, Value, Value)> body) {
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), n, indexConst(b, loc, 1),
      ValueRange{init},
      [&](OpBuilder &b, Location loc, Value x, ValueRange state) {
        scf::YieldOp::create(b, loc, body(b, loc, x, state[0]));
      });
  return loop.getResult(0);
}

/// out[i, h, l] = in[i, h, order[l]] for a tensor<rows x heads x width>.
Value permuteRows(OpBuilder &b, Location loc, Value in,
                  ArrayRef<int64_t> order) {
  auto type = cast<RankedTensorType>(in.getType());
  const int64_t width = type.getDimSize(2);
  auto rowType = VectorType::get({width}, b.getF32Type());
  Value out = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, in, 0), sizeOf(b, loc, in, 1),
                                b.getIndexAttr(width)},
      b.getF32Type());
  Value c0 = indexConst(b, loc, 0);
  return forEach(
      b, loc, tensor::DimOp::create(b, loc, in, 0), out,
      [&](OpBuilder &b, Location loc, Value i, Value out) {
        return forEach(
            b, loc, tensor::DimOp::create(b, loc, in, 1), out,
            [&](OpBuilder &b, Location loc, Value h, Value out) {
              Value row = vector::TransferReadOp::create(
                  b, loc, rowType, in, ValueRange{i, h, c0},
                  f32Const(b, loc, 0.0f), ArrayRef<bool>{true});
              Value permuted =
                  vector::ShuffleOp::create(b, loc, row, row, order);
              return vector::TransferWriteOp::create(
                         b, loc, permuted, out, ValueRange{i, h, c0},
                         ArrayRef<bool>{true})
                  .getResult();
            });
      });
}

/// The inverse of a lane order.
SmallVector<int64_t> inverseOrder(ArrayRef<int64_t> order) {
  SmallVector<int64_t> inverse(order.size());
  for (size_t l = 0; l < order.size(); ++l)
    inverse[order[l]] = int64_t(l);
  return inverse;
}

Value splatF32(OpBuilder &b, Location loc, Value scalar, int64_t lanes) {
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({lanes}, b.getF32Type()), scalar);
}

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
                         Value init, RowsBody body, bool decode = true) {
  const CacheAccess &access = rows.rowDecoder().access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  rows.computeRowFactors(b, loc, kvHeads);
  Value prefetch = rows.prefetchBuffer(b, loc);
  const int64_t numChunks = rows.width() / lanes;
  Value last = arith::SubIOp::create(b, loc, tokens, indexConst(b, loc, 1));
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), tokens, indexConst(b, loc, step),
      ValueRange{init},
      [&](OpBuilder &b, Location loc, Value t0, ValueRange state) {
        Value next = forEach(
            b, loc, indexConst(b, loc, kvHeads), state[0],
            [&](OpBuilder &b, Location loc, Value kvh, Value state) {
              SmallVector<DecodedRow> decoded;
              for (int64_t k = 0; k < step; ++k) {
                DecodedRow r;
                r.t = t0;
                if (k > 0) {
                  Value t = arith::AddIOp::create(b, loc, t0,
                                                  indexConst(b, loc, k));
                  r.valid = arith::CmpIOp::create(
                      b, loc, arith::CmpIPredicate::ult, t, tokens);
                  r.t = arith::MinUIOp::create(b, loc, t, last);
                }
                rows.prefetchNextRange(b, loc, prefetch, r.t, kvh);
                r.row = rows.rowBytes(b, loc, r.t, kvh);
                if (decode)
                  r.chunks =
                      decodeChunks(b, loc, rows, r.row, lanes, 0, numChunks);
                decoded.push_back(std::move(r));
              }
              return body(b, loc, kvh, decoded, state);
            });
        scf::YieldOp::create(b, loc, next);
      });
  return loop.getResult(0);
}

} // namespace

int64_t mlir::tq::fusedChunkLanes(int64_t width) {
  for (int64_t lanes : {16, 8})
    if (width % lanes == 0)
      return lanes;
  return width;
}

Value mlir::tq::emitFusedScore(OpBuilder &b, Location loc, Value query,
                               VectorRowDecoder &keys, int64_t kvHeads,
                               int64_t group,
                               const TQToLoopsOptions &options) {
  const CacheAccess &access = keys.rowDecoder().access();
  const int64_t width = keys.width(), lanes = fusedChunkLanes(width);
  Value queries = tensor::DimOp::create(b, loc, query, 0);
  // tqprod: S q of every query head (row order), for <S q, sign>.
  Value projected;
  auto [valueLoop, signLoop] = chunkLoops(keys, lanes, options.maxUnrolledChunks);
  if (keys.hasQjl())
    // (Loop-invariant in a flash loop: LICM lifts it out.)
    projected = projectQueriesByQjl(b, loc, query, keys.rowDecoder().spec());
  // The keys' lanes in their decode order (once per call).
  if (keys.isReordered())
    query = permuteRows(b, loc, query, keys.laneOrder());
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, query, 0),
                                sizeOf(b, loc, query, 1), access.numTokens},
      b.getF32Type());
  // Loops (t in steps of `step`, kv head, i): each row is decoded once for
  // all query rows and heads; every score is one chain of multiply-adds
  // over the chunks, and the step's chains share one horizontal-sum tree.
  // A block of at most one vector's lanes of heads per unrolled body (the
  // step's sums share one tree).
  const int64_t block = headBlock(group, lanes);
  const int64_t perRow = block * (keys.hasQjl() ? 2 : 1);
  const bool oneQueryRow =
      cast<RankedTensorType>(query.getType()).getDimSize(0) == 1;
  const int64_t step = scoreRowsPerStep(perRow, lanes, options.scoreRows);
  return forEachDecodedRows(
      b, loc, keys, kvHeads, lanes, step, init,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value scores) {
        // A row's signs, decoded before the query loop where they are
        // visited whole (else per period, in it).
        SmallVector<SmallVector<Value>> signs(rows.size());
        SmallVector<Value> qjlWeights;
        for (auto [r, row] : llvm::enumerate(rows)) {
          for (int64_t c = 0; signLoop.periods == 1 && c < signLoop.chunks;
               ++c)
            signs[r].push_back(
                keys.decodeSigns(b, loc, row.row, c * lanes, lanes));
          if (keys.hasQjl())
            qjlWeights.push_back(keys.qjlWeight(b, loc, row.row));
        }
        return forEach(
            b, loc, queries, scores,
            [&](OpBuilder &b, Location loc, Value i, Value scores) {
              return forEachHeadBlock(
                  b, loc, kvh, group, block, scores,
                  [&](OpBuilder &b, Location loc, const HeadBlock &blockHeads,
                      Value scores) {
                    ArrayRef<Value> heads = blockHeads.heads;
                    // Per row, one chain per head over the values, then
                    // (tqprod) one per head over the signs; one sum tree for
                    // all of them. Chunk by chunk: the step's rows decode chunk
                    // c, which goes straight into every chain, so the chains
                    // stay in registers and a decoded chunk lives briefly.
                    // Chain hh * step + r: head hh's product with row r.
                    auto addChunk = [&](OpBuilder &b, Location loc,
                                        SmallVector<Value> &chains,
                                        int64_t slot, Value x, Value y) {
                      chains[slot] =
                          chains[slot]
                              ? vector::FMAOp::create(b, loc, x, y,
                                                      chains[slot])
                                    .getResult()
                              : arith::MulFOp::create(b, loc, x, y).getResult();
                    };
                    SmallVector<Value> dots = forEachPeriod(
                        b, loc, valueLoop, lanes,
                        SmallVector<Value>(block * step),
                        [&](OpBuilder &b, Location loc,
                            const PeriodStart &start,
                            SmallVector<Value> &chains) {
                          for (int64_t c = 0; c < valueLoop.chunks; ++c) {
                            Value offset = start.value(b, loc, c * lanes);
                            SmallVector<Value> qc;
                            for (Value h : heads)
                              qc.push_back(readChunk(b, loc, query, i, h,
                                                     offset, lanes));
                            for (auto [r, row] : llvm::enumerate(rows)) {
                              Value kc =
                                  row.chunks.empty()
                                      ? decodeChunks(b, loc, keys,
                                                     start.of(b, loc, row.row),
                                                     lanes,
                                                     valueLoop.decodeChunk(c),
                                                     1)[0]
                                      : row.chunks[c];
                              for (int64_t hh = 0; hh < block; ++hh)
                                addChunk(b, loc, chains, hh * step + r,
                                         qc[hh], kc);
                            }
                          }
                        });
                    if (keys.hasQjl())
                      llvm::append_range(
                          dots,
                          forEachPeriod(
                              b, loc, signLoop, lanes,
                              SmallVector<Value>(block * step),
                              [&](OpBuilder &b, Location loc,
                                  const PeriodStart &start,
                                  SmallVector<Value> &chains) {
                                for (int64_t c = 0; c < signLoop.chunks; ++c) {
                                  SmallVector<Value> sc;
                                  for (auto [r, row] : llvm::enumerate(rows))
                                    sc.push_back(
                                        signs[r].empty()
                                            ? keys.decodeSigns(
                                                  b, loc,
                                                  start.of(b, loc, row.row),
                                                  signLoop.decodeChunk(c) *
                                                      lanes,
                                                  lanes)
                                            : signs[r][c]);
                                  Value offset =
                                      start.value(b, loc, c * lanes);
                                  for (int64_t hh = 0; hh < block; ++hh) {
                                    Value pc = readChunk(b, loc, projected, i,
                                                         heads[hh], offset,
                                                         lanes);
                                    for (size_t r = 0; r < rows.size(); ++r)
                                      addChunk(b, loc, chains, hh * step + r,
                                               pc, sc[r]);
                                  }
                                }
                              }));
                    // Lane hh * step + r: head hh's score of row r, so each
                    // head's scores of the step are consecutive tokens, scaled
                    // and written as one vector (the write is masked past the
                    // tile's last token, where padding rows repeat it).
                    Value total = sumTree(b, loc, dots);
                    const int64_t valueLanes = block * step;
                    Value sums = sliceLanes(b, loc, total, 0, valueLanes);
                    if (keys.hasQjl())
                      sums = arith::AddFOp::create(
                          b, loc, sums,
                          arith::MulFOp::create(
                              b, loc,
                              sliceLanes(b, loc, total, valueLanes, valueLanes),
                              repeatPerHead(b, loc, qjlWeights, block)));
                    if (keys.hasRowScale()) {
                      SmallVector<Value> scales;
                      for (const DecodedRow &row : rows)
                        scales.push_back(
                            keys.rowScale(b, loc, row.row, row.t, kvh));
                      sums = arith::MulFOp::create(
                          b, loc, sums, repeatPerHead(b, loc, scales, block));
                    }
                    for (int64_t hh = 0; hh < block; ++hh)
                      scores =
                          vector::TransferWriteOp::create(
                              b, loc, sliceLanes(b, loc, sums, hh * step, step),
                              scores, ValueRange{i, heads[hh], rows[0].t},
                              ArrayRef<bool>{step == 1})
                              .getResult();
                    return scores;
                  });
            });
      },
      // One query row (decode kernels) decodes in the chain loop, chunk by
      // chunk; several (prefill) decode each row once, outside the loop
      // over the query rows, unless the row is visited by periods (then
      // each query row decodes it again: compile time over speed at such
      // widths).
      /*decode=*/!oneQueryRow && valueLoop.periods == 1);
}

namespace {

/// tensor<group x tokens>: probs[0, kvh * group + hh, t] times the scale
/// of row (t, kvh), for a format whose decoding leaves the row scale out.
Value scaledWeights(OpBuilder &b, Location loc, Value probs,
                    const VectorRowDecoder &values, Value tokens, Value kvh,
                    int64_t group) {
  assert(values.hasRowScale() && "the weights are the probabilities");
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{b.getIndexAttr(group),
                                getAsOpFoldResult(tokens)},
      b.getF32Type());
  Value c0 = indexConst(b, loc, 0);
  // The rows' scales first (strided reads of the rows), then the
  // products over contiguous tokens, which vectorise.
  Value scales = forEach(
      b, loc, tokens,
      tensor::EmptyOp::create(
          b, loc, SmallVector<OpFoldResult>{getAsOpFoldResult(tokens)},
          b.getF32Type()),
      [&](OpBuilder &b, Location loc, Value t, Value scales) {
        RowBytes row = values.rowBytes(b, loc, t, kvh);
        return tensor::InsertOp::create(
                   b, loc, values.rowScale(b, loc, row, t, kvh), scales,
                   ValueRange{t})
            .getResult();
      });
  Value first = arith::MulIOp::create(b, loc, kvh, indexConst(b, loc, group));
  return forEach(
      b, loc, indexConst(b, loc, group), init,
      [&](OpBuilder &b, Location loc, Value hh, Value weights) {
        Value h = arith::AddIOp::create(b, loc, first, hh);
        return forEach(
            b, loc, tokens, weights,
            [&](OpBuilder &b, Location loc, Value t, Value weights) {
              Value p = tensor::ExtractOp::create(b, loc, probs,
                                                  ValueRange{c0, h, t});
              Value scale =
                  tensor::ExtractOp::create(b, loc, scales, ValueRange{t});
              return tensor::InsertOp::create(
                         b, loc, arith::MulFOp::create(b, loc, p, scale),
                         weights, ValueRange{hh, t})
                  .getResult();
            });
      });
}

/// Writes chunk `chunks[hh]` of every head of `heads` to
/// out[0, heads[hh], offset ...]: one 2-D write for the block (one write per
/// head would make a chain of tensor writes as long as the group).
Value writeHeadChunks(OpBuilder &b, Location loc, ArrayRef<Value> chunks,
                      Value out, const HeadBlock &heads, Value offset) {
  Value c0 = indexConst(b, loc, 0);
  if (chunks.size() == 1)
    return writeChunk(b, loc, chunks[0], out, c0, heads.heads[0], offset);
  auto chunkType = cast<VectorType>(chunks[0].getType());
  auto tileType = VectorType::get(
      {int64_t(chunks.size()), chunkType.getDimSize(0)}, b.getF32Type());
  Value tile =
      arith::ConstantOp::create(b, loc, DenseElementsAttr::get(tileType, 0.0f));
  for (auto [hh, chunk] : llvm::enumerate(chunks))
    tile = vector::InsertOp::create(b, loc, chunk, tile,
                                    ArrayRef<int64_t>{int64_t(hh)});
  return vector::TransferWriteOp::create(
             b, loc, tile, out,
             ValueRange{c0, heads.heads[0], offset},
             ArrayRef<bool>{true, true})
      .getResult();
}

/// One query row: a few chunks of every head's output stay in
/// loop-carried vectors while the tokens stream by. The chunks are the
/// row's value chunks then, with a QJL residual, its sign chunks (output
/// lanes [width, width + m): sign sums weighted by ||r|| sqrt(pi/2)/m).
Value accumulateInRegisters(OpBuilder &b, Location loc, Value probs,
                            VectorRowDecoder &values, Value out,
                            Value tokens, int64_t kvHeads, int64_t group,
                            int64_t lanes, const TQToLoopsOptions &options) {
  auto [valueLoop, signLoop] =
      chunkLoops(values, lanes, options.maxUnrolledChunks);
  // (AVX-512 has 32 vector registers; the decoded chunks need the rest.)
  const int64_t budget = options.accumulators;
  // Heads whose accumulators share a token loop; larger groups loop over
  // such blocks.
  const int64_t block = headBlock(group, budget);
  Value c0 = indexConst(b, loc, 0);
  values.computeRowFactors(b, loc, kvHeads);
  Value prefetch = values.prefetchBuffer(b, loc);
  return forEach(
      b, loc, indexConst(b, loc, kvHeads), out,
      [&](OpBuilder &b, Location loc, Value kvh, Value out) {
        // Each head's weights times the rows' scales, once for all passes
        // (the passes then broadcast a weight straight from memory);
        // without a row scale the probabilities are the weights.
        Value weights =
            values.hasRowScale()
                ? scaledWeights(b, loc, probs, values, tokens, kvh, group)
                : Value();
        return forEachHeadBlock(
            b, loc, kvh, group, block, out,
            [&](OpBuilder &b, Location loc, const HeadBlock &blockHeads,
                Value out) {
              ArrayRef<Value> heads = blockHeads.heads;
              auto weightOf = [&](OpBuilder &b, Location loc, int64_t hh,
                                  Value t) -> Value {
                if (weights)
                  return tensor::ExtractOp::create(
                      b, loc, weights,
                      ValueRange{arith::AddIOp::create(b, loc,
                                                       blockHeads.inGroup,
                                                       indexConst(b, loc, hh)),
                                 t});
                return tensor::ExtractOp::create(b, loc, probs,
                                                 ValueRange{c0, heads[hh], t});
              };
              // Passes over some of the row's chunks (values at output
              // lane c * lanes, signs at width + c * lanes, both moved to
              // the period at `start`): each pass is a token loop over a
              // few chunks, its accumulators in registers.
              struct PassChunk {
                bool sign;
                int64_t chunk;
              };
              auto runPasses = [&](OpBuilder &b, Location loc, Value out,
                                   ArrayRef<PassChunk> items,
                                   const PeriodStart &start) {
                const int64_t perPass = std::clamp<int64_t>(
                    budget / block, 1, items.size());
                for (int64_t first = 0; first < int64_t(items.size());
                     first += perPass) {
                  ArrayRef<PassChunk> pass = items.slice(
                      first, std::min<int64_t>(perPass, items.size() - first));
                  const int64_t count = pass.size();
                  const bool anySign = llvm::any_of(
                      pass, [](const PassChunk &c) { return c.sign; });
                  // Accumulator (hh, c) at hh * count + c.
                  SmallVector<Value> zeros(
                      block * count,
                      splatF32(b, loc, f32Const(b, loc, 0.0f), lanes));
                  auto loop = scf::ForOp::create(
                      b, loc, c0, tokens, indexConst(b, loc, 1), zeros,
                      [&](OpBuilder &b, Location loc, Value t,
                          ValueRange accs) {
                        if (first == 0 && !pass.front().sign)
                          values.prefetchNextRange(b, loc, prefetch, t, kvh);
                        RowBytes row = values.rowBytes(b, loc, t, kvh);
                        RowBytes moved = start.of(b, loc, row);
                        SmallVector<Value> v;
                        for (const PassChunk &c : pass)
                          v.push_back(
                              c.sign
                                  ? values.decodeSigns(
                                        b, loc, moved,
                                        signLoop.decodeChunk(c.chunk) * lanes,
                                        lanes)
                                  : decodeChunks(b, loc, values, moved, lanes,
                                                 valueLoop.decodeChunk(c.chunk),
                                                 1)[0]);
                        Value signWeight =
                            anySign ? values.qjlWeight(b, loc, row) : Value();
                        SmallVector<Value> next;
                        for (int64_t hh = 0; hh < block; ++hh) {
                          Value p = weightOf(b, loc, hh, t);
                          Value weight = splatF32(b, loc, p, lanes);
                          Value signW =
                              anySign ? splatF32(b, loc,
                                                 arith::MulFOp::create(
                                                     b, loc, p, signWeight),
                                                 lanes)
                                      : Value();
                          for (int64_t c = 0; c < count; ++c)
                            next.push_back(vector::FMAOp::create(
                                b, loc, pass[c].sign ? signW : weight, v[c],
                                accs[hh * count + c]));
                        }
                        scf::YieldOp::create(b, loc, next);
                      });
                  for (int64_t c = 0; c < count; ++c) {
                    SmallVector<Value> chunks;
                    for (int64_t hh = 0; hh < block; ++hh)
                      chunks.push_back(loop.getResult(hh * count + c));
                    const int64_t at =
                        (pass[c].sign ? values.width() : 0) +
                        pass[c].chunk * lanes;
                    out = writeHeadChunks(b, loc, chunks, out, blockHeads,
                                          start.value(b, loc, at));
                  }
                }
                return out;
              };
              auto chunksOf = [](int64_t n, bool sign) {
                SmallVector<PassChunk> items;
                for (int64_t c = 0; c < n; ++c)
                  items.push_back({sign, c});
                return items;
              };
              if (valueLoop.periods == 1 && signLoop.periods == 1) {
                // Whole: one sequence of passes, values then signs.
                SmallVector<PassChunk> items = chunksOf(valueLoop.chunks, false);
                llvm::append_range(items, chunksOf(signLoop.chunks, true));
                return runPasses(b, loc, out, items, PeriodStart{});
              }
              for (auto [loop, sign] : {std::pair{valueLoop, false},
                                        std::pair{signLoop, true}}) {
                if (sign && !values.hasQjl())
                  break;
                SmallVector<PassChunk> items = chunksOf(loop.chunks, sign);
                out = forEachPeriod(
                    b, loc, loop, lanes, {out},
                    [&](OpBuilder &b, Location loc, const PeriodStart &start,
                        SmallVector<Value> &state) {
                      state[0] = runPasses(b, loc, state[0], items, start);
                    })[0];
              }
              return out;
            });
      });
}

/// Any number of query rows: loops (t, kv head, i), each row decoded once
/// for all query rows. Rows come in pairs, so each output chunk is loaded
/// and stored once per two tokens (the updates are store-bound). With a
/// QJL residual, output lanes [width, width + m) sum the signs weighted by
/// p * scale * ||r|| * sqrt(pi/2)/m, for one projection by S^T at the end.
Value accumulateInMemory(OpBuilder &b, Location loc, Value probs,
                         VectorRowDecoder &values, Value out,
                         int64_t kvHeads, int64_t group, int64_t lanes,
                         const TQToLoopsOptions &options) {
  const int64_t width = values.width();
  auto [valueLoop, signLoop] = chunkLoops(values, lanes, options.maxUnrolledChunks);
  const bool whole = valueLoop.periods == 1 && signLoop.periods == 1;
  Value queries = tensor::DimOp::create(b, loc, probs, 0);
  /// Chunks of the step's rows (chunks[r][c]) to add to output lanes
  /// start + outAt + c * lanes, weighted by p (or, for signs, by p times
  /// the row's sign weight).
  struct PartChunks {
    SmallVector<SmallVector<Value>> chunks;
    bool signs;
    PeriodStart start;
    int64_t outAt;
  };
  return forEachDecodedRows(
      b, loc, values, kvHeads, lanes, /*step=*/2, out,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value out) {
        SmallVector<Value> signWeight;
        for (const DecodedRow &row : rows)
          if (values.hasQjl())
            signWeight.push_back(values.qjlWeight(b, loc, row.row));
        // Chunks [0, loop.chunks) of the period at `start` of every row.
        auto decodePart = [&](OpBuilder &b, Location loc,
                              const ChunkLoop &loop, bool signs,
                              const PeriodStart &start) {
          PartChunks part{{}, signs, start, signs ? width : 0};
          for (const DecodedRow &row : rows) {
            RowBytes moved = start.of(b, loc, row.row);
            if (!signs && !row.chunks.empty())
              part.chunks.push_back(row.chunks);
            else if (!signs)
              part.chunks.push_back(decodeChunks(b, loc, values, moved, lanes,
                                                 loop.decodeChunk(0),
                                                 loop.chunks));
            else {
              SmallVector<Value> chunks;
              for (int64_t c = 0; c < loop.chunks; ++c)
                chunks.push_back(values.decodeSigns(
                    b, loc, moved, loop.decodeChunk(c) * lanes, lanes));
              part.chunks.push_back(std::move(chunks));
            }
          }
          return part;
        };
        // out[i, h, at + ...] += sum_r weight_r * chunks[r][...] for every
        // query row i and head h of the group, for each part.
        auto update = [&](OpBuilder &b, Location loc, Value out,
                          ArrayRef<PartChunks> parts) {
          return forEach(
              b, loc, queries, out,
              [&](OpBuilder &b, Location loc, Value i, Value out) {
                // A loop over the group's heads (unrolled, a large group's
                // chain of tensor updates would swamp bufferization).
                Value first = arith::MulIOp::create(
                    b, loc, kvh, indexConst(b, loc, group));
                return forEach(
                    b, loc, indexConst(b, loc, group), out,
                    [&](OpBuilder &b, Location loc, Value hh, Value out) {
                      Value h = arith::AddIOp::create(b, loc, first, hh);
                      SmallVector<Value> w, ws;
                      for (auto [r, row] : llvm::enumerate(rows)) {
                        Value p = tensor::ExtractOp::create(
                            b, loc, probs, ValueRange{i, h, row.t});
                        if (row.valid)
                          p = arith::SelectOp::create(b, loc, row.valid, p,
                                                      f32Const(b, loc, 0.0f));
                        p = applyRowScale(b, loc, values, p, row.row, row.t,
                                          kvh);
                        w.push_back(splatF32(b, loc, p, lanes));
                        if (!signWeight.empty())
                          ws.push_back(splatF32(
                              b, loc,
                              arith::MulFOp::create(b, loc, p, signWeight[r]),
                              lanes));
                      }
                      for (const PartChunks &part : parts)
                        for (size_t c = 0; c < part.chunks[0].size(); ++c) {
                          Value at = part.start.value(
                              b, loc, part.outAt + int64_t(c) * lanes);
                          Value acc = readChunk(b, loc, out, i, h, at, lanes);
                          for (size_t r = 0; r < rows.size(); ++r)
                            acc = vector::FMAOp::create(
                                b, loc, part.signs ? ws[r] : w[r],
                                part.chunks[r][c], acc);
                          out = writeChunk(b, loc, acc, out, i, h, at);
                        }
                      return out;
                    });
              });
        };
        if (whole) {
          // Both parts in one pass over the query rows and heads.
          SmallVector<PartChunks> parts = {
              decodePart(b, loc, valueLoop, false, PeriodStart{})};
          if (values.hasQjl())
            parts.push_back(decodePart(b, loc, signLoop, true, PeriodStart{}));
          return update(b, loc, out, parts);
        }
        // Period by period, each period's chunks decoded once for all
        // query rows.
        auto byPeriods = [&](Value out, const ChunkLoop &loop, bool signs) {
          return forEachPeriod(
              b, loc, loop, lanes, {out},
              [&](OpBuilder &b, Location loc, const PeriodStart &start,
                  SmallVector<Value> &state) {
                state[0] = update(b, loc, state[0],
                                  {decodePart(b, loc, loop, signs, start)});
              })[0];
        };
        out = byPeriods(out, valueLoop, false);
        if (values.hasQjl())
          out = byPeriods(out, signLoop, true);
        return out;
      },
      /*decode=*/valueLoop.periods == 1);
}

} // namespace

Value mlir::tq::emitFusedAccumulate(OpBuilder &b, Location loc, Value probs,
                                    VectorRowDecoder &values,
                                    int64_t kvHeads, int64_t group,
                                    const TQToLoopsOptions &options) {
  const CacheAccess &access = values.rowDecoder().access();
  const int64_t width = values.width(), lanes = fusedChunkLanes(width);
  const int64_t signs = values.qjlRows();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  auto zerosOfWidth = [&](int64_t n) {
    return createFilledTensor(
        b, loc,
        {sizeOf(b, loc, probs, 0), sizeOf(b, loc, probs, 1),
         b.getIndexAttr(n)},
        b.getF32Type(), b.getF32FloatAttr(0.0f));
  };
  // Accumulated in the values' decode order, put back in row order once.
  auto inRowOrder = [&](Value out) {
    if (!values.isReordered())
      return out;
    return permuteRows(b, loc, out, inverseOrder(values.laneOrder()));
  };
  Value out;
  if (cast<ShapedType>(probs.getType()).getDimSize(0) == 1) {
    out = accumulateInRegisters(b, loc, probs, values,
                                zerosOfWidth(width + signs), tokens, kvHeads,
                                group, lanes, options);
  } else {
    out = accumulateInMemory(b, loc, probs, values,
                             zerosOfWidth(width + signs), kvHeads, group,
                             lanes, options);
  }
  if (!signs)
    return inRowOrder(out);
  auto slice = [&](int64_t offset, int64_t n) -> Value {
    SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), b.getIndexAttr(0),
                                         b.getIndexAttr(offset)};
    SmallVector<OpFoldResult> sizes = {sizeOf(b, loc, out, 0),
                                       sizeOf(b, loc, out, 1),
                                       b.getIndexAttr(n)};
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(b, loc, out, offsets, sizes,
                                          strides);
  };
  // out[i, h, j] += sum_r S[r, j] W[i, h, r]: loops (i, h, r, j), the
  // reduction outside so the innermost loop streams rows of S.
  const ::tq::quant::FormatSpec &spec = values.rowDecoder().spec();
  MLIRContext *ctx = b.getContext();
  Value matrix = qjlMatrix(b, loc, spec);
  using utils::IteratorType;
  return createLoopNest(
      b, loc, inRowOrder(slice(0, width)), {slice(width, signs), matrix},
      {projection(ctx, 4, {0, 1, 2}), projection(ctx, 4, {2, 3})},
      projection(ctx, 4, {0, 1, 3}),
      {IteratorType::parallel, IteratorType::parallel,
       IteratorType::reduction, IteratorType::parallel},
      [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
        return multiplyAdd(b, loc, acc, in[0], in[1]);
      });
}
