//===- FusedByteScore.cpp - The fused score by int8 dot products ----------===//
//
// scores[i, h, t] = <q, K_t> with K_t = s_tb * C[idx_t] (one scale s_tb
// per block b of the row) computed as
//
//   sq * sc * sum_b s_tb * (sum_{j in b} q8_j * (c8[idx_tj] + M + 1)
//                           - (M + 1) * sum_{j in b} q8_j)
//
// where q8 = round(q / sq) is the query quantised to int8 once per call
// (per query row and head, sq = max |q| / 127) and c8 + M + 1 the
// codebook levels as unsigned bytes (c8 = round(C / sc), sc = max |C| /
// M, M = 127; with narrowLevels M = 63, so every level byte is below 128
// and the byte_dot is `narrow`: AVX2's vpmaddubsw cannot saturate). The
// inner sum is tq.byte_dot (vpdpbusd: unsigned x signed bytes, four
// products per i32 lane) of tq.byte_lookup (vpshufb) of the decoded
// indices, 64 values per chunk: no f32 value of the row is ever formed.
// The error against the f32 score is that of the two roundings, bounded
// in tests against the format's own. A chunk lies in one block
// (VectorRowDecoder::blockChunkLanes), so each block has its own chains.
//
//===----------------------------------------------------------------------===//

#include "FusedByteScore.h"
#include "FusedLoops.h"

#include "LoopBuilders.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::fused;
using namespace mlir::tq::bytescore;

int32_t bytescore::maxLevel(bool narrow) { return narrow ? 63 : 127; }

Value bytescore::scaledSums(OpBuilder &b, Location loc, Value exact,
                            Value factors, Value scales) {
  auto type = cast<VectorType>(exact.getType()).clone(b.getF32Type());
  return arith::MulFOp::create(
      b, loc, arith::SIToFPOp::create(b, loc, type, exact),
      arith::MulFOp::create(b, loc, factors, scales));
}

float bytescore::levelBytes(ArrayRef<float> levels, bool narrow,
                            SmallVectorImpl<int8_t> &table) {
  const int32_t m = maxLevel(narrow);
  float maxAbs = 0.0f;
  for (float c : levels)
    maxAbs = std::max(maxAbs, std::fabs(c));
  const float scale = maxAbs > 0.0f ? maxAbs / float(m) : 1.0f;
  for (float c : levels)
    table.push_back(
        int8_t(uint8_t(int32_t(std::nearbyint(c / scale)) + m + 1)));
  return scale;
}

ByteQuery bytescore::quantiseQuery(OpBuilder &b, Location loc, Value query,
                                   ArrayRef<int64_t> order, bool reordered,
                                   int64_t blockLen, int64_t blocks,
                                   float levelScale, int32_t levelOffset) {
  auto type = cast<RankedTensorType>(query.getType());
  const int64_t width = type.getDimSize(2);
  auto f32Row = VectorType::get({width}, b.getF32Type());
  auto i32Row = VectorType::get({width}, b.getI32Type());
  auto i8Row = VectorType::get({width}, b.getI8Type());
  SmallVector<OpFoldResult> rowsHeads = {sizeOf(b, loc, query, 0),
                                         sizeOf(b, loc, query, 1)};
  SmallVector<OpFoldResult> bytesSizes(rowsHeads);
  bytesSizes.push_back(b.getIndexAttr(width));
  Value bytes = tensor::EmptyOp::create(b, loc, bytesSizes, b.getI8Type());
  Value factors = tensor::EmptyOp::create(b, loc, rowsHeads, b.getF32Type());
  SmallVector<OpFoldResult> offsetsSizes(rowsHeads);
  offsetsSizes.push_back(b.getIndexAttr(blocks));
  Value offsets =
      tensor::EmptyOp::create(b, loc, offsetsSizes, b.getI32Type());
  // Lanes of each block (decode order), where there are several.
  SmallVector<Value> blockLanes;
  if (blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      SmallVector<bool> in;
      for (int64_t v : order)
        in.push_back(v / blockLen == blk);
      blockLanes.push_back(arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(VectorType::get({width}, b.getI1Type()),
                                 ArrayRef<bool>(in))));
    }
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  auto loops = scf::ForOp::create(
      b, loc, c0, tensor::DimOp::create(b, loc, query, 0), c1,
      ValueRange{bytes, factors, offsets},
      [&](OpBuilder &b, Location loc, Value i, ValueRange outer) {
        auto heads = scf::ForOp::create(
            b, loc, c0, tensor::DimOp::create(b, loc, query, 1), c1, outer,
            [&](OpBuilder &b, Location loc, Value h, ValueRange state) {
              Value row = vector::TransferReadOp::create(
                  b, loc, f32Row, query, ValueRange{i, h, c0},
                  f32Const(b, loc, 0.0f), ArrayRef<bool>{true});
              if (reordered)
                row = vector::ShuffleOp::create(b, loc, row, row, order);
              Value maxAbs = vector::ReductionOp::create(
                  b, loc, vector::CombiningKind::MAXNUMF,
                  math::AbsFOp::create(b, loc, row));
              // sq = max |q| / 127; a zero row quantises to zeros.
              Value isZero = arith::CmpFOp::create(
                  b, loc, arith::CmpFPredicate::OEQ, maxAbs,
                  f32Const(b, loc, 0.0f));
              Value inverse = arith::SelectOp::create(
                  b, loc, isZero, f32Const(b, loc, 0.0f),
                  arith::DivFOp::create(b, loc, f32Const(b, loc, 127.0f),
                                        maxAbs));
              Value scaled = arith::MulFOp::create(
                  b, loc, row,
                  vector::BroadcastOp::create(b, loc, f32Row, inverse));
              Value ints = arith::FPToSIOp::create(
                  b, loc, i32Row, math::RoundEvenOp::create(b, loc, scaled));
              Value q8 = arith::TruncIOp::create(b, loc, i8Row, ints);
              Value offsetsOf = state[2];
              Value cOffset = arith::ConstantIntOp::create(
                  b, loc, b.getI32Type(), levelOffset);
              for (int64_t blk = 0; blk < blocks; ++blk) {
                Value in = ints;
                if (blocks > 1)
                  in = arith::SelectOp::create(
                      b, loc, blockLanes[blk], ints,
                      arith::ConstantOp::create(
                          b, loc, DenseElementsAttr::get(i32Row, int32_t(0))));
                Value sum = vector::ReductionOp::create(
                    b, loc, vector::CombiningKind::ADD, in);
                offsetsOf = tensor::InsertOp::create(
                    b, loc, arith::MulIOp::create(b, loc, sum, cOffset),
                    offsetsOf, ValueRange{i, h, indexConst(b, loc, blk)});
              }
              Value factor = arith::MulFOp::create(
                  b, loc, maxAbs, f32Const(b, loc, levelScale / 127.0f));
              Value nextBytes = vector::TransferWriteOp::create(
                                    b, loc, q8, state[0], ValueRange{i, h, c0},
                                    ArrayRef<bool>{true})
                                    .getResult();
              Value nextFactors = tensor::InsertOp::create(
                  b, loc, factor, state[1], ValueRange{i, h});
              scf::YieldOp::create(
                  b, loc, ValueRange{nextBytes, nextFactors, offsetsOf});
            });
        scf::YieldOp::create(b, loc, heads.getResults());
      });
  return {loops.getResult(0), loops.getResult(1), loops.getResult(2)};
}

FailureOr<Value> mlir::tq::emitFusedByteScore(OpBuilder &b, Location loc,
                                              Value query,
                                              const VectorRowDecoder &keys,
                                              int64_t kvHeads, int64_t group,
                                              const TQToLoopsOptions &options) {
  if (options.tokenLaneScore)
    if (FailureOr<Value> tokens =
            emitTokenLaneScore(b, loc, query, keys, kvHeads, group, options);
        succeeded(tokens))
      return *tokens;
  // A scale per block (applied to the block's sums), codes, no QJL
  // residual.
  FailureOr<VectorRowDecoder> codes =
      VectorRowDecoder::getForScaledCodes(keys.rowDecoder());
  if (failed(codes))
    return failure();
  // Short blocks (tq3_0's 32 values: a chain, a sum and a scale per 32
  // values) ran slower than the f32 score by rows: decode 1.6-2.9x, a
  // 64-row prefill block 1.4x (docs/perf/cpu.md). Such rows take the
  // int8 score by token lanes (one query row) or keep f32.
  if (keys.rowDecoder().spec().hasShortScaleBlocks())
    return failure();
  codes->selectFields(options.selectFields);
  const int64_t width = codes->width();
  const int64_t lanes = codes->blockChunkLanes();
  const int64_t blocks = codes->scaleBlocks();
  // Every (head, row, block) sum takes a lane of one sum tree.
  if (blocks > lanes / 4)
    return failure();
  const int64_t sumLanes = lanes / 4, chunks = width / lanes;
  const CacheAccess &access = keys.rowDecoder().access();
  const std::vector<float> &levels =
      keys.rowDecoder().spec().codebook->centroids;
  SmallVector<int8_t> table;
  const bool narrow = options.narrowLevels;
  const float levelScale = levelBytes(levels, narrow, table);
  auto tableAttr = b.getDenseI8ArrayAttr(table);

  ByteQuery q = quantiseQuery(b, loc, query, codes->laneOrder(),
                              codes->isReordered(), codes->blockLen(), blocks,
                              levelScale, maxLevel(narrow) + 1);
  Value queries = tensor::DimOp::create(b, loc, query, 0);
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, query, 0),
                                sizeOf(b, loc, query, 1), access.numTokens},
      b.getF32Type());
  const int64_t block =
      headBlock(group, std::max<int64_t>(sumLanes / blocks, 1));
  const int64_t step =
      scoreRowsPerStep(block * blocks, sumLanes, options.scoreRows);
  const bool oneQueryRow =
      cast<RankedTensorType>(query.getType()).getDimSize(0) == 1;
  auto bytesType = VectorType::get({lanes}, b.getI8Type());
  auto sumType = VectorType::get({sumLanes}, b.getI32Type());
  auto levelsOf = [&](OpBuilder &b, Location loc, const RowBytes &row,
                      int64_t c) -> Value {
    return ByteLookupOp::create(
        b, loc, bytesType,
        codes->decodeCodes(b, loc, row, c * lanes, lanes), tableAttr);
  };
  VectorRowDecoder &rowsDecoder = *codes;
  return forEachDecodedRows(
      b, loc, rowsDecoder, kvHeads, lanes, step, init,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value scores) {
        // Several query rows (prefill): each row's levels decoded once,
        // before the loop over the query rows.
        SmallVector<SmallVector<Value>> decoded(rows.size());
        if (!oneQueryRow)
          for (auto [r, row] : llvm::enumerate(rows))
            for (int64_t c = 0; c < chunks; ++c)
              decoded[r].push_back(levelsOf(b, loc, row.row, c));
        // Row r's block blk at r * blocks + blk.
        SmallVector<Value> rowScales;
        for (const DecodedRow &row : rows)
          for (int64_t blk = 0; blk < blocks; ++blk)
            rowScales.push_back(
                rowsDecoder.scaleOfBlock(b, loc, row.row, row.t, kvh, blk));
        return forEach(
            b, loc, queries, scores,
            [&](OpBuilder &b, Location loc, Value i, Value scores) {
              return forEachHeadBlock(
                  b, loc, kvh, group, block, scores,
                  [&](OpBuilder &b, Location loc, const HeadBlock &blockHeads,
                      Value scores) {
                    ArrayRef<Value> heads = blockHeads.heads;
                    // Chain (hh * step + r) * blocks + blk: head hh's
                    // product with block blk of row r.
                    Value zero = arith::ConstantOp::create(
                        b, loc, cast<TypedAttr>(b.getZeroAttr(sumType)));
                    SmallVector<Value> chains(block * step * blocks, zero);
                    for (int64_t c = 0; c < chunks; ++c) {
                      Value offset = indexConst(b, loc, c * lanes);
                      SmallVector<Value> qc;
                      for (Value h : heads)
                        qc.push_back(vector::TransferReadOp::create(
                            b, loc, bytesType, q.bytes,
                            ValueRange{i, h, offset},
                            arith::ConstantIntOp::create(b, loc,
                                                         b.getI8Type(), 0),
                            ArrayRef<bool>{true}));
                      const int64_t blk = codes->chunkBlock(lanes, c);
                      for (auto [r, row] : llvm::enumerate(rows)) {
                        Value kc = oneQueryRow ? levelsOf(b, loc, row.row, c)
                                               : decoded[r][c];
                        for (int64_t hh = 0; hh < block; ++hh) {
                          Value &chain =
                              chains[(hh * step + r) * blocks + blk];
                          chain = ByteDotOp::create(b, loc, sumType, chain, kc,
                                                    qc[hh], narrow);
                        }
                      }
                    }
                    // Lane (hh * step + r) * blocks + blk: head hh's
                    // product with block blk of row r.
                    const int64_t n = block * step * blocks;
                    Value sums = sliceLanes(b, loc, sumTree(b, loc, chains),
                                            0, n);
                    SmallVector<Value> offsets, factors;
                    SmallVector<int64_t> offsetLanes;
                    for (Value h : heads) {
                      for (int64_t blk = 0; blk < blocks; ++blk)
                        offsets.push_back(tensor::ExtractOp::create(
                            b, loc, q.offsets,
                            ValueRange{i, h, indexConst(b, loc, blk)}));
                      factors.push_back(tensor::ExtractOp::create(
                          b, loc, q.factors, ValueRange{i, h}));
                    }
                    for (int64_t hh = 0; hh < block; ++hh)
                      for (int64_t r = 0; r < step; ++r)
                        for (int64_t blk = 0; blk < blocks; ++blk)
                          offsetLanes.push_back(hh * blocks + blk);
                    Value exact = arith::SubIOp::create(
                        b, loc, sums,
                        spreadScalars(b, loc, offsets, offsetLanes));
                    Value scaled = scaledSums(
                        b, loc, exact,
                        repeatPerRow(b, loc, factors, step * blocks),
                        repeatPerHead(b, loc, rowScales, block));
                    // Lane hh * step + r: head hh's score of row r, the
                    // sum of its blocks'.
                    if (blocks > 1) {
                      Value total;
                      for (int64_t blk = 0; blk < blocks; ++blk) {
                        SmallVector<int64_t> mask;
                        for (int64_t m = 0; m < block * step; ++m)
                          mask.push_back(m * blocks + blk);
                        Value part = vector::ShuffleOp::create(
                            b, loc, scaled, scaled, mask);
                        total = total ? arith::AddFOp::create(b, loc, total,
                                                              part)
                                            .getResult()
                                      : part;
                      }
                      scaled = total;
                    }
                    for (int64_t hh = 0; hh < block; ++hh)
                      scores = vector::TransferWriteOp::create(
                                   b, loc,
                                   sliceLanes(b, loc, scaled, hh * step, step),
                                   scores, ValueRange{i, heads[hh], rows[0].t},
                                   ArrayRef<bool>{step == 1})
                                   .getResult();
                    return scores;
                  });
            });
      },
      /*decode=*/false);
}
