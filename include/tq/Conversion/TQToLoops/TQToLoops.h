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

/// Choices of the lowering that trade compile time for code.
struct TQToLoopsOptions {
  /// Rows of more vector chunks (values and QJL signs) than this are not
  /// unrolled whole by the fused products, but by decode periods.
  int64_t maxUnrolledChunks = 48;
  /// At most this many KV rows per step of the fused score (their chains
  /// share one horizontal-sum tree, which also bounds the step).
  int64_t scoreRows = 4;
  /// Vector accumulators the one-row weighted sum keeps per token loop
  /// (more: fewer passes over the rows, more register pressure).
  int64_t accumulators = 16;
};

/// Patterns lowering every tq op except tq.attention and tq.quantize to
/// linalg/tensor/arith/math.
void populateTQToLoopsPatterns(const TypeConverter &converter,
                               RewritePatternSet &patterns,
                               const TQToLoopsOptions &options = {});

} // namespace mlir::tq

#endif // TQ_CONVERSION_TQTOLOOPS_TQTOLOOPS_H
