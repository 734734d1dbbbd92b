//===- LoopBuilders.cpp - Small helpers for linalg loop nests -------------===//

#include "LoopBuilders.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::tq;

Value mlir::tq::createFilledTensor(OpBuilder &b, Location loc,
                                   ArrayRef<OpFoldResult> sizes,
                                   Type elementType, TypedAttr value) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, elementType);
  Value fill = arith::ConstantOp::create(b, loc, value);
  return linalg::FillOp::create(b, loc, fill, empty).getResult(0);
}

Value mlir::tq::createLoopNest(OpBuilder &b, Location loc, Value init,
                               ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                               AffineMap outputMap, unsigned numLoops,
                               unsigned numReductions, LoopBody body) {
  SmallVector<utils::IteratorType> iterators(numLoops,
                                             utils::IteratorType::parallel);
  for (unsigned i = numLoops - numReductions; i < numLoops; ++i)
    iterators[i] = utils::IteratorType::reduction;
  return createLoopNest(b, loc, init, inputs, inputMaps, outputMap, iterators,
                        body);
}

Value mlir::tq::createLoopNest(OpBuilder &b, Location loc, Value init,
                               ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                               AffineMap outputMap,
                               ArrayRef<utils::IteratorType> iterators,
                               LoopBody body) {
  const unsigned numLoops = iterators.size();
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(outputMap);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
      iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> indices;
        for (unsigned i = 0; i < numLoops; ++i)
          indices.push_back(linalg::IndexOp::create(nb, nloc, i));
        Value result = body(nb, nloc, indices, args.drop_back(), args.back());
        linalg::YieldOp::create(nb, nloc, result);
      });
  return generic.getResult(0);
}

AffineMap mlir::tq::projection(MLIRContext *context, unsigned numLoops,
                               ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, context));
  return AffineMap::get(numLoops, 0, exprs, context);
}

Value mlir::tq::f32Const(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

Value mlir::tq::multiplyAdd(OpBuilder &b, Location loc, Value acc, Value x,
                            Value y) {
  auto flags = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
  Value product = arith::MulFOp::create(b, loc, x, y, flags);
  return arith::AddFOp::create(b, loc, acc, product, flags);
}

OpFoldResult mlir::tq::sizeOf(OpBuilder &b, Location loc, Value value,
                              unsigned i) {
  return tensor::getMixedSize(b, loc, value, i);
}

SmallVector<OpFoldResult> mlir::tq::sizesOf(OpBuilder &b, Location loc,
                                            Value v) {
  SmallVector<OpFoldResult> sizes;
  for (unsigned i = 0; i < cast<ShapedType>(v.getType()).getRank(); ++i)
    sizes.push_back(sizeOf(b, loc, v, i));
  return sizes;
}

Value mlir::tq::guardedExp(OpBuilder &b, Location loc, Value x, Value max,
                           float ifEmpty) {
  Value empty = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OEQ, max,
      f32Const(b, loc, -std::numeric_limits<float>::infinity()));
  Value e = math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, x, max));
  return arith::SelectOp::create(b, loc, empty, f32Const(b, loc, ifEmpty), e);
}
