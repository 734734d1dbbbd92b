//===- RotationLowering.h - Rotations as loop nests -------------*- C++ -*-===//
//
// Emits a rotation of the last dimension of an f32 tensor that computes
// exactly what lib/Quant's Rotation computes, operation for operation:
// Hadamard kinds as sign multiplies and log2(n) butterfly stages in f32
// (a + b, a - b) followed by float(1/sqrt(n)); Haar as a dense product
// accumulated in f64. Encoders built on it reproduce the library's bytes.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_ROTATIONLOWERING_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_ROTATIONLOWERING_H

#include "tq/Quant/Rotation.h"

#include "mlir/IR/Builders.h"

namespace mlir::tq {

/// forward(x) (or inverse(x)) applied to every row of `input`, whose last
/// dimension equals rotation.dim(). With `vectors` the Hadamard kinds
/// work on rows of 16-lane vectors where the row length is a multiple of
/// 16 (the same operations per element, so the same bits).
Value emitRotation(OpBuilder &b, Location loc, Value input,
                   const ::tq::quant::Rotation &rotation, bool inverse,
                   bool vectors = false);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_ROTATIONLOWERING_H
