//===- TokenLaneScore.cpp - The int8 score with a token per lane group ----===//
//
// The int8 score of FusedByteScore.cpp (the same integer sums, scaled the
// same way, so the same f32 scores) for one query row, with the work laid
// out by tokens instead of by row chunks. A vector of 64 level bytes holds
// four tokens, one per 128-bit lane; the 16 bytes of a lane are 16 values
// of that token, two runs of 8 (one per 64-bit half). tq.byte_dot against
// the query bytes of the same 16 values (repeated to the four lanes)
// leaves four partial sums of one token in each lane, so the sums of 16
// tokens need one small transpose-and-add per head, where the row layout
// sums every row's 16 lanes in a shuffle tree.
//
// The level bytes come from the packed rows directly: each 64-bit half of
// a lane holds 8 bytes of the row that contain its values' fields in one
// index plane (16 bytes read per token and plane), and tq.select_bits
// (vpmultishiftqb) moves every value's field to its byte; with two planes
// one bit select joins the low and high fields, and tq.byte_lookup
// (vpermb) turns the index into its level byte. Per 64 level bytes: one
// gather per plane, the select, the lookup, then a dot per head.
//
// Fits formats whose codes are s_b * C[idx] (hasScaledCodes) with one or
// two index planes of 1, 2 or 4 bits (the second above the first's bits),
// every plane packed value after value within a block, and blocks of a
// multiple of 2S values, where S = 64 / (widest plane's bits) values fill
// 8 bytes of the widest plane (turbo2/3/4_0, polar1-4), or of exactly S
// values, a lane's halves then from one run (tq3_0's 32). Each block has
// its own chains and transpose. Where a token's one 16-byte read holds
// every plane's window (tq3_0's block) the planes share it, and a block
// scale inside it is taken from the joined reads, not read per token.
// With shiftLaneScore (score-lanes=shifts) rows of one index plane or of
// a 2-bit plane under a 1-bit one take the level bytes of each 16 bytes
// of the widest plane from whole shifts of 16-bit words instead (the
// ShiftPlan: field f of every byte moved down by b f, the values in that
// order, the 1-bit plane's bytes spread to nibbles by one in-lane
// interleave): on Zen 4 vpmultishiftqb takes the multiply pipes the dots
// need, shifts run on others.
// Each group of four tokens reads its own copy of the query bytes, each
// run of 16 already repeated to the four lanes (queryPerGroup), so no
// query vector lives across the step's groups and none needs a shuffle.
//
//===----------------------------------------------------------------------===//

#include "FusedByteScore.h"
#include "FusedLoops.h"

#include "LoopBuilders.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::fused;
using namespace mlir::tq::bytescore;

namespace {

/// How one plane's 16 bytes of a token feed a piece: the read at row byte
/// `read`, and the bytes of each 64-bit half within it (in 0..8).
struct PlaneWindow {
  int64_t read = 0;
  int64_t half[2] = {0, 8};
  bool identity() const { return half[0] == 0 && half[1] == 8; }
};

/// One vector of 64 level bytes: lane byte m (m < 16) holds value
/// values[m] of the row; per plane, the tq.select_bits offsets of the 64
/// bytes (the same in every lane).
struct LevelVector {
  SmallVector<int64_t, 16> values;
  SmallVector<SmallVector<int8_t, 64>, 2> offsets;
};

/// A piece: 2S values of one block, read once per token and plane, giving
/// S / 8 level vectors.
struct Piece {
  int64_t block = 0;
  SmallVector<PlaneWindow, 2> windows;
  SmallVector<LevelVector, 0> levels;
};

struct Plan {
  SmallVector<Piece, 0> pieces;
  /// The query's lane order: the level vectors' values, in order.
  SmallVector<int64_t> order;
  /// Bits below the second plane (taken from the first by the select);
  /// 0 with one plane.
  int64_t lowBits = 0;
};

/// The plan for rows of `spec`, or none where the format does not fit.
std::optional<Plan> planFor(const ::tq::quant::FormatSpec &spec) {
  const auto &planes = spec.indexPlanes;
  if (planes.empty() || planes.size() > 2)
    return std::nullopt;
  int64_t widest = 0;
  for (const auto &p : planes) {
    if (p.bits != 1 && p.bits != 2 && p.bits != 4)
      return std::nullopt;
    widest = std::max<int64_t>(widest, p.bits);
  }
  // The select takes bits below the second plane's from the first.
  if (planes[0].shift != 0 ||
      (planes.size() == 2 && planes[1].shift != planes[0].bits))
    return std::nullopt;
  const int64_t span = 64 / widest;
  const int64_t blockLen = spec.blockLen;
  const int64_t blocks = spec.paddedDim / spec.blockLen;
  const int64_t rowBytes = blocks * int64_t(spec.bytesPerBlock);
  // A piece of two runs of S values (each half of a lane from one), or,
  // in blocks of S values, of one run (a lane's halves from the same
  // window, the second half 8 values on).
  const bool twoRuns = blockLen % (2 * span) == 0;
  if ((!twoRuns && blockLen != span) || rowBytes < 16)
    return std::nullopt;
  const int64_t pieceLen = twoRuns ? 2 * span : span;
  // Value e of half h of the piece's level vector k: first + h * halfStep
  // + k * vectorStep + e.
  const int64_t halfStep = twoRuns ? span : 8;
  const int64_t vectorStep = twoRuns ? 8 : 16;
  const int64_t vectors = pieceLen / 16;
  Plan plan;
  if (planes.size() == 2)
    plan.lowBits = planes[0].bits;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t base = blk * spec.bytesPerBlock;
    for (int64_t first = 0; first < blockLen; first += pieceLen) {
      Piece piece;
      piece.block = blk;
      for (const auto &p : planes) {
        // Bit of value j (of the block) in the row.
        auto bitOf = [&](int64_t j) {
          return 8 * (base + int64_t(p.byteOffset)) + j * int64_t(p.bits);
        };
        // Each half's 8 bytes from its first field on (inside the row); a
        // narrower plane's runs share the first half's.
        int64_t at[2];
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t from = p.bits == widest ? h : 0;
          at[h] = std::min(bitOf(first + from * halfStep) / 8, rowBytes - 8);
        }
        const int64_t read = std::min(at[0], rowBytes - 16);
        PlaneWindow w;
        w.read = read;
        for (int64_t h = 0; h < 2; ++h) {
          w.half[h] = at[h] - read;
          // Every field of the half inside its 8 bytes, which lie inside
          // the 16 read.
          const int64_t lo = first + h * halfStep;
          const int64_t hi = lo + (vectors - 1) * vectorStep + 7;
          if (w.half[h] < 0 || w.half[h] > 8 || bitOf(lo) < 8 * at[h] ||
              bitOf(hi) + int64_t(p.bits) > 8 * (at[h] + 8))
            return std::nullopt;
        }
        piece.windows.push_back(w);
      }
      // One read for every plane where its 16 bytes hold all the windows
      // (tq3_0's block: both planes and the scale in 14 bytes): the
      // token's bytes are then loaded and joined once.
      int64_t common = piece.windows.front().read;
      for (const PlaneWindow &w : piece.windows)
        common = std::min(common, w.read);
      bool shared = true;
      for (const PlaneWindow &w : piece.windows)
        for (int64_t h = 0; h < 2; ++h)
          shared &= w.read + w.half[h] - common <= 8;
      if (shared)
        for (PlaneWindow &w : piece.windows) {
          for (int64_t h = 0; h < 2; ++h)
            w.half[h] += w.read - common;
          w.read = common;
        }
      for (int64_t k = 0; k < vectors; ++k) {
        LevelVector v;
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t e = 0; e < 8; ++e)
            v.values.push_back(blk * blockLen + first + h * halfStep +
                               k * vectorStep + e);
        v.offsets.resize(planes.size());
        for (auto [pl, p] : llvm::enumerate(planes)) {
          const PlaneWindow &w = piece.windows[pl];
          for (int64_t lane = 0; lane < kLaneTokens; ++lane)
            for (int64_t m = 0; m < 16; ++m) {
              const int64_t h = m / 8;
              const int64_t j = v.values[m] - blk * blockLen;
              const int64_t bit = 8 * (base + int64_t(p.byteOffset)) +
                                  j * int64_t(p.bits) -
                                  8 * (w.read + w.half[h]);
              // The field lands at its index position p.shift.
              v.offsets[pl].push_back(
                  int8_t(((bit - int64_t(p.shift)) % 64 + 64) % 64));
            }
        }
        plan.order.append(v.values.begin(), v.values.end());
        piece.levels.push_back(std::move(v));
      }
      plan.pieces.push_back(std::move(piece));
    }
  }
  return plan;
}

/// A piece of 128 / b values of one block (16 bytes of the b-bit widest
/// plane) whose level vectors come from whole-vector shifts: level
/// vector f holds the field f of each of the 16 bytes (lane byte i: value
/// first + (8 / b) i + f), moved to the byte's low bits by one shift of
/// 16-bit words by b f. Shifts run on Zen 4's shift pipes, where
/// tq.select_bits' vpmultishiftqb shares the multiply pipes with the
/// dots; the query takes the same value order, so the integer sums are
/// the select plan's.
struct ShiftPiece {
  int64_t block = 0;
  /// Row byte of the widest plane's 16 bytes.
  int64_t lowRead = 0;
  /// Two planes (2 + 1 bits): the row byte of a 16-byte read of the 1-bit
  /// plane and whether the piece's 8 bytes are its upper half.
  int64_t highRead = 0;
  bool highUpper = false;
};

struct ShiftPlan {
  SmallVector<ShiftPiece, 0> pieces;
  SmallVector<int64_t> order;
  /// The widest (first) plane's bits.
  int64_t bits = 0;
  /// A 1-bit plane above a 2-bit one (turbo3_0's, polar3's).
  bool twoPlanes = false;
};

/// The shift plan for rows of `spec`: one plane of 1, 2 or 4 bits or a
/// 2-bit plane with a 1-bit plane above it, each packed value after value
/// within blocks of a multiple of 128 / b values.
std::optional<ShiftPlan> shiftPlanFor(const ::tq::quant::FormatSpec &spec) {
  const auto &planes = spec.indexPlanes;
  ShiftPlan plan;
  if (planes.size() == 1) {
    if ((planes[0].bits != 1 && planes[0].bits != 2 && planes[0].bits != 4) ||
        planes[0].shift != 0)
      return std::nullopt;
  } else if (planes.size() == 2) {
    if (planes[0].bits != 2 || planes[0].shift != 0 || planes[1].bits != 1 ||
        planes[1].shift != 2)
      return std::nullopt;
    plan.twoPlanes = true;
  } else {
    return std::nullopt;
  }
  plan.bits = planes[0].bits;
  const int64_t pieceLen = 128 / plan.bits;
  const int64_t fields = 8 / plan.bits;
  const int64_t blockLen = spec.blockLen;
  const int64_t blocks = spec.paddedDim / spec.blockLen;
  const int64_t rowBytes = blocks * int64_t(spec.bytesPerBlock);
  if (blockLen % pieceLen != 0)
    return std::nullopt;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t base = blk * spec.bytesPerBlock;
    for (int64_t first = 0; first < blockLen; first += pieceLen) {
      ShiftPiece piece;
      piece.block = blk;
      piece.lowRead = base + planes[0].byteOffset + first * plan.bits / 8;
      if (piece.lowRead + 16 > rowBytes)
        return std::nullopt;
      if (plan.twoPlanes) {
        // The piece's 8 bytes of the 1-bit plane; pieces 2k and 2k + 1
        // share one read where it fits the row.
        const int64_t at = base + planes[1].byteOffset + first / 8;
        if ((first / pieceLen) % 2 == 0 && at + 16 <= rowBytes) {
          piece.highRead = at;
        } else if (at >= 8 && at + 8 <= rowBytes) {
          piece.highRead = at - 8;
          piece.highUpper = true;
        } else {
          return std::nullopt;
        }
      }
      for (int64_t f = 0; f < fields; ++f)
        for (int64_t i = 0; i < 16; ++i)
          plan.order.push_back(blk * blockLen + first + fields * i + f);
      plan.pieces.push_back(piece);
    }
  }
  return plan;
}

} // namespace

Value bytescore::shiftWords(OpBuilder &b, Location loc, Value bytes,
                            int64_t by) {
  if (by == 0)
    return bytes;
  auto bytesType = cast<VectorType>(bytes.getType());
  auto wordsType =
      VectorType::get({bytesType.getNumElements() / 2}, b.getI16Type());
  Value words = vector::BitCastOp::create(b, loc, wordsType, bytes);
  Value count = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(wordsType,
                             b.getI16IntegerAttr(std::abs(by)).getValue()));
  Value shifted = by > 0
                      ? arith::ShRUIOp::create(b, loc, words, count).getResult()
                      : arith::ShLIOp::create(b, loc, words, count).getResult();
  return vector::BitCastOp::create(b, loc, bytesType, shifted);
}

DenseI8ArrayAttr bytescore::highBitAtThree(OpBuilder &b,
                                           DenseI8ArrayAttr lookup) {
  SmallVector<int8_t> table;
  for (int64_t i = 0; i < 16; ++i)
    table.push_back(lookup[(i & 3) | (((i >> 3) & 1) << 2)]);
  return b.getDenseI8ArrayAttr(table);
}

SpreadBits bytescore::spreadToNibbles(OpBuilder &b, Location loc, Value bits,
                                      bool upper) {
  Value upperNibbles = shiftWords(b, loc, bits, 4);
  SmallVector<int64_t> mask;
  const int64_t from = upper ? 8 : 0;
  for (int64_t lane = 0; lane < kLaneTokens; ++lane)
    for (int64_t m = 0; m < 8; ++m) {
      mask.push_back(16 * lane + from + m);
      mask.push_back(64 + 16 * lane + from + m);
    }
  Value spread = vector::ShuffleOp::create(b, loc, bits, upperNibbles, mask);
  return {spread, shiftWords(b, loc, spread, -2)};
}

Value bytescore::shiftedLevelVector(OpBuilder &b, Location loc,
                                    const LaneScoreInputs &in,
                                    DenseI8ArrayAttr oddLookup, Value fields,
                                    int64_t fieldBits, int64_t f,
                                    const SpreadBits *high) {
  Value index = shiftWords(b, loc, fields, fieldBits * f);
  DenseI8ArrayAttr lookup = in.lookup;
  if (high) {
    index = arith::OrIOp::create(
        b, loc, arith::AndIOp::create(b, loc, index, in.lowMask),
        arith::AndIOp::create(b, loc, f < 2 ? high->raised : high->bits,
                              in.highMask));
    if (f % 2 == 1)
      lookup = oddLookup;
  }
  return ByteLookupOp::create(b, loc, VectorType::get({64}, b.getI8Type()),
                              index, lookup);
}

int64_t mlir::tq::shiftLaneScorePlanes(llvm::StringRef format, unsigned dim) {
  auto f = ::tq::quant::Format::get(std::string_view(format), dim);
  if (!f)
    return 0;
  if (std::optional<bool> quads = shiftQuadPlanes(f->spec()))
    return *quads ? 2 : 1;
  std::optional<ShiftPlan> plan = shiftPlanFor(f->spec());
  return plan ? (plan->twoPlanes ? 2 : 1) : 0;
}

namespace {

/// Four tokens' 16-byte reads as one 64-byte vector (lane L: `reads[L]`).
Value joinReads(OpBuilder &b, Location loc, ArrayRef<Value> reads) {
  auto join = [&](Value x, Value y, int64_t n) {
    SmallVector<int64_t> mask(2 * n);
    for (int64_t i = 0; i < 2 * n; ++i)
      mask[i] = i;
    return vector::ShuffleOp::create(b, loc, x, y, mask).getResult();
  };
  return join(join(reads[0], reads[1], 16), join(reads[2], reads[3], 16), 32);
}

/// The level vectors of `piece` for the tokens of group `g` (token
/// 4L + g in lane L), in the plan's order. With two planes the 1-bit
/// plane's byte m (values 8m..8m+7 of the piece) is spread to lane bytes
/// 2m (its low nibble) and 2m + 1 (its high one), so lane byte i holds
/// value 4i + f's bit at bit f, as the 2-bit plane's byte i holds its
/// field at bits 2f (spreadToNibbles, shiftedLevelVector).
SmallVector<Value> shiftLevelVectors(OpBuilder &b, Location loc,
                                     const LaneScoreInputs &in,
                                     DenseI8ArrayAttr oddLookup,
                                     const ShiftPlan &plan,
                                     const ShiftPiece &piece,
                                     ArrayRef<DecodedRow> rows, int64_t g) {
  auto joinedAt = [&](int64_t at) {
    SmallVector<Value> reads;
    for (int64_t lane = 0; lane < kLaneTokens; ++lane)
      reads.push_back(rows[kLaneTokens * lane + g].row.read(b, loc, at, 16));
    return joinReads(b, loc, reads);
  };
  Value low = joinedAt(piece.lowRead);
  std::optional<SpreadBits> high;
  if (plan.twoPlanes)
    high = spreadToNibbles(b, loc, joinedAt(piece.highRead), piece.highUpper);
  SmallVector<Value> levels;
  for (int64_t f = 0; f < 8 / plan.bits; ++f)
    levels.push_back(shiftedLevelVector(b, loc, in, oddLookup, low, plan.bits,
                                        f, high ? &*high : nullptr));
  return levels;
}

/// The plane's bytes from the joined reads: lane L holds the window's
/// halves of token L's read.
Value planeBytes(OpBuilder &b, Location loc, Value joined,
                 const PlaneWindow &w) {
  if (w.identity())
    return joined;
  SmallVector<int64_t> mask;
  for (int64_t lane = 0; lane < kLaneTokens; ++lane)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 8; ++e)
        mask.push_back(16 * lane + w.half[h] + e);
  return vector::ShuffleOp::create(b, loc, joined, joined, mask);
}

/// Where a block's fp16 scale lies in a read of the block's first piece
/// (tq3_0's, inside its 16 bytes): the plane and the byte in the read.
struct ScaleInRead {
  int64_t plane = 0;
  int64_t at = 0;
};

std::optional<ScaleInRead> scaleInRead(const ::tq::quant::FormatSpec &spec,
                                       const Piece &piece) {
  const int64_t scale =
      piece.block * int64_t(spec.bytesPerBlock) + int64_t(spec.scaleOffset);
  for (auto [pl, w] : llvm::enumerate(piece.windows))
    if (scale >= w.read && scale + 2 <= w.read + 16)
      return ScaleInRead{int64_t(pl), scale - w.read};
  return std::nullopt;
}

/// The step's 16 tokens' scales (token 4L + g in lane 4L + g) from the
/// four groups' joined reads, each token's half at byte 16L + at of its
/// group's vector: two byte shuffles per pair of groups and a widening,
/// where a scalar load and conversion per token would be 16 of each.
Value scalesFromReads(OpBuilder &b, Location loc, ArrayRef<Value> joined,
                      int64_t at) {
  auto groupsOf = [&](int64_t g0) {
    SmallVector<int64_t> mask(32, 0);
    for (int64_t t = 0; t < kStepTokens; ++t) {
      const int64_t g = t % kLaneTokens, lane = t / kLaneTokens;
      if (g != g0 && g != g0 + 1)
        continue;
      for (int64_t k = 0; k < 2; ++k)
        mask[2 * t + k] = (g == g0 ? 0 : 64) + 16 * lane + at + k;
    }
    return vector::ShuffleOp::create(b, loc, joined[g0], joined[g0 + 1], mask)
        .getResult();
  };
  Value low = groupsOf(0), high = groupsOf(2);
  SmallVector<int64_t> mask;
  for (int64_t t = 0; t < kStepTokens; ++t)
    for (int64_t k = 0; k < 2; ++k)
      mask.push_back((t % kLaneTokens < 2 ? 0 : 32) + 2 * t + k);
  Value bytes = vector::ShuffleOp::create(b, loc, low, high, mask);
  Value halves = vector::BitCastOp::create(
      b, loc, VectorType::get({kStepTokens}, b.getF16Type()), bytes);
  return arith::ExtFOp::create(
      b, loc, VectorType::get({kStepTokens}, b.getF32Type()), halves);
}

/// Partial sums of two groups x and y (four i32 lanes per token in each
/// 128-bit lane) halved: [x0 y0 x1 y1] + [x2 y2 x3 y3] = [x02 y02 x13
/// y13] per lane.
Value pairSums(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddIOp::create(b, loc,
                               interleaveInLanes(b, loc, x, y, {0, 4, 1, 5}),
                               interleaveInLanes(b, loc, x, y, {2, 6, 3, 7}));
}

/// The tokens' sums from the pair sums of groups 0, 1 (ab) and 2, 3 (cd):
/// [ab0 ab1 cd0 cd1] + [ab2 ab3 cd2 cd3] = [a b c d] per lane, so lane
/// 4L + g holds token 4L + g's sum.
Value tokenSums(OpBuilder &b, Location loc, Value ab, Value cd) {
  return arith::AddIOp::create(b, loc,
                               interleaveInLanes(b, loc, ab, cd, {0, 1, 4, 5}),
                               interleaveInLanes(b, loc, ab, cd, {2, 3, 6, 7}));
}

} // namespace

Value bytescore::interleaveInLanes(OpBuilder &b, Location loc, Value x,
                                   Value y, ArrayRef<int64_t> lanePattern) {
  SmallVector<int64_t> mask;
  for (int64_t lane = 0; lane < kLaneTokens; ++lane)
    for (int64_t i : lanePattern)
      mask.push_back(i < 4 ? 4 * lane + i : 16 + 4 * lane + (i - 4));
  return vector::ShuffleOp::create(b, loc, x, y, mask).getResult();
}

Value bytescore::queryPerGroup(OpBuilder &b, Location loc, Value bytes) {
  auto type = cast<RankedTensorType>(bytes.getType());
  assert(type.getRank() == 3 && type.getDimSize(2) % 16 == 0 &&
         "query bytes are rows x heads x (16 x runs)");
  const int64_t runs = type.getDimSize(2) / 16;
  OpFoldResult rows = sizeOf(b, loc, bytes, 0);
  OpFoldResult heads = sizeOf(b, loc, bytes, 1);
  // rows x heads x runs x 16.
  Value byRuns = tensor::ExpandShapeOp::create(
      b, loc,
      RankedTensorType::get({type.getDimSize(0), type.getDimSize(1), runs, 16},
                            type.getElementType()),
      bytes, ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}},
      SmallVector<OpFoldResult>{rows, heads, b.getIndexAttr(runs),
                                b.getIndexAttr(16)});
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(kGroups), rows, heads,
                                     b.getIndexAttr(runs),
                                     b.getIndexAttr(4 * 16)};
  Value copies =
      tensor::EmptyOp::create(b, loc, sizes, type.getElementType());
  SmallVector<OpFoldResult> sliceSizes = {b.getIndexAttr(1), rows, heads,
                                          b.getIndexAttr(runs),
                                          b.getIndexAttr(16)};
  SmallVector<OpFoldResult> strides(5, b.getIndexAttr(1));
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t lane = 0; lane < kLaneTokens; ++lane) {
      SmallVector<OpFoldResult> offsets(5, b.getIndexAttr(0));
      offsets[0] = b.getIndexAttr(g);
      offsets[4] = b.getIndexAttr(16 * lane);
      copies = tensor::InsertSliceOp::create(b, loc, byRuns, copies, offsets,
                                             sliceSizes, strides);
    }
  return copies;
}

Value bytescore::writeStepScores(OpBuilder &b, Location loc, Value scores,
                                 ArrayRef<Value> totals, ArrayRef<Value> heads,
                                 Value t) {
  Value c0 = indexConst(b, loc, 0);
  for (auto [total, head] : llvm::zip_equal(totals, heads))
    scores = vector::TransferWriteOp::create(b, loc, total, scores,
                                             ValueRange{c0, head, t},
                                             ArrayRef<bool>{false})
                 .getResult();
  return scores;
}

LaneScoreInputs bytescore::prepareLaneScore(OpBuilder &b, Location loc,
                                            Value query,
                                            const VectorRowDecoder &codes,
                                            ArrayRef<int64_t> order,
                                            int64_t lowBits, bool narrow) {
  const ::tq::quant::FormatSpec &spec = codes.rowDecoder().spec();
  SmallVector<int8_t> table;
  const float levelScale = levelBytes(spec.codebook->centroids, narrow, table);
  // The lookup reads the index's low bits: the table repeated to 16.
  SmallVector<int8_t> lookup;
  for (int64_t i = 0; i < 16; ++i)
    lookup.push_back(table[i % table.size()]);
  LaneScoreInputs in;
  in.lookup = b.getDenseI8ArrayAttr(lookup);
  in.query = quantiseQuery(b, loc, query, order, /*reordered=*/true,
                           codes.blockLen(), codes.scaleBlocks(), levelScale,
                           maxLevel(narrow) + 1);
  in.groupQueries = queryPerGroup(b, loc, in.query.bytes);
  in.scores = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, query, 0),
                                sizeOf(b, loc, query, 1),
                                codes.rowDecoder().access().numTokens},
      b.getF32Type());
  if (lowBits) {
    // Bits below the second plane from the first, the rest from the
    // second.
    auto bytesType = VectorType::get({64}, b.getI8Type());
    in.lowMask = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(bytesType, int8_t((1 << lowBits) - 1)));
    in.highMask = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(bytesType, int8_t(~((1 << lowBits) - 1))));
  }
  return in;
}

Value bytescore::queryDot(OpBuilder &b, Location loc,
                          const LaneScoreInputs &in, Value chain, Value levels,
                          int64_t group, Value head, int64_t vector,
                          bool narrow) {
  // The query bytes of the vector's 16 values, in every lane.
  auto bytesType = VectorType::get({64}, b.getI8Type());
  Value c0 = indexConst(b, loc, 0);
  Value zeroByte = arith::ConstantIntOp::create(b, loc, b.getI8Type(), 0);
  Value qv = vector::TransferReadOp::create(
      b, loc, bytesType, in.groupQueries,
      ValueRange{indexConst(b, loc, group), c0, head,
                 indexConst(b, loc, vector), c0},
      zeroByte, ArrayRef<bool>{true});
  return ByteDotOp::create(b, loc, chain.getType(), chain, levels, qv,
                           narrow);
}

Value bytescore::levelVector(OpBuilder &b, Location loc,
                             const LaneScoreInputs &in, ArrayRef<Value> planes,
                             ArrayRef<SmallVector<int8_t, 64>> offsets) {
  auto bytesType = VectorType::get({64}, b.getI8Type());
  Value index = SelectBitsOp::create(b, loc, bytesType, planes[0],
                                     b.getDenseI8ArrayAttr(offsets[0]));
  if (in.lowMask) {
    Value high = SelectBitsOp::create(b, loc, bytesType, planes[1],
                                      b.getDenseI8ArrayAttr(offsets[1]));
    index = arith::OrIOp::create(
        b, loc, arith::AndIOp::create(b, loc, index, in.lowMask),
        arith::AndIOp::create(b, loc, high, in.highMask));
  }
  return ByteLookupOp::create(b, loc, bytesType, index, in.lookup);
}

FailureOr<Value> mlir::tq::emitTokenLaneScore(OpBuilder &b, Location loc,
                                              Value query,
                                              const VectorRowDecoder &keys,
                                              int64_t kvHeads, int64_t group,
                                              const TQToLoopsOptions &options) {
  if (cast<RankedTensorType>(query.getType()).getDimSize(0) != 1)
    return failure();
  if (options.blockLaneScore || options.shiftLaneScore)
    if (FailureOr<Value> quads =
            emitBlockLaneScore(b, loc, query, keys, kvHeads, group, options);
        succeeded(quads))
      return *quads;
  FailureOr<VectorRowDecoder> codes =
      VectorRowDecoder::getForScaledCodes(keys.rowDecoder());
  if (failed(codes))
    return failure();
  const ::tq::quant::FormatSpec &spec = keys.rowDecoder().spec();
  std::optional<ShiftPlan> shifts;
  std::optional<Plan> plan;
  ArrayRef<int64_t> order = chooseLanePlan(spec, options.shiftLaneScore,
                                           shiftPlanFor, planFor, shifts, plan);
  if (order.empty() || int64_t(order.size()) != codes->width() ||
      codes->width() % 16 != 0)
    return failure();
  const int64_t blocks = codes->scaleBlocks();
  const int64_t lowBits =
      shifts ? (shifts->twoPlanes ? shifts->bits : 0) : plan->lowBits;
  LaneScoreInputs in = prepareLaneScore(b, loc, query, *codes, order, lowBits,
                                        options.narrowLevels);
  // The shift plan's odd level vectors hold the high plane's bit at bit 3
  // of the index instead of 2.
  DenseI8ArrayAttr oddLookup;
  if (shifts && shifts->twoPlanes)
    oddLookup = highBitAtThree(b, in.lookup);
  const ByteQuery &q = in.query;
  const int64_t block = headBlock(group, 4);
  auto sumType = VectorType::get({16}, b.getI32Type());
  Value c0 = indexConst(b, loc, 0);
  VectorRowDecoder &rowsDecoder = *codes;
  return forEachDecodedRows(
      b, loc, rowsDecoder, kvHeads, /*lanes=*/64, kStepTokens, in.scores,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value scores) {
        // Scale of block blk of the step's tokens, token t in lane t.
        SmallVector<int64_t> tokenLanes;
        for (int64_t t = 0; t < kStepTokens; ++t)
          tokenLanes.push_back(t);
        // Blocks whose fp16 scale the first piece's reads hold take it
        // from them (below); the others' are read per row here. (Pieces
        // come in block order.)
        SmallVector<Value> blockScales(blocks);
        SmallVector<std::optional<ScaleInRead>> inReads(blocks);
        if (rowsDecoder.hasHalfBlockScales() && plan)
          for (auto [k, piece] : llvm::enumerate(plan->pieces))
            if (k == 0 || plan->pieces[k - 1].block != piece.block)
              inReads[piece.block] = scaleInRead(spec, piece);
        for (int64_t blk = 0; blk < blocks; ++blk) {
          if (inReads[blk])
            continue;
          SmallVector<Value> perRow;
          if (rowsDecoder.hasHalfScaleBits()) {
            // fp16 scales as bits, widened together: one conversion per
            // step where a scalar one per row (two uops and an insert on
            // the vector ports) was a tenth of the score's.
            for (const DecodedRow &row : rows)
              perRow.push_back(
                  rowsDecoder.scaleBitsOfBlock(b, loc, row.row, blk));
            Value bits = spreadScalars(b, loc, perRow, tokenLanes);
            auto lanes = int64_t(tokenLanes.size());
            blockScales[blk] = arith::ExtFOp::create(
                b, loc, VectorType::get({lanes}, b.getF32Type()),
                vector::BitCastOp::create(
                    b, loc, VectorType::get({lanes}, b.getF16Type()), bits)
                    .getResult());
            continue;
          }
          for (const DecodedRow &row : rows)
            perRow.push_back(
                rowsDecoder.scaleOfBlock(b, loc, row.row, row.t, kvh, blk));
          blockScales[blk] = spreadScalars(b, loc, perRow, tokenLanes);
        }
        return forEachHeadBlock(
            b, loc, kvh, group, block, scores,
            [&](OpBuilder &b, Location loc, const HeadBlock &blockHeads,
                Value scores) {
              ArrayRef<Value> heads = blockHeads.heads;
              Value zero = arith::ConstantOp::create(
                  b, loc, cast<TypedAttr>(b.getZeroAttr(sumType)));
              SmallVector<Value> totals(block);
              for (int64_t blk = 0; blk < blocks; ++blk) {
                // Group by group (four tokens, 4L + g in lane L), so only
                // one group's accumulators are live while its rows are
                // decoded: acc[hh * kGroups + g] is head hh's partial sums
                // of group g.
                SmallVector<Value> acc(block * kGroups, zero);
                // Pair sums of groups 0, 1 and 2, 3 per head, formed as
                // soon as both groups are done.
                SmallVector<Value> pairs(2 * block);
                // Each group's joined reads that hold the block's scales.
                SmallVector<Value> scaleReads;
                for (int64_t g = 0; g < kGroups; ++g) {
                  int64_t vectorIndex = 0;
                  auto dotLevels = [&](Value levels) {
                    for (int64_t hh = 0; hh < block; ++hh) {
                      Value &chain = acc[hh * kGroups + g];
                      chain = queryDot(b, loc, in, chain, levels, g, heads[hh],
                                       vectorIndex, options.narrowLevels);
                    }
                    ++vectorIndex;
                  };
                  if (shifts)
                    for (const ShiftPiece &piece : shifts->pieces) {
                      if (piece.block != blk) {
                        vectorIndex += 8 / shifts->bits;
                        continue;
                      }
                      for (Value levels : shiftLevelVectors(
                               b, loc, in, oddLookup, *shifts, piece, rows, g))
                        dotLevels(levels);
                    }
                  bool firstPiece = true;
                  for (const Piece &piece : plan ? ArrayRef<Piece>(plan->pieces)
                                                 : ArrayRef<Piece>()) {
                    if (piece.block != blk) {
                      vectorIndex += piece.levels.size();
                      continue;
                    }
                    SmallVector<Value> planeVectors;
                    for (auto [pl, w] : llvm::enumerate(piece.windows)) {
                      SmallVector<Value> reads;
                      for (int64_t lane = 0; lane < kLaneTokens; ++lane)
                        reads.push_back(rows[kLaneTokens * lane + g].row.read(
                            b, loc, w.read, 16));
                      Value joined = joinReads(b, loc, reads);
                      if (firstPiece && inReads[blk] &&
                          inReads[blk]->plane == int64_t(pl))
                        scaleReads.push_back(joined);
                      planeVectors.push_back(planeBytes(b, loc, joined, w));
                    }
                    firstPiece = false;
                    for (const LevelVector &level : piece.levels)
                      dotLevels(
                          levelVector(b, loc, in, planeVectors, level.offsets));
                  }
                  if (g % 2 == 1)
                    for (int64_t hh = 0; hh < block; ++hh)
                      pairs[2 * hh + g / 2] =
                          pairSums(b, loc, acc[hh * kGroups + g - 1],
                                   acc[hh * kGroups + g]);
                }
                if (inReads[blk])
                  blockScales[blk] =
                      scalesFromReads(b, loc, scaleReads, inReads[blk]->at);
                for (int64_t hh = 0; hh < block; ++hh) {
                  Value sums =
                      tokenSums(b, loc, pairs[2 * hh], pairs[2 * hh + 1]);
                  Value offset = tensor::ExtractOp::create(
                      b, loc, q.offsets,
                      ValueRange{c0, heads[hh], indexConst(b, loc, blk)});
                  Value exact = arith::SubIOp::create(
                      b, loc, sums,
                      vector::BroadcastOp::create(b, loc, sumType, offset));
                  Value factor = tensor::ExtractOp::create(
                      b, loc, q.factors, ValueRange{c0, heads[hh]});
                  Value scaled = scaledSums(
                      b, loc, exact, splatF32(b, loc, factor, kStepTokens),
                      blockScales[blk]);
                  totals[hh] = totals[hh] ? arith::AddFOp::create(
                                                b, loc, totals[hh], scaled)
                                                .getResult()
                                          : scaled;
                }
              }
              return writeStepScores(b, loc, scores, totals, heads,
                                     rows[0].t);
            });
      },
      /*decode=*/false);
}
