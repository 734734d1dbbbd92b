//===- Pipelines.h - Named pass pipelines of tqc ----------------*- C++ -*-===//
//
// The pipelines are library functions taking an options struct, shared by
// tq-opt (as registered pipelines), tq-aot and the tests.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_PIPELINES_PIPELINES_H
#define TQ_PIPELINES_PIPELINES_H

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::tq {

/// Options of the tq pipelines.
struct TQPipelineOptions : public PassPipelineOptions<TQPipelineOptions> {
  PassOptions::Option<bool> hoistRotations{
      *this, "hoist-rotations",
      llvm::cl::desc("Move K/V rotations onto queries and outputs (off: the "
                     "naive pipeline that un-rotates every cached row)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> fuseCodebook{
      *this, "fuse-codebook",
      llvm::cl::desc("Score and accumulate straight from packed indices"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> tileSize{
      *this, "tile-size",
      llvm::cl::desc("Tokens per KV tile of the flash loop (0: no tiling; "
                     "needs fuse-codebook)"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> splits{
      *this, "splits",
      llvm::cl::desc("Split-KV chunks merged by tq.combine"),
      llvm::cl::init(1)};
  PassOptions::Option<LookupStrategy> lookup{
      *this, "lookup", llvm::cl::desc("Centroid lookup: select or lut"),
      llvm::cl::init(LookupStrategy::select),
      llvm::cl::values(clEnumValN(LookupStrategy::select, "select",
                                  "codebook in registers"),
                       clEnumValN(LookupStrategy::lut, "lut",
                                  "per-query lookup table"),
                       clEnumValN(LookupStrategy::tile, "tile",
                                  "decode each KV row of a tile once for "
                                  "the whole GQA group"))};
  PassOptions::Option<int64_t> maxUnrolledChunks{
      *this, "max-unrolled-chunks",
      llvm::cl::desc("Fused products unroll rows of at most this many vector "
                     "chunks whole, longer ones by decode periods (see "
                     "tq-lower-to-loops)"),
      llvm::cl::init(48)};
  PassOptions::Option<int64_t> scoreRows{
      *this, "score-rows",
      llvm::cl::desc("At most this many KV rows per step of the fused score "
                     "(see tq-lower-to-loops)"),
      llvm::cl::init(4)};
  PassOptions::Option<int64_t> accumulators{
      *this, "accumulators",
      llvm::cl::desc("Vector accumulators of the one-row weighted sum (see "
                     "tq-lower-to-loops)"),
      llvm::cl::init(16)};
  PassOptions::Option<std::string> scoreDot{
      *this, "score-dot",
      llvm::cl::desc("Dot products of the fused score: f32 or i8 (see "
                     "tq-lower-to-loops)"),
      llvm::cl::init("f32")};
  PassOptions::Option<std::string> valueDot{
      *this, "value-dot",
      llvm::cl::desc("Multiply-adds of the one-row weighted sum: f32, bf16 "
                     "or i16 (see tq-lower-to-loops)"),
      llvm::cl::init("f32")};
  PassOptions::Option<std::string> prefetch{
      *this, "prefetch",
      llvm::cl::desc("Where the fused products prefetch the next tile's "
                     "rows: l1 or l2 (see tq-lower-to-loops)"),
      llvm::cl::init("l1")};
  PassOptions::Option<bool> pairAhead{
      *this, "pair-ahead",
      llvm::cl::desc("The one-row pair weighted sum decodes a token pair "
                     "ahead (see tq-lower-to-loops)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> amxTiles{
      *this, "amx-tiles",
      llvm::cl::desc("Several query rows: the score and weighted sum as "
                     "AMX-BF16 tile products (see tq-lower-to-loops)"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> scoreLanes{
      *this, "score-lanes",
      llvm::cl::desc("Lanes of the int8 score with one query row: rows, "
                     "tokens, blocks or shifts (see tq-lower-to-loops)"),
      llvm::cl::init("rows")};
  PassOptions::Option<bool> narrowLevels{
      *this, "narrow-levels",
      llvm::cl::desc("The int8 score's levels as 7-bit bytes, so that AVX2 "
                     "computes its byte products exactly with vpmaddubsw "
                     "(see tq-lower-to-loops); tq-aot sets it where the "
                     "lane-lookup isa has no vpdpbusd"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> vnni{
      *this, "vnni",
      llvm::cl::desc("The target has AVX512-VNNI and -BW: with "
                     "centroid-permute=avx512 the int8 score's byte ops "
                     "become vpshufb / vpdpbusd (tq-lower-lane-lookup "
                     "isa=avx512vnni); tq-aot sets it from the CPU"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> avxVnni{
      *this, "avx-vnni",
      llvm::cl::desc("The target has AVX-VNNI (VEX-encoded 256-bit "
                     "vpdpbusd/vpdpwssd): with centroid-permute=avx2 the "
                     "integer dot paths' products take them "
                     "(tq-lower-lane-lookup isa=avxvnni); tq-aot sets it "
                     "from the CPU"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> vbmi{
      *this, "vbmi",
      llvm::cl::desc("The target has AVX512-VBMI: with centroid-permute="
                     "avx512 tq.select_bits becomes vpmultishiftqb and byte "
                     "lookups vpermb (tq-lower-lane-lookup vbmi), and the "
                     "integer paths' index decode gathers fields by "
                     "tq.select_bits (tq-lower-to-loops select-fields); "
                     "tq-aot sets it from the CPU"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> nativeFmaFloor{
      *this, "native-fma-floor",
      llvm::cl::desc("The target has FMA and SSE4.1: the exp "
                     "approximation keeps its math.fma and math.floor as "
                     "instructions (tq-approximate-math native-fma-floor); "
                     "tq-aot sets it from the CPU"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> bf16{
      *this, "bf16",
      llvm::cl::desc("The target also has AVX512-BF16 (implies vnni): a bf16 "
                     "weighted sum's pair products become vdpbf16ps "
                     "(tq-lower-lane-lookup isa=avx512bf16); tq-aot sets it "
                     "from the CPU"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> centroidPermute{
      *this, "centroid-permute",
      llvm::cl::desc("Centroid lookup of vector row decoding: none (select "
                     "tree), avx2 or avx512 (x86 vpermps; tq-aot picks it "
                     "from the target CPU's features)"),
      llvm::cl::init("none")};
};

/// tq.attention -> the fused tq form (decompose, hoist, fuse, tile,
/// canonicalize).
void buildTQFusionPipeline(OpPassManager &pm, const TQPipelineOptions &options);

/// The fusion pipeline, then tq-lower-to-loops, bufferization and the
/// upstream conversions down to the LLVM dialect (CPU).
void buildTQToLLVMPipeline(OpPassManager &pm, const TQPipelineOptions &options);

/// The `isa` of tq-lower-lane-lookup in that pipeline: centroid-permute,
/// refined by vnni and bf16 (avx512) or avx-vnni (avx2).
std::string laneLookupIsa(const TQPipelineOptions &options);

/// True where tq-lower-lane-lookup's `isa` lowers tq.byte_dot to
/// vpdpbusd (avx512vnni, avx512bf16, avxvnni), which needs no `narrow`.
bool hasVnniByteDots(StringRef isa);

/// The tail of tq-to-llvm, for any host code of scf/affine loops, vector,
/// math, arith and memref ops: strided metadata expanded, affine and scf
/// lowered, then everything converted to the LLVM dialect (math by LLVM
/// intrinsics, libm for the rest). Also runs kernels built for the host
/// emulation of the GPU target (after tq-gpu-to-host). `amx`: the code
/// has AMX tiles (tq-lower-to-loops' amx-tiles), whose ops and branches
/// the conversion then lowers too.
void buildHostLoopsToLLVMPipeline(OpPassManager &pm, bool amx = false);

/// Registers "tq-fusion" and "tq-to-llvm" with the pass registry.
void registerTQPipelines();

} // namespace mlir::tq

#endif // TQ_PIPELINES_PIPELINES_H
