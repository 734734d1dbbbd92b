//===- FusedPairAccumulate.cpp - Weighted sum two tokens at a time --------===//
//
// out[h, :] = sum_t w[h, t] C[idx_t] with w = p * s_tb (the probability
// times the scale of the row's block b; a row has one block or several,
// each value's block takes its own weights), two tokens per multiply-add:
// lane l of a 32-bit accumulator takes value l of rows t and t+1 as a pair
// of 16-bit words, times the pair (w[h, t], w[h, t+1]) broadcast to every
// lane (tq.pair_dot: vdpbf16ps or vpdpwssd, 32 multiply-adds per instruction
// where an f32 FMA does 16).
//
// - bf16: the words are the centroids rounded to bf16 and the weights
//   rounded to bf16; the sums are f32.
// - i16: the words are int16 levels round(C / sc) (sc = max |C| / 511) and
//   the weights are int16 fixed point, w16 = round(w * q) per head and
//   call with q = min(32767 / max u, 2^30 / (511 sum u)) over u = p times
//   the token's largest block scale (u = w with one block), so no i32 sum
//   of any block can overflow; the sums become f32 once per call, times
//   sc / q.
//
// A 64-value chunk may span scale blocks (tq3_0's 32-value blocks) where
// each 16-value group lies in one: the unpacks stay in 128-bit lanes, so
// each 128-bit lane of a chunk's words and accumulators is one block's,
// and the chunk's weights (and factors) join the blocks' by lane.
//
// The rows are decoded to codebook indices as bytes (decodeCodes, 64 per
// chunk), the two rows' bytes interleaved and widened to words by in-lane
// unpacks, and the words turned into levels by tq.word_lookup (vpermw).
// The unpacks permute lanes; the output is put back in row order once.
// With several query rows (prefill) each pair's words are formed once per
// call and kv head into a buffer, which every query row's passes read.
// With one query row and pairAhead, each turn decodes the next pair while
// its dots take the words carried from the turn before.
//
//===----------------------------------------------------------------------===//

#include "FusedPairAccumulate.h"
#include "FusedLoops.h"

#include "LoopBuilders.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::fused;

namespace {

/// Largest |level| of the i16 path (levels round(C / sc), sc = max |C| /
/// kLevelMax). With the weights bounded by 2^30 / (kLevelMax sum w) an i32
/// sum stays below 2^30 plus the weights' rounding, 0.5 kLevelMax per
/// token.
constexpr int64_t kLevelMax = 511;

/// The codebook as 16-bit words, padded to a power of two: bf16 bit
/// patterns, or int16 levels (then *levelScale = sc).
SmallVector<int16_t> wordTable(ArrayRef<float> centroids, ValueDot dot,
                               float *levelScale) {
  SmallVector<int16_t> table;
  float maxAbs = 0.0f;
  for (float c : centroids)
    maxAbs = std::max(maxAbs, std::fabs(c));
  *levelScale = maxAbs > 0.0f ? maxAbs / float(kLevelMax) : 1.0f;
  for (float c : centroids) {
    if (dot == ValueDot::BF16) {
      llvm::APFloat value(c);
      bool lost = false;
      value.convert(llvm::APFloat::BFloat(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
      table.push_back(
          int16_t(value.bitcastToAPInt().getZExtValue() & 0xffff));
    } else {
      table.push_back(int16_t(std::nearbyint(c / *levelScale)));
    }
  }
  while (!llvm::isPowerOf2_64(table.size()))
    table.push_back(table.back());
  return table;
}

/// The in-lane unpacks (punpcklbw / punpckhbw within each 16-byte lane)
/// that turn two rows' index bytes a, b (vector<n x i8>, n a multiple of
/// 16) into word vectors: part v of 4, word 2l + k is row k's index of
/// value wordSource[v][l] of the chunk, zero-extended.
struct Unpacks {
  /// Bytes of (a ++ b) into the interleaved halves (lo, hi).
  SmallVector<int64_t> interleave[2];
  /// Bytes of (half ++ zeros) into each part's words.
  SmallVector<int64_t> widen[2];
  /// Part v, lane l: the chunk value its words hold.
  SmallVector<SmallVector<int64_t>> wordSource;

  explicit Unpacks(int64_t n) {
    const int64_t lanes16 = n / 16;
    for (int64_t high = 0; high < 2; ++high)
      for (int64_t lane = 0; lane < lanes16; ++lane)
        for (int64_t j = 0; j < 8; ++j) {
          interleave[high].push_back(16 * lane + 8 * high + j);
          interleave[high].push_back(n + 16 * lane + 8 * high + j);
          // Byte j of the lane's half: (j, zero) in every word.
          widen[high].push_back(16 * lane + 8 * high + j);
          widen[high].push_back(n);
        }
    // Follow value indices through both shuffles (row a's byte of the
    // even word of each pair).
    for (int64_t outer = 0; outer < 2; ++outer)
      for (int64_t inner = 0; inner < 2; ++inner) {
        SmallVector<int64_t> lanes;
        for (size_t w = 0; w < widen[inner].size(); w += 4)
          lanes.push_back(interleave[outer][widen[inner][w]]);
        wordSource.push_back(std::move(lanes));
      }
  }
};

/// Lanes of the weights' vector loops.
constexpr int64_t kWeightLanes = 16;

/// Per query row, query head of kv head `kvh`'s group and scale block,
/// its pair weights as a tensor <queries x group x blocks x span> (word:
/// bf16, or i16 with the factors sc / q as tensor<queries x group x
/// blocks x f32>), `span` the tokens rounded up to kWeightLanes; tokens
/// past `tokens` weigh zero. Vector loops over the
/// tokens (the weights of a 256-token tile cost as much as its products
/// when formed one scalar at a time).
struct PairWeights {
  Value words, factors;
};

PairWeights pairWeights(OpBuilder &b, Location loc, Value probs,
                        const VectorRowDecoder &values, Value tokens,
                        Value span, Value kvh, int64_t group, ValueDot dot,
                        float levelScale) {
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1),
        step = indexConst(b, loc, kWeightLanes);
  Type f32 = b.getF32Type();
  auto f32s = VectorType::get({kWeightLanes}, f32);
  Value zero = f32Const(b, loc, 0.0f);
  const int64_t blocks = values.scaleBlocks();
  // The rows' scales (strided reads of the rows), zero past the tokens.
  Value scales = blockScalesOfRows(b, loc, values, tokens, span, kvh);
  Value first = arith::MulIOp::create(b, loc, kvh, indexConst(b, loc, group));
  Value zeros = vector::BroadcastOp::create(b, loc, f32s, zero);
  // Query row i's head hh's probabilities of tokens [t, t +
  // kWeightLanes), zero past the tokens.
  auto probsAt = [&](OpBuilder &b, Location loc, Value i, Value hh,
                     Value t) -> Value {
    Value h = arith::AddIOp::create(b, loc, first, hh);
    Value p = vector::TransferReadOp::create(b, loc, f32s, probs,
                                             ValueRange{i, h, t}, zero,
                                             ArrayRef<bool>{false});
    Value valid = vector::CreateMaskOp::create(
        b, loc, VectorType::get({kWeightLanes}, b.getI1Type()),
        ValueRange{arith::SubIOp::create(b, loc, tokens, t)});
    return arith::SelectOp::create(b, loc, valid, p, zeros);
  };
  // The rows' scales of block blk for those tokens.
  auto scaleAt = [&](OpBuilder &b, Location loc, Value blk,
                     Value t) -> Value {
    return vector::TransferReadOp::create(b, loc, f32s, scales,
                                          ValueRange{blk, t}, zero,
                                          ArrayRef<bool>{true});
  };
  // Their weights of block blk.
  auto weights = [&](OpBuilder &b, Location loc, Value i, Value hh,
                     Value blk, Value t) -> Value {
    return arith::MulFOp::create(b, loc, probsAt(b, loc, i, hh, t),
                                 scaleAt(b, loc, blk, t));
  };
  // for x in [0, n) step `by`, carrying `init`.
  using LoopBody = function_ref<SmallVector<Value>(OpBuilder &, Location,
                                                   Value, ValueRange)>;
  auto loopOf = [&](OpBuilder &b, Location loc, Value n, Value by,
                    ValueRange init, LoopBody body) {
    return scf::ForOp::create(
               b, loc, c0, n, by, init,
               [&](OpBuilder &b, Location loc, Value x, ValueRange state) {
                 scf::YieldOp::create(b, loc, body(b, loc, x, state));
               })
        .getResults();
  };
  // for t in [0, span) step kWeightLanes, carrying `init`.
  auto overTokens = [&](OpBuilder &b, Location loc, ValueRange init,
                        LoopBody body) {
    return loopOf(b, loc, span, step, init, body);
  };
  Type word = dot == ValueDot::BF16 ? Type(b.getBF16Type())
                                    : Type(b.getI16Type());
  OpFoldResult queries = sizeOf(b, loc, probs, 0);
  Value words = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{queries, b.getIndexAttr(group),
                                b.getIndexAttr(blocks),
                                getAsOpFoldResult(span)},
      word);
  auto write = [&](OpBuilder &b, Location loc, Value v, Value words, Value i,
                   Value hh, Value blk, Value t) -> Value {
    return vector::TransferWriteOp::create(b, loc, v, words,
                                           ValueRange{i, hh, blk, t},
                                           ArrayRef<bool>{true})
        .getResult();
  };
  // for (i, hh) in queries x group, carrying `init`.
  using HeadBody = function_ref<SmallVector<Value>(
      OpBuilder &, Location, Value, Value, ValueRange)>;
  auto overRowsAndHeads = [&](ValueRange init, HeadBody body) {
    return loopOf(
        b, loc, getValueOrCreateConstantIndexOp(b, loc, queries), c1, init,
        [&](OpBuilder &b, Location loc, Value i, ValueRange state) {
          return SmallVector<Value>(loopOf(
              b, loc, indexConst(b, loc, group), c1, state,
              [&](OpBuilder &b, Location loc, Value hh, ValueRange state) {
                return body(b, loc, i, hh, state);
              }));
        });
  };
  // for (i, hh, blk) in queries x group x blocks, carrying `init`.
  using RowBody = function_ref<SmallVector<Value>(
      OpBuilder &, Location, Value, Value, Value, ValueRange)>;
  auto overRowsHeadsAndBlocks = [&](ValueRange init, RowBody body) {
    return overRowsAndHeads(
        init, [&](OpBuilder &b, Location loc, Value i, Value hh,
                  ValueRange state) {
          return SmallVector<Value>(loopOf(
              b, loc, indexConst(b, loc, blocks), c1, state,
              [&](OpBuilder &b, Location loc, Value blk, ValueRange state) {
                return body(b, loc, i, hh, blk, state);
              }));
        });
  };
  if (dot == ValueDot::BF16) {
    words = overRowsHeadsAndBlocks(
        words,
        [&](OpBuilder &b, Location loc, Value i, Value hh, Value blk,
            ValueRange words) -> SmallVector<Value> {
          return overTokens(
              b, loc, words,
              [&](OpBuilder &b, Location loc, Value t, ValueRange state) {
                Value w = arith::TruncFOp::create(
                    b, loc, VectorType::get({kWeightLanes}, word),
                    weights(b, loc, i, hh, blk, t));
                return SmallVector<Value>{
                    write(b, loc, w, state[0], i, hh, blk, t)};
              });
        })[0];
    return {words, Value()};
  }
  // i16: per query row and head one q, from the largest weight and the
  // weights' sum over every block (each token's weights bounded by its
  // probability times its largest block scale, so no i32 sum of any block
  // overflows), then the weights of every block in fixed point. With one
  // block these are the weights' own maximum and sum.
  Value factors = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{queries, b.getIndexAttr(group),
                                b.getIndexAttr(blocks)},
      f32);
  // The weights are probabilities times row scales: finite and
  // non-negative, so maxima need neither NaN nor signed zero handling
  // (one vmaxps instead of a six-instruction chain).
  auto fastMax = [&](OpBuilder &b, Location loc, Value x, Value y) -> Value {
    return arith::MaximumFOp::create(
        b, loc, x, y,
        arith::FastMathFlagsAttr::get(b.getContext(),
                                      arith::FastMathFlags::nnan |
                                          arith::FastMathFlags::nsz));
  };
  // Per query row, every head of the group in the same token loops: the
  // heads' max and sum chains are independent (one vmaxps/vaddps chain per
  // loop was bound by their latency), and they share each token's scale
  // reads.
  ValueRange fixed = loopOf(
      b, loc, getValueOrCreateConstantIndexOp(b, loc, queries), c1,
      ValueRange{words, factors},
      [&](OpBuilder &b, Location loc, Value i,
          ValueRange state) -> SmallVector<Value> {
        ValueRange stats = overTokens(
            b, loc, SmallVector<Value>(2 * group, zeros),
            [&](OpBuilder &b, Location loc, Value t, ValueRange acc) {
              Value largest = scaleAt(b, loc, indexConst(b, loc, 0), t);
              for (int64_t blk = 1; blk < blocks; ++blk)
                largest = fastMax(b, loc, largest,
                                  scaleAt(b, loc, indexConst(b, loc, blk), t));
              SmallVector<Value> next;
              for (int64_t hh = 0; hh < group; ++hh) {
                Value p = probsAt(b, loc, i, indexConst(b, loc, hh), t);
                Value w = arith::MulFOp::create(b, loc, p, largest);
                next.push_back(fastMax(b, loc, acc[2 * hh], w));
                next.push_back(
                    arith::AddFOp::create(b, loc, acc[2 * hh + 1], w));
              }
              return next;
            });
        SmallVector<Value> qs;
        Value nextFactors = state[1];
        for (int64_t hh = 0; hh < group; ++hh) {
          Value maxW = vector::ReductionOp::create(
              b, loc, vector::CombiningKind::MAXIMUMF, stats[2 * hh]);
          Value sumW = vector::ReductionOp::create(
              b, loc, vector::CombiningKind::ADD, stats[2 * hh + 1]);
          Value byMax =
              arith::DivFOp::create(b, loc, f32Const(b, loc, 32767.0f), maxW);
          Value bySum = arith::DivFOp::create(
              b, loc, f32Const(b, loc, float(1 << 30) / float(kLevelMax)),
              sumW);
          // All-zero weights (a masked head): q = 0, the sums stay zero.
          Value isZero = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OLE, maxW, zero);
          Value q = arith::SelectOp::create(
              b, loc, isZero, zero,
              arith::MinimumFOp::create(b, loc, byMax, bySum));
          Value factor = arith::SelectOp::create(
              b, loc, isZero, zero,
              arith::DivFOp::create(b, loc, f32Const(b, loc, levelScale), q));
          qs.push_back(vector::BroadcastOp::create(b, loc, f32s, q));
          for (int64_t blk = 0; blk < blocks; ++blk)
            nextFactors = tensor::InsertOp::create(
                b, loc, factor, nextFactors,
                ValueRange{i, indexConst(b, loc, hh),
                           indexConst(b, loc, blk)});
        }
        Value nextWords = overTokens(
            b, loc, state[0],
            [&](OpBuilder &b, Location loc, Value t, ValueRange words) {
              Value next = words[0];
              // w = round(p q s) as the low bits of p q s + 1.5 2^23 (one
              // rounding, to nearest even, of the fused multiply-add):
              // 0 <= w <= 32767 is far inside the 2^22 where the float's
              // mantissa holds the integer, so its low 16 bits are w.
              auto contract = arith::FastMathFlags::contract;
              Value magic =
                  splatF32(b, loc, f32Const(b, loc, 12582912.0f), kWeightLanes);
              auto i32s = VectorType::get({kWeightLanes}, b.getI32Type());
              for (int64_t hh = 0; hh < group; ++hh) {
                Value head = indexConst(b, loc, hh);
                Value pq = arith::MulFOp::create(
                    b, loc, probsAt(b, loc, i, head, t), qs[hh]);
                for (int64_t blk = 0; blk < blocks; ++blk) {
                  Value scaled = arith::AddFOp::create(
                      b, loc,
                      arith::MulFOp::create(
                          b, loc, pq,
                          scaleAt(b, loc, indexConst(b, loc, blk), t),
                          contract),
                      magic, contract);
                  Value w = arith::TruncIOp::create(
                      b, loc, VectorType::get({kWeightLanes}, word),
                      vector::BitCastOp::create(b, loc, i32s, scaled));
                  next = write(b, loc, w, next, i, head,
                               indexConst(b, loc, blk), t);
                }
              }
              return SmallVector<Value>{next};
            })[0];
        return {nextWords, nextFactors};
      });
  return {fixed[0], fixed[1]};
}

} // namespace

FailureOr<Value> mlir::tq::emitFusedPairAccumulate(
    OpBuilder &b, Location loc, Value probs, const VectorRowDecoder &values,
    int64_t kvHeads, int64_t group, const TQToLoopsOptions &options) {
  const ValueDot dot = options.valueDot;
  assert(dot != ValueDot::F32 && "the f32 weighted sum has its own path");
  // A scale per block (folded into the block's weights), codes, no QJL
  // residual.
  FailureOr<VectorRowDecoder> decoded =
      VectorRowDecoder::getForScaledCodes(values.rowDecoder(),
                                          options.selectFields);
  if (failed(decoded))
    return failure();
  VectorRowDecoder &codes = *decoded;
  codes.selectFields(options.selectFields);
  const int64_t width = codes.width();
  // Chunks whose 128-bit lanes each lie in one scale block (a chunk may
  // span blocks: its weights then differ by lane).
  const int64_t lanes = codes.groupBlockChunkLanes();
  // Blocks under 64 values in narrower chunks (tq3_0 at head dim 96: 32
  // lanes) keep the f32 sum: at head dim 128 such chunks took 26.6 ms
  // where f32 values took 7.69 (docs/perf/cpu.md, session #21).
  if (values.rowDecoder().spec().hasShortScaleBlocks() && lanes < 64)
    return failure();

  float levelScale = 1.0f;
  SmallVector<int16_t> table = wordTable(
      values.rowDecoder().spec().codebook->centroids, dot, &levelScale);
  auto tableAttr = b.getDenseI16ArrayAttr(table);
  const Unpacks unpacks(lanes);
  // Accumulators of `accLanes` 32-bit lanes, four per chunk.
  const int64_t accLanes = lanes / 4, chunks = width / lanes;
  const bool floats = dot == ValueDot::BF16;
  Type accElement = floats ? Type(b.getF32Type()) : Type(b.getI32Type());
  Type wordElement = floats ? Type(b.getBF16Type()) : Type(b.getI16Type());
  auto accType = VectorType::get({accLanes}, accElement);
  auto wordsType = VectorType::get({2 * accLanes}, wordElement);
  auto i16Words = VectorType::get({2 * accLanes}, b.getI16Type());
  auto bytesType = VectorType::get({lanes}, b.getI8Type());
  // Heads sharing a token loop, and chunks per pass over the rows.
  const int64_t budget = std::max<int64_t>(options.accumulators, 4);
  const int64_t block = headBlock(group, std::max<int64_t>(budget / 4, 1));
  const int64_t perPass =
      std::clamp<int64_t>(budget / (4 * block), 1, chunks);

  const bool oneQueryRow =
      cast<ShapedType>(probs.getType()).getDimSize(0) == 1;
  const CacheAccess &access = values.rowDecoder().access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1),
        c2 = indexConst(b, loc, 2);
  Value pairs = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, tokens, c1), c2);
  // (kWeightLanes is even: the span covers every pair.)
  Value span = arith::MulIOp::create(
      b, loc,
      arith::CeilDivUIOp::create(b, loc, tokens,
                                 indexConst(b, loc, kWeightLanes)),
      indexConst(b, loc, kWeightLanes));
  Value last = arith::SubIOp::create(b, loc, tokens, c1);
  codes.computeRowFactors(b, loc, kvHeads);
  Value prefetch = codes.prefetchBuffer(b, loc);

  // Output lanes in accumulator order: chunk c, part v, lane l at
  // c * lanes + v * accLanes + l.
  Value out = createFilledTensor(
      b, loc,
      {sizeOf(b, loc, probs, 0), sizeOf(b, loc, probs, 1),
       b.getIndexAttr(width)},
      b.getF32Type(), b.getF32FloatAttr(0.0f));
  // The word vectors of pair `pair` (rows t0, t1): words[c * 4 + v] is
  // part v of chunk firstChunk + c, for `count` chunks.
  auto pairWords = [&](OpBuilder &b, Location loc, Value kvh, Value t0,
                       Value t1, int64_t firstChunk, int64_t count) {
    RowBytes row0 = codes.rowBytes(b, loc, t0, kvh);
    RowBytes row1 = codes.rowBytes(b, loc, t1, kvh);
    SmallVector<Value> words;
    Value zeroBytes = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(bytesType, b.getI8IntegerAttr(0)));
    for (int64_t c = 0; c < count; ++c) {
      const int64_t at = (firstChunk + c) * lanes;
      Value a = codes.decodeCodes(b, loc, row0, at, lanes);
      Value bb = codes.decodeCodes(b, loc, row1, at, lanes);
      for (int64_t outer = 0; outer < 2; ++outer) {
        Value half =
            vector::ShuffleOp::create(b, loc, a, bb, unpacks.interleave[outer]);
        for (int64_t inner = 0; inner < 2; ++inner) {
          Value wide = vector::ShuffleOp::create(b, loc, half, zeroBytes,
                                                 unpacks.widen[inner]);
          Value index = vector::BitCastOp::create(b, loc, i16Words, wide);
          words.push_back(
              WordLookupOp::create(b, loc, i16Words, index, tableAttr));
        }
      }
    }
    return words;
  };
  // Rows t0 = 2 pair and t1 = min(t0 + 1, last): an odd count's last pair
  // repeats the last row, whose weight is zero.
  auto pairRows = [&](OpBuilder &b, Location loc, Value pair) {
    Value t0 = arith::MulIOp::create(b, loc, pair, c2);
    Value t1 = arith::MinUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, t0, c1), last);
    return std::make_pair(t0, t1);
  };
  // A vector of `type` (accLanes 32-bit lanes) whose 128-bit lane g holds
  // `of(block)` of the block of chunk `chunk`'s 16-lane group g: one
  // block's splat, or lanes of several blocks' splats.
  auto byLane = [&](OpBuilder &b, Location loc, int64_t chunk, Type type,
                    llvm::function_ref<Value(int64_t)> of) -> Value {
    const int64_t groups = lanes / 16;
    SmallVector<int64_t> blockOfGroup;
    for (int64_t g = 0; g < groups; ++g)
      blockOfGroup.push_back(codes.groupBlock(lanes, chunk, g));
    Value first = of(blockOfGroup[0]);
    if (llvm::all_equal(blockOfGroup))
      return first;
    auto i32Lanes = VectorType::get({accLanes}, b.getI32Type());
    Value joined = vector::BitCastOp::create(b, loc, i32Lanes, first);
    // One shuffle per further block, taking the lanes of its groups.
    SmallVector<int64_t> done = {blockOfGroup[0]};
    for (int64_t blk : blockOfGroup) {
      if (llvm::is_contained(done, blk))
        continue;
      done.push_back(blk);
      Value other = vector::BitCastOp::create(b, loc, i32Lanes, of(blk));
      SmallVector<int64_t> mask;
      for (int64_t l = 0; l < accLanes; ++l)
        mask.push_back(blockOfGroup[l / 4] == blk ? accLanes + l : l);
      joined = vector::ShuffleOp::create(b, loc, joined, other, mask);
    }
    return vector::BitCastOp::create(b, loc, type, joined);
  };
  const int64_t wordsPerPair = chunks * 4;
  out = forEach(b, loc, indexConst(b, loc, kvHeads), out,
                [&](OpBuilder &b, Location loc, Value kvh, Value out) {
    PairWeights weights = pairWeights(b, loc, probs, codes, tokens, span,
                                      kvh, group, dot, levelScale);
    // Several query rows: every pair's words once, in a buffer the query
    // rows' passes read (tensor<pairs x words x 2 accLanes x i16>).
    Value buffer;
    if (!oneQueryRow) {
      buffer = tensor::EmptyOp::create(
          b, loc,
          SmallVector<OpFoldResult>{getAsOpFoldResult(pairs),
                                    b.getIndexAttr(wordsPerPair),
                                    b.getIndexAttr(2 * accLanes)},
          b.getI16Type());
      buffer = forEach(
          b, loc, pairs, buffer,
          [&](OpBuilder &b, Location loc, Value pair, Value buffer) {
            auto [t0, t1] = pairRows(b, loc, pair);
            codes.prefetchNextRange(b, loc, prefetch, t0, kvh);
            codes.prefetchNextRange(b, loc, prefetch, t1, kvh);
            for (auto [k, w] :
                 llvm::enumerate(pairWords(b, loc, kvh, t0, t1, 0, chunks)))
              buffer = vector::TransferWriteOp::create(
                           b, loc, w, buffer,
                           ValueRange{pair, indexConst(b, loc, k), c0},
                           ArrayRef<bool>{true})
                           .getResult();
            return buffer;
          });
    }
    auto perRow = [&](OpBuilder &b, Location loc, Value i, Value out) {
      return forEachHeadBlock(
          b, loc, kvh, group, block, out,
          [&](OpBuilder &b, Location loc, const HeadBlock &heads, Value out) {
            // Head hh's weights of block blk for pair t/2, in every lane.
            auto pairWeight = [&](OpBuilder &b, Location loc, int64_t hh,
                                  int64_t blk, Value t) -> Value {
              Value row = arith::AddIOp::create(b, loc, heads.inGroup,
                                                indexConst(b, loc, hh));
              Value zero = arith::ConstantOp::create(
                  b, loc, cast<TypedAttr>(b.getZeroAttr(wordElement)));
              Value two = vector::TransferReadOp::create(
                  b, loc, VectorType::get({2}, wordElement), weights.words,
                  ValueRange{i, row, indexConst(b, loc, blk), t}, zero,
                  ArrayRef<bool>{true});
              Value dword = vector::BitCastOp::create(
                  b, loc, VectorType::get({1}, b.getI32Type()), two);
              Value splat = vector::BroadcastOp::create(
                  b, loc, VectorType::get({accLanes}, b.getI32Type()), dword);
              return vector::BitCastOp::create(b, loc, wordsType, splat);
            };
            for (int64_t firstChunk = 0; firstChunk < chunks;
                 firstChunk += perPass) {
              const int64_t count = std::min(perPass, chunks - firstChunk);
              // Accumulator (hh, c, v) at (hh * count + c) * 4 + v.
              Value zeroAcc = arith::ConstantOp::create(
                  b, loc, cast<TypedAttr>(b.getZeroAttr(accType)));
              const int64_t numAccs = block * count * 4;
              // The loop's state: the accumulators, then (pairAhead) the
              // words of the pair its first turn takes.
              SmallVector<Value> init(numAccs, zeroAcc);
              // pairAhead: the loop decodes pair n + 1 while its dots take
              // pair n's words (carried), so a pair's decode chain
              // (permutes, field selects, lookups: ~25 cycles) overlaps
              // the previous pair's dots instead of filling the scheduler.
              const bool ahead = oneQueryRow && options.pairAhead;
              Value lastPair;
              if (ahead) {
                lastPair = arith::SubIOp::create(b, loc, pairs, c1);
                // Pair 0's words; none to read without tokens.
                Value some = arith::CmpIOp::create(
                    b, loc, arith::CmpIPredicate::ne, pairs, c0);
                auto first = scf::IfOp::create(
                    b, loc, SmallVector<Type>(count * 4, i16Words), some,
                    /*withElseRegion=*/true);
                {
                  OpBuilder::InsertionGuard guard(b);
                  b.setInsertionPointToStart(first.thenBlock());
                  auto [t0, t1] = pairRows(b, loc, c0);
                  scf::YieldOp::create(
                      b, loc,
                      pairWords(b, loc, kvh, t0, t1, firstChunk, count));
                  b.setInsertionPointToStart(first.elseBlock());
                  Value none = arith::ConstantOp::create(
                      b, loc, DenseElementsAttr::get(i16Words,
                                                     b.getI16IntegerAttr(0)));
                  scf::YieldOp::create(
                      b, loc, SmallVector<Value>(count * 4, none));
                }
                llvm::append_range(init, first.getResults());
              }
              auto loop = scf::ForOp::create(
                  b, loc, c0, pairs, c1, init,
                  [&](OpBuilder &b, Location loc, Value pair, ValueRange state) {
                    ValueRange accs = state.take_front(numAccs);
                    auto [t0, t1] = pairRows(b, loc, pair);
                    SmallVector<Value> words, next;
                    if (oneQueryRow && firstChunk == 0) {
                      codes.prefetchNextRange(b, loc, prefetch, t0, kvh);
                      codes.prefetchNextRange(b, loc, prefetch, t1, kvh);
                    }
                    if (ahead) {
                      words = llvm::to_vector(state.drop_front(numAccs));
                      // Pair min(n + 1, last)'s words for the next turn.
                      Value following = arith::MinUIOp::create(
                          b, loc, arith::AddIOp::create(b, loc, pair, c1),
                          lastPair);
                      auto [n0, n1] = pairRows(b, loc, following);
                      next = pairWords(b, loc, kvh, n0, n1, firstChunk, count);
                    } else if (oneQueryRow) {
                      words = pairWords(b, loc, kvh, t0, t1, firstChunk, count);
                    } else {
                      Value zeroWord = arith::ConstantIntOp::create(
                          b, loc, b.getI16Type(), 0);
                      for (int64_t k = 0; k < count * 4; ++k)
                        words.push_back(vector::TransferReadOp::create(
                            b, loc, i16Words, buffer,
                            ValueRange{pair,
                                       indexConst(b, loc, firstChunk * 4 + k),
                                       c0},
                            zeroWord, ArrayRef<bool>{true}));
                    }
                    if (floats)
                      for (Value &w : words)
                        w = vector::BitCastOp::create(b, loc, wordsType, w);
                    SmallVector<Value> sums;
                    for (int64_t hh = 0; hh < block; ++hh) {
                      // Each block's weights once per pass, and each
                      // chunk's (its lanes' blocks') once.
                      std::map<int64_t, Value> w;
                      std::map<int64_t, Value> chunkWeights;
                      auto weightOf = [&](int64_t blk) {
                        if (!w.count(blk))
                          w[blk] = pairWeight(b, loc, hh, blk, t0);
                        return w[blk];
                      };
                      for (int64_t k = 0; k < count * 4; ++k) {
                        const int64_t chunk = firstChunk + k / 4;
                        if (!chunkWeights.count(chunk))
                          chunkWeights[chunk] = byLane(
                              b, loc, chunk, wordsType, weightOf);
                        sums.push_back(PairDotOp::create(
                            b, loc, accType, accs[hh * count * 4 + k], words[k],
                            chunkWeights[chunk]));
                      }
                    }
                    llvm::append_range(sums, next);
                    scf::YieldOp::create(b, loc, sums);
                  });
              for (int64_t hh = 0; hh < block; ++hh) {
                Value row = arith::AddIOp::create(b, loc, heads.inGroup,
                                                  indexConst(b, loc, hh));
                auto f32Lanes =
                    VectorType::get({accLanes}, b.getF32Type());
                std::map<int64_t, Value> blockFactors;
                auto factorOf = [&](int64_t blk) {
                  if (!blockFactors.count(blk))
                    blockFactors[blk] = vector::BroadcastOp::create(
                        b, loc, f32Lanes,
                        tensor::ExtractOp::create(
                            b, loc, weights.factors,
                            ValueRange{i, row, indexConst(b, loc, blk)}));
                  return blockFactors[blk];
                };
                std::map<int64_t, Value> chunkFactors;
                for (int64_t k = 0; k < count * 4; ++k) {
                  Value acc = loop.getResult(hh * count * 4 + k);
                  const int64_t chunk = firstChunk + k / 4;
                  if (!floats && !chunkFactors.count(chunk))
                    chunkFactors[chunk] =
                        byLane(b, loc, chunk, f32Lanes, factorOf);
                  Value factor = floats ? Value() : chunkFactors[chunk];
                  if (!floats)
                    acc = arith::MulFOp::create(
                        b, loc,
                        arith::SIToFPOp::create(
                            b, loc,
                            VectorType::get({accLanes}, b.getF32Type()), acc),
                        factor);
                  const int64_t at = firstChunk * lanes + k * accLanes;
                  out = writeChunk(b, loc, acc, out, i, heads.heads[hh],
                                   indexConst(b, loc, at));
                }
              }
            }
            return out;
          });
    };
    if (oneQueryRow)
      return perRow(b, loc, c0, out);
    return forEach(b, loc, tensor::DimOp::create(b, loc, probs, 0), out,
                   perRow);
  });
  // Position c * lanes + v * accLanes + l holds row value
  // laneOrder[c * lanes + wordSource[v][l]].
  ArrayRef<int64_t> order = codes.laneOrder();
  SmallVector<int64_t> valueAt(width);
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t v = 0; v < 4; ++v)
      for (int64_t l = 0; l < accLanes; ++l)
        valueAt[c * lanes + v * accLanes + l] =
            order[c * lanes + unpacks.wordSource[v][l]];
  return permuteRows(b, loc, out, inverseOrder(valueAt));
}
