//===- NativeExp2.cpp - f32 exp2 as the hardware instruction --------------===//
//
// After the pass no scalar f32 math.exp2 remains; each became
// llvm.call_intrinsic "llvm.exp2.f32" (or the intrinsic the pass is
// given), which the GPU conversions leave untouched and the NVPTX /
// AMDGPU backends select as one instruction.
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
  Exp2AsIntrinsic(MLIRContext *context, StringRef intrinsic)
      : OpRewritePattern(context), intrinsic(intrinsic.str()) {}
  LogicalResult matchAndRewrite(math::Exp2Op op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "not a scalar f32");
    auto call = LLVM::CallIntrinsicOp::create(
        rewriter, op.getLoc(), op.getType(),
        rewriter.getStringAttr(intrinsic), ValueRange{op.getOperand()});
    rewriter.replaceOp(op, call.getResults());
    return success();
  }

  std::string intrinsic;
};

struct TQNativeExp2Pass
    : public mlir::tq::impl::TQNativeExp2Base<TQNativeExp2Pass> {
  using TQNativeExp2Base::TQNativeExp2Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<Exp2AsIntrinsic>(&getContext(), intrinsic);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
