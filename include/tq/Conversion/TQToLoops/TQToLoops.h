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

/// The dot products of the fused score.
enum class ScoreDot {
  /// Decoded rows (f32) times the f32 query: the reference.
  F32,
  /// Codebook indices as int8 levels times the query quantised to int8
  /// (per query row and head, once per call), four products per i32 lane
  /// (tq.byte_dot): where the format has a scale per block, at most 16
  /// levels and no QJL residual; other formats keep F32.
  I8,
};

/// The multiply-adds of the fused weighted sum.
enum class ValueDot {
  /// Decoded rows (f32) times each head's f32 weight: the reference.
  F32,
  /// Two tokens per multiply-add (tq.pair_dot): the rows' centroids and
  /// the weights rounded to bf16, summed in f32 (vdpbf16ps).
  BF16,
  /// Two tokens per multiply-add: int16 levels of the centroids times the
  /// weights in int16 fixed point (per query row, head, block and call),
  /// summed in i32
  /// (vpdpwssd) and scaled to f32 once per call.
  I16,
};
// (BF16 and I16 apply where the values' format has a scale per block, at
// most 16 levels and no QJL residual; others keep F32.)

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
  /// The score's dot products.
  ScoreDot scoreDot = ScoreDot::F32;
  /// ScoreDot::I8's codebook levels as 7-bit bytes (tq.byte_dot's
  /// `narrow`: exact with AVX2's vpmaddubsw) instead of 8-bit ones (for
  /// vpdpbusd).
  bool narrowLevels = false;
  /// The weighted sum's multiply-adds.
  ValueDot valueDot = ValueDot::F32;
  /// ScoreDot::I8 with one query row (decode): accumulate each token's
  /// score in lanes of its own (four tokens a vector, fields gathered
  /// from the packed rows by tq.select_bits) instead of one row's chunk
  /// per vector summed by a shuffle tree; formats whose index planes
  /// fit it (see TokenLaneScore.cpp), others keep the row lanes.
  bool tokenLaneScore = false;
  /// With tokenLaneScore, rows of short scale blocks (tq3_0's) hold four
  /// blocks' sums in the 32-bit lanes of a token's 128-bit lane (see
  /// BlockLaneScore.cpp) where the format fits.
  bool blockLaneScore = false;
  /// With tokenLaneScore, rows of one index plane or of a 2-bit plane
  /// under a 1-bit one (turbo3_0's) take their level bytes from whole
  /// shifts of 16-bit words, the values in the order the shifts leave
  /// them (the query in the same order: the same sums), instead of
  /// tq.select_bits: for CPUs whose vpmultishiftqb shares the dots'
  /// pipes (AMD Zen 4 and 5) (see TokenLaneScore.cpp). Rows of 32-value
  /// blocks of such planes (tq3_0's) take the block lanes with shifted
  /// fields (BlockLaneScore.cpp).
  bool shiftLaneScore = false;
  /// The integer paths' index decode gathers fields with tq.select_bits
  /// (VectorRowDecoder::selectFields): for targets where it is one
  /// instruction (AVX512-VBMI's vpmultishiftqb).
  bool selectFields = false;
  /// The one-row pair weighted sum decodes pair n + 1 while its dots take
  /// pair n's words (carried by the loop): the decode chain overlaps the
  /// dots, at the cost of a chunk's words more in registers.
  bool pairAhead = false;
  /// The fused products prefetch the next tile's rows into L2 (locality
  /// hint 2) instead of L1 (3).
  bool prefetchToL2 = false;
  /// Several query rows (prefill): the score and the weighted sum as
  /// AMX-BF16 tile products (AmxTileProducts.cpp) where they apply; for
  /// CPUs with AMX-BF16 (the kernels need the OS's permission to use the
  /// tile registers: tq-aot's libraries ask for it when loaded).
  bool amxTiles = false;
  /// tq.rotate's Hadamard kinds on rows of 16-lane vectors (the same bits
  /// as the scalar stages); for pipelines that lower the vector dialect
  /// (the CPU's: GPU kernel bodies keep scalar code).
  bool vectorRotations = false;
  /// tq.online_softmax of a tile with static heads as 16-lane vector loops
  /// (VectorSoftmax.cpp: the heads side by side, an exp for its bounded
  /// argument); for the CPU pipeline.
  bool vectorSoftmax = false;
};

/// The index planes whose fields score-lanes=shifts (shiftLaneScore)
/// moves by whole-vector shifts in keys of `format` at head dim `dim`: 1
/// (one plane of 1, 2 or 4 bits), 2 (a 2-bit plane under a 1-bit one,
/// turbo3_0's, polar3's and, by block lanes, tq3_0's: two
/// tq.select_bits per level vector replaced), or 0 where the format (or
/// an unknown name) does not fit and keeps tq.select_bits.
int64_t shiftLaneScorePlanes(llvm::StringRef format, unsigned dim);

/// Patterns lowering every tq op except tq.attention and tq.quantize to
/// linalg/tensor/arith/math.
void populateTQToLoopsPatterns(const TypeConverter &converter,
                               RewritePatternSet &patterns,
                               const TQToLoopsOptions &options = {});

} // namespace mlir::tq

#endif // TQ_CONVERSION_TQTOLOOPS_TQTOLOOPS_H
