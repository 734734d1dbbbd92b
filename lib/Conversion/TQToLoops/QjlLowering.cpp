//===- QjlLowering.cpp - The QJL residual's shared IR pieces --------------===//

#include "QjlLowering.h"

#include "LoopBuilders.h"
#include "RowDecoding.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tq;

float mlir::tq::qjlConstant(const ::tq::quant::FormatSpec &spec) {
  return float(std::sqrt(M_PI / 2.0) / spec.qjl->rows());
}

Value mlir::tq::qjlMatrix(OpBuilder &b, Location loc,
                          const ::tq::quant::FormatSpec &spec) {
  return createF32Matrix(b, loc, spec.qjl->matrix(), spec.qjl->rows(),
                         spec.qjl->dim());
}

Value mlir::tq::projectQueriesByQjl(OpBuilder &b, Location loc, Value queries,
                                    const ::tq::quant::FormatSpec &spec) {
  MLIRContext *ctx = b.getContext();
  Value zeros = createFilledTensor(
      b, loc,
      {sizeOf(b, loc, queries, 0), sizeOf(b, loc, queries, 1),
       b.getIndexAttr(spec.qjl->rows())},
      b.getF32Type(), b.getF32FloatAttr(0.0f));
  // sq[i, h, r] = sum_d S[r, d] q[i, h, d]: loops (i, h, r, d).
  return createLoopNest(
      b, loc, zeros, {queries, qjlMatrix(b, loc, spec)},
      {projection(ctx, 4, {0, 1, 3}), projection(ctx, 4, {2, 3})},
      projection(ctx, 4, {0, 1, 2}), 4, 1,
      [](OpBuilder &b, Location loc, ValueRange, ValueRange in, Value acc) {
        return multiplyAdd(b, loc, acc, in[0], in[1]);
      });
}
