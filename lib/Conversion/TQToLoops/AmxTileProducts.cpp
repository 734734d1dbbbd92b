//===- AmxTileProducts.cpp - Prefill products on AMX tiles ----------------===//
//
// A kv head's R = queries x group query rows (row m: query m / group, head
// kvh * group + m % group) against a tile of T tokens, as tdpbf16ps over
// 16x16 f32 tiles. Per tile the operands are written once, as bf16, in the
// layouts tiles load (64-byte tile rows of 32 bf16):
//
//   queries  Q[kvh, m, d]                    A of the score (16 x 32 d)
//   keys     K[kvh, d / 2, 2 t + d % 2]       B of the score (VNNI pairs)
//   weights  P[kvh, m, t]                    A of the weighted sum
//   values   V[kvh, t / 2, 2 d + t % 2]       B of the weighted sum
//
// Rows m >= R repeat row R - 1, so every tile is whole and the products
// of the repeated rows are written again, unchanged. Weights past the
// tile's last token are zero and so are values past its last token pair
// (0 x NaN would not be); keys past it are left as they are, their
// scores (columns of their own) never written.
//
//===----------------------------------------------------------------------===//

#include "AmxTileProducts.h"
#include "FusedLoops.h"
#include "FusedTileProducts.h"
#include "LoopBuilders.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::fused;

namespace {

/// Rows of a tile; f32 (and i32) values of a tile row; bf16 values of one.
constexpr int64_t kTileRows = 16;
constexpr int64_t kTileF32 = 16;
constexpr int64_t kTileBf16 = 32;

Value mulIndex(OpBuilder &b, Location loc, Value x, int64_t k) {
  return arith::MulIOp::create(b, loc, x, indexConst(b, loc, k));
}

/// n rounded up to a multiple of k.
Value roundUp(OpBuilder &b, Location loc, Value n, int64_t k) {
  Value up = arith::AddIOp::create(b, loc, n, indexConst(b, loc, k - 1));
  return mulIndex(b, loc,
                  arith::DivUIOp::create(b, loc, up, indexConst(b, loc, k)),
                  k);
}

/// Loops over [from, to) carrying `init`.
Value forRange(OpBuilder &b, Location loc, Value from, Value to, Value init,
               function_ref<Value(OpBuilder &, Location, Value, Value)> body) {
  auto loop = scf::ForOp::create(
      b, loc, from, to, indexConst(b, loc, 1), ValueRange{init},
      [&](OpBuilder &b, Location loc, Value x, ValueRange state) {
        scf::YieldOp::create(b, loc, body(b, loc, x, state[0]));
      });
  return loop.getResult(0);
}

/// The query and head of kv head `kvh`'s row m (rows past `last` read
/// row `last`).
std::pair<Value, Value> queryRowOf(OpBuilder &b, Location loc, Value m,
                                   Value last, Value kvh, int64_t group) {
  m = arith::MinUIOp::create(b, loc, m, last);
  Value g = indexConst(b, loc, group);
  Value i = arith::DivUIOp::create(b, loc, m, g);
  Value h = arith::AddIOp::create(b, loc, mulIndex(b, loc, kvh, group),
                                  arith::RemUIOp::create(b, loc, m, g));
  return {i, h};
}

/// tensor<kvHeads x padded x cols x bf16>: row m of kv head kvh is
/// in[i, h, 0 .. cols) of its query row (i, h), zero past in's last
/// column; `cols` a multiple of 16.
Value packRows(OpBuilder &b, Location loc, Value in, int64_t kvHeads,
               int64_t group, Value last, Value padded, Value cols) {
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{b.getIndexAttr(kvHeads), padded, cols},
      b.getBF16Type());
  auto chunkType = VectorType::get({kTileF32}, b.getBF16Type());
  Value chunks = arith::DivUIOp::create(b, loc, cols,
                                        indexConst(b, loc, kTileF32));
  return forEach(
      b, loc, indexConst(b, loc, kvHeads), init,
      [&](OpBuilder &b, Location loc, Value kvh, Value pack) {
        return forEach(
            b, loc, padded, pack,
            [&](OpBuilder &b, Location loc, Value m, Value pack) {
              auto [i, h] = queryRowOf(b, loc, m, last, kvh, group);
              return forEach(
                  b, loc, chunks, pack,
                  [&](OpBuilder &b, Location loc, Value c, Value pack) {
                    Value at = mulIndex(b, loc, c, kTileF32);
                    Value x = vector::TransferReadOp::create(
                        b, loc, VectorType::get({kTileF32}, b.getF32Type()),
                        in, ValueRange{i, h, at}, f32Const(b, loc, 0.0f),
                        ArrayRef<bool>{false});
                    Value y = arith::TruncFOp::create(b, loc, chunkType, x);
                    return vector::TransferWriteOp::create(
                               b, loc, y, pack, ValueRange{kvh, m, at},
                               ArrayRef<bool>{true})
                        .getResult();
                  });
            });
      });
}

/// A read-only view of a packed operand for tile loads.
Value tileBuffer(OpBuilder &b, Location loc, Value packed) {
  auto type = cast<RankedTensorType>(packed.getType());
  auto layout = StridedLayoutAttr::get(
      b.getContext(), ShapedType::kDynamic,
      {ShapedType::kDynamic, ShapedType::kDynamic, 1});
  return bufferization::ToBufferOp::create(
      b, loc,
      MemRefType::get(type.getShape(), type.getElementType(), layout),
      packed, /*readOnly=*/true);
}

/// memref<16x16xf32> for a finished tile, in the function's entry block
/// (a stack slot of the frame, not one per iteration).
Value tileScratch(OpBuilder &b, Location loc) {
  OpBuilder::InsertionGuard guard(b);
  Operation *parent = b.getInsertionBlock()->getParentOp();
  auto func = isa<func::FuncOp>(parent) ? cast<func::FuncOp>(parent)
                                        : parent->getParentOfType<func::FuncOp>();
  b.setInsertionPointToStart(&func.getBody().front());
  return memref::AllocaOp::create(
      b, loc, MemRefType::get({kTileRows, kTileF32}, b.getF32Type()));
}

/// Writes the 16 rows of the tile in `scratch` to out[i, h, col ...] of
/// rows mb * 16 + r of kv head kvh (rows past `last` write row `last`
/// again); `inBounds`: the 16 columns are all in out.
Value writeTileRows(OpBuilder &b, Location loc, Value scratch, Value out,
                    Value mb, Value last, Value kvh, int64_t group, Value col,
                    bool inBounds) {
  auto rowType = VectorType::get({kTileF32}, b.getF32Type());
  Value first = mulIndex(b, loc, mb, kTileRows);
  for (int64_t r = 0; r < kTileRows; ++r) {
    Value m = arith::AddIOp::create(b, loc, first, indexConst(b, loc, r));
    auto [i, h] = queryRowOf(b, loc, m, last, kvh, group);
    Value row = vector::LoadOp::create(
        b, loc, rowType, scratch,
        ValueRange{indexConst(b, loc, r), indexConst(b, loc, 0)});
    out = vector::TransferWriteOp::create(b, loc, row, out,
                                          ValueRange{i, h, col},
                                          ArrayRef<bool>{inBounds})
              .getResult();
  }
  return out;
}

amx::TileType bf16Tile(OpBuilder &b) {
  return amx::TileType::get({kTileRows, kTileBf16}, b.getBF16Type());
}
amx::TileType f32Tile(OpBuilder &b) {
  return amx::TileType::get({kTileRows, kTileF32}, b.getF32Type());
}

/// acc + A B for the tiles at a[kvh, ra, ca] and b[kvh, rb, cb].
Value tileProduct(OpBuilder &b, Location loc, Value aBuf, Value bBuf,
                  Value kvh, Value ra, Value ca, Value rb, Value cb,
                  Value acc) {
  Value lhs = amx::TileLoadOp::create(b, loc, bf16Tile(b), aBuf,
                                      ValueRange{kvh, ra, ca});
  Value rhs = amx::TileLoadOp::create(b, loc, bf16Tile(b), bBuf,
                                      ValueRange{kvh, rb, cb});
  return amx::TileMulFOp::create(b, loc, f32Tile(b), lhs, rhs, acc);
}

/// A decoded chunk of `row` (token t, kv head kvh) times the row's scale
/// where decodeChunks left it out.
Value scaledChunk(OpBuilder &b, Location loc, const VectorRowDecoder &rows,
                  Value chunk, const DecodedRow &row, Value kvh) {
  if (!rows.hasRowScale())
    return chunk;
  Value scale = rows.rowScale(b, loc, row.row, row.t, kvh);
  return arith::MulFOp::create(b, loc, chunk,
                               splatF32(b, loc, scale, kTileF32));
}

/// R - 1 and R rounded up to whole tiles, for `operand`'s query rows.
std::pair<Value, Value> queryRows(OpBuilder &b, Location loc, Value operand,
                                  int64_t group) {
  Value rows = mulIndex(b, loc, tensor::DimOp::create(b, loc, operand, 0),
                        group);
  return {arith::SubIOp::create(b, loc, rows, indexConst(b, loc, 1)),
          roundUp(b, loc, rows, kTileRows)};
}

} // namespace

bool mlir::tq::amxTilesApply(const VectorRowDecoder &rows,
                             int64_t queryRows) {
  return queryRows != 1 && !rows.hasQjl() && rows.width() % kTileBf16 == 0 &&
         fusedChunkLanes(rows.width()) == kTileF32;
}

FailureOr<Value> mlir::tq::emitAmxScore(OpBuilder &b, Location loc,
                                        Value query, VectorRowDecoder &keys,
                                        int64_t kvHeads, int64_t group) {
  auto queryType = cast<RankedTensorType>(query.getType());
  if (!amxTilesApply(keys, queryType.getDimSize(0)))
    return failure();
  const int64_t width = keys.width();
  const CacheAccess &access = keys.rowDecoder().access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  if (keys.isReordered())
    query = permuteRows(b, loc, query, keys.laneOrder());
  auto [last, padded] = queryRows(b, loc, query, group);
  Value queries = packRows(b, loc, query, kvHeads, group, last, padded,
                           indexConst(b, loc, width));

  // The keys, rows of four tokens at a time: lanes 2p, 2p + 1 of a
  // chunk c are K[kvh, 8c + p, 2t ..].
  Value paddedTokens = roundUp(b, loc, tokens, kTileF32);
  Value keyInit = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{
          b.getIndexAttr(kvHeads), b.getIndexAttr(width / 2),
          getAsOpFoldResult(mulIndex(b, loc, paddedTokens, 2))},
      b.getBF16Type());
  auto chunkType = VectorType::get({kTileF32}, b.getBF16Type());
  Value packedKeys = forEachDecodedRows(
      b, loc, keys, kvHeads, kTileF32, /*step=*/4, keyInit,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value pack) {
        for (const DecodedRow &row : rows) {
          Value col = mulIndex(b, loc, row.t, 2);
          for (auto [c, chunk] : llvm::enumerate(row.chunks)) {
            Value x = scaledChunk(b, loc, keys, chunk, row, kvh);
            Value y = arith::TruncFOp::create(b, loc, chunkType, x);
            for (int64_t p = 0; p < kTileF32 / 2; ++p) {
              Value pair = vector::ExtractStridedSliceOp::create(
                  b, loc, y, ArrayRef<int64_t>{2 * p}, ArrayRef<int64_t>{2},
                  ArrayRef<int64_t>{1});
              pack = vector::TransferWriteOp::create(
                         b, loc, pair, pack,
                         ValueRange{kvh,
                                    indexConst(b, loc,
                                               int64_t(c) * kTileF32 / 2 + p),
                                    col},
                         ArrayRef<bool>{true})
                         .getResult();
            }
          }
        }
        return pack;
      });

  Value queryBuf = tileBuffer(b, loc, queries);
  Value keyBuf = tileBuffer(b, loc, packedKeys);
  Value scratch = tileScratch(b, loc);
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, query, 0),
                                sizeOf(b, loc, query, 1),
                                getAsOpFoldResult(tokens)},
      b.getF32Type());
  Value rowTiles = arith::DivUIOp::create(b, loc, padded,
                                          indexConst(b, loc, kTileRows));
  Value tokenTiles = arith::DivUIOp::create(b, loc, paddedTokens,
                                            indexConst(b, loc, kTileF32));
  return forEach(
      b, loc, indexConst(b, loc, kvHeads), init,
      [&](OpBuilder &b, Location loc, Value kvh, Value out) {
        return forEach(
            b, loc, rowTiles, out,
            [&](OpBuilder &b, Location loc, Value mb, Value out) {
              Value ra = mulIndex(b, loc, mb, kTileRows);
              return forEach(
                  b, loc, tokenTiles, out,
                  [&](OpBuilder &b, Location loc, Value nb, Value out) {
                    Value acc = amx::TileZeroOp::create(b, loc, f32Tile(b));
                    Value cb = mulIndex(b, loc, nb, 2 * kTileF32);
                    for (int64_t kb = 0; kb < width / kTileBf16; ++kb)
                      acc = tileProduct(
                          b, loc, queryBuf, keyBuf, kvh, ra,
                          indexConst(b, loc, kb * kTileBf16),
                          indexConst(b, loc, kb * kTileRows), cb, acc);
                    amx::TileStoreOp::create(
                        b, loc, scratch,
                        ValueRange{indexConst(b, loc, 0),
                                   indexConst(b, loc, 0)},
                        acc);
                    return writeTileRows(b, loc, scratch, out, mb, last, kvh,
                                         group,
                                         mulIndex(b, loc, nb, kTileF32),
                                         /*inBounds=*/false);
                  });
            });
      });
}

FailureOr<Value> mlir::tq::emitAmxAccumulate(OpBuilder &b, Location loc,
                                             Value probs,
                                             VectorRowDecoder &values,
                                             int64_t kvHeads, int64_t group) {
  auto probsType = cast<RankedTensorType>(probs.getType());
  if (!amxTilesApply(values, probsType.getDimSize(0)))
    return failure();
  const int64_t width = values.width();
  const CacheAccess &access = values.rowDecoder().access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  Value paddedTokens = roundUp(b, loc, tokens, kTileBf16);
  auto [last, padded] = queryRows(b, loc, probs, group);
  Value weights =
      packRows(b, loc, probs, kvHeads, group, last, padded, paddedTokens);

  // The values, a token pair at a time: chunk c of rows t and t + 1
  // interleaved is V[kvh, t / 2, 32c ..]. A last odd token's pair
  // repeats it (its weight is zero); pairs past the last are zeros.
  Value pairs = arith::DivUIOp::create(b, loc, paddedTokens,
                                       indexConst(b, loc, 2));
  Value valueInit = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{b.getIndexAttr(kvHeads),
                                getAsOpFoldResult(pairs),
                                b.getIndexAttr(2 * width)},
      b.getBF16Type());
  auto pairType = VectorType::get({kTileBf16}, b.getBF16Type());
  Value packed = forEachDecodedRows(
      b, loc, values, kvHeads, kTileF32, /*step=*/2, valueInit,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value pack) {
        Value pair = arith::DivUIOp::create(b, loc, rows[0].t,
                                            indexConst(b, loc, 2));
        for (size_t c = 0; c < rows[0].chunks.size(); ++c) {
          Value even = scaledChunk(b, loc, values, rows[0].chunks[c],
                                   rows[0], kvh);
          Value odd = scaledChunk(b, loc, values, rows[1].chunks[c],
                                  rows[1], kvh);
          Value both = vector::InterleaveOp::create(b, loc, even, odd);
          Value y = arith::TruncFOp::create(b, loc, pairType, both);
          pack = vector::TransferWriteOp::create(
                     b, loc, y, pack,
                     ValueRange{kvh, pair,
                                indexConst(b, loc, int64_t(c) * kTileBf16)},
                     ArrayRef<bool>{true})
                     .getResult();
        }
        return pack;
      });
  Value written = roundUp(b, loc, tokens, 2);
  written = arith::DivUIOp::create(b, loc, written, indexConst(b, loc, 2));
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(pairType, b.getZeroAttr(b.getBF16Type())));
  packed = forEach(
      b, loc, indexConst(b, loc, kvHeads), packed,
      [&](OpBuilder &b, Location loc, Value kvh, Value pack) {
        return forRange(
            b, loc, written, pairs, pack,
            [&](OpBuilder &b, Location loc, Value p, Value pack) {
              for (int64_t c = 0; c < width / kTileF32; ++c)
                pack = vector::TransferWriteOp::create(
                           b, loc, zeros, pack,
                           ValueRange{kvh, p,
                                      indexConst(b, loc, c * kTileBf16)},
                           ArrayRef<bool>{true})
                           .getResult();
              return pack;
            });
      });

  Value weightBuf = tileBuffer(b, loc, weights);
  Value valueBuf = tileBuffer(b, loc, packed);
  Value scratch = tileScratch(b, loc);
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, probs, 0),
                                sizeOf(b, loc, probs, 1),
                                b.getIndexAttr(width)},
      b.getF32Type());
  Value rowTiles = arith::DivUIOp::create(b, loc, padded,
                                          indexConst(b, loc, kTileRows));
  Value tokenTiles = arith::DivUIOp::create(b, loc, paddedTokens,
                                            indexConst(b, loc, kTileBf16));
  Value out = forEach(
      b, loc, indexConst(b, loc, kvHeads), init,
      [&](OpBuilder &b, Location loc, Value kvh, Value out) {
        return forEach(
            b, loc, rowTiles, out,
            [&](OpBuilder &b, Location loc, Value mb, Value out) {
              Value ra = mulIndex(b, loc, mb, kTileRows);
              return forEach(
                  b, loc, indexConst(b, loc, width / kTileF32), out,
                  [&](OpBuilder &b, Location loc, Value nd, Value out) {
                    Value cb = mulIndex(b, loc, nd, kTileBf16);
                    Value zero = amx::TileZeroOp::create(b, loc, f32Tile(b));
                    auto sum = scf::ForOp::create(
                        b, loc, indexConst(b, loc, 0), tokenTiles,
                        indexConst(b, loc, 1), ValueRange{zero},
                        [&](OpBuilder &b, Location loc, Value kb,
                            ValueRange acc) {
                          scf::YieldOp::create(
                              b, loc,
                              tileProduct(b, loc, weightBuf, valueBuf, kvh,
                                          ra, mulIndex(b, loc, kb, kTileBf16),
                                          mulIndex(b, loc, kb, kTileRows), cb,
                                          acc[0]));
                        });
                    amx::TileStoreOp::create(
                        b, loc, scratch,
                        ValueRange{indexConst(b, loc, 0),
                                   indexConst(b, loc, 0)},
                        sum.getResult(0));
                    return writeTileRows(b, loc, scratch, out, mb, last, kvh,
                                         group,
                                         mulIndex(b, loc, nd, kTileF32),
                                         /*inBounds=*/true);
                  });
            });
      });
  if (!values.isReordered())
    return out;
  return permuteRows(b, loc, out, inverseOrder(values.laneOrder()));
}
