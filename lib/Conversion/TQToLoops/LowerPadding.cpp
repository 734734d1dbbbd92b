//===- LowerPadding.cpp - Zero padding and leading slices as loops --------===//
//
// tq-hoist-rotation and tq-decompose-attention pad heads with zeros
// (tensor.pad) and slice them back (tensor.extract_slice at offset 0).
// Bufferized as-is these become copies through strided views, which lower
// to a runtime-library call; as loop nests they stay self-contained code.
//
//===----------------------------------------------------------------------===//

#include "LoopBuilders.h"
#include "LoweringPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::tq;

namespace {

bool allConstant(ArrayRef<OpFoldResult> values, int64_t expected) {
  return llvm::all_of(values, [&](OpFoldResult v) {
    std::optional<int64_t> c = getConstantIntValue(v);
    return c && *c == expected;
  });
}

/// tensor.pad with zero low padding and a constant value:
/// out[..., j] = j < source extent ? source[..., j] : pad (per dim).
struct LowerPad : public OpConversionPattern<tensor::PadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(tensor::PadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value padValue = op.getConstantPaddingValue();
    if (!padValue || !allConstant(op.getMixedLowPad(), 0))
      return rewriter.notifyMatchFailure(op, "not a zero-offset constant pad");
    Location loc = op.getLoc();
    Value source = adaptor.getSource();
    auto resultType = op.getResultType();
    unsigned rank = resultType.getRank();
    SmallVector<OpFoldResult> sizes;
    for (unsigned i = 0; i < rank; ++i) {
      if (resultType.isDynamicDim(i))
        return rewriter.notifyMatchFailure(op, "dynamic padded size");
      sizes.push_back(rewriter.getIndexAttr(resultType.getDimSize(i)));
    }
    SmallVector<Value> extents;
    for (unsigned i = 0; i < rank; ++i)
      extents.push_back(tensor::DimOp::create(rewriter, loc, source, i));
    Value init = tensor::EmptyOp::create(rewriter, loc, sizes,
                                         resultType.getElementType());
    Value result = createLoopNest(
        rewriter, loc, init, {}, {},
        AffineMap::getMultiDimIdentityMap(rank, rewriter.getContext()), rank,
        0,
        [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange,
            Value) -> Value {
          // Clamp so the (discarded) read for padding stays in bounds.
          Value inside = arith::ConstantIntOp::create(b, loc, 1, 1);
          SmallVector<Value> at;
          Value one = arith::ConstantIndexOp::create(b, loc, 1);
          for (unsigned i = 0; i < rank; ++i) {
            Value in = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             idx[i], extents[i]);
            inside = arith::AndIOp::create(b, loc, inside, in);
            Value last = arith::SubIOp::create(b, loc, extents[i], one);
            at.push_back(arith::MinUIOp::create(b, loc, idx[i], last));
          }
          Value read = tensor::ExtractOp::create(b, loc, source, at);
          return arith::SelectOp::create(b, loc, inside, read, padValue);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// tensor.extract_slice at offset 0 with unit strides, rank-preserving.
struct LowerLeadingSlice : public OpConversionPattern<tensor::ExtractSliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(tensor::ExtractSliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!allConstant(op.getMixedOffsets(), 0) ||
        !allConstant(op.getMixedStrides(), 1) ||
        op.getSourceType().getRank() != op.getResultType().getRank())
      return rewriter.notifyMatchFailure(op, "not a leading slice");
    Location loc = op.getLoc();
    Value source = adaptor.getSource();
    unsigned rank = op.getResultType().getRank();
    Value init = tensor::EmptyOp::create(rewriter, loc, op.getMixedSizes(),
                                         op.getResultType().getElementType());
    Value result = createLoopNest(
        rewriter, loc, init, {}, {},
        AffineMap::getMultiDimIdentityMap(rank, rewriter.getContext()), rank,
        0,
        [&](OpBuilder &b, Location loc, ValueRange idx, ValueRange,
            Value) -> Value {
          return tensor::ExtractOp::create(b, loc, source, idx);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

bool mlir::tq::isLoweredPadding(Operation *op) {
  if (auto pad = dyn_cast<tensor::PadOp>(op))
    return pad.getConstantPaddingValue() &&
           allConstant(pad.getMixedLowPad(), 0) &&
           pad.getResultType().hasStaticShape();
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    return allConstant(slice.getMixedOffsets(), 0) &&
           allConstant(slice.getMixedStrides(), 1) &&
           slice.getSourceType().getRank() == slice.getResultType().getRank();
  return false;
}

void mlir::tq::populatePaddingLoweringPatterns(const TypeConverter &converter,
                                               RewritePatternSet &patterns) {
  patterns.add<LowerPad, LowerLeadingSlice>(converter, patterns.getContext());
}
