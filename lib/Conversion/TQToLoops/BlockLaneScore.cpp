//===- BlockLaneScore.cpp - The int8 score with a block per 32-bit lane ---===//
//
// The token-lane score (TokenLaneScore.cpp) for rows of short scale blocks
// (tq3_0's 32 values, each block with its fp16 scale): the same integer
// sums, scaled and added in the same order, so the same f32 scores. By
// token lanes every block had chains, a transpose-and-add and a scale of
// its own per head and step (a third of the loop's instructions at head
// dim 128). Here the four 32-bit lanes of a token's 128-bit lane hold four
// blocks' sums (a quad), so one chain per head and group of four tokens
// runs through the whole quad, its lanes are scaled by the four tokens'
// block scales at once, and one transpose per head leaves each block's
// scaled sums of the step's 16 tokens in a vector of their own, added in
// block order as the token lanes add them.
//
// A token's quad (at most 64 bytes) is one 64-byte read, masked past the
// row's end. Chunk c of a quad is values [8c, 8c + 8) of each block; its
// 16 bytes hold, in 64-bit half h, blocks 2h and 2h + 1's plane bytes of
// the chunk, and chunks 0 and 1 carry the four block scales in their
// halves' spare bytes. One two-source byte permute per pair of tokens
// gives both tokens' chunks c and c + 1, one lane shuffle per two pairs
// gives four tokens' chunk c (a token per 128-bit lane, as the token lanes
// have them), and tq.select_bits moves each level vector's fields (values
// 8c + 4e + [0, 4) of block j into 32-bit lane j) to their bytes. Where
// the token lanes read 16 bytes per token, block and plane and joined them
// with inserts, the quad takes one read per token and two shuffles per
// token and chunk pair.
//
// With shiftLaneScore (score-lanes=shifts) rows of 32-value blocks of a
// 2-bit plane (and a 1-bit one above it) take the level bytes from whole
// shifts instead (ShiftQuadPlan): the permutes lay out each block's 2-bit
// bytes by halves, its 1-bit bytes and the scales, and every level vector
// is one shift of a half (plus a bit select with the 1-bit bytes, spread
// to nibbles once per group), in the value order the shifts leave; the
// query takes the same order, so the sums are the same.
//
//===----------------------------------------------------------------------===//

#include "FusedByteScore.h"
#include "FusedLoops.h"

#include "LoopBuilders.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::fused;
using namespace mlir::tq::bytescore;

namespace {

/// Blocks per quad (one per 32-bit lane); bytes a token's quad read takes.
constexpr int64_t kQuadBlocks = 4;
constexpr int64_t kReadBytes = 64;

struct QuadPlan {
  int64_t quads = 0;
  int64_t quadBytes = 0;
  /// Chunks of 8 values per block (even, at least 2: chunks 0 and 1 carry
  /// the scales).
  int64_t chunks = 0;
  /// Per chunk pair (c, c + 1): the byte permute of two tokens' reads (a:
  /// 0-63, b: 64-127) into lanes [a c, b c, a c+1, b c+1].
  SmallVector<SmallVector<int64_t, 64>, 2> pairMasks;
  /// Per level vector (chunk c, half e: vector 2c + e) and plane, the
  /// tq.select_bits offsets of its 64 bytes.
  SmallVector<SmallVector<SmallVector<int8_t, 64>, 2>, 0> offsets;
  /// The 16-bit word of a chunk lane's half holding a block scale.
  int64_t scaleWord = 0;
  /// The query's lane order (every quad's level vectors' values).
  SmallVector<int64_t> order;
  /// Bits below the second plane (taken from the first by the select);
  /// 0 with one plane.
  int64_t lowBits = 0;
};

/// The plan for rows of `spec`, or none where they do not fit: one or two
/// index planes (the second above the first's bits) of 1, 2 or 4 bits,
/// blocks of 2 x 8k values packed value after value, blocks in quads of at
/// most 64 bytes, each block's plane bytes of a chunk at most 3 (two
/// blocks and a scale in 8 bytes) and an fp16 scale per block.
std::optional<QuadPlan> planFor(const ::tq::quant::FormatSpec &spec) {
  const auto &planes = spec.indexPlanes;
  if (planes.empty() || planes.size() > 2 || planes[0].shift != 0 ||
      (planes.size() == 2 && planes[1].shift != planes[0].bits))
    return std::nullopt;
  int64_t chunkBytes = 0; // one block's plane bytes of a chunk
  for (const auto &p : planes) {
    if (p.bits != 1 && p.bits != 2 && p.bits != 4)
      return std::nullopt;
    chunkBytes += p.bits;
  }
  const int64_t blockLen = spec.blockLen;
  const int64_t bytesPerBlock = spec.bytesPerBlock;
  const int64_t blocks = spec.paddedDim / blockLen;
  if (blockLen % 16 != 0 || blocks % kQuadBlocks != 0 ||
      kQuadBlocks * bytesPerBlock > kReadBytes || 2 * chunkBytes + 2 > 8 ||
      spec.scaleType != ::tq::quant::ScalarType::F16 ||
      int64_t(spec.scaleOffset) + 2 > bytesPerBlock)
    return std::nullopt;
  for (const auto &p : planes)
    if (int64_t(p.byteOffset) + blockLen * int64_t(p.bits) / 8 >
        bytesPerBlock)
      return std::nullopt;
  QuadPlan plan;
  plan.quads = blocks / kQuadBlocks;
  plan.quadBytes = kQuadBlocks * bytesPerBlock;
  plan.chunks = blockLen / 8;
  plan.scaleWord = chunkBytes; // byte 2 * chunkBytes of each half
  if (planes.size() == 2)
    plan.lowBits = planes[0].bits;
  // Plane p's first byte among a block's chunk bytes.
  SmallVector<int64_t, 2> planeAt;
  for (int64_t p = 0, at = 0; p < int64_t(planes.size()); ++p) {
    planeAt.push_back(at);
    at += planes[p].bits;
  }
  for (int64_t c = 0; c < plan.chunks; c += 2) {
    SmallVector<int64_t, 64> mask;
    for (int64_t lane = 0; lane < kLaneTokens; ++lane) {
      const int64_t token = lane % 2, chunk = c + lane / 2;
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t k = 0; k < 8; ++k) {
          int64_t src = 0; // a spare byte: any of the token's
          if (k < 2 * chunkBytes) {
            const int64_t blk = 2 * h + k / chunkBytes;
            const int64_t kk = k % chunkBytes;
            int64_t p = planes.size() - 1;
            while (kk < planeAt[p])
              --p;
            src = blk * bytesPerBlock + int64_t(planes[p].byteOffset) +
                  chunk * int64_t(planes[p].bits) + (kk - planeAt[p]);
          } else if (chunk < 2 && k < 2 * chunkBytes + 2) {
            src = (2 * chunk + h) * bytesPerBlock +
                  int64_t(spec.scaleOffset) + (k - 2 * chunkBytes);
          }
          mask.push_back(token * kReadBytes + src);
        }
    }
    plan.pairMasks.push_back(std::move(mask));
  }
  for (int64_t q = 0; q < plan.quads; ++q)
    for (int64_t c = 0; c < plan.chunks; ++c)
      for (int64_t e = 0; e < 2; ++e) {
        SmallVector<SmallVector<int8_t, 64>, 2> offsets(planes.size());
        for (int64_t m = 0; m < 16; ++m) {
          const int64_t h = m / 8, r = m % 8;
          const int64_t blk = 2 * h + r / 4, v = 4 * e + r % 4;
          plan.order.push_back((kQuadBlocks * q + blk) * blockLen + 8 * c +
                               v);
          for (auto [p, plane] : llvm::enumerate(planes)) {
            const int64_t bit = 8 * ((blk % 2) * chunkBytes + planeAt[p]) +
                                v * int64_t(plane.bits);
            // The field lands at its index position plane.shift.
            offsets[p].push_back(
                int8_t(((bit - int64_t(plane.shift)) % 64 + 64) % 64));
          }
        }
        for (auto &perPlane : offsets)
          for (int64_t lane = 1; lane < kLaneTokens; ++lane)
            perPlane.append(perPlane.begin(), perPlane.begin() + 16);
        if (q == 0)
          plan.offsets.push_back(std::move(offsets));
      }
  return plan;
}

/// The quads of rows whose blocks are 32 values of a 2-bit plane (8 bytes)
/// and optionally a 1-bit plane above it (4 bytes), tq3_0's, with the
/// level bytes moved by whole shifts instead of tq.select_bits (see
/// TokenLaneScore.cpp's ShiftPlan; score-lanes=shifts): half e of a
/// block is its 2-bit bytes 4e..4e+3, and level vector (e, f) holds in
/// 32-bit lane j field f of block j's half e, value 16e + 4m + f in byte
/// m: one shift of 16-bit words by 2f. A token's lane of the 1-bit
/// vector holds block j's bytes 2e, 2e + 1 at lane bytes 2j, 2j + 1 (e =
/// 0) and 8 + 2j, 8 + 2j + 1 (e = 1); spread to nibbles (the lanes' lower
/// 8 bytes for e = 0, the upper for e = 1: spreadToNibbles) they hold
/// value 16e + 4m + f's bit at bit f of byte m of lane j, joined as the
/// token lanes join theirs (shiftedLevelVector).
struct ShiftQuadPlan {
  int64_t quads = 0;
  int64_t quadBytes = 0;
  /// The byte permutes of two tokens' reads (a: 0-63, b: 64-127) into
  /// lanes [a x, b x, a y, b y]: 2-bit halves (x = half 0, y = half 1),
  /// then the 1-bit bytes (x) and the block scales (y, bytes 0-7).
  SmallVector<int64_t, 64> halvesMask, bitsAndScalesMask;
  SmallVector<int64_t> order;
  bool twoPlanes = false;
};

std::optional<ShiftQuadPlan>
shiftQuadPlanFor(const ::tq::quant::FormatSpec &spec) {
  const auto &planes = spec.indexPlanes;
  if (planes.empty() || planes.size() > 2 || planes[0].bits != 2 ||
      planes[0].shift != 0 ||
      (planes.size() == 2 && (planes[1].bits != 1 || planes[1].shift != 2)))
    return std::nullopt;
  const int64_t blockLen = spec.blockLen;
  const int64_t bytesPerBlock = spec.bytesPerBlock;
  const int64_t blocks = spec.paddedDim / blockLen;
  if (blockLen != 32 || blocks % kQuadBlocks != 0 ||
      kQuadBlocks * bytesPerBlock > kReadBytes ||
      spec.scaleType != ::tq::quant::ScalarType::F16 ||
      int64_t(spec.scaleOffset) + 2 > bytesPerBlock)
    return std::nullopt;
  for (const auto &p : planes)
    if (int64_t(p.byteOffset) + blockLen * int64_t(p.bits) / 8 > bytesPerBlock)
      return std::nullopt;
  ShiftQuadPlan plan;
  plan.quads = blocks / kQuadBlocks;
  plan.quadBytes = kQuadBlocks * bytesPerBlock;
  plan.twoPlanes = planes.size() == 2;
  for (int64_t lane = 0; lane < kLaneTokens; ++lane) {
    const int64_t token = lane % 2, y = lane / 2;
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t j = (i % 8) / 2, k = i % 2;
      // Half y's byte i % 4 of block i / 4.
      plan.halvesMask.push_back(token * kReadBytes + (i / 4) * bytesPerBlock +
                                int64_t(planes[0].byteOffset) + 4 * y + i % 4);
      int64_t src = 0; // a spare byte: any of the token's
      if (y == 0 && plan.twoPlanes)
        src =
            j * bytesPerBlock + int64_t(planes[1].byteOffset) + 2 * (i / 8) + k;
      else if (y == 1 && i < 8)
        src = j * bytesPerBlock + int64_t(spec.scaleOffset) + k;
      plan.bitsAndScalesMask.push_back(token * kReadBytes + src);
    }
  }
  for (int64_t q = 0; q < plan.quads; ++q)
    for (int64_t e = 0; e < 2; ++e)
      for (int64_t f = 0; f < 4; ++f)
        for (int64_t j = 0; j < kQuadBlocks; ++j)
          for (int64_t m = 0; m < 4; ++m)
            plan.order.push_back((kQuadBlocks * q + j) * blockLen + 16 * e +
                                 4 * m + f);
  return plan;
}

} // namespace

std::optional<bool>
mlir::tq::shiftQuadPlanes(const ::tq::quant::FormatSpec &spec) {
  std::optional<ShiftQuadPlan> plan = shiftQuadPlanFor(spec);
  if (!plan)
    return std::nullopt;
  return plan->twoPlanes;
}

namespace {

/// Lanes (in 128-bit units) `lanes` of x (0-3) and y (4-7).
Value shuffleLanes(OpBuilder &b, Location loc, Value x, Value y,
                   ArrayRef<int64_t> lanes) {
  SmallVector<int64_t> mask;
  for (int64_t lane : lanes)
    for (int64_t i = 0; i < 16; ++i)
      mask.push_back(16 * lane + i);
  return vector::ShuffleOp::create(b, loc, x, y, mask);
}

/// The group's 16 block scales (token lane L, block j in lane 4L + j) from
/// its chunk 0 and 1 vectors.
Value scalesOfGroup(OpBuilder &b, Location loc, Value chunk0, Value chunk1,
                    int64_t scaleWord) {
  auto words = VectorType::get({32}, b.getI16Type());
  Value w0 = vector::BitCastOp::create(b, loc, words, chunk0);
  Value w1 = vector::BitCastOp::create(b, loc, words, chunk1);
  SmallVector<int64_t> mask;
  for (int64_t lane = 0; lane < kLaneTokens; ++lane)
    for (int64_t blk = 0; blk < kQuadBlocks; ++blk)
      mask.push_back(32 * (blk / 2) + 8 * lane + 4 * (blk % 2) + scaleWord);
  Value bits = vector::ShuffleOp::create(b, loc, w0, w1, mask);
  Value halves = vector::BitCastOp::create(
      b, loc, VectorType::get({16}, b.getF16Type()), bits);
  return arith::ExtFOp::create(b, loc, VectorType::get({16}, b.getF32Type()),
                               halves);
}

/// The group's 16 block scales (token lane L, block j in lane 4L + j) from
/// its scale lanes (lane L's bytes 2j, 2j + 1: token L's block j scale).
Value scalesOfScaleLanes(OpBuilder &b, Location loc, Value scaleLanes) {
  Value words = vector::BitCastOp::create(
      b, loc, VectorType::get({32}, b.getI16Type()), scaleLanes);
  SmallVector<int64_t> mask;
  for (int64_t lane = 0; lane < kLaneTokens; ++lane)
    for (int64_t blk = 0; blk < kQuadBlocks; ++blk)
      mask.push_back(8 * lane + blk);
  Value bits = vector::ShuffleOp::create(b, loc, words, words, mask);
  Value halves = vector::BitCastOp::create(
      b, loc, VectorType::get({16}, b.getF16Type()), bits);
  return arith::ExtFOp::create(b, loc, VectorType::get({16}, b.getF32Type()),
                               halves);
}

/// Four groups' vectors (lane 4L + j: token 4L + g's block j) as four
/// blocks' (lane 4L + g: token 4L + g): a transpose in every 128-bit lane.
SmallVector<Value, 4> blocksOfGroups(OpBuilder &b, Location loc,
                                     ArrayRef<Value> groups) {
  Value t0 = interleaveInLanes(b, loc, groups[0], groups[1], {0, 4, 1, 5});
  Value t1 = interleaveInLanes(b, loc, groups[0], groups[1], {2, 6, 3, 7});
  Value t2 = interleaveInLanes(b, loc, groups[2], groups[3], {0, 4, 1, 5});
  Value t3 = interleaveInLanes(b, loc, groups[2], groups[3], {2, 6, 3, 7});
  return {interleaveInLanes(b, loc, t0, t2, {0, 1, 4, 5}),
          interleaveInLanes(b, loc, t0, t2, {2, 3, 6, 7}),
          interleaveInLanes(b, loc, t1, t3, {0, 1, 4, 5}),
          interleaveInLanes(b, loc, t1, t3, {2, 3, 6, 7})};
}

} // namespace

FailureOr<Value> mlir::tq::emitBlockLaneScore(OpBuilder &b, Location loc,
                                              Value query,
                                              const VectorRowDecoder &keys,
                                              int64_t kvHeads, int64_t group,
                                              const TQToLoopsOptions &options) {
  if (cast<RankedTensorType>(query.getType()).getDimSize(0) != 1)
    return failure();
  FailureOr<VectorRowDecoder> codes =
      VectorRowDecoder::getForScaledCodes(keys.rowDecoder());
  if (failed(codes) || !codes->hasHalfBlockScales() ||
      !codes->hasHalfScaleBits())
    return failure();
  const ::tq::quant::FormatSpec &spec = keys.rowDecoder().spec();
  std::optional<ShiftQuadPlan> shifts;
  std::optional<QuadPlan> plan;
  ArrayRef<int64_t> order = chooseLanePlan(
      spec, options.shiftLaneScore, shiftQuadPlanFor, planFor, shifts, plan);
  if (order.empty() || int64_t(order.size()) != codes->width())
    return failure();
  const int64_t quads = shifts ? shifts->quads : plan->quads;
  const int64_t quadBytes = shifts ? shifts->quadBytes : plan->quadBytes;
  const int64_t vectorsPerQuad = order.size() / quads / 16;
  const int64_t blocks = codes->scaleBlocks();
  const int64_t rowBytes = blocks * int64_t(spec.bytesPerBlock);
  const bool narrow = options.narrowLevels;
  const int64_t lowBits = shifts ? (shifts->twoPlanes ? 2 : 0) : plan->lowBits;
  LaneScoreInputs in =
      prepareLaneScore(b, loc, query, *codes, order, lowBits, narrow);
  DenseI8ArrayAttr oddLookup;
  if (shifts && shifts->twoPlanes)
    oddLookup = highBitAtThree(b, in.lookup);
  const ByteQuery &q = in.query;
  const int64_t block = headBlock(group, 4);
  auto sumType = VectorType::get({16}, b.getI32Type());
  auto offsetType = VectorType::get({kQuadBlocks}, b.getI32Type());
  Value c0 = indexConst(b, loc, 0);
  Value zeroWord = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0);
  const SmallVector<int64_t> quadOfLanes = {0, 1, 2, 3, 0, 1, 2, 3,
                                            0, 1, 2, 3, 0, 1, 2, 3};
  return forEachDecodedRows(
      b, loc, *codes, kvHeads, /*lanes=*/64, kStepTokens, in.scores,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value scores) {
        return forEachHeadBlock(
            b, loc, kvh, group, block, scores,
            [&](OpBuilder &b, Location loc, const HeadBlock &blockHeads,
                Value scores) {
              ArrayRef<Value> heads = blockHeads.heads;
              Value zero = arith::ConstantOp::create(
                  b, loc, cast<TypedAttr>(b.getZeroAttr(sumType)));
              SmallVector<Value> totals(block);
              for (int64_t quad = 0; quad < quads; ++quad) {
                const int64_t at = quad * quadBytes;
                // Per head, the quad's block offsets in every 128-bit lane
                // and the factor in every lane.
                SmallVector<Value> quadOffsets, factors;
                for (Value head : heads) {
                  Value offsets = vector::TransferReadOp::create(
                      b, loc, offsetType, q.offsets,
                      ValueRange{c0, head,
                                 indexConst(b, loc, kQuadBlocks * quad)},
                      zeroWord, ArrayRef<bool>{true});
                  quadOffsets.push_back(vector::ShuffleOp::create(
                      b, loc, offsets, offsets, quadOfLanes));
                  factors.push_back(splatF32(
                      b, loc,
                      tensor::ExtractOp::create(b, loc, q.factors,
                                                ValueRange{c0, head}),
                      kStepTokens));
                }
                // scaled[hh][g]: head hh's scaled sums of group g.
                SmallVector<SmallVector<Value, 4>> scaled(block);
                for (int64_t g = 0; g < kGroups; ++g) {
                  // Group g: token 4L + g in 128-bit lane L.
                  SmallVector<Value> reads;
                  for (int64_t lane = 0; lane < kLaneTokens; ++lane) {
                    const RowBytes &row = rows[kLaneTokens * lane + g].row;
                    reads.push_back(row.read(b, loc, at, kReadBytes,
                                             at + kReadBytes <= rowBytes));
                  }
                  // The four tokens' lanes x and y of a pair permute.
                  auto permuted = [&](ArrayRef<int64_t> pairMask) {
                    Value ab = vector::ShuffleOp::create(b, loc, reads[0],
                                                         reads[1], pairMask);
                    Value cd = vector::ShuffleOp::create(b, loc, reads[2],
                                                         reads[3], pairMask);
                    return std::make_pair(
                        shuffleLanes(b, loc, ab, cd, {0, 1, 4, 5}),
                        shuffleLanes(b, loc, ab, cd, {2, 3, 6, 7}));
                  };
                  SmallVector<Value> levels;
                  Value blockScales;
                  if (shifts) {
                    auto [half0, half1] = permuted(shifts->halvesMask);
                    auto [bits, scaleLanes] =
                        permuted(shifts->bitsAndScalesMask);
                    for (int64_t e = 0; e < 2; ++e) {
                      // Half e's 1-bit bytes: the lanes' lower or upper 8.
                      std::optional<SpreadBits> high;
                      if (shifts->twoPlanes)
                        high = spreadToNibbles(b, loc, bits, e == 1);
                      for (int64_t f = 0; f < 4; ++f)
                        levels.push_back(shiftedLevelVector(
                            b, loc, in, oddLookup, e == 0 ? half0 : half1,
                            /*fieldBits=*/2, f, high ? &*high : nullptr));
                    }
                    blockScales = scalesOfScaleLanes(b, loc, scaleLanes);
                  } else {
                    SmallVector<Value> chunks;
                    for (ArrayRef<int64_t> pairMask : plan->pairMasks) {
                      auto [x, y] = permuted(pairMask);
                      chunks.push_back(x);
                      chunks.push_back(y);
                    }
                    // Both planes' fields lie in the chunk's bytes.
                    for (auto [k, offsets] : llvm::enumerate(plan->offsets))
                      levels.push_back(levelVector(
                          b, loc, in, {chunks[k / 2], chunks[k / 2]}, offsets));
                    blockScales = scalesOfGroup(b, loc, chunks[0], chunks[1],
                                                plan->scaleWord);
                  }
                  SmallVector<Value> acc(block, zero);
                  for (auto [k, levelBytes] : llvm::enumerate(levels)) {
                    const int64_t vector = quad * vectorsPerQuad + k;
                    for (int64_t hh = 0; hh < block; ++hh)
                      acc[hh] = queryDot(b, loc, in, acc[hh], levelBytes, g,
                                         heads[hh], vector, narrow);
                  }
                  for (int64_t hh = 0; hh < block; ++hh)
                    scaled[hh].push_back(scaledSums(
                        b, loc,
                        arith::SubIOp::create(b, loc, acc[hh], quadOffsets[hh]),
                        factors[hh], blockScales));
                }
                // Each block's 16 tokens, added in block order.
                for (int64_t hh = 0; hh < block; ++hh)
                  for (Value part : blocksOfGroups(b, loc, scaled[hh]))
                    totals[hh] = totals[hh] ? arith::AddFOp::create(
                                                  b, loc, totals[hh], part)
                                                  .getResult()
                                            : part;
              }
              return writeStepScores(b, loc, scores, totals, heads,
                                     rows[0].t);
            });
      },
      /*decode=*/false);
}
