//===- LoopBuilders.h - Small helpers for linalg loop nests -----*- C++ -*-===//
//
// Every tq lowering is a handful of linalg.generic ops whose bodies read
// their loop indices; these helpers keep the boilerplate out of the
// patterns.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_LOOPBUILDERS_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_LOOPBUILDERS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir::tq {

/// Body of a generic: loop indices (linalg.index of every loop), the
/// scalar arguments of the inputs, and the current output value; returns
/// the value to yield.
using LoopBody = function_ref<Value(OpBuilder &b, Location loc,
                                    ValueRange indices, ValueRange inputs,
                                    Value output)>;

/// A tensor of the given sizes filled with `value`.
Value createFilledTensor(OpBuilder &b, Location loc,
                         ArrayRef<OpFoldResult> sizes, Type elementType,
                         TypedAttr value);

/// linalg.generic over `numLoops` loops (the leading ones parallel, the
/// trailing `numReductions` reductions) writing `init` through `outputMap`.
Value createLoopNest(OpBuilder &b, Location loc, Value init,
                     ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                     AffineMap outputMap, unsigned numLoops,
                     unsigned numReductions, LoopBody body);

/// The same with explicit iterator types, for nests whose reduction is not
/// the innermost loop (e.g. a weighted sum that streams over the head dim).
Value createLoopNest(OpBuilder &b, Location loc, Value init,
                     ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                     AffineMap outputMap,
                     ArrayRef<utils::IteratorType> iterators, LoopBody body);

/// (d0, ..., dn-1) -> (d[dims[0]], d[dims[1]], ...).
AffineMap projection(MLIRContext *context, unsigned numLoops,
                     ArrayRef<unsigned> dims);

/// acc + x * y for the attention reductions (dot products, weighted sums),
/// marked reassociable and contractible so LLVM may vectorise the
/// reduction and use FMA. Never used by the encoders, which must reproduce
/// the library's rounding exactly.
Value multiplyAdd(OpBuilder &b, Location loc, Value acc, Value x, Value y);

/// An f32 constant.
Value f32Const(OpBuilder &b, Location loc, float value);

/// The size of dim `i` of `value` as an OpFoldResult.
OpFoldResult sizeOf(OpBuilder &b, Location loc, Value value, unsigned i);

/// The sizes of every dim of `v`.
SmallVector<OpFoldResult> sizesOf(OpBuilder &b, Location loc, Value v);

/// exp(x - max), or `ifEmpty` when max is -inf (nothing visible yet); f32
/// scalars.
Value guardedExp(OpBuilder &b, Location loc, Value x, Value max,
                 float ifEmpty);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_LOOPBUILDERS_H
