//===- LowerLaneLookup.cpp - tq.lane_lookup for the target's vector ISA ---===//

#include "tq/Conversion/Passes.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/MathExtras.h"

#include <numeric>

namespace mlir::tq {
#define GEN_PASS_DEF_TQLOWERLANELOOKUP
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;
using namespace mlir::tq;

namespace {

/// A register permute: `lanes` indices against a table of `lanes` floats
/// (vpermps reads the low log2(lanes) bits of each index).
struct Permute {
  int64_t lanes;
  StringRef intrinsic;
};

/// levels[index mod n] by a binary select tree: bit k (k < log2 n) of the
/// index picks between pairs of the previous level. `levels` are scalar
/// attributes of the result's element type.
Value selectTree(OpBuilder &b, Location loc, ArrayRef<TypedAttr> levels,
                 Value index) {
  auto indexType = cast<VectorType>(index.getType());
  const int64_t n = indexType.getDimSize(0);
  auto resultType = VectorType::get({n}, levels.front().getType());
  auto splatIndex = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            indexType, b.getIntegerAttr(indexType.getElementType(), v)));
  };
  SmallVector<Value> level;
  for (TypedAttr c : levels)
    level.push_back(arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(resultType, c)));
  Value zero = splatIndex(0);
  for (int64_t bit = 1; level.size() > 1; bit <<= 1) {
    Value masked = arith::AndIOp::create(b, loc, index, splatIndex(bit));
    Value isSet =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, masked, zero);
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2)
      next.push_back(
          arith::SelectOp::create(b, loc, isSet, level[i + 1], level[i]));
    level = std::move(next);
  }
  return level.front();
}

/// The number of `width`-lane parts of `lanes` is a power of two
/// (concatLanes joins them pairwise).
bool splitsInto(int64_t lanes, int64_t width) {
  return lanes % width == 0 && llvm::isPowerOf2_64(lanes / width);
}

/// The 1-D vectors [first, first + lanes) of `v`, for each first.
SmallVector<Value> splitLanes(OpBuilder &b, Location loc, Value v,
                              int64_t lanes) {
  const int64_t n = cast<VectorType>(v.getType()).getDimSize(0);
  if (n == lanes)
    return {v};
  SmallVector<Value> parts;
  for (int64_t first = 0; first < n; first += lanes)
    parts.push_back(vector::ExtractStridedSliceOp::create(
        b, loc, v, ArrayRef<int64_t>{first}, ArrayRef<int64_t>{lanes},
        ArrayRef<int64_t>{1}));
  return parts;
}

/// The parts concatenated (a power-of-two count of equal widths).
Value concatLanes(OpBuilder &b, Location loc, SmallVector<Value> parts) {
  while (parts.size() > 1) {
    SmallVector<Value> joined;
    for (size_t i = 0; i < parts.size(); i += 2) {
      int64_t width = cast<VectorType>(parts[i].getType()).getDimSize(0);
      SmallVector<int64_t> mask(2 * width);
      std::iota(mask.begin(), mask.end(), 0);
      joined.push_back(
          vector::ShuffleOp::create(b, loc, parts[i], parts[i + 1], mask));
    }
    parts = std::move(joined);
  }
  return parts.front();
}

/// One call of `intrinsic` per part, the results (of `partType`)
/// concatenated: operand k is split into parts of lanes[k] lanes, or, with
/// lanes[k] = 0, passed whole to every call. Every split operand has the
/// same power-of-two count of parts.
Value intrinsicParts(OpBuilder &b, Location loc, StringRef intrinsic,
                     Type partType, ArrayRef<Value> operands,
                     ArrayRef<int64_t> lanes) {
  SmallVector<SmallVector<Value>> split;
  size_t count = 1;
  for (auto [operand, width] : llvm::zip_equal(operands, lanes)) {
    split.push_back(width ? splitLanes(b, loc, operand, width)
                          : SmallVector<Value>{operand});
    count = std::max(count, split.back().size());
  }
  SmallVector<Value> parts;
  for (size_t k = 0; k < count; ++k) {
    SmallVector<Value> args;
    for (const SmallVector<Value> &s : split)
      args.push_back(s.size() == 1 ? s.front() : s[k]);
    parts.push_back(LLVM::CallIntrinsicOp::create(
                        b, loc, partType, b.getStringAttr(intrinsic), args)
                        .getResult(0));
  }
  return concatLanes(b, loc, std::move(parts));
}

/// One call of the register-permute `intrinsic` (table, index part) per
/// `partLanes` lanes of `index`, the results concatenated.
Value permuteParts(OpBuilder &b, Location loc, Value table, Value index,
                   int64_t partLanes, StringRef intrinsic) {
  return intrinsicParts(b, loc, intrinsic, table.getType(), {table, index},
                        {0, partLanes});
}

/// A constant vector<lanes x element> of `table` repeated (a register
/// permute's table: the index bits above log2 of the table's size then do
/// not matter).
template <typename T>
Value repeatedTable(OpBuilder &b, Location loc, ArrayRef<T> table,
                    int64_t lanes, Type element) {
  SmallVector<T> repeated;
  for (int64_t i = 0; i < lanes; ++i)
    repeated.push_back(table[i % table.size()]);
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(VectorType::get({lanes}, element),
                             ArrayRef<T>(repeated)));
}

/// table[index mod n] by one permute per `p.lanes` lanes, the parts
/// concatenated. The permute reads log2(p.lanes) index bits, so the table
/// repeats to p.lanes entries: the bits above log2 n do not matter.
Value permuteLanes(OpBuilder &b, Location loc, ArrayRef<float> table,
                   Value index, const Permute &p) {
  return permuteParts(
      b, loc, repeatedTable(b, loc, table, p.lanes, b.getF32Type()), index,
      p.lanes, p.intrinsic);
}

struct ExpandLaneLookup : public OpRewritePattern<LaneLookupOp> {
  ExpandLaneLookup(MLIRContext *context, std::optional<Permute> permute)
      : OpRewritePattern(context), permute(permute) {}

  LogicalResult matchAndRewrite(LaneLookupOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<float> table = op.getTable();
    const int64_t n = op.getIndex().getType().getDimSize(0);
    Value result;
    // (A one-entry table is a constant: the select tree has no level.)
    if (permute && table.size() > 1 &&
        int64_t(table.size()) <= permute->lanes &&
        splitsInto(n, permute->lanes))
      result = permuteLanes(rewriter, op.getLoc(), table, op.getIndex(),
                            *permute);
    else
      result = selectTree(rewriter, op.getLoc(),
                          llvm::map_to_vector(table,
                                              [&](float c) -> TypedAttr {
                                                return rewriter.getF32FloatAttr(
                                                    c);
                                              }),
                          op.getIndex());
    rewriter.replaceOp(op, result);
    return success();
  }

  std::optional<Permute> permute;
};

/// The byte and word instructions the target has for the integer dot
/// paths' ops.
struct IntegerOps {
  /// AVX512-VNNI and -BW: 512-bit vpshufb, vpermw, vpdpbusd, vpdpwssd.
  bool vnni = false;
  /// AVX512-BF16 as well: vdpbf16ps.
  bool bf16 = false;
  /// AVX2 (and no AVX512-VNNI): 256-bit vpshufb, vpmaddubsw, vpmaddwd.
  bool avx2 = false;
  /// AVX-VNNI as well (VEX-encoded 256-bit vpdpbusd, vpdpwssd; implies
  /// avx2).
  bool avxVnni = false;
  /// AVX512-VBMI: 512-bit vpermb and vpmultishiftqb.
  bool vbmi = false;

  /// The i32 lanes of one vpdpbusd / vpdpwssd for `lanes` accumulator
  /// lanes: 16, 8 or 4 with AVX512-VNNI, 8 with AVX-VNNI; 0 where there
  /// is none or the lanes do not split into a power-of-two count of them.
  int64_t vnniLanes(int64_t lanes) const;
};

/// A splat integer constant of vector type `type`.
Value splatInt(OpBuilder &b, Location loc, VectorType type, int64_t v) {
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          type, b.getIntegerAttr(type.getElementType(), v)));
}

/// tq.byte_lookup: with `vbmi` one vpermb per 64 lanes (the table repeated
/// to 64 bytes); else one vpshufb per 64 lanes (`vnni`: AVX512-BW, which
/// every VNNI CPU has) or per 32 (`avx2`), the table repeated to 16
/// bytes in each 128-bit lane; vpshufb reads the low 4 index bits and
/// zeroes lanes whose bit 7 is set, so the index is masked to its low 4
/// bits first. Else (or for lane counts that are not multiples of the
/// vpshufb's) a select tree.
struct ExpandByteLookup : public OpRewritePattern<ByteLookupOp> {
  ExpandByteLookup(MLIRContext *context, IntegerOps ops)
      : OpRewritePattern(context), ops(ops) {}

  LogicalResult matchAndRewrite(ByteLookupOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int8_t> table = op.getTable();
    const Location loc = op.getLoc();
    auto type = op.getIndex().getType();
    const int64_t n = type.getDimSize(0);
    const int64_t width = ops.vnni ? 64 : ops.avx2 ? 32 : 0;
    Value result;
    if (ops.vbmi && table.size() > 1 && splitsInto(n, 64)) {
      // vpermb reads the low 6 index bits: the table repeated to 64 bytes
      // needs no mask.
      result = permuteParts(
          rewriter, loc,
          repeatedTable(rewriter, loc, table, 64, rewriter.getI8Type()),
          op.getIndex(), 64, "llvm.x86.avx512.permvar.qi.512");
    } else if (width && table.size() > 1 && splitsInto(n, width)) {
      Value low = arith::AndIOp::create(rewriter, loc, op.getIndex(),
                                        splatInt(rewriter, loc, type, 15));
      result = permuteParts(rewriter, loc,
                            repeatedTable(rewriter, loc, table, width,
                                          rewriter.getI8Type()),
                            low,
                            width,
                            ops.vnni ? "llvm.x86.avx512.pshuf.b.512"
                                     : "llvm.x86.avx2.pshuf.b");
    } else {
      result = selectTree(rewriter, loc,
                          llvm::map_to_vector(table,
                                              [&](int8_t c) -> TypedAttr {
                                                return rewriter
                                                    .getI8IntegerAttr(c);
                                              }),
                          op.getIndex());
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  IntegerOps ops;
};

/// tq.select_bits: with `vbmi` one vpmultishiftqb per 64 bytes (the
/// intrinsic takes the offsets first); else each byte's 64-bit lane
/// rotated right by its offset and truncated.
struct ExpandSelectBits : public OpRewritePattern<SelectBitsOp> {
  ExpandSelectBits(MLIRContext *context, IntegerOps ops)
      : OpRewritePattern(context), ops(ops) {}

  LogicalResult matchAndRewrite(SelectBitsOp op,
                                PatternRewriter &rewriter) const override {
    const Location loc = op.getLoc();
    auto type = op.getSource().getType();
    const int64_t n = type.getDimSize(0);
    ArrayRef<int8_t> offsets = op.getOffsets();
    if (ops.vbmi && splitsInto(n, 64)) {
      Value control = arith::ConstantOp::create(
          rewriter, loc, DenseElementsAttr::get(type, offsets));
      rewriter.replaceOp(
          op, intrinsicParts(rewriter, loc,
                             "llvm.x86.avx512.pmultishift.qb.512",
                             VectorType::get({64}, rewriter.getI8Type()),
                             {control, op.getSource()}, {64, 64}));
      return success();
    }
    auto qwords = VectorType::get({n / 8}, rewriter.getI64Type());
    auto wide = VectorType::get({n}, rewriter.getI64Type());
    Value lanes =
        vector::BitCastOp::create(rewriter, loc, qwords, op.getSource());
    SmallVector<int64_t> spread;
    SmallVector<int64_t> right, left;
    for (int64_t i = 0; i < n; ++i) {
      spread.push_back(i / 8);
      right.push_back(offsets[i]);
      left.push_back((64 - offsets[i]) % 64);
    }
    Value each = vector::ShuffleOp::create(rewriter, loc, lanes, lanes, spread);
    auto constant = [&](ArrayRef<int64_t> v) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       DenseElementsAttr::get(wide, v));
    };
    Value rotated = arith::OrIOp::create(
        rewriter, loc,
        arith::ShRUIOp::create(rewriter, loc, each, constant(right)),
        arith::ShLIOp::create(rewriter, loc, each, constant(left)));
    rewriter.replaceOp(op,
                       arith::TruncIOp::create(rewriter, loc, type, rotated));
    return success();
  }

  IntegerOps ops;
};

/// A dot op (acc, lhs, rhs) done per `width` lanes of acc: `part` of each
/// (acc part, lhs part, rhs part; lhs and rhs hold `perLane` elements a
/// lane) gives that part's result, and the parts are concatenated.
Value mapParts(OpBuilder &b, Location loc, Value acc, Value lhs, Value rhs,
               int64_t width, int64_t perLane,
               function_ref<Value(Value, Value, Value)> part) {
  SmallVector<Value> accs = splitLanes(b, loc, acc, width);
  SmallVector<Value> lhsParts = splitLanes(b, loc, lhs, perLane * width);
  SmallVector<Value> rhsParts = splitLanes(b, loc, rhs, perLane * width);
  SmallVector<Value> parts;
  for (size_t k = 0; k < accs.size(); ++k)
    parts.push_back(part(accs[k], lhsParts[k], rhsParts[k]));
  return concatLanes(b, loc, std::move(parts));
}

/// One call of the VNNI `intrinsic` per `width` lanes of acc (lhs and rhs
/// hold `perLane` elements a lane).
Value vnniParts(OpBuilder &b, Location loc, StringRef intrinsic, Value acc,
                Value lhs, Value rhs, int64_t width, int64_t perLane) {
  auto accType = VectorType::get(
      {width}, cast<VectorType>(acc.getType()).getElementType());
  return intrinsicParts(b, loc, intrinsic, accType, {acc, lhs, rhs},
                        {width, perLane * width, perLane * width});
}

/// The widest of 16, 8 or 4 lanes that divides `lanes` into a power-of-two
/// count of parts (concatLanes joins them pairwise); 0 if none does.
int64_t intrinsicLanes(int64_t lanes) {
  for (int64_t w : {16, 8, 4})
    if (splitsInto(lanes, w))
      return w;
  return 0;
}

int64_t IntegerOps::vnniLanes(int64_t lanes) const {
  if (vnni)
    return intrinsicLanes(lanes);
  return avxVnni && splitsInto(lanes, 8) ? 8 : 0;
}

/// One `intrinsic` (lhs part, rhs part) -> vector<width x i32> per
/// `width` lanes of acc, each added to its accumulator part: vpmaddwd
/// (avx2) of words, or vpmaddubsw then vpmaddwd against ones of bytes.
Value pmaddParts(OpBuilder &b, Location loc, Value acc, Value lhs, Value rhs,
                 int64_t width, bool bytes) {
  auto accType = VectorType::get({width}, b.getI32Type());
  auto wordsType = VectorType::get({2 * width}, b.getI16Type());
  Value ones = bytes ? splatInt(b, loc, wordsType, 1) : Value();
  return mapParts(
      b, loc, acc, lhs, rhs, width, bytes ? 4 : 2,
      [&](Value a, Value words, Value other) -> Value {
        if (bytes) {
          // Pair sums of unsigned x signed bytes, saturated to i16 (never
          // reached: the caller checked `narrow`).
          words = LLVM::CallIntrinsicOp::create(
                      b, loc, wordsType,
                      b.getStringAttr("llvm.x86.avx2.pmadd.ub.sw"),
                      ValueRange{words, other})
                      .getResult(0);
          other = ones;
        }
        Value sums = LLVM::CallIntrinsicOp::create(
                         b, loc, accType,
                         b.getStringAttr("llvm.x86.avx2.pmadd.wd"),
                         ValueRange{words, other})
                         .getResult(0);
        return arith::AddIOp::create(b, loc, a, sums);
      });
}

/// tq.byte_dot: with `vnni` one vpdpbusd per 16 lanes (512 bits; 256 and
/// 128 for 8 and 4 lanes, AVX512-VL); with `avxVnni` one VEX vpdpbusd per
/// 8 lanes (the same intrinsic; LLVM encodes it as AVX-VNNI where the
/// CPU has no AVX512-VL); with `avx2` and `narrow`,
/// vpmaddubsw and vpmaddwd against ones per 8 lanes (exact: lhs bytes
/// below 128 keep each pair sum within i16). Else zero/sign extension to
/// i32, a multiply and a sum of each group of four.
struct ExpandByteDot : public OpRewritePattern<ByteDotOp> {
  ExpandByteDot(MLIRContext *context, IntegerOps ops)
      : OpRewritePattern(context), ops(ops) {}

  LogicalResult matchAndRewrite(ByteDotOp op,
                                PatternRewriter &rewriter) const override {
    const Location loc = op.getLoc();
    const int64_t lanes = op.getAcc().getType().getDimSize(0);
    const int64_t bytes = 4 * lanes;
    if (const int64_t width = ops.vnniLanes(lanes)) {
      rewriter.replaceOp(
          op, vnniParts(rewriter, loc,
                        "llvm.x86.avx512.vpdpbusd." + std::to_string(32 * width),
                        op.getAcc(), op.getLhs(), op.getRhs(), width, 4));
      return success();
    }
    if (ops.avx2 && op.getNarrow() && splitsInto(lanes, 8)) {
      rewriter.replaceOp(op, pmaddParts(rewriter, loc, op.getAcc(),
                                        op.getLhs(), op.getRhs(), 8,
                                        /*bytes=*/true));
      return success();
    }
    auto wide = VectorType::get({bytes}, rewriter.getI32Type());
    Value products = arith::MulIOp::create(
        rewriter, loc, arith::ExtUIOp::create(rewriter, loc, wide, op.getLhs()),
        arith::ExtSIOp::create(rewriter, loc, wide, op.getRhs()));
    // Lane l sums products 4l .. 4l + 3: four strided shuffles (1-D
    // vectors only; convert-vector-to-llvm has no multi-reductions).
    Value sum = op.getAcc();
    for (int64_t k = 0; k < 4; ++k) {
      SmallVector<int64_t> mask;
      for (int64_t l = 0; l < lanes; ++l)
        mask.push_back(4 * l + k);
      sum = arith::AddIOp::create(
          rewriter, loc, sum,
          vector::ShuffleOp::create(rewriter, loc, products, products, mask));
    }
    rewriter.replaceOp(op, sum);
    return success();
  }

  IntegerOps ops;
};

/// table[index mod n] for tables of up to 16 words by vpshufb (AVX2) per
/// 16 lanes: word index w reads bytes 2(w mod 8) and 2(w mod 8) + 1 of a
/// 16-byte table of 8 words (lane index w * 0x202 + 0x100 on the low 3
/// bits), repeated to both 128-bit lanes; a 16-word table takes two such
/// lookups and bit 3 of w picks between them.
Value wordShuffleLookup(OpBuilder &b, Location loc, ArrayRef<int16_t> table,
                        Value index) {
  auto indexType = cast<VectorType>(index.getType());
  auto bytesType =
      VectorType::get({2 * indexType.getDimSize(0)}, b.getI8Type());
  Value low = arith::AndIOp::create(b, loc, index,
                                    splatInt(b, loc, indexType, 7));
  Value lanes = vector::BitCastOp::create(
      b, loc, bytesType,
      arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, low,
                                        splatInt(b, loc, indexType, 0x202)),
          splatInt(b, loc, indexType, 0x100)));
  auto lookupHalf = [&](int64_t first) {
    SmallVector<int8_t> bytes;
    for (int64_t w = 0; w < 8; ++w) {
      const uint16_t word = uint16_t(table[(first + w) % table.size()]);
      bytes.push_back(int8_t(word & 0xff));
      bytes.push_back(int8_t(word >> 8));
    }
    Value words = permuteParts(
        b, loc, repeatedTable(b, loc, ArrayRef<int8_t>(bytes), 32, b.getI8Type()),
        lanes, 32, "llvm.x86.avx2.pshuf.b");
    return vector::BitCastOp::create(b, loc, indexType, words).getResult();
  };
  if (table.size() <= 8)
    return lookupHalf(0);
  Value high = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne,
      arith::AndIOp::create(b, loc, index, splatInt(b, loc, indexType, 8)),
      splatInt(b, loc, indexType, 0));
  Value upper = lookupHalf(8);
  Value lower = lookupHalf(0);
  return arith::SelectOp::create(b, loc, high, upper, lower);
}

/// tq.word_lookup: with AVX512-BW (every VNNI CPU) one vpermw per 32 lanes,
/// the table repeated to 32 words (vpermw reads the low 5 index bits);
/// with AVX2 and at most 16 words, vpshufb on the table's bytes
/// (wordShuffleLookup); else a select tree.
struct ExpandWordLookup : public OpRewritePattern<WordLookupOp> {
  ExpandWordLookup(MLIRContext *context, IntegerOps ops)
      : OpRewritePattern(context), ops(ops) {}

  LogicalResult matchAndRewrite(WordLookupOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int16_t> table = op.getTable();
    const Location loc = op.getLoc();
    const int64_t n = op.getIndex().getType().getDimSize(0);
    Value result;
    if (ops.avx2 && table.size() > 1 && table.size() <= 16 &&
        splitsInto(n, 16)) {
      result = wordShuffleLookup(rewriter, loc, table, op.getIndex());
    } else if (ops.vnni && table.size() > 1 && splitsInto(n, 32)) {
      result = permuteParts(
          rewriter, loc,
          repeatedTable(rewriter, loc, table, 32, rewriter.getI16Type()),
          op.getIndex(), 32, "llvm.x86.avx512.permvar.hi.512");
    } else {
      result = selectTree(rewriter, loc,
                          llvm::map_to_vector(table,
                                              [&](int16_t c) -> TypedAttr {
                                                return rewriter
                                                    .getI16IntegerAttr(c);
                                              }),
                          op.getIndex());
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  IntegerOps ops;
};

/// tq.word_lookup of bytes widened to words by a shuffle with zeros (how
/// the pair weighted sum forms its indices) becomes two tq.byte_lookup of
/// the bytes, the table's low and high bytes, and the same shuffle taking
/// the high bytes where it took zeros. With AVX2 a byte lookup is one
/// vpshufb per 32 lanes where a word lookup takes three instructions per
/// 16; with AVX-512 one vpshufb or vpermb (one uop) per 64 where vpermw
/// is two uops per 32. Exact: the index word is the byte (high byte
/// zero), which a table of N <= 16 words (byte_lookup's limit) reads mod N
/// as byte_lookup does; words are little-endian (x86).
struct WordLookupOfWidenedBytes : public OpRewritePattern<WordLookupOp> {
  WordLookupOfWidenedBytes(MLIRContext *context)
      : OpRewritePattern(context, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(WordLookupOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int16_t> table = op.getTable();
    if (table.size() > 16)
      return rewriter.notifyMatchFailure(op, "more words than byte_lookup");
    auto cast = op.getIndex().getDefiningOp<vector::BitCastOp>();
    auto widen =
        cast ? cast.getSource().getDefiningOp<vector::ShuffleOp>() : nullptr;
    if (!widen || !widen.getV1VectorType().getElementType().isInteger(8) ||
        !matchPattern(widen.getV2(), m_Zero()))
      return rewriter.notifyMatchFailure(op, "index is not widened bytes");
    const int64_t bytes = widen.getV1VectorType().getDimSize(0);
    ArrayRef<int64_t> mask = widen.getMask();
    SmallVector<int64_t> split;
    for (size_t k = 0; k + 1 < mask.size(); k += 2) {
      if (mask[k] < 0 || mask[k] >= bytes || mask[k + 1] < bytes)
        return rewriter.notifyMatchFailure(op, "high bytes are not zeros");
      split.append({mask[k], mask[k] + bytes});
    }
    SmallVector<int8_t> low, high;
    for (int16_t w : table) {
      low.push_back(int8_t(uint16_t(w) & 0xff));
      high.push_back(int8_t(uint16_t(w) >> 8));
    }
    const Location loc = op.getLoc();
    Value source = widen.getV1();
    auto lookup = [&](ArrayRef<int8_t> t) -> Value {
      return ByteLookupOp::create(rewriter, loc, source.getType(), source,
                                  rewriter.getDenseI8ArrayAttr(t));
    };
    Value words = vector::ShuffleOp::create(rewriter, loc, lookup(low),
                                            lookup(high), split);
    rewriter.replaceOpWithNewOp<vector::BitCastOp>(op, op.getType(), words);
    return success();
  }
};

/// tq.pair_dot: per 16, 8 or 4 lanes one vpdpwssd (i16, `vnni`) or one
/// x86vector.avx512.dot (vdpbf16ps; bf16, `bf16`); i16 with `avxVnni`
/// one VEX vpdpwssd per 8 lanes (LLVM may still emit vpmaddwd + vpaddd
/// where that is faster on the CPU), with `avx2` vpmaddwd and an add per
/// 8 lanes. Else extensions to the accumulator's type, a multiply and the
/// sum of each pair.
struct ExpandPairDot : public OpRewritePattern<PairDotOp> {
  ExpandPairDot(MLIRContext *context, IntegerOps ops)
      : OpRewritePattern(context), ops(ops) {}

  LogicalResult matchAndRewrite(PairDotOp op,
                                PatternRewriter &rewriter) const override {
    const Location loc = op.getLoc();
    VectorType accType = op.getAcc().getType();
    const bool floats = isa<Float32Type>(accType.getElementType());
    const int64_t lanes = accType.getDimSize(0);
    if (floats) {
      if (const int64_t width = intrinsicLanes(lanes); width && ops.bf16) {
        auto partType = VectorType::get({width}, accType.getElementType());
        rewriter.replaceOp(
            op, mapParts(rewriter, loc, op.getAcc(), op.getLhs(), op.getRhs(),
                         width, 2, [&](Value a, Value l, Value r) -> Value {
                           return x86vector::DotBF16Op::create(
                               rewriter, loc, partType, a, l, r);
                         }));
        return success();
      }
    } else if (const int64_t width = ops.vnniLanes(lanes)) {
      rewriter.replaceOp(
          op, vnniParts(rewriter, loc,
                        "llvm.x86.avx512.vpdpwssd." + std::to_string(32 * width),
                        op.getAcc(), op.getLhs(), op.getRhs(), width, 2));
      return success();
    } else if (ops.avx2 && splitsInto(lanes, 8)) {
      rewriter.replaceOp(op, pmaddParts(rewriter, loc, op.getAcc(),
                                        op.getLhs(), op.getRhs(), 8,
                                        /*bytes=*/false));
      return success();
    }
    auto wide = VectorType::get({2 * lanes}, accType.getElementType());
    auto extend = [&](Value v) -> Value {
      if (floats)
        return arith::ExtFOp::create(rewriter, loc, wide, v);
      return arith::ExtSIOp::create(rewriter, loc, wide, v);
    };
    Value lhs = extend(op.getLhs()), rhs = extend(op.getRhs());
    Value products = floats ? arith::MulFOp::create(rewriter, loc, lhs, rhs)
                                  .getResult()
                            : arith::MulIOp::create(rewriter, loc, lhs, rhs)
                                  .getResult();
    auto half = [&](int64_t k) -> Value {
      SmallVector<int64_t> mask;
      for (int64_t l = 0; l < lanes; ++l)
        mask.push_back(2 * l + k);
      return vector::ShuffleOp::create(rewriter, loc, products, products,
                                       mask);
    };
    Value sum;
    if (floats)
      sum = arith::AddFOp::create(
          rewriter, loc, op.getAcc(),
          arith::AddFOp::create(rewriter, loc, half(0), half(1)));
    else
      sum = arith::AddIOp::create(
          rewriter, loc, op.getAcc(),
          arith::AddIOp::create(rewriter, loc, half(0), half(1)));
    rewriter.replaceOp(op, sum);
    return success();
  }

  IntegerOps ops;
};

/// (x & m) | (y & ~m) with a splat constant m of 8-, 16- or 32-bit lanes
/// on whole 512-bit vectors: one vpternlogd per 512 bits. LLVM keeps m
/// and ~m as two constants and emits an and and a ternlog (two uops of
/// the vector ports) for what is one bit select.
struct MergeMaskedBits : public OpRewritePattern<arith::OrIOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::OrIOp op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<VectorType>(op.getType());
    if (!type || type.isScalable() || type.getRank() != 1)
      return failure();
    const unsigned width = type.getElementTypeBitWidth();
    const int64_t bits = type.getNumElements() * int64_t(width);
    if ((width != 8 && width != 16 && width != 32) || bits % 512 != 0)
      return failure();
    // An operand `v & constant`: v and the constant's splat value.
    auto masked = [](Value operand) -> std::optional<std::pair<Value, APInt>> {
      auto andOp = operand.getDefiningOp<arith::AndIOp>();
      if (!andOp)
        return std::nullopt;
      for (int k = 0; k < 2; ++k) {
        APInt splat;
        if (matchPattern(andOp->getOperand(k), m_ConstantInt(&splat)))
          return std::make_pair(andOp->getOperand(1 - k), splat);
      }
      return std::nullopt;
    };
    auto lhs = masked(op.getLhs()), rhs = masked(op.getRhs());
    if (!lhs || !rhs || lhs->second != ~rhs->second)
      return failure();
    const Location loc = op.getLoc();
    auto dwords = VectorType::get({bits / 32}, rewriter.getI32Type());
    auto asDwords = [&](Value v) {
      return vector::BitCastOp::create(rewriter, loc, dwords, v).getResult();
    };
    Value mask = arith::ConstantOp::create(
        rewriter, loc,
        DenseElementsAttr::get(dwords, APInt::getSplat(32, lhs->second)));
    // Operands A = x, B = y, C = m; 0xe4 is C ? A : B bit by bit.
    Value select = arith::ConstantIntOp::create(rewriter, loc,
                                                rewriter.getI32Type(), 0xe4);
    Value merged = intrinsicParts(
        rewriter, loc, "llvm.x86.avx512.pternlog.d.512",
        VectorType::get({16}, rewriter.getI32Type()),
        {asDwords(lhs->first), asDwords(rhs->first), mask, select},
        {16, 16, 16, 0});
    rewriter.replaceOpWithNewOp<vector::BitCastOp>(op, type, merged);
    return success();
  }
};

struct TQLowerLaneLookupPass
    : public mlir::tq::impl::TQLowerLaneLookupBase<TQLowerLaneLookupPass> {
  using TQLowerLaneLookupBase::TQLowerLaneLookupBase;

  void runOnOperation() override {
    std::optional<Permute> permute;
    // avx512bf16 implies VNNI (every CPU with AVX512-BF16 has it); every
    // AVX-512 CPU has AVX2.
    IntegerOps ops;
    ops.bf16 = isa == "avx512bf16";
    ops.vnni = isa == "avx512vnni" || ops.bf16;
    ops.avxVnni = isa == "avxvnni";
    ops.avx2 = isa == "avx2" || isa == "avx512" || ops.avxVnni;
    ops.vbmi = vbmi;
    if (vbmi && isa != "avx512" && !ops.vnni) {
      getOperation()->emitError()
          << "tq-lower-lane-lookup: vbmi needs an AVX-512 isa (avx512, "
             "avx512vnni or avx512bf16), got '"
          << isa << "'";
      return signalPassFailure();
    }
    if (isa == "avx512" || ops.vnni) {
      permute = Permute{16, "llvm.x86.avx512.permvar.sf.512"};
    } else if (isa == "avx2" || ops.avxVnni) {
      permute = Permute{8, "llvm.x86.avx2.permps"};
    } else if (isa != "none") {
      getOperation()->emitError()
          << "tq-lower-lane-lookup: isa must be none, avx2, avxvnni, avx512, "
             "avx512vnni or avx512bf16, got '"
          << isa << "'";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandLaneLookup>(&getContext(), permute);
    patterns.add<ExpandByteLookup, ExpandByteDot, ExpandWordLookup,
                 ExpandPairDot, ExpandSelectBits>(&getContext(), ops);
    // Widened index bytes are looked up as bytes on every x86 isa: per 64
    // interleaved index bytes two byte lookups (one uop each) and two
    // unpacks, where two vpermw cost four uops on Intel's AVX-512 cores
    // (measured on an Emerald Rapids) besides the two widening unpacks.
    if (ops.avx2 || ops.vnni)
      patterns.add<WordLookupOfWidenedBytes>(&getContext());
    if (isa == "avx512" || ops.vnni)
      patterns.add<MergeMaskedBits>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
