//===- VectorSoftmax.h - A tile's online softmax as vector loops -*- C++ -*-===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_VECTORSOFTMAX_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_VECTORSOFTMAX_H

#include "mlir/IR/Builders.h"

namespace mlir::tq {

/// exp(d) of a 16-lane f32 vector whose lanes are <= 0 (or -inf, or NaN):
/// 0 below -87, else within 1.3e-7 relative of e^d.
Value boundedExp(OpBuilder &b, Location loc, Value d);

/// tq.online_softmax's results.
struct OnlineSoftmaxValues {
  Value probs, max, sum, correction;
};

/// The online softmax of `masked` ([queries x heads x T] f32, scaled and
/// masked logits; heads static) against the running max and sum
/// ([queries x heads]): 16-lane vector loops, per query row one pass for
/// the heads' maxima and one for their probabilities and sums, over blocks
/// of at most 16 heads (a loop over the blocks for larger groups). Failure
/// for other shapes.
FailureOr<OnlineSoftmaxValues> vectorOnlineSoftmax(OpBuilder &b, Location loc,
                                                   Value masked, Value oldMax,
                                                   Value oldSum);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_VECTORSOFTMAX_H
