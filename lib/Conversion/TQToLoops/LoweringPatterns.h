//===- LoweringPatterns.h - tq-to-loops pattern groups ----------*- C++ -*-===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_LOWERINGPATTERNS_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_LOWERINGPATTERNS_H

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tq {

/// tq.rotate, tq.qk, tq.softmax, tq.pv.
void populateDenseLoweringPatterns(const TypeConverter &converter,
                                   RewritePatternSet &patterns);

/// tq.from_bytes, tq.to_bytes, tq.gather, tq.score, tq.accumulate.
void populateCacheLoweringPatterns(const TypeConverter &converter,
                                   RewritePatternSet &patterns);

/// Zero-offset tensor.pad and leading tensor.extract_slice as loop nests.
void populatePaddingLoweringPatterns(const TypeConverter &converter,
                                     RewritePatternSet &patterns);

/// True for the pads and slices populatePaddingLoweringPatterns lowers.
bool isLoweredPadding(Operation *op);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_LOWERINGPATTERNS_H
