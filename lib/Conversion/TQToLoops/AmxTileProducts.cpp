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
/// Keys decoded a step at a time (their words transposed as 8 x 8).
constexpr int64_t kKeyRows = 8;
/// Finished tiles stored side by side before their rows are read back.
constexpr int64_t kBlockTiles = 8;

Value mulIndex(OpBuilder &b, Location loc, Value x, int64_t k) {
  return arith::MulIOp::create(b, loc, x, indexConst(b, loc, k));
}

/// n rounded up to a multiple of k.
Value roundUp(OpBuilder &b, Location loc, Value n, int64_t k) {
  Value up = arith::AddIOp::create(b, loc, n, indexConst(b, loc, k - 1));
  return mulIndex(b, loc,
                  arith::DivUIOp::create(b, loc, up, indexConst(b, loc, k)), k);
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
               int64_t group, Value last, Value padded, OpFoldResult cols) {
  Value init = tensor::EmptyOp::create(
      b, loc, SmallVector<OpFoldResult>{b.getIndexAttr(kvHeads), padded, cols},
      b.getBF16Type());
  auto chunkType = VectorType::get({kTileF32}, b.getBF16Type());
  Value chunks = arith::DivUIOp::create(
      b, loc, getValueOrCreateConstantIndexOp(b, loc, cols),
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
                        b, loc, VectorType::get({kTileF32}, b.getF32Type()), in,
                        ValueRange{i, h, at}, f32Const(b, loc, 0.0f),
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

/// Moves `b` before the outermost scf.for around it that `v` is defined
/// outside of: what is built there from `v` alone (the packed queries) is
/// built once, not in every iteration of the flash loop.
void hoistAbove(OpBuilder &b, Value v) {
  Operation *outermost = nullptr;
  for (Operation *op = b.getInsertionBlock()->getParentOp();
       isa_and_nonnull<scf::ForOp>(op); op = op->getParentOp()) {
    if (op->isAncestor(v.getParentBlock()->getParentOp()))
      break;
    outermost = op;
  }
  if (outermost)
    b.setInsertionPoint(outermost);
}

/// A read-only view of a packed operand for tile loads.
Value tileBuffer(OpBuilder &b, Location loc, Value packed) {
  auto type = cast<RankedTensorType>(packed.getType());
  auto layout =
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                             {ShapedType::kDynamic, ShapedType::kDynamic, 1});
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType(), layout),
      packed, /*readOnly=*/true);
}

/// memref<16 x 128 x f32> for kBlockTiles finished tiles side by side, in
/// the function's entry block (a stack slot of the frame, not one per
/// iteration).
Value tileScratch(OpBuilder &b, Location loc) {
  OpBuilder::InsertionGuard guard(b);
  Operation *parent = b.getInsertionBlock()->getParentOp();
  auto func = isa<func::FuncOp>(parent)
                  ? cast<func::FuncOp>(parent)
                  : parent->getParentOfType<func::FuncOp>();
  b.setInsertionPointToStart(&func.getBody().front());
  return memref::AllocaOp::create(
      b, loc,
      MemRefType::get({kTileRows, kBlockTiles * kTileF32}, b.getF32Type()));
}

/// One row block's tiles j in [0, count) (count <= kBlockTiles, `tileAt`
/// computes tile j) stored side by side in `scratch`, then its 16 rows
/// written to out[i, h, col + 16 j ...] for rows mb * 16 + r of kv head
/// kvh (rows past `last` write row `last` again). The rows are read back
/// after all the block's tiles are stored, not each right after its
/// store (a tile store does not forward to vector loads). `inBounds`:
/// every tile of kBlockTiles has its 16 columns in out (else the writes
/// are masked at out's end, and tiles past `count` write nothing).
Value writeTileBlock(OpBuilder &b, Location loc, Value scratch, Value out,
                     Value mb, Value last, Value kvh, int64_t group, Value col,
                     Value count, bool inBounds,
                     function_ref<Value(OpBuilder &, Location, Value)> tileAt) {
  scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), count, indexConst(b, loc, 1), ValueRange{},
      [&](OpBuilder &b, Location loc, Value j, ValueRange) {
        amx::TileStoreOp::create(
            b, loc, scratch,
            ValueRange{indexConst(b, loc, 0), mulIndex(b, loc, j, kTileF32)},
            tileAt(b, loc, j));
        scf::YieldOp::create(b, loc);
      });
  auto rowType = VectorType::get({kTileF32}, b.getF32Type());
  Value first = mulIndex(b, loc, mb, kTileRows);
  std::optional<int64_t> tiles = getConstantIntValue(count);
  const int64_t width = inBounds && tiles ? *tiles : kBlockTiles;
  // A loop over the rows (unrolled, 16 x 8 tensor writes in one block
  // made bufferization's analysis take most of a kernel's compile time).
  return forEach(b, loc, indexConst(b, loc, kTileRows), out,
                 [&](OpBuilder &b, Location loc, Value r, Value out) {
                   Value m = arith::AddIOp::create(b, loc, first, r);
                   auto [i, h] = queryRowOf(b, loc, m, last, kvh, group);
                   for (int64_t j = 0; j < width; ++j) {
                     Value row = vector::LoadOp::create(
                         b, loc, rowType, scratch,
                         ValueRange{r, indexConst(b, loc, j * kTileF32)});
                     Value at = arith::AddIOp::create(
                         b, loc, col, indexConst(b, loc, j * kTileF32));
                     out = vector::TransferWriteOp::create(
                               b, loc, row, out, ValueRange{i, h, at},
                               ArrayRef<bool>{inBounds})
                               .getResult();
                   }
                   return out;
                 });
}

amx::TileType bf16Tile(OpBuilder &b) {
  return amx::TileType::get({kTileRows, kTileBf16}, b.getBF16Type());
}
amx::TileType f32Tile(OpBuilder &b) {
  return amx::TileType::get({kTileRows, kTileF32}, b.getF32Type());
}

/// acc + A B for the tiles at a[kvh, ra, ca] and b[kvh, rb, cb].
Value tileProduct(OpBuilder &b, Location loc, Value aBuf, Value bBuf, Value kvh,
                  Value ra, Value ca, Value rb, Value cb, Value acc) {
  Value lhs = amx::TileLoadOp::create(b, loc, bf16Tile(b), aBuf,
                                      ValueRange{kvh, ra, ca});
  Value rhs = amx::TileLoadOp::create(b, loc, bf16Tile(b), bBuf,
                                      ValueRange{kvh, rb, cb});
  return amx::TileMulFOp::create(b, loc, f32Tile(b), lhs, rhs, acc);
}

/// The 8 x 8 transpose of `rows` (8 vectors of 8 i32): result p holds
/// word p of every row, in row order. Three rounds of shuffles, each
/// doubling the rows a group of lanes holds.
SmallVector<Value> transposeWords(OpBuilder &b, Location loc,
                                  ArrayRef<Value> rows) {
  assert(rows.size() == kKeyRows && "8 rows of 8 words");
  // Joins x and y (n words of each of g rows per word index, 8 indices)
  // into 2g rows per index: index p's lanes of x, then of y.
  auto join = [&](Value x, Value y, int64_t g, int64_t first, int64_t count) {
    const int64_t n = cast<VectorType>(x.getType()).getDimSize(0);
    SmallVector<int64_t> mask;
    for (int64_t p = first; p < first + count; ++p) {
      for (int64_t k = 0; k < g; ++k)
        mask.push_back(p * g + k);
      for (int64_t k = 0; k < g; ++k)
        mask.push_back(n + p * g + k);
    }
    return vector::ShuffleOp::create(b, loc, x, y, mask).getResult();
  };
  SmallVector<Value> pairs, quads, columns;
  for (int64_t r = 0; r < 8; r += 2)
    pairs.push_back(join(rows[r], rows[r + 1], 1, 0, 8));
  for (int64_t r = 0; r < 4; r += 2)
    quads.push_back(join(pairs[r], pairs[r + 1], 2, 0, 8));
  for (int64_t p = 0; p < 8; ++p)
    columns.push_back(join(quads[0], quads[1], 4, p, 1));
  return columns;
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

/// tensor<queries x heads x cols x f32> for the products of `operand`'s
/// query rows, and the loops (kv head, 16-row tile mb) over them carrying
/// it; `body` also gets the tile's first row.
Value forEachRowTile(OpBuilder &b, Location loc, Value operand,
                     OpFoldResult cols, int64_t kvHeads, Value padded,
                     function_ref<Value(OpBuilder &, Location, Value kvh,
                                        Value mb, Value first, Value out)>
                         body) {
  Value init = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, operand, 0),
                                sizeOf(b, loc, operand, 1), cols},
      b.getF32Type());
  Value rowTiles =
      arith::DivUIOp::create(b, loc, padded, indexConst(b, loc, kTileRows));
  return forEach(b, loc, indexConst(b, loc, kvHeads), init,
                 [&](OpBuilder &b, Location loc, Value kvh, Value out) {
                   return forEach(
                       b, loc, rowTiles, out,
                       [&](OpBuilder &b, Location loc, Value mb, Value out) {
                         return body(b, loc, kvh, mb,
                                     mulIndex(b, loc, mb, kTileRows), out);
                       });
                 });
}

/// R - 1 and R rounded up to whole tiles, for `operand`'s query rows.
std::pair<Value, Value> queryRows(OpBuilder &b, Location loc, Value operand,
                                  int64_t group) {
  Value rows =
      mulIndex(b, loc, tensor::DimOp::create(b, loc, operand, 0), group);
  return {arith::SubIOp::create(b, loc, rows, indexConst(b, loc, 1)),
          roundUp(b, loc, rows, kTileRows)};
}

} // namespace

bool mlir::tq::amxTilesApply(const VectorRowDecoder &rows, int64_t queryRows) {
  // Codebook formats only: bf16 operands add ~2e-3 of the output's norm,
  // a small share of a 2-4-bit format's own error but several times
  // q8_0's and f16's (measured: 0.36-0.39 of q8_0's, 9x f16's).
  return queryRows != 1 && rows.rowDecoder().spec().codebook &&
         !rows.hasQjl() && rows.width() % kTileBf16 == 0 &&
         fusedChunkLanes(rows.width()) == kTileF32;
}

FailureOr<Value> mlir::tq::emitAmxScore(OpBuilder &b, Location loc, Value query,
                                        VectorRowDecoder &keys, int64_t kvHeads,
                                        int64_t group) {
  auto queryType = cast<RankedTensorType>(query.getType());
  if (!amxTilesApply(keys, queryType.getDimSize(0)))
    return failure();
  const int64_t width = keys.width();
  const CacheAccess &access = keys.rowDecoder().access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  Value last, padded, queries;
  {
    OpBuilder::InsertionGuard guard(b);
    hoistAbove(b, query);
    if (keys.isReordered())
      query = permuteRows(b, loc, query, keys.laneOrder());
    std::tie(last, padded) = queryRows(b, loc, query, group);
    queries = packRows(b, loc, query, kvHeads, group, last, padded,
                       b.getIndexAttr(width));
  }

  // The keys, eight tokens at a time: chunk c of each row as 8 words
  // (bf16 pairs d = 2p, 2p + 1), the 8 x 8 words transposed, so word p of
  // the eight rows is K[kvh, 8c + p, 2t0 ..] (32 bytes).
  Value paddedTokens = roundUp(b, loc, tokens, kTileF32);
  Value keyInit = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{
          b.getIndexAttr(kvHeads), b.getIndexAttr(width / 2),
          getAsOpFoldResult(mulIndex(b, loc, paddedTokens, 2))},
      b.getBF16Type());
  auto chunkType = VectorType::get({kTileF32}, b.getBF16Type());
  auto wordsType = VectorType::get({kKeyRows}, b.getI32Type());
  Value packedKeys = forEachDecodedRows(
      b, loc, keys, kvHeads, kTileF32, kKeyRows, keyInit,
      [&](OpBuilder &b, Location loc, Value kvh, ArrayRef<DecodedRow> rows,
          Value pack) {
        Value col = mulIndex(b, loc, rows[0].t, 2);
        for (size_t c = 0; c < rows[0].chunks.size(); ++c) {
          SmallVector<Value> words;
          for (const DecodedRow &row : rows)
            words.push_back(vector::BitCastOp::create(
                b, loc, wordsType,
                arith::TruncFOp::create(
                    b, loc, chunkType,
                    scaledChunk(b, loc, keys, row.chunks[c], row, kvh))));
          for (auto [p, column] :
               llvm::enumerate(transposeWords(b, loc, words)))
            pack =
                vector::TransferWriteOp::create(
                    b, loc,
                    vector::BitCastOp::create(b, loc, chunkType, column), pack,
                    ValueRange{kvh,
                               indexConst(b, loc, int64_t(c) * kKeyRows + p),
                               col},
                    ArrayRef<bool>{true})
                    .getResult();
        }
        return pack;
      });

  Value queryBuf = tileBuffer(b, loc, queries);
  Value keyBuf = tileBuffer(b, loc, packedKeys);
  Value scratch = tileScratch(b, loc);
  Value tokenTiles = arith::DivUIOp::create(b, loc, paddedTokens,
                                            indexConst(b, loc, kTileF32));
  Value tokenBlocks =
      arith::DivUIOp::create(b, loc, roundUp(b, loc, tokenTiles, kBlockTiles),
                             indexConst(b, loc, kBlockTiles));
  return forEachRowTile(
      b, loc, query, getAsOpFoldResult(tokens), kvHeads, padded,
      [&](OpBuilder &b, Location loc, Value kvh, Value mb, Value ra,
          Value out) {
        // Blocks of kBlockTiles token tiles.
        return forEach(
            b, loc, tokenBlocks, out,
            [&](OpBuilder &b, Location loc, Value blk, Value out) {
              Value firstTile = mulIndex(b, loc, blk, kBlockTiles);
              Value count = arith::MinUIOp::create(
                  b, loc, indexConst(b, loc, kBlockTiles),
                  arith::SubIOp::create(b, loc, tokenTiles, firstTile));
              return writeTileBlock(
                  b, loc, scratch, out, mb, last, kvh, group,
                  mulIndex(b, loc, firstTile, kTileF32), count,
                  /*inBounds=*/false, [&](OpBuilder &b, Location loc, Value j) {
                    Value nb = arith::AddIOp::create(b, loc, firstTile, j);
                    Value acc = amx::TileZeroOp::create(b, loc, f32Tile(b));
                    Value cb = mulIndex(b, loc, nb, 2 * kTileF32);
                    for (int64_t kb = 0; kb < width / kTileBf16; ++kb)
                      acc = tileProduct(b, loc, queryBuf, keyBuf, kvh, ra,
                                        indexConst(b, loc, kb * kTileBf16),
                                        indexConst(b, loc, kb * kTileRows), cb,
                                        acc);
                    return acc;
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
  Value pairs =
      arith::DivUIOp::create(b, loc, paddedTokens, indexConst(b, loc, 2));
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
        Value pair =
            arith::DivUIOp::create(b, loc, rows[0].t, indexConst(b, loc, 2));
        for (size_t c = 0; c < rows[0].chunks.size(); ++c) {
          Value even =
              scaledChunk(b, loc, values, rows[0].chunks[c], rows[0], kvh);
          Value odd =
              scaledChunk(b, loc, values, rows[1].chunks[c], rows[1], kvh);
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
                pack =
                    vector::TransferWriteOp::create(
                        b, loc, zeros, pack,
                        ValueRange{kvh, p, indexConst(b, loc, c * kTileBf16)},
                        ArrayRef<bool>{true})
                        .getResult();
              return pack;
            });
      });

  Value weightBuf = tileBuffer(b, loc, weights);
  Value valueBuf = tileBuffer(b, loc, packed);
  Value scratch = tileScratch(b, loc);
  Value tokenTiles = arith::DivUIOp::create(b, loc, paddedTokens,
                                            indexConst(b, loc, kTileBf16));
  Value out = forEachRowTile(
      b, loc, probs, b.getIndexAttr(width), kvHeads, padded,
      [&](OpBuilder &b, Location loc, Value kvh, Value mb, Value ra,
          Value out) {
        // Blocks of kBlockTiles 16-value column tiles of the row.
        const int64_t columnTiles = width / kTileF32;
        for (int64_t first = 0; first < columnTiles; first += kBlockTiles)
          out = writeTileBlock(
              b, loc, scratch, out, mb, last, kvh, group,
              indexConst(b, loc, first * kTileF32),
              indexConst(b, loc, std::min(kBlockTiles, columnTiles - first)),
              /*inBounds=*/true, [&](OpBuilder &b, Location loc, Value j) {
                Value nd =
                    arith::AddIOp::create(b, loc, j, indexConst(b, loc, first));
                Value cb = mulIndex(b, loc, nd, kTileBf16);
                Value zero = amx::TileZeroOp::create(b, loc, f32Tile(b));
                auto sum = scf::ForOp::create(
                    b, loc, indexConst(b, loc, 0), tokenTiles,
                    indexConst(b, loc, 1), ValueRange{zero},
                    [&](OpBuilder &b, Location loc, Value kb, ValueRange acc) {
                      scf::YieldOp::create(
                          b, loc,
                          tileProduct(b, loc, weightBuf, valueBuf, kvh, ra,
                                      mulIndex(b, loc, kb, kTileBf16),
                                      mulIndex(b, loc, kb, kTileRows), cb,
                                      acc[0]));
                    });
                return sum.getResult(0);
              });
        return out;
      });
  if (!values.isReordered())
    return out;
  return permuteRows(b, loc, out, inverseOrder(values.laneOrder()));
}
