//===- LowerLaneLookup.cpp - tq.lane_lookup for the target's vector ISA ---===//

#include "tq/Conversion/Passes.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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

Value splatI32(OpBuilder &b, Location loc, int64_t n, int32_t v) {
  auto type = VectorType::get({n}, b.getI32Type());
  return arith::ConstantOp::create(b, loc,
                                   DenseElementsAttr::get(type, v));
}

/// table[index mod n] by a binary select tree: bit k (k < log2 n) of the
/// index picks between pairs of the previous level.
Value selectTree(OpBuilder &b, Location loc, ArrayRef<float> table,
                 Value index) {
  const int64_t n = cast<VectorType>(index.getType()).getDimSize(0);
  auto f32Vec = VectorType::get({n}, b.getF32Type());
  SmallVector<Value> level;
  for (float c : table)
    level.push_back(arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(f32Vec, c)));
  Value zero = splatI32(b, loc, n, 0);
  for (int32_t bit = 1; level.size() > 1; bit <<= 1) {
    Value masked =
        arith::AndIOp::create(b, loc, index, splatI32(b, loc, n, bit));
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

/// table[index mod n] by one permute per `p.lanes` lanes, the parts
/// concatenated. The permute reads log2(p.lanes) index bits, so the table
/// repeats to p.lanes entries: the bits above log2 n do not matter.
Value permuteLanes(OpBuilder &b, Location loc, ArrayRef<float> table,
                   Value index, const Permute &p) {
  const int64_t n = cast<VectorType>(index.getType()).getDimSize(0);
  SmallVector<float> padded;
  for (int64_t i = 0; i < p.lanes; ++i)
    padded.push_back(table[i % table.size()]);
  auto tableType = VectorType::get({p.lanes}, b.getF32Type());
  Value tableValue = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(tableType, ArrayRef<float>(padded)));
  SmallVector<Value> parts;
  for (int64_t first = 0; first < n; first += p.lanes) {
    Value part = index;
    if (n != p.lanes)
      part = vector::ExtractStridedSliceOp::create(
          b, loc, index, ArrayRef<int64_t>{first}, ArrayRef<int64_t>{p.lanes},
          ArrayRef<int64_t>{1});
    parts.push_back(LLVM::CallIntrinsicOp::create(
                        b, loc, tableType, b.getStringAttr(p.intrinsic),
                        ValueRange{tableValue, part})
                        .getResult(0));
  }
  // Concatenate pairwise back to n lanes (n / lanes is a power of two).
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
      result = selectTree(rewriter, op.getLoc(), table, op.getIndex());
    rewriter.replaceOp(op, result);
    return success();
  }

  std::optional<Permute> permute;
};

struct TQLowerLaneLookupPass
    : public mlir::tq::impl::TQLowerLaneLookupBase<TQLowerLaneLookupPass> {
  using TQLowerLaneLookupBase::TQLowerLaneLookupBase;

  void runOnOperation() override {
    std::optional<Permute> permute;
    if (isa == "avx512") {
      permute = Permute{16, "llvm.x86.avx512.permvar.sf.512"};
    } else if (isa == "avx2") {
      permute = Permute{8, "llvm.x86.avx2.permps"};
    } else if (isa != "none") {
      getOperation()->emitError()
          << "tq-lower-lane-lookup: isa must be none, avx2 or avx512, got '"
          << isa << "'";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandLaneLookup>(&getContext(), permute);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
