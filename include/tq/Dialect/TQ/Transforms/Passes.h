//===- Passes.h - Transformations of the tq dialect -------------*- C++ -*-===//
//
// Pass declarations (from Passes.td) and the pattern sets they drive, so
// other passes and pipelines can reuse the rewrites.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_DIALECT_TQ_TRANSFORMS_PASSES_H
#define TQ_DIALECT_TQ_TRANSFORMS_PASSES_H

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace tq {

#define GEN_PASS_DECL
#include "tq/Dialect/TQ/Transforms/Passes.h.inc"

/// tq.attention -> gather, inverse rotate, slice, qk, softmax, pv.
void populateDecomposeAttentionPatterns(RewritePatternSet &patterns);

/// The original-domain rows of a cache (`tokens x kv_heads x head_dim`
/// f32): tq.gather, the inverse rotation when the format rotates, and the
/// slice back to the head dim when it pads.
Value buildDequantizedRows(OpBuilder &builder, Location loc, Value cache);

/// Key-side rotations onto queries, value-side rotations onto outputs.
void populateHoistRotationPatterns(RewritePatternSet &patterns);

/// Why the rotation feeding `denseOperand` of a tq.qk / tq.pv cannot be
/// hoisted, or success when it can (or when no rotation feeds it).
LogicalResult checkRotationHoistable(Value denseOperand, std::string &reason);

/// qk/pv over tq.gather -> tq.score / tq.accumulate.
void populateFuseCodebookPatterns(RewritePatternSet &patterns,
                                  LookupStrategy lookup);

/// score -> softmax -> accumulate as a KV-tiled online-softmax loop,
/// split into `splits` independent chunks when splits > 1.
void populateTileFlashAttentionPatterns(RewritePatternSet &patterns,
                                        int64_t tileSize, int64_t splits);

#define GEN_PASS_REGISTRATION
#include "tq/Dialect/TQ/Transforms/Passes.h.inc"

} // namespace tq
} // namespace mlir

#endif // TQ_DIALECT_TQ_TRANSFORMS_PASSES_H
