//===- LowerLaneLookup.cpp - tq.lane_lookup for the target's vector ISA ---===//

#include "tq/Conversion/Passes.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
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

/// One call of the register-permute `intrinsic` (table, index part) per
/// `partLanes` lanes of `index`, the results concatenated.
Value permuteParts(OpBuilder &b, Location loc, Value table, Value index,
                   int64_t partLanes, StringRef intrinsic) {
  SmallVector<Value> parts;
  for (Value part : splitLanes(b, loc, index, partLanes))
    parts.push_back(LLVM::CallIntrinsicOp::create(b, loc, table.getType(),
                                                  b.getStringAttr(intrinsic),
                                                  ValueRange{table, part})
                        .getResult(0));
  return concatLanes(b, loc, std::move(parts));
}

/// table[index mod n] by one permute per `p.lanes` lanes, the parts
/// concatenated. The permute reads log2(p.lanes) index bits, so the table
/// repeats to p.lanes entries: the bits above log2 n do not matter.
Value permuteLanes(OpBuilder &b, Location loc, ArrayRef<float> table,
                   Value index, const Permute &p) {
  SmallVector<float> padded;
  for (int64_t i = 0; i < p.lanes; ++i)
    padded.push_back(table[i % table.size()]);
  auto tableType = VectorType::get({p.lanes}, b.getF32Type());
  Value tableValue = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(tableType, ArrayRef<float>(padded)));
  return permuteParts(b, loc, tableValue, index, p.lanes, p.intrinsic);
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
        n % permute->lanes == 0 && llvm::isPowerOf2_64(n / permute->lanes))
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

/// tq.byte_lookup: with `vnni` (AVX512-BW, which every VNNI CPU has) one
/// vpshufb per 64 lanes, the table repeated to 16 bytes in each 128-bit
/// lane; vpshufb reads the low 4 index bits and zeroes lanes whose bit 7
/// is set, so the index is masked to its low 4 bits first. Else (or for
/// lane counts that are not multiples of 64) a select tree.
struct ExpandByteLookup : public OpRewritePattern<ByteLookupOp> {
  ExpandByteLookup(MLIRContext *context, bool vnni)
      : OpRewritePattern(context), vnni(vnni) {}

  LogicalResult matchAndRewrite(ByteLookupOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int8_t> table = op.getTable();
    const Location loc = op.getLoc();
    auto type = op.getIndex().getType();
    const int64_t n = type.getDimSize(0);
    Value result;
    if (vnni && table.size() > 1 && n % 64 == 0) {
      auto partType = VectorType::get({64}, rewriter.getI8Type());
      SmallVector<int8_t> repeated;
      for (int64_t i = 0; i < 64; ++i)
        repeated.push_back(table[i % table.size()]);
      Value tableValue = arith::ConstantOp::create(
          rewriter, loc,
          DenseElementsAttr::get(partType, ArrayRef<int8_t>(repeated)));
      Value low = arith::AndIOp::create(
          rewriter, loc, op.getIndex(),
          arith::ConstantOp::create(
              rewriter, loc,
              DenseElementsAttr::get(type, rewriter.getI8IntegerAttr(15))));
      result = permuteParts(rewriter, loc, tableValue, low, 64,
                            "llvm.x86.avx512.pshuf.b.512");
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

  bool vnni;
};

/// The widest of 16, 8 or 4 lanes that divides `lanes` into a power-of-two
/// count of parts (concatLanes joins them pairwise); 0 if none does.
int64_t intrinsicLanes(int64_t lanes) {
  for (int64_t w : {16, 8, 4})
    if (lanes % w == 0 && llvm::isPowerOf2_64(lanes / w))
      return w;
  return 0;
}

/// tq.byte_dot: with `vnni` one vpdpbusd per 16 lanes (512 bits; 256 and
/// 128 for 8 and 4 lanes, AVX512-VL). Else zero/sign extension to i32,
/// a multiply and a sum of each group of four (LLVM may still find
/// pmaddubsw-style code).
struct ExpandByteDot : public OpRewritePattern<ByteDotOp> {
  ExpandByteDot(MLIRContext *context, bool vnni)
      : OpRewritePattern(context), vnni(vnni) {}

  LogicalResult matchAndRewrite(ByteDotOp op,
                                PatternRewriter &rewriter) const override {
    const Location loc = op.getLoc();
    const int64_t lanes = op.getAcc().getType().getDimSize(0);
    const int64_t bytes = 4 * lanes;
    const int64_t width = intrinsicLanes(lanes);
    if (vnni && width) {
      auto accType = VectorType::get({width}, rewriter.getI32Type());
      std::string name =
          "llvm.x86.avx512.vpdpbusd." + std::to_string(32 * width);
      SmallVector<Value> accs = splitLanes(rewriter, loc, op.getAcc(), width);
      SmallVector<Value> lhs = splitLanes(rewriter, loc, op.getLhs(), 4 * width);
      SmallVector<Value> rhs = splitLanes(rewriter, loc, op.getRhs(), 4 * width);
      SmallVector<Value> parts;
      for (size_t k = 0; k < accs.size(); ++k)
        parts.push_back(LLVM::CallIntrinsicOp::create(
                            rewriter, loc, accType,
                            rewriter.getStringAttr(name),
                            ValueRange{accs[k], lhs[k], rhs[k]})
                            .getResult(0));
      rewriter.replaceOp(op, concatLanes(rewriter, loc, std::move(parts)));
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

  bool vnni;
};

/// tq.word_lookup: with AVX512-BW (every VNNI CPU) one vpermw per 32 lanes,
/// the table repeated to 32 words (vpermw reads the low 5 index bits);
/// else a select tree.
struct ExpandWordLookup : public OpRewritePattern<WordLookupOp> {
  ExpandWordLookup(MLIRContext *context, bool permute)
      : OpRewritePattern(context), permute(permute) {}

  LogicalResult matchAndRewrite(WordLookupOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int16_t> table = op.getTable();
    const Location loc = op.getLoc();
    const int64_t n = op.getIndex().getType().getDimSize(0);
    Value result;
    if (permute && table.size() > 1 && n % 32 == 0 &&
        llvm::isPowerOf2_64(n / 32)) {
      auto partType = VectorType::get({32}, rewriter.getI16Type());
      SmallVector<int16_t> repeated;
      for (int64_t i = 0; i < 32; ++i)
        repeated.push_back(table[i % table.size()]);
      Value tableValue = arith::ConstantOp::create(
          rewriter, loc,
          DenseElementsAttr::get(partType, ArrayRef<int16_t>(repeated)));
      result = permuteParts(rewriter, loc, tableValue, op.getIndex(), 32,
                            "llvm.x86.avx512.permvar.hi.512");
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

  bool permute;
};

/// tq.pair_dot: per 16, 8 or 4 lanes one vpdpwssd (i16, `vnni`) or one
/// x86vector.avx512.dot (vdpbf16ps; bf16, `bf16`). Else extensions to
/// the accumulator's type, a multiply and the sum of each pair.
struct ExpandPairDot : public OpRewritePattern<PairDotOp> {
  ExpandPairDot(MLIRContext *context, bool vnni, bool bf16)
      : OpRewritePattern(context), vnni(vnni), bf16(bf16) {}

  LogicalResult matchAndRewrite(PairDotOp op,
                                PatternRewriter &rewriter) const override {
    const Location loc = op.getLoc();
    VectorType accType = op.getAcc().getType();
    const bool floats = isa<Float32Type>(accType.getElementType());
    const int64_t lanes = accType.getDimSize(0);
    const int64_t width = intrinsicLanes(lanes);
    if (width && (floats ? bf16 : vnni)) {
      auto partType = VectorType::get({width}, accType.getElementType());
      SmallVector<Value> accs = splitLanes(rewriter, loc, op.getAcc(), width);
      SmallVector<Value> lhs = splitLanes(rewriter, loc, op.getLhs(), 2 * width);
      SmallVector<Value> rhs = splitLanes(rewriter, loc, op.getRhs(), 2 * width);
      const std::string name =
          "llvm.x86.avx512.vpdpwssd." + std::to_string(32 * width);
      SmallVector<Value> parts;
      for (size_t k = 0; k < accs.size(); ++k)
        parts.push_back(
            floats ? x86vector::DotBF16Op::create(rewriter, loc, partType,
                                                  accs[k], lhs[k], rhs[k])
                         .getResult()
                   : LLVM::CallIntrinsicOp::create(
                         rewriter, loc, partType, rewriter.getStringAttr(name),
                         ValueRange{accs[k], lhs[k], rhs[k]})
                         .getResult(0));
      rewriter.replaceOp(op, concatLanes(rewriter, loc, std::move(parts)));
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

  bool vnni, bf16;
};

struct TQLowerLaneLookupPass
    : public mlir::tq::impl::TQLowerLaneLookupBase<TQLowerLaneLookupPass> {
  using TQLowerLaneLookupBase::TQLowerLaneLookupBase;

  void runOnOperation() override {
    std::optional<Permute> permute;
    // avx512bf16 implies VNNI (every CPU with AVX512-BF16 has it).
    const bool bf16 = isa == "avx512bf16";
    const bool vnni = isa == "avx512vnni" || bf16;
    if (isa == "avx512" || vnni) {
      permute = Permute{16, "llvm.x86.avx512.permvar.sf.512"};
    } else if (isa == "avx2") {
      permute = Permute{8, "llvm.x86.avx2.permps"};
    } else if (isa != "none") {
      getOperation()->emitError()
          << "tq-lower-lane-lookup: isa must be none, avx2, avx512, avx512vnni or "
             "avx512bf16, got '"
          << isa << "'";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandLaneLookup>(&getContext(), permute);
    patterns.add<ExpandByteLookup, ExpandByteDot, ExpandWordLookup>(
        &getContext(), vnni);
    patterns.add<ExpandPairDot>(&getContext(), vnni, bf16);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
