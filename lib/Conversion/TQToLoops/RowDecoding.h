//===- RowDecoding.h - IR that reads one element of a packed row -*- C++ -*-===//
//
// Emits, inside a loop body, the scalar arithmetic that decodes element j of
// the packed row (t, kv_head) of a cache: the block's scale from its fp16 or
// f32 bytes, the codebook index assembled from the format's bit planes, and
// the centroid from a constant table. All layout facts come from the
// format's FormatSpec at compile time.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOLOOPS_ROWDECODING_H
#define TQ_LIB_CONVERSION_TQTOLOOPS_ROWDECODING_H

#include "tq/Quant/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Value.h"

namespace mlir::tq {

/// Where the rows of a cache value live once lowered. Every cache lowers to
/// a page pool tensor<pages x page_size x kv_heads x row_bytes x i8>; token t
/// of the cache is row tokenOffset + t of the sequence, which lives in page
/// table[(tokenOffset + t) / page_size] at slot (tokenOffset + t) %
/// page_size. Without a table (contiguous caches) every row is in page 0.
struct CacheAccess {
  Value pages;
  Value table;       // tensor<? x i32>, or null
  Value tokenOffset; // index
  OpFoldResult numTokens; // static when the cache type says so
  Value sequenceTokens; // index: rows of the whole sequence (not the slice)
};

/// Follows an original !tq.cache value through tq.slice_tokens to its
/// tq.from_pages / tq.from_bytes (or block argument) and returns how to
/// address it; `pages` is the cache's converted value.
CacheAccess resolveCacheAccess(OpBuilder &b, Location loc, Value cache,
                               Value pages);

/// Contiguous bytes [tokens, kv_heads, row_bytes] as a pool of one page,
/// cast to `poolType` (the converted cache type).
Value createSinglePagePool(OpBuilder &b, Location loc, Value bytes,
                           Type poolType);

/// Element decoder for one cache. Constants are created once, where the
/// decoder is built (outside the loop nests that use it).
class RowDecoder {
public:
  RowDecoder(OpBuilder &b, Location loc, ::tq::quant::Format format,
             CacheAccess access);

  const ::tq::quant::FormatSpec &spec() const { return format_.spec(); }
  /// tensor<2^bits x f32> of centroids (null for q8_0 / f16).
  Value codebook() const { return codebook_; }

  /// Rotated-domain value of element j, without the QJL correction and,
  /// for haar4, without the 1/||C[idx]|| renormalisation:
  ///   scale * C[idx]  (codebook formats), d * int8 (q8_0), half (f16).
  /// t, kvHead and j are index values.
  Value element(OpBuilder &b, Location loc, Value t, Value kvHead,
                Value j) const;
  /// The index of element j as i32 (all the bits of its planes), and its
  /// centroid.
  Value index(OpBuilder &b, Location loc, Value t, Value kvHead,
              Value j) const;
  Value centroid(OpBuilder &b, Location loc, Value index) const;
  /// `index` reduced mod the codebook's size, as lib/Quant's decoders read
  /// it: haar4 stores 4-bit indices in whole bytes, and a byte above 15
  /// must not read past the table. The identity (no op) where the planes
  /// cannot hold a larger index.
  Value codebookIndex(OpBuilder &b, Location loc, Value index) const;
  /// The scale of the block holding element j (f32).
  Value scale(OpBuilder &b, Location loc, Value t, Value kvHead,
              Value j) const;
  /// tqprod: fp16 residual norm of the row (f32).
  Value residualNorm(OpBuilder &b, Location loc, Value t, Value kvHead) const;
  /// tqprod: QJL sign i of the row as +1.0 / -1.0 (f32).
  Value qjlSign(OpBuilder &b, Location loc, Value t, Value kvHead,
                Value i) const;

  /// Page and slot of cache row t (index values).
  std::pair<Value, Value> rowAddress(OpBuilder &b, Location loc,
                                     Value t) const;
  /// Page and slot of row t of the range that follows this cache's tokens
  /// in the sequence (the caller keeps it below access().sequenceTokens;
  /// only after precompute(..., DecodeUse::VectorRows)).
  std::pair<Value, Value> nextRangeRowAddress(OpBuilder &b, Location loc,
                                              Value t) const;
  /// Rows t .. t + count - 1 (count >= 1) as one page and the slots
  /// from `slot` on: {in one page, page, slot of t} (i1, index, index).
  /// Consecutive rows fill a page's slots in order, so they are in one
  /// page exactly when the first's slot + count - 1 is below the page
  /// size; rows past the cache's tokens do not count as in it. With
  /// `nextRange` the rows of the range that follows (only after
  /// precompute(..., DecodeUse::VectorRows); rows past the sequence do
  /// not count).
  std::tuple<Value, Value, Value> rowsInOnePage(OpBuilder &b, Location loc,
                                                Value t, int64_t count,
                                                bool nextRange) const;
  /// The same for a count known at run time (an index value), which must
  /// be at least one when it runs (row t's address is read): callers
  /// guard empty ranges.
  std::tuple<Value, Value, Value> rowsInOnePage(OpBuilder &b, Location loc,
                                                Value t, Value count,
                                                bool nextRange) const;
  const CacheAccess &access() const { return access_; }
  /// memref.prefetch's locality hint for the next range's rows: 3 (L1,
  /// the default) or 2 (L2; TQToLoopsOptions::prefetchToL2).
  int64_t prefetchLocality() const { return prefetchLocality_; }
  void setPrefetchLocality(int64_t hint) { prefetchLocality_ = hint; }

  /// Who reads the rows, which decides what precompute() prepares.
  enum class DecodeUse {
    /// Element accessors: every block's scale, converted once.
    Elements,
    /// VectorRowDecoder: scales come from the rows it reads; the range
    /// that follows is addressed too, for its prefetches.
    VectorRows,
  };
  /// Builds, outside any loop nest, each row's page and slot (index
  /// tensors over the tokens, and over the next range for VectorRows) and,
  /// for Elements, each block's scale; afterwards the accessors read those
  /// instead of recomputing the page lookup and the scale conversion for
  /// every value.
  void precompute(OpBuilder &b, Location loc, int64_t kvHeads,
                  DecodeUse use = DecodeUse::Elements);

private:
  /// Entry `at` of the precomputed pages and slots, as index values.
  std::pair<Value, Value> addressAt(OpBuilder &b, Location loc,
                                    Value at) const;
  /// rowsInOnePage of rows t .. t + lastOffset.
  std::tuple<Value, Value, Value> rowsInOnePageTo(OpBuilder &b, Location loc,
                                                  Value t, Value lastOffset,
                                                  bool nextRange) const;
  void precomputeAddresses(OpBuilder &b, Location loc, bool withNextRange);
  void precomputeScales(OpBuilder &b, Location loc, int64_t kvHeads);
  /// Byte offset of the block holding element j within its row.
  Value blockBase(OpBuilder &b, Location loc, Value j) const;
  Value byteAt(OpBuilder &b, Location loc, Value t, Value kvHead,
               Value offset) const;
  Value halfAt(OpBuilder &b, Location loc, Value t, Value kvHead,
               Value offset) const;
  Value f32At(OpBuilder &b, Location loc, Value t, Value kvHead,
              Value offset) const;
  /// Bits [bit % 8, bit % 8 + width) of byte offset + bit / 8, as i32.
  Value bitsAt(OpBuilder &b, Location loc, Value t, Value kvHead,
               Value offset, Value bit, unsigned width) const;

  ::tq::quant::Format format_;
  CacheAccess access_;
  int64_t prefetchLocality_ = 3;
  Value pageSize_;
  Value codebook_;
  // Set by precompute(): tensor<tokens x i32> (2 * tokens with the
  // next range) and tensor<tokens x kv_heads x blocks x f32>.
  Value pages_, slots_, scales_;
  bool addressesNextRange_ = false;
};

/// A constant tensor<rows x cols x f32> (row-major values).
Value createF32Matrix(OpBuilder &b, Location loc, ArrayRef<float> values,
                      int64_t rows, int64_t cols);

} // namespace mlir::tq

#endif // TQ_LIB_CONVERSION_TQTOLOOPS_ROWDECODING_H
