//===- FusedTileProducts.cpp - Products over rows decoded in registers ----===//

#include "FusedTileProducts.h"
#include "AmxTileProducts.h"
#include "FusedByteScore.h"
#include "FusedLoops.h"
#include "FusedPairAccumulate.h"

#include "LoopBuilders.h"
#include "QjlLowering.h"
#include "RowDecoding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tq;

using namespace mlir::tq::fused;


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
  if (options.amxTiles)
    if (FailureOr<Value> tiles =
            emitAmxScore(b, loc, query, keys, kvHeads, group);
        succeeded(tiles))
      return *tiles;
  if (options.scoreDot == ScoreDot::I8)
    if (FailureOr<Value> bytes = emitFusedByteScore(b, loc, query, keys,
                                                    kvHeads, group, options);
        succeeded(bytes))
      return *bytes;
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
  Value scales = blockScalesOfRows(b, loc, values, tokens, tokens, kvh);
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
                  tensor::ExtractOp::create(b, loc, scales, ValueRange{c0, t});
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
  const bool oneQueryRow = cast<ShapedType>(probs.getType()).getDimSize(0) == 1;
  if (options.amxTiles)
    if (FailureOr<Value> tiles =
            emitAmxAccumulate(b, loc, probs, values, kvHeads, group);
        succeeded(tiles))
      return *tiles;
  if (options.valueDot != ValueDot::F32)
    if (FailureOr<Value> pairs = emitFusedPairAccumulate(
            b, loc, probs, values, kvHeads, group, options);
        succeeded(pairs))
      return *pairs;
  Value out;
  if (oneQueryRow) {
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
