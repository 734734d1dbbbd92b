//===- HoistRotation.cpp - Rotations onto the query and output side -------===//
//
// For orthogonal R and rotated-domain rows G:
//   <q, slice(R^T G)> = <R pad(q), G>          (keys)
//   sum_t p_t slice(R^T G_t) = slice(R^T sum_t p_t G_t)   (values)
// where slice keeps the leading head_dim entries and pad appends zeros.
// Both move a per-token rotation to a per-query (or per-output) one.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQHOISTROTATION
#include "tq/Dialect/TQ/Transforms/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;
using namespace mlir::tq;

namespace {

/// A rotation feeding a dense qk/pv operand, possibly through the slice that
/// drops a zero-padded tail.
struct RotatedOperand {
  RotateOp rotate;
  tensor::ExtractSliceOp slice; // null when the rotation feeds directly
};

/// True when size `i` of the slice is the whole of its source's dim `i`.
bool coversWholeDim(tensor::ExtractSliceOp slice, unsigned i) {
  OpFoldResult size = slice.getMixedSizes()[i];
  int64_t sourceSize = slice.getSourceType().getDimSize(i);
  if (std::optional<int64_t> c = getConstantIntValue(size))
    return !ShapedType::isDynamic(sourceSize) && *c == sourceSize;
  auto dim = cast<Value>(size).getDefiningOp<tensor::DimOp>();
  if (!dim || dim.getSource() != slice.getSource())
    return false;
  std::optional<int64_t> index = dim.getConstantIndex();
  return index && *index == int64_t(i);
}

/// The op through which a rotation reaches `value` when `value` is not the
/// rotation itself: the defining op of `value` if one of its operands comes,
/// within `depth` more ops, from a tq.rotate. Null when no rotation is found.
Operation *findOpBetween(Value value, unsigned depth) {
  Operation *def = value.getDefiningOp();
  if (!def || isa<RotateOp>(def))
    return nullptr;
  for (Value operand : def->getOperands()) {
    if (!isa<TensorType>(operand.getType()))
      continue;
    if (operand.getDefiningOp<RotateOp>())
      return def;
    if (depth > 0 && findOpBetween(operand, depth - 1))
      return def;
  }
  return nullptr;
}

/// Finds the rotation behind a dense operand. Returns std::nullopt when no
/// rotation feeds it, and failure (with `reason`) when one does but the
/// rotation identity does not apply.
FailureOr<std::optional<RotatedOperand>>
matchRotatedOperand(Value dense, std::string &reason) {
  auto slice = dense.getDefiningOp<tensor::ExtractSliceOp>();
  Value source = slice ? slice.getSource() : dense;
  auto rotate = source.getDefiningOp<RotateOp>();
  if (!rotate) {
    // A rotation further up (behind a tensor.cast, a reshape, arithmetic)
    // still costs one rotation per cached row; say why it stays. Only the
    // rotation itself and the slice of its padding are looked through.
    if (Operation *between = findOpBetween(source, /*depth=*/3)) {
      reason = "the rotated rows reach the operand through '" +
               between->getName().getStringRef().str() +
               "'; only a tq.rotate and a zero-offset, unit-stride "
               "tensor.extract_slice of it are looked through";
      return failure();
    }
    return std::optional<RotatedOperand>();
  }
  if (slice) {
    if (slice.getSourceType().getRank() != 3 ||
        slice.getResultType().getRank() != 3) {
      reason = "the rotated rows are reshaped by a rank-changing slice";
      return failure();
    }
    for (unsigned i = 0; i < 3; ++i) {
      std::optional<int64_t> offset =
          getConstantIntValue(slice.getMixedOffsets()[i]);
      std::optional<int64_t> stride =
          getConstantIntValue(slice.getMixedStrides()[i]);
      if (!offset || *offset != 0) {
        reason = "the slice of the rotated rows does not start at 0 in "
                 "dimension " +
                 std::to_string(i) +
                 ", so the dropped entries are not the zero padding";
        return failure();
      }
      if (!stride || *stride != 1) {
        reason = "the slice of the rotated rows is strided in dimension " +
                 std::to_string(i);
        return failure();
      }
      if (i < 2 && !coversWholeDim(slice, i)) {
        reason = "the slice drops " +
                 std::string(i == 0 ? "tokens" : "kv heads") +
                 ", not only padding";
        return failure();
      }
    }
  }
  return std::optional<RotatedOperand>(RotatedOperand{rotate, slice});
}

/// Zero-pads the last dim of `value`, whose rows are `headDim` wide, to
/// `width`. `headDim` is the static width the value must have (the other
/// operand's, which qk's verifier made compatible), or dynamic when neither
/// operand knows it; then the padding is computed from the value's own size.
Value padLastDim(PatternRewriter &rewriter, Location loc, Value value,
                 int64_t headDim, int64_t width) {
  auto type = cast<RankedTensorType>(value.getType());
  unsigned last = type.getRank() - 1;
  SmallVector<int64_t> shape(type.getShape());
  if (!ShapedType::isDynamic(headDim) && shape.back() != headDim) {
    // The query's dynamic head dim must equal the keys' static one at run
    // time (qk's contract); the cast states it, so the padding is static.
    shape.back() = headDim;
    value = tensor::CastOp::create(
        rewriter, loc, RankedTensorType::get(shape, type.getElementType()),
        value);
  }
  if (shape.back() == width)
    return value;
  SmallVector<OpFoldResult> low(type.getRank(), rewriter.getIndexAttr(0));
  SmallVector<OpFoldResult> high(type.getRank(), rewriter.getIndexAttr(0));
  if (ShapedType::isDynamic(shape.back())) {
    // width - dim(value, last); the slice that produced the keys was in
    // bounds of the rotated rows, so this is never negative.
    Value size = tensor::DimOp::create(rewriter, loc, value, last);
    Value full = arith::ConstantIndexOp::create(rewriter, loc, width);
    high.back() = Value(arith::SubIOp::create(rewriter, loc, full, size));
  } else {
    high.back() = rewriter.getIndexAttr(width - shape.back());
  }
  shape.back() = width;
  auto paddedType = RankedTensorType::get(shape, type.getElementType());
  Value zero = arith::ConstantOp::create(
      rewriter, loc, rewriter.getZeroAttr(type.getElementType()));
  return tensor::PadOp::create(rewriter, loc, paddedType, value, low, high,
                               zero);
}

/// The rotation of the other side: forward where the operand was inverse.
UnitAttr flipped(PatternRewriter &rewriter, RotateOp rotate) {
  return rotate.getInverse() ? UnitAttr() : rewriter.getUnitAttr();
}

/// qk(q, slice(rotate(G))) -> qk(rotate'(pad(q)), G).
struct HoistKeyRotation : public OpRewritePattern<QKOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(QKOp op,
                                PatternRewriter &rewriter) const override {
    std::string reason;
    auto match = matchRotatedOperand(op.getKeys(), reason);
    if (failed(match))
      return rewriter.notifyMatchFailure(op, reason);
    if (!*match)
      return rewriter.notifyMatchFailure(op, "keys are not rotated");
    RotateOp rotate = (*match)->rotate;
    Location loc = op.getLoc();
    int64_t headDim = op.getQuery().getType().getDimSize(2);
    if (ShapedType::isDynamic(headDim))
      headDim = op.getKeys().getType().getDimSize(2);
    Value query = padLastDim(rewriter, loc, op.getQuery(), headDim,
                             rotate.getRotation().getDim());
    Value rotated =
        RotateOp::create(rewriter, loc, query.getType(), query,
                         rotate.getRotation(), flipped(rewriter, rotate));
    rewriter.replaceOpWithNewOp<QKOp>(op, op.getType(), rotated,
                                      rotate.getInput());
    return success();
  }
};

/// pv(p, slice(rotate(G))) -> slice(rotate(pv(p, G))).
struct HoistValueRotation : public OpRewritePattern<PVOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PVOp op,
                                PatternRewriter &rewriter) const override {
    std::string reason;
    auto match = matchRotatedOperand(op.getValues(), reason);
    if (failed(match))
      return rewriter.notifyMatchFailure(op, reason);
    if (!*match)
      return rewriter.notifyMatchFailure(op, "values are not rotated");
    RotateOp rotate = (*match)->rotate;
    Location loc = op.getLoc();
    auto resultType = op.getType();
    auto accType = RankedTensorType::get(
        {resultType.getDimSize(0), resultType.getDimSize(1),
         int64_t(rotate.getRotation().getDim())},
        resultType.getElementType());
    Value acc = PVOp::create(rewriter, loc, accType, op.getProbs(),
                             rotate.getInput());
    Value out = RotateOp::create(rewriter, loc, accType, acc,
                                 rotate.getRotation(), rotate.getInverseAttr());
    tensor::ExtractSliceOp slice = (*match)->slice;
    if (slice && !coversWholeDim(slice, 2)) {
      // Keep the values' leading head_dim entries: the size the original
      // slice kept (an SSA value that dominates `op` when dynamic), not the
      // result type's, which may be less static.
      SmallVector<OpFoldResult> offsets(3, rewriter.getIndexAttr(0));
      SmallVector<OpFoldResult> strides(3, rewriter.getIndexAttr(1));
      SmallVector<OpFoldResult> sizes = {
          tensor::getMixedSize(rewriter, loc, out, 0),
          tensor::getMixedSize(rewriter, loc, out, 1),
          slice.getMixedSizes()[2]};
      out = tensor::ExtractSliceOp::create(rewriter, loc, out, offsets, sizes,
                                           strides);
    }
    // Only static information differs now (pv's verifier made the types
    // compatible).
    if (out.getType() != resultType)
      out = tensor::CastOp::create(rewriter, loc, resultType, out);
    rewriter.replaceOp(op, out);
    return success();
  }
};

struct TQHoistRotationPass
    : public mlir::tq::impl::TQHoistRotationBase<TQHoistRotationPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateHoistRotationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
      return;
    }
    // Explain every rotation that stayed on the K/V side.
    getOperation()->walk([](Operation *op) {
      Value dense;
      if (auto qk = dyn_cast<QKOp>(op))
        dense = qk.getKeys();
      else if (auto pv = dyn_cast<PVOp>(op))
        dense = pv.getValues();
      else
        return;
      std::string reason;
      if (failed(checkRotationHoistable(dense, reason)))
        op->emitRemark() << "rotation not hoisted: " << reason;
    });
  }
};

} // namespace

LogicalResult mlir::tq::checkRotationHoistable(Value denseOperand,
                                               std::string &reason) {
  return failed(matchRotatedOperand(denseOperand, reason)) ? failure()
                                                           : success();
}

void mlir::tq::populateHoistRotationPatterns(RewritePatternSet &patterns) {
  patterns.add<HoistKeyRotation, HoistValueRotation>(patterns.getContext());
}
