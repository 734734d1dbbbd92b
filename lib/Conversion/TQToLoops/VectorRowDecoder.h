//===- VectorRowDecoder.h - Vector decode of packed rows --------*- C++ -*-===//
//
// Decodes rows of a cache to the rotated domain with vector ops: the row's
// bytes are read as one vector, every bit plane is expanded to one lane per
// value by a constant shuffle, shifted and masked with constant per-lane
// amounts, and the centroid is picked by tq.lane_lookup over the (at most
// 16) codebook levels (a select tree or a register permute once
// tq-lower-lane-lookup ran), then scaled. LLVM turns this into SIMD code,
// where the element-wise loop nest stays scalar.
//
// A row can be decoded whole or in lane chunks, so consumers keep decoded
// values in registers (FusedTileProducts) instead of a buffer. Lanes may
// follow a bit-plane order instead of the row's (see laneOrder): a chunk
// then takes consecutive bytes of the widest plane at one bit offset, so
// its unpacking is a zero-extension, one uniform shift and a mask.
// Where each chunk's fields of a plane sit in a few 32-bit words of the
// row (turbo3_0: 16 two-bit fields in one word, 16 one-bit fields in
// another), lanes keep the row's order and read their fields by
// broadcasting those words and shifting every lane by its own amount:
// one variable shift per plane instead of byte shuffles and widening.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_VECTORROWDECODER_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_VECTORROWDECODER_H

#include "RowDecoding.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::tq {

/// Where the packed bytes of one row live: the trailing dim of `source`
/// (a tensor) holds them, `at` indexes its leading dims. Consumers read
/// just the bytes they need, so word and scale reads stay loads from
/// memory (a load folds into a broadcast) instead of lane extractions
/// from a row held in registers.
struct RowBytes {
  Value source;
  SmallVector<Value, 3> at;
  /// A dynamic byte offset (index) added to every read: the row seen from
  /// one of its decode periods on (see VectorRowDecoder::DecodePeriod);
  /// null for the row's start.
  Value base;
  /// Where index planes move by their own strides (a 3-bit polar row's
  /// 2-bit and 1-bit planes), plane p's reads take planeBase[p] instead.
  SmallVector<Value, 2> planeBase;
  /// Bytes [offset, offset + count) as vector<count x i8>; without
  /// `inRow` they may run past the row's end, which reads as zeros (a
  /// masked read).
  Value read(OpBuilder &b, Location loc, int64_t offset, int64_t count,
             bool inRow = true) const;
  /// The same row, `bytes` (index) further on, index plane p
  /// `planeBytes[p]` further on (none: all by `bytes`).
  RowBytes movedBy(OpBuilder &b, Location loc, Value bytes,
                   ArrayRef<Value> planeBytes = {}) const;
};

class VectorRowDecoder {
public:
  /// The decoder of formats whose values are scale * C[idx] (tq3_0,
  /// tq3_0_legacy, turbo, polar; tqprod's polar part, its QJL signs apart)
  /// with at most 16 codebook levels and fp16 or f32 scales (haar4: its
  /// uint8 indices, each row renormalised by 1/||C[idx]||), d * int8
  /// (q8_0) or halves (f16). `decoder` must be precomputed and outlive
  /// this.
  /// With `chunkLanes` > 0 lanes may be reordered for chunks of that many
  /// lanes (laneOrder); 0 keeps the row's order.
  static FailureOr<VectorRowDecoder> get(const RowDecoder &decoder,
                                         int64_t chunkLanes = 0);
  static bool supports(const ::tq::quant::FormatSpec &spec);
  /// A decoder for decodeCodes in chunks of `chunkLanes` bytes: lanes in
  /// the widest plane's order (see laneOrder) for the widest of 64, 32 or
  /// 16 byte groups that divides the plane and keeps each group's lanes in
  /// one scale block, so a chunk's fields of that plane share a few bit
  /// offsets; else the row's order. Never the word reads' row order
  /// (bytes have no per-lane variable shift). Fails where the format has
  /// no codes (hasCodes).
  static FailureOr<VectorRowDecoder> getForCodes(const RowDecoder &decoder);
  /// getForCodes for the products on indices with scales applied per block
  /// (the integer score, the pair weighted sum): fails where the format
  /// does not fit them (hasScaledCodes) or no chunk width keeps chunks in
  /// one block (blockChunkLanes).
  /// With `selectFields`, the row's order where tq.select_bits gathers
  /// every chunk of 64 lanes in both orders and the row's order needs
  /// fewer permutes (selectPermutes): a chunk's fields then lie in one
  /// stretch of each plane, so a narrow plane's (turbo3_0's high bits) is
  /// one broadcast 8-byte read, where the widest plane's order spreads the
  /// chunk over the whole plane; but that order reads a single plane
  /// (polar4) in lane order with no permute at all.
  static FailureOr<VectorRowDecoder>
  getForScaledCodes(const RowDecoder &decoder, bool selectFields = false);

  /// Values per row (the padded head dim).
  int64_t width() const { return width_; }

  /// Lane l of a decoded row holds value laneOrder()[l] of the row. Where
  /// the widest index plane packs v > 1 values per byte and its bytes come
  /// in multiples of the chunk width L, lanes go by (group of L plane
  /// bytes, position within the byte, byte): chunk (g, k) holds value k of
  /// bytes gL .. gL + L - 1. Otherwise the identity.
  ArrayRef<int64_t> laneOrder() const { return order_; }
  bool isReordered() const { return reordered_; }
  const RowDecoder &rowDecoder() const { return *decoder_; }

  /// The packed bytes of row (t, kvHead) in the cache.
  RowBytes rowBytes(OpBuilder &b, Location loc, Value t, Value kvHead) const;
  /// The packed bytes of the row at (page, slot) of the pool, head kvHead
  /// (a row of a run in one page: RowDecoder::rowsInOnePage).
  RowBytes rowBytesAt(Value page, Value slot, Value kvHead) const;
  /// All of a row's bytes: vector<row_bytes x i8>.
  Value loadRow(OpBuilder &b, Location loc, const RowBytes &row) const;

  /// For a renormalised format (haar4): each row's scale / ||C[idx]||,
  /// by a loop over the rows before the products (rowScale reads it);
  /// nothing otherwise.
  void computeRowFactors(OpBuilder &b, Location loc, int64_t kvHeads);

  /// True where a row's values are scale * C[idx] / ||C[idx]|| (haar4).
  bool renormalises() const;

  /// A read-only buffer of the pool for prefetchNextRange (create it once,
  /// outside the loops).
  Value prefetchBuffer(OpBuilder &b, Location loc) const;

  /// Prefetches row t of the next token range (the next tile of a flash
  /// loop), head kvHead, where the sequence has it: issued while this
  /// range is computed, one row per token, so the next range finds its
  /// rows in cache.
  void prefetchNextRange(OpBuilder &b, Location loc, Value buffer, Value t,
                         Value kvHead) const;
  /// Prefetches the row at (page, slot) of the pool, head kvHead: its
  /// start, and its end where that may lie in a line no other row's start
  /// touches (a row may straddle two cache lines): where the pool's slots
  /// are not one row apart (token-major pools of several kv heads), or at
  /// a page's last slot. Slots one row apart (head-major pools) touch each
  /// line once, not twice.
  void prefetchRowAt(OpBuilder &b, Location loc, Value buffer, Value page,
                     Value slot, Value kvHead) const;


  /// Values [first, first + count) of a row as vector<count x f32>, from
  /// its bytes `row` (scales are read from them too). Without
  /// `applyScale` (only where hasRowScale()) the values are not
  /// multiplied by the row's scale.
  Value decode(OpBuilder &b, Location loc, const RowBytes &row, int64_t first,
               int64_t count, bool applyScale = true) const;

  /// True where a row's values are scale * C[idx] for indices idx of at
  /// most 16 levels (decodeCodes applies; not q8_0 or f16).
  bool hasCodes() const;
  /// The codebook indices of values [first, first + count) in lane order
  /// as vector<count x i8>: exact (bits above the index are zero), or,
  /// after selectFields(true) where the planes fit, exact in the index's
  /// bits only (the bits above hold whatever followed a field), for
  /// consumers that look the index up in a table of 2^bits entries
  /// (tq.byte_lookup and tq.word_lookup read an index mod N).
  Value decodeCodes(OpBuilder &b, Location loc, const RowBytes &row,
                    int64_t first, int64_t count) const;
  /// decodeCodes gathers each plane's fields with tq.select_bits (one
  /// vpmultishiftqb per 64 lanes and plane with AVX512-VBMI) from 8-byte
  /// windows of the row and joins the planes with bit selects, instead of
  /// shifting and masking each plane and or-ing them: two instructions
  /// fewer per 64 lanes of a two-plane format. Applies to formats whose
  /// planes are 1, 2 or 4 bits wide, each above the previous one's bits,
  /// with exactly 2^bits levels; others keep the exact decode.
  void selectFields(bool on) { selectFields_ = on; }

  /// A span over which decoding repeats: with r the reference period,
  /// lanes [l + k * values) of a row decode, by the same code, as lanes
  /// [l + r * values) of the row moved (k - r) * bytes bytes on
  /// (RowBytes::movedBy), for every l < values and every k below
  /// width / values (the reads of every period stay inside the row). A
  /// consumer then loops over the periods and unrolls one, so its IR
  /// grows with the period, not the row.
  /// (Each index plane moves by its own stride, planeBytes[p]; `bytes`
  /// moves the rest: block scales, the sign plane.)
  struct DecodePeriod {
    int64_t values, bytes, reference;
    SmallVector<int64_t, 2> planeBytes;
  };
  /// The shortest period of the values (decode with applyScale =
  /// !hasRowScale()) that is a multiple of `lanes` and at least
  /// `minValues`, or none (the row does not repeat, or only as a whole).
  std::optional<DecodePeriod> valuePeriod(int64_t lanes,
                                          int64_t minValues) const;
  /// The same for the QJL signs (decodeSigns).
  std::optional<DecodePeriod> signPeriod(int64_t lanes,
                                         int64_t minValues) const;

  /// tqprod: the row also carries QJL residual signs (qjlRows() of them)
  /// and a residual norm.
  bool hasQjl() const;
  int64_t qjlRows() const;
  /// Signs [first, first + count) of the row's QJL plane as +1.0 / -1.0.
  Value decodeSigns(OpBuilder &b, Location loc, const RowBytes &row,
                    int64_t first, int64_t count) const;
  /// ||r|| * sqrt(pi/2) / m of the row with bytes `row`: the weight of
  /// <S q, sign> in the row's score, before the row scale.
  Value qjlWeight(OpBuilder &b, Location loc, const RowBytes &row) const;

  /// True where one scale covers the whole row (a single block), so a
  /// consumer can apply it to a scalar instead of to every value.
  bool hasRowScale() const;
  /// That scale (f32) of row (t, kvHead), whose bytes are `row` — for
  /// haar4 divided by the row's ||C[idx]|| (only after
  /// computeRowFactors).
  Value rowScale(OpBuilder &b, Location loc, const RowBytes &row, Value t,
                 Value kvHead) const;

  /// True where every value of a row is s_b * C[idx] with one scale s_b
  /// per block of blockLen() values, at most 16 levels and nothing else
  /// (no QJL residual): the products can run on the indices and apply
  /// the scales to sums per block (the integer score, the pair weighted
  /// sum). Mirrors FormatSpec::isScaledCodesRow.
  bool hasScaledCodes() const;
  /// Values per scale block, and blocks per row (1 where hasRowScale()).
  int64_t blockLen() const;
  int64_t scaleBlocks() const;
  /// The scale of block `block` of row (t, kvHead) (formats with scales;
  /// rowScale where hasRowScale()).
  Value scaleOfBlock(OpBuilder &b, Location loc, const RowBytes &row,
                     Value t, Value kvHead, int64_t block) const;
  /// True where each block's scale is an fp16 in the row itself (no row
  /// factor) and the row has several blocks.
  bool hasHalfBlockScales() const;
  /// True where every scale of the row (its blocks', or its one row
  /// scale) is an fp16 in the row used as it is, no renormalisation:
  /// scaleBitsOfBlock applies.
  bool hasHalfScaleBits() const;
  /// The bits of block `block`'s fp16 scale as an i16 (hasHalfScaleBits):
  /// moved as they are, widened later many at a time.
  Value scaleBitsOfBlock(OpBuilder &b, Location loc, const RowBytes &row,
                         int64_t block) const;
  /// The widest of 64, 32 or 16 lanes that divides the row with every
  /// chunk of that many lanes (in laneOrder) inside one scale block; 0
  /// where none is.
  int64_t blockChunkLanes() const;
  /// The scale block of chunk `chunk` of `lanes` lanes (blockChunkLanes).
  int64_t chunkBlock(int64_t lanes, int64_t chunk) const {
    return order_[chunk * lanes] / blockLen();
  }
  /// The widest of 64, 32 or 16 lanes that divides the row with every
  /// 16-lane group of every chunk (in laneOrder) inside one scale block: a
  /// chunk may span blocks (tq3_0's 32-value blocks in 64-lane chunks),
  /// each 128-bit lane of its products one block's. 0 where none is.
  int64_t groupBlockChunkLanes() const;
  /// The scale block of 16-lane group `group` of chunk `chunk` of `lanes`
  /// lanes (groupBlockChunkLanes).
  int64_t groupBlock(int64_t lanes, int64_t chunk, int64_t group) const {
    return order_[chunk * lanes + 16 * group] / blockLen();
  }

private:
  VectorRowDecoder(const RowDecoder &decoder, int64_t chunkLanes,
                   bool wordReads = true);
  /// decodeCodes of `values` by tq.select_bits (see selectFields); null
  /// where the planes or the row do not fit.
  Value selectCodes(OpBuilder &b, Location loc, const RowBytes &row,
                    ArrayRef<int64_t> values) const;
  /// True where selectCodes applies to the planes: 1, 2 or 4 bits each,
  /// each above the previous ones' bits, 2^bits levels, rows of at least
  /// 8 bytes.
  bool selectsPlanes() const;
  /// How selectCodes reads one plane for lanes whose fields lie at row
  /// bytes `at` (a byte per lane): `window[k]` is the first of the 8 bytes
  /// 64-bit lane k reads; `broadcast` where every lane reads the same 8
  /// (one 8-byte read repeated to every lane), else one read of `span`
  /// bytes from `first`, `inOrder` where it needs no permute. None where
  /// some 8 lanes' fields do not lie in 8 bytes.
  struct PlaneRead {
    SmallVector<int64_t> window;
    int64_t first = 0, span = 0;
    bool broadcast = false, inOrder = false;
  };
  std::optional<PlaneRead> planeRead(ArrayRef<int64_t> at) const;
  /// Where selectCodes gathers every chunk of `lanes` lanes of a whole row
  /// (selectsPlanes, each 8 lanes' fields within 8 bytes of each plane):
  /// how many of the chunks' plane reads need a permute (planeRead
  /// neither broadcast nor in order); none where it does not.
  std::optional<int64_t> selectPermutes(int64_t lanes) const;
  /// True where every group of `group` lanes (default: the chunk) of
  /// every chunk of `lanes` lanes lies in one scale block.
  bool chunksInBlocks(int64_t lanes, int64_t group = 0) const;

  /// Per value j of the row (not per lane): the byte of the row holding
  /// its bits in one plane, the bit offset within that byte, and where the
  /// plane's bits go in the index.
  struct PlaneLanes {
    SmallVector<int64_t> bytes;
    SmallVector<int32_t> shifts;
    int32_t mask = 0, indexShift = 0;
    /// The lanes of `count` values of `plane`, in blocks of `blockLen`
    /// values `bytesPerBlock` bytes apart.
    static PlaneLanes of(const ::tq::quant::BitPlane &plane, int64_t count,
                         int64_t blockLen, int64_t bytesPerBlock);
  };

  /// How lanes read one plane's fields from 32-bit words of the row: word
  /// k starts at row byte wordBytes[k]; lane l shifts word lanesWord[l]
  /// right by lanesShift[l], which leaves its field at the plane's index
  /// position (masking does the rest).
  struct WordReads {
    SmallVector<int64_t> wordBytes, lanesWord;
    SmallVector<int32_t> lanesShift;
  };
  /// The word reads of `values` in `lanes`, where at most four words hold
  /// them all without a field straddling a word.
  std::optional<WordReads> planWordReads(const PlaneLanes &lanes,
                                         ArrayRef<int64_t> values) const;
  /// True where planeFields' code for `ours`, run on the row moved
  /// `bytes` on (possibly back), reads `theirs`: their fields sit `bytes`
  /// after ours at the same bit offsets, the reads are whole bytes or
  /// words (not the shuffle of the whole row, which a moved row lacks) and
  /// stay inside the row when moved. With `wholeBytes` only whole
  /// consecutive bytes count (q8_0 reads nothing else without the
  /// shuffle).
  bool readsRepeat(const PlaneLanes &lanes, ArrayRef<int64_t> ours,
                   ArrayRef<int64_t> theirs, int64_t bytes,
                   bool wholeBytes) const;
  /// The shortest period of the lanes of `order` (values read through
  /// `planes`), as valuePeriod says; with `scales` the block scales must
  /// repeat with it too.
  std::optional<DecodePeriod>
  periodOf(ArrayRef<const PlaneLanes *> planes, ArrayRef<int64_t> order,
           int64_t lanes, int64_t minValues, bool scales,
           bool wholeBytes) const;
  /// `row` as plane `lanes` reads it (its own moved base, where it has
  /// one).
  RowBytes planeRow(const RowBytes &row, const PlaneLanes &lanes) const;
  /// True where every plane of every chunk of `chunkLanes` lanes, in the
  /// row's order, has word reads.
  bool allChunksReadWords(int64_t chunkLanes) const;
  /// The plane's fields of `values`, shifted to their index position, by
  /// word reads (see WordReads); without `exact` the bits above each field
  /// (and, for word reads, below it) are left as they come.
  Value readFields(OpBuilder &b, Location loc, const RowBytes &row,
                   const PlaneLanes &lanes, const WordReads &reads,
                   bool exact) const;
  /// The plane's fields of `values` at their index position, however the
  /// layout reads best: one read of whole consecutive bytes, word reads,
  /// or a byte shuffle with per-lane shifts. `exact` as for readFields.
  Value planeFields(OpBuilder &b, Location loc, const RowBytes &row,
                    const PlaneLanes &lanes, ArrayRef<int64_t> values,
                    bool exact) const;

  /// The plane's fields of `values` at their index position as bytes,
  /// exact: the bytes holding them gathered by one read (and a shuffle
  /// where they are not consecutive), then shifted by the cheapest means
  /// their bit offsets allow.
  Value planeCodes(OpBuilder &b, Location loc, const RowBytes &row,
                   const PlaneLanes &lanes, ArrayRef<int64_t> values) const;

  /// The little-endian f16 or f32 at byte `offset` of `row`, as f32.
  Value scalarInRow(OpBuilder &b, Location loc, const RowBytes &row,
                    int64_t offset, ::tq::quant::ScalarType type) const;
  /// The scale of block `block` of `row`.
  Value blockScale(OpBuilder &b, Location loc, const RowBytes &row,
                   int64_t block) const;
  /// The block scales of `values` (one per lane), one vector.
  Value blockScales(OpBuilder &b, Location loc, const RowBytes &row,
                    ArrayRef<int64_t> values) const;

  const RowDecoder *decoder_;
  int64_t width_, rowBytes_;
  SmallVector<PlaneLanes> planes_;
  // tqprod: the QJL sign plane, per residual row (empty otherwise).
  PlaneLanes signLanes_;
  SmallVector<int64_t> order_;
  bool reordered_ = false;
  /// decodeCodes by tq.select_bits where the planes fit (selectFields).
  bool selectFields_ = false;
  // haar4: tensor<tokens x kv_heads x 1 x f32> of scale / ||C[idx]||
  // (computeRowFactors).
  Value rowFactors_;
};

/// tensor<tokens x kv_heads x padded x f32>: every row of the cache
/// decoded, or failure where VectorRowDecoder::get fails (the caller falls
/// back to the element-wise lowering). `decoder` must be precomputed.
FailureOr<Value> emitVectorGather(OpBuilder &b, Location loc,
                                  const RowDecoder &decoder, int64_t kvHeads);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_VECTORROWDECODER_H
