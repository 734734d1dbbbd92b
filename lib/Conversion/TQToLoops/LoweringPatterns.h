//===- LoweringPatterns.h - tq-to-loops pattern groups ----------*- C++ -*-===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_LOWERINGPATTERNS_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_LOWERINGPATTERNS_H

#include "tq/Conversion/TQToLoops/TQToLoops.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tq {

/// tq.rotate, tq.qk, tq.softmax, tq.pv.
void populateDenseLoweringPatterns(const TypeConverter &converter,
                                   RewritePatternSet &patterns,
                                   const TQToLoopsOptions &options);

/// tq.from_bytes, tq.to_bytes, tq.gather, tq.score, tq.accumulate.
void populateCacheLoweringPatterns(const TypeConverter &converter,
                                   RewritePatternSet &patterns,
                                   const TQToLoopsOptions &options);

/// tq.num_tokens, tq.slice_tokens, tq.online_softmax, tq.merge_tile,
/// tq.normalize, tq.combine.
void populateFlashLoweringPatterns(const TypeConverter &converter,
                                   RewritePatternSet &patterns,
                                   const TQToLoopsOptions &options);

/// The masking rule shared by tq.softmax and tq.online_softmax.
struct MaskingParams {
  float scale;
  float softcap;
  bool causal;
  int64_t window;
};

/// scale, soft-cap, mask and causal/window visibility applied to logits
/// [queries x heads x T] of keys offset .. offset + T of a numTokens-long
/// context; hidden entries are -inf.
/// `mask` (f32 or f16, [queries x T]) is scaled by `slopes[h]` when given.
Value createMaskedLogits(OpBuilder &b, Location loc, Value logits, Value mask,
                         Value slopes, Value offset, Value numTokens,
                         const MaskingParams &params);

/// tq.quantize: every format's encoder.
void populateQuantizeLoweringPatterns(const TypeConverter &converter,
                                      RewritePatternSet &patterns,
                                      const TQToLoopsOptions &options);

/// Zero-offset tensor.pad and leading tensor.extract_slice as loop nests.
void populatePaddingLoweringPatterns(const TypeConverter &converter,
                                     RewritePatternSet &patterns);

/// Emits an error on a tq.qk, tq.pv, tq.score or tq.accumulate whose head
/// counts (dim 1 of its per-head operands) are not static, which the
/// lowering needs (the GQA group is a constant of its loops); the patterns
/// only fail to match such ops, and the conversion would say no more than
/// "failed to legalize".
LogicalResult checkStaticHeadCounts(Operation *op);

/// True for the pads and slices populatePaddingLoweringPatterns lowers.
bool isLoweredPadding(Operation *op);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_LOWERINGPATTERNS_H
