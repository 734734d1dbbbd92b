//===- NativeExp2.cpp - f32 exp2 as the hardware instruction --------------===//
//
// After the pass no scalar f32 math.exp2 remains; each became
// llvm.call_intrinsic "llvm.exp2.f32", which the GPU conversions leave
// untouched and the NVPTX / AMDGPU backends select as one instruction.
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQNATIVEEXP2
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {

struct Exp2AsIntrinsic : public OpRewritePattern<math::Exp2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::Exp2Op op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "not a scalar f32");
    auto call = LLVM::CallIntrinsicOp::create(
        rewriter, op.getLoc(), op.getType(),
        rewriter.getStringAttr("llvm.exp2.f32"), ValueRange{op.getOperand()});
    rewriter.replaceOp(op, call.getResults());
    return success();
  }
};

struct TQNativeExp2Pass
    : public mlir::tq::impl::TQNativeExp2Base<TQNativeExp2Pass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<Exp2AsIntrinsic>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
