//===- TQToLoops.h - tq to linalg loop nests --------------------*- C++ -*-===//

#ifndef TQ_CONVERSION_TQTOLOOPS_TQTOLOOPS_H
#define TQ_CONVERSION_TQTOLOOPS_TQTOLOOPS_H

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tq {

/// Maps !tq.cache to a page pool,
/// tensor<? x ? x kv_heads x row_bytes x i8> (a contiguous cache is one
/// page); every other type is kept.
class CacheToBytesTypeConverter : public TypeConverter {
public:
  CacheToBytesTypeConverter();
};

/// Patterns lowering every tq op except tq.attention and tq.quantize to
/// linalg/tensor/arith/math.
void populateTQToLoopsPatterns(const TypeConverter &converter,
                               RewritePatternSet &patterns);

} // namespace mlir::tq

#endif // TQ_CONVERSION_TQTOLOOPS_TQTOLOOPS_H
