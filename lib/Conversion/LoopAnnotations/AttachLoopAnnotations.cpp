//===- AttachLoopAnnotations.cpp - Loop hints into the LLVM property ------===//
//
// Invariant after the pass: no llvm.br / llvm.cond_br carries a discardable
// `llvm.loop_annotation`; each such hint sits in the op's loop_annotation
// property, where the LLVM IR translation emits it as !llvm.loop.
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQATTACHLOOPANNOTATIONS
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {

constexpr StringLiteral kDiscardableName = "llvm.loop_annotation";

/// Moves the discardable hint of `op` into its property; an annotation the
/// branch already has wins.
template <typename BranchOp> void attach(BranchOp op) {
  auto hint = op->template getAttrOfType<LLVM::LoopAnnotationAttr>(
      kDiscardableName);
  if (!hint)
    return;
  op->removeAttr(kDiscardableName);
  if (!op.getLoopAnnotationAttr())
    op.setLoopAnnotationAttr(hint);
}

struct TQAttachLoopAnnotationsPass
    : tq::impl::TQAttachLoopAnnotationsBase<TQAttachLoopAnnotationsPass> {
  void runOnOperation() override {
    getOperation()->walk([](Operation *op) {
      if (auto br = dyn_cast<LLVM::BrOp>(op))
        attach(br);
      else if (auto condBr = dyn_cast<LLVM::CondBrOp>(op))
        attach(condBr);
    });
  }
};

} // namespace
