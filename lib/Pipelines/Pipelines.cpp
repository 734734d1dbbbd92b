//===- Pipelines.cpp - Named pass pipelines of tqc ------------------------===//

#include "tq/Pipelines/Pipelines.h"

#include "tq/Conversion/Passes.h"
#include "tq/Dialect/TQ/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tq;

void mlir::tq::buildTQFusionPipeline(OpPassManager &pm,
                                     const TQPipelineOptions &options) {
  pm.addPass(createTQDecomposeAttention());
  if (options.hoistRotations)
    pm.addPass(createTQHoistRotation());
  if (options.fuseCodebook) {
    TQFuseCodebookOptions fuse;
    fuse.lookup = options.lookup;
    pm.addPass(createTQFuseCodebook(fuse));
    if (options.tileSize > 0) {
      TQTileFlashAttentionOptions tile;
      tile.tileSize = options.tileSize;
      tile.splits = options.splits;
      pm.addPass(createTQTileFlashAttention(tile));
    }
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::tq::buildTQToLLVMPipeline(OpPassManager &pm,
                                     const TQPipelineOptions &options) {
  buildTQFusionPipeline(pm, options);
  // The lane lookup's isa, and VBMI where it is an AVX-512 one
  // (vpmultishiftqb and vpermb are AVX-512): the loop lowering gathers
  // index fields by tq.select_bits only where that is one instruction.
  const std::string isa = laneLookupIsa(options);
  const bool vbmi = options.vbmi && StringRef(isa).starts_with("avx512");
  TQLowerToLoopsOptions lowering;
  lowering.maxUnrolledChunks = options.maxUnrolledChunks;
  lowering.scoreRows = options.scoreRows;
  lowering.accumulators = options.accumulators;
  lowering.scoreDot = options.scoreDot;
  lowering.narrowLevels = options.narrowLevels;
  lowering.valueDot = options.valueDot;
  lowering.scoreLanes = options.scoreLanes;
  lowering.pairAhead = options.pairAhead;
  lowering.prefetch = options.prefetch;
  lowering.amxTiles = options.amxTiles;
  lowering.selectFields = vbmi;
  lowering.vectorRotations = true;
  lowering.vectorSoftmax = true;
  pm.addPass(createTQLowerToLoops(lowering));
  // exp as an inline polynomial instead of a libm call, so the softmax
  // loops vectorise.
  TQApproximateMathOptions approximate;
  approximate.nativeFmaFloor = options.nativeFmaFloor;
  pm.addPass(createTQApproximateMath(approximate));
  pm.addPass(createCanonicalizerPass());
  // The lowerings read a row's scale once per use (per head); on tensors
  // the reads are pure, so one read serves them all.
  pm.addPass(createCSEPass());
  // Per-tile work on loop-invariant operands (tqprod's S q, the query's
  // lane permutation) moves out of the flash loop.
  pm.addPass(createLoopInvariantCodeMotionPass());

  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);

  // Centroid lookups become selects or register permutes (after
  // bufferization: the permute intrinsics declare no memory effects).
  TQLowerLaneLookupOptions laneLookup;
  laneLookup.isa = isa;
  laneLookup.vbmi = vbmi;
  pm.addPass(createTQLowerLaneLookup(laneLookup));
  // Copies through strided views would otherwise call memrefCopy from
  // MLIR's runtime library; kernels stay self-contained.
  pm.addPass(createTQMemRefCopyToLinalg());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createForallToForLoopPass());
  // The flash loop's per-tile buffers (and, the split loop now serial, its
  // per-split ones): one allocation per call instead of a malloc/free pair
  // per tile.
  pm.addPass(createTQHoistTileBuffers());
  pm.addPass(createConvertVectorToSCFPass());
  buildHostLoopsToLLVMPipeline(pm, options.amxTiles);
}

std::string mlir::tq::laneLookupIsa(const TQPipelineOptions &options) {
  if (options.centroidPermute == "avx512" && options.bf16)
    return "avx512bf16";
  if (options.centroidPermute == "avx512" && options.vnni)
    return "avx512vnni";
  if (options.centroidPermute == "avx2" && options.avxVnni)
    return "avxvnni";
  return options.centroidPermute;
}

bool mlir::tq::hasVnniByteDots(StringRef isa) {
  return isa == "avx512vnni" || isa == "avx512bf16" || isa == "avxvnni";
}

void mlir::tq::buildHostLoopsToLLVMPipeline(OpPassManager &pm, bool amx) {
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // (x86vector: vdpbf16ps of a bf16 weighted sum.)
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = true;
  // (amx: the prefill's tile products.)
  vectorToLLVM.amx = amx;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  if (amx) {
    // Branches carrying AMX tiles (a weighted sum's accumulator across
    // its token loop) need the AMX dialect's type conversion.
    ConvertToLLVMPassOptions controlFlow;
    controlFlow.filterDialects = {"cf", "amx"};
    pm.addPass(createConvertToLLVMPass(controlFlow));
  } else {
    pm.addPass(createConvertControlFlowToLLVMPass());
  }
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertIndexToLLVMPass());
  // Lowered n-D vector transfers leave ub.poison behind.
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::tq::registerTQPipelines() {
  PassPipelineRegistration<TQPipelineOptions>(
      "tq-fusion",
      "Derive fused attention: decompose, hoist rotations, fuse codebook",
      buildTQFusionPipeline);
  PassPipelineRegistration<TQPipelineOptions>(
      "tq-to-llvm", "tq.attention down to the LLVM dialect (CPU)",
      buildTQToLLVMPipeline);
}
