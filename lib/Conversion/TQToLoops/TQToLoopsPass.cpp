//===- TQToLoopsPass.cpp - The tq-lower-to-loops pass ---------------------===//

#include "LoweringPatterns.h"

#include "tq/Conversion/Passes.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQLOWERTOLOOPS
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;
using namespace mlir::tq;

CacheToBytesTypeConverter::CacheToBytesTypeConverter() {
  addConversion([](Type type) { return type; });
  // Every cache lowers to a pool of pages (see CacheAccess).
  addConversion([](CacheType type) -> Type {
    return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                                  type.getNumKvHeads(), type.getRowBytes()},
                                 IntegerType::get(type.getContext(), 8));
  });
}

void mlir::tq::populateTQToLoopsPatterns(const TypeConverter &converter,
                                         RewritePatternSet &patterns,
                                         const TQToLoopsOptions &options) {
  populateDenseLoweringPatterns(converter, patterns, options);
  populateCacheLoweringPatterns(converter, patterns, options);
  populateFlashLoweringPatterns(converter, patterns, options);
  populateQuantizeLoweringPatterns(converter, patterns, options);
  populatePaddingLoweringPatterns(converter, patterns);
}

namespace {
struct TQLowerToLoopsPass
    : public mlir::tq::impl::TQLowerToLoopsBase<TQLowerToLoopsPass> {
  using TQLowerToLoopsBase::TQLowerToLoopsBase;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    if (maxUnrolledChunks < 0) {
      getOperation()->emitError()
          << "tq-lower-to-loops: max-unrolled-chunks must be >= 0, got "
          << int64_t(maxUnrolledChunks);
      return signalPassFailure();
    }
    if (scoreRows < 1 || accumulators < 1) {
      getOperation()->emitError()
          << "tq-lower-to-loops: score-rows and accumulators must be >= 1, "
             "got "
          << int64_t(scoreRows) << " and " << int64_t(accumulators);
      return signalPassFailure();
    }
    if (scoreDot != "f32" && scoreDot != "i8") {
      getOperation()->emitError()
          << "tq-lower-to-loops: score-dot must be f32 or i8, got '"
          << scoreDot << "'";
      return signalPassFailure();
    }
    if (prefetch != "l1" && prefetch != "l2") {
      getOperation()->emitError()
          << "tq-lower-to-loops: prefetch must be l1 or l2, got '" << prefetch
          << "'";
      return signalPassFailure();
    }
    if (scoreLanes != "rows" && scoreLanes != "tokens" &&
        scoreLanes != "blocks" && scoreLanes != "shifts") {
      getOperation()->emitError()
          << "tq-lower-to-loops: score-lanes must be rows, tokens, blocks "
             "or shifts, got '"
          << scoreLanes << "'";
      return signalPassFailure();
    }
    if (valueDot != "f32" && valueDot != "bf16" && valueDot != "i16") {
      getOperation()->emitError()
          << "tq-lower-to-loops: value-dot must be f32, bf16 or i16, got '"
          << valueDot << "'";
      return signalPassFailure();
    }
    // Ops the loop lowering does not take: report them by name, with the
    // reason (a failed conversion would only say "failed to legalize").
    bool unsupported = false;
    getOperation()->walk([&](Operation *op) {
      if (isa<AttentionOp>(op)) {
        op->emitError() << "tq.attention must be decomposed first (run "
                           "tq-decompose-attention before tq-lower-to-loops)";
        unsupported = true;
      } else if (failed(checkStaticHeadCounts(op))) {
        unsupported = true;
      }
    });
    if (unsupported)
      return signalPassFailure();

    CacheToBytesTypeConverter converter;
    ConversionTarget target(*context);
    target.addIllegalDialect<TQDialect>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, scf::SCFDialect,
                           tensor::TensorDialect, vector::VectorDialect>();
    // Row decoding's centroid lookup; tq-lower-lane-lookup expands it.
    target.addLegalOp<LaneLookupOp>();
    // The int8 score's byte ops; tq-lower-lane-lookup expands them too.
    target.addLegalOp<ByteLookupOp, ByteDotOp, SelectBitsOp>();
    // So are the pair weighted sum's word ops.
    target.addLegalOp<WordLookupOp, PairDotOp>();
    // Fused row decoding prefetches the next tile's rows through the
    // pool's buffer (its slot stride says which row ends to touch).
    target.addLegalOp<bufferization::ToBufferOp, memref::PrefetchOp,
                      memref::ExtractStridedMetadataOp>();
    // The AMX tile products: tiles, and a stack slot for a finished one.
    target.addLegalDialect<amx::AMXDialect>();
    target.addLegalOp<memref::AllocaOp, memref::LoadOp>();
    target.addDynamicallyLegalOp<tensor::PadOp, tensor::ExtractSliceOp>(
        [](Operation *op) { return !isLoweredPadding(op); });
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
      return converter.isSignatureLegal(op.getFunctionType()) &&
             converter.isLegal(&op.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
        [&](Operation *op) { return converter.isLegal(op); });

    RewritePatternSet patterns(context);
    TQToLoopsOptions options;
    options.maxUnrolledChunks = maxUnrolledChunks;
    options.scoreRows = scoreRows;
    options.accumulators = accumulators;
    options.scoreDot =
        scoreDot == "i8" ? ScoreDot::I8 : ScoreDot::F32;
    options.narrowLevels = narrowLevels;
    options.tokenLaneScore = scoreLanes == "tokens" || scoreLanes == "blocks" ||
                             scoreLanes == "shifts";
    options.blockLaneScore = scoreLanes == "blocks";
    options.shiftLaneScore = scoreLanes == "shifts";
    options.selectFields = selectFields;
    options.pairAhead = pairAhead;
    options.prefetchToL2 = prefetch == "l2";
    options.amxTiles = amxTiles;
    options.vectorRotations = vectorRotations;
    options.vectorSoftmax = vectorSoftmax;
    options.valueDot = valueDot == "bf16"  ? ValueDot::BF16
                       : valueDot == "i16" ? ValueDot::I16
                                           : ValueDot::F32;
    populateTQToLoopsPatterns(converter, patterns, options);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    // Loops carrying caches (the tiled KV loop does not, but be general).
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
