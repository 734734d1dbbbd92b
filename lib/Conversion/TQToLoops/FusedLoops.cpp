//===- FusedLoops.cpp - Loops and reductions of the fused products --------===//

#include "FusedLoops.h"

#include "LoopBuilders.h"
#include "RowDecoding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/MathExtras.h"

namespace mlir::tq::fused {

Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// scf.if `cond` yielding the one value `then` or `otherwise` builds.
static Value ifElse(OpBuilder &b, Location loc, Value cond,
                    function_ref<Value(OpBuilder &, Location)> then,
                    function_ref<Value(OpBuilder &, Location)> otherwise) {
  return scf::IfOp::create(
             b, loc, cond,
             [&](OpBuilder &b, Location loc) {
               scf::YieldOp::create(b, loc, then(b, loc));
             },
             [&](OpBuilder &b, Location loc) {
               scf::YieldOp::create(b, loc, otherwise(b, loc));
             })
      .getResult(0);
}

Value blockScalesOfRows(OpBuilder &b, Location loc,
                        const VectorRowDecoder &rows, Value tokens,
                        Value length, Value kvh) {
  const int64_t blocks = rows.scaleBlocks();
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(blocks),
                                     getAsOpFoldResult(length)};
  if (rows.hasHalfScaleBits()) {
    // The halves' bits moved per row into a row-major table (token t's
    // blocks at t * blocks: one store per row, where a store per row and
    // block bound this loop at a store a cycle, 4 per tq3_0 row), then
    // taken apart by block and widened 16 at a time: a scalar conversion
    // per row and block would be most of this loop's instructions.
    std::optional<int64_t> staticLength = getConstantIntValue(length);
    OpFoldResult entries =
        staticLength
            ? OpFoldResult(b.getIndexAttr(*staticLength * blocks))
            : OpFoldResult(arith::MulIOp::create(
                  b, loc, length, indexConst(b, loc, blocks)).getResult());
    Value bits = createFilledTensor(b, loc, {entries}, b.getI16Type(),
                                    b.getI16IntegerAttr(0));
    auto rowBits = VectorType::get({blocks}, b.getI16Type());
    auto moveBits = [&](OpBuilder &b, Location loc, Value bits,
                        function_ref<RowBytes(OpBuilder &, Location, Value)>
                            rowOf) {
      return forEach(
          b, loc, tokens, bits,
          [&](OpBuilder &b, Location loc, Value t, Value bits) {
            RowBytes row = rowOf(b, loc, t);
            SmallVector<Value> perBlock;
            for (int64_t blk = 0; blk < blocks; ++blk)
              perBlock.push_back(rows.scaleBitsOfBlock(b, loc, row, blk));
            Value at = arith::MulIOp::create(b, loc, t,
                                             indexConst(b, loc, blocks));
            return vector::TransferWriteOp::create(
                       b, loc,
                       vector::FromElementsOp::create(b, loc, rowBits,
                                                      perBlock),
                       bits, ValueRange{at}, ArrayRef<bool>{true})
                .getResult();
          });
    };
    auto anyRows = [&](OpBuilder &b, Location loc) {
      return moveBits(b, loc, bits, [&](OpBuilder &b, Location loc, Value t) {
        return rows.rowBytes(b, loc, t, kvh);
      });
    };
    // Rows in one page (a whole tile, mostly): each a slot further, no
    // per-row page and slot reads and address products, which were most
    // of this loop. Their first row's address is read only for a range
    // that has rows.
    auto onePageOrAny = [&](OpBuilder &b, Location loc) {
      auto [run, page, slot] = rows.rowDecoder().rowsInOnePage(
          b, loc, indexConst(b, loc, 0), tokens, false);
      auto onePage = [&](OpBuilder &b, Location loc) {
        return moveBits(b, loc, bits,
                        [&](OpBuilder &b, Location loc, Value t) {
                          return rows.rowBytesAt(
                              page, arith::AddIOp::create(b, loc, slot, t),
                              kvh);
                        });
      };
      return ifElse(b, loc, run, onePage, anyRows);
    };
    if (!rows.rowDecoder().access().table) {
      bits = anyRows(b, loc);
    } else {
      Value some = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                         tokens, indexConst(b, loc, 0));
      bits = ifElse(b, loc, some, onePageOrAny,
                    [&](OpBuilder &, Location) { return bits; });
    }
    constexpr int64_t kLanes = 16;
    Value scales = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
    Value zeroBits = arith::ConstantIntOp::create(b, loc, b.getI16Type(), 0);
    Value steps = arith::CeilDivUIOp::create(
        b, loc, getValueOrCreateConstantIndexOp(b, loc, length),
        indexConst(b, loc, kLanes));
    return forEach(
        b, loc, steps, scales,
        [&](OpBuilder &b, Location loc, Value step, Value scales) {
          Value t = arith::MulIOp::create(b, loc, step,
                                          indexConst(b, loc, kLanes));
          // The 16 tokens' entries, then block blk's as every blocks-th.
          Value read = vector::TransferReadOp::create(
              b, loc, VectorType::get({kLanes * blocks}, b.getI16Type()),
              bits,
              ValueRange{arith::MulIOp::create(b, loc, t,
                                               indexConst(b, loc, blocks))},
              zeroBits, ArrayRef<bool>{false});
          for (int64_t blk = 0; blk < blocks; ++blk) {
            Value blockBits = read;
            if (blocks > 1) {
              SmallVector<int64_t> mask;
              for (int64_t l = 0; l < kLanes; ++l)
                mask.push_back(l * blocks + blk);
              blockBits =
                  vector::ShuffleOp::create(b, loc, read, read, mask);
            }
            Value halves = vector::BitCastOp::create(
                b, loc, VectorType::get({kLanes}, b.getF16Type()), blockBits);
            scales = vector::TransferWriteOp::create(
                         b, loc,
                         arith::ExtFOp::create(
                             b, loc,
                             VectorType::get({kLanes}, b.getF32Type()),
                             halves),
                         scales, ValueRange{indexConst(b, loc, blk), t},
                         ArrayRef<bool>{false})
                         .getResult();
          }
          return scales;
        });
  }
  Value scales = createFilledTensor(b, loc, sizes, b.getF32Type(),
                                    b.getF32FloatAttr(0.0f));
  return forEach(
      b, loc, tokens, scales,
      [&](OpBuilder &b, Location loc, Value t, Value scales) {
        RowBytes row = rows.rowBytes(b, loc, t, kvh);
        for (int64_t blk = 0; blk < blocks; ++blk)
          scales = tensor::InsertOp::create(
              b, loc, rows.scaleOfBlock(b, loc, row, t, kvh, blk), scales,
              ValueRange{indexConst(b, loc, blk), t});
        return scales;
      });
}

int64_t headBlock(int64_t group, int64_t cap) {
  for (int64_t block = std::min(group, cap); block > 1; --block)
    if (group % block == 0)
      return block;
  return 1;
}

Value forEachHeadBlock(OpBuilder &b, Location loc, Value kvh, int64_t group,
                       int64_t block, Value state, HeadBlockBody body) {
  auto run = [&](OpBuilder &b, Location loc, Value inGroup, Value state) {
    HeadBlock heads;
    heads.inGroup = inGroup;
    Value first = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, kvh, indexConst(b, loc, group)),
        inGroup);
    for (int64_t hh = 0; hh < block; ++hh)
      heads.heads.push_back(
          hh == 0 ? first
                  : arith::AddIOp::create(b, loc, first, indexConst(b, loc, hh))
                        .getResult());
    return body(b, loc, heads, state);
  };
  if (block == group)
    return run(b, loc, indexConst(b, loc, 0), state);
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), indexConst(b, loc, group),
      indexConst(b, loc, block), ValueRange{state},
      [&](OpBuilder &b, Location loc, Value inGroup, ValueRange state) {
        scf::YieldOp::create(b, loc, run(b, loc, inGroup, state[0]));
      });
  return loop.getResult(0);
}

SmallVector<Value> decodeChunks(OpBuilder &b, Location loc,
                                const VectorRowDecoder &rows,
                                const RowBytes &row,
                                int64_t lanes, int64_t first,
                                int64_t count) {
  SmallVector<Value> chunks;
  for (int64_t c = first; c < first + count; ++c)
    chunks.push_back(rows.decode(b, loc, row, c * lanes, lanes,
                                 /*applyScale=*/!rows.hasRowScale()));
  return chunks;
}

Value applyRowScale(OpBuilder &b, Location loc, const VectorRowDecoder &rows,
                    Value x, const RowBytes &row, Value t, Value kvHead) {
  if (!rows.hasRowScale())
    return x;
  return arith::MulFOp::create(b, loc, x,
                               rows.rowScale(b, loc, row, t, kvHead));
}

Value sumTree(OpBuilder &b, Location loc, ArrayRef<Value> parts) {
  auto type = cast<VectorType>(parts.front().getType());
  const int64_t w = type.getDimSize(0);
  const bool isFloat = isa<FloatType>(type.getElementType());
  auto add = [&](Value x, Value y) -> Value {
    if (isFloat)
      return arith::AddFOp::create(b, loc, x, y);
    return arith::AddIOp::create(b, loc, x, y);
  };
  const int64_t n = int64_t(llvm::PowerOf2Ceil(uint64_t(parts.size())));
  if (n == 1 || n > w) {
    SmallVector<Value> sums;
    for (Value part : parts)
      sums.push_back(
          isFloat ? vector::ReductionOp::create(b, loc,
                                                vector::CombiningKind::ADD,
                                                part,
                                                arith::FastMathFlags::reassoc)
                  : vector::ReductionOp::create(
                        b, loc, vector::CombiningKind::ADD, part));
    return vector::FromElementsOp::create(
        b, loc,
        VectorType::get({int64_t(sums.size())}, type.getElementType()),
        sums);
  }
  // Lanes [g * size + from, g * size + from + len) of every group g of
  // `groups` groups of `size` lanes, from operand `operand` (0 or 1).
  auto lanesOf = [](SmallVector<int64_t> &mask, int64_t operand,
                    int64_t width, int64_t groups, int64_t size,
                    int64_t from, int64_t len) {
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t l = 0; l < len; ++l)
        mask.push_back(operand * width + g * size + from + l);
  };
  SmallVector<Value> level(parts);
  // Zero parts fill the tree up to a power of two.
  if (int64_t(level.size()) < n)
    level.resize(n, arith::ConstantOp::create(
                        b, loc, cast<TypedAttr>(b.getZeroAttr(type))));
  int64_t groups = 1;
  while (level.size() > 1) {
    const int64_t size = w / groups, half = size / 2;
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2) {
      SmallVector<int64_t> lo, hi;
      for (int64_t operand : {0, 1}) {
        lanesOf(lo, operand, w, groups, size, 0, half);
        lanesOf(hi, operand, w, groups, size, half, half);
      }
      Value a = vector::ShuffleOp::create(b, loc, level[i], level[i + 1], lo);
      Value c = vector::ShuffleOp::create(b, loc, level[i], level[i + 1], hi);
      next.push_back(add(a, c));
    }
    level = std::move(next);
    groups *= 2;
  }
  // One vector of n groups (part k's partial sums in group k).
  Value v = level.front();
  for (int64_t size = w / n; size > 1; size /= 2) {
    const int64_t width = n * size;
    SmallVector<int64_t> lo, hi;
    lanesOf(lo, 0, width, n, size, 0, size / 2);
    lanesOf(hi, 0, width, n, size, size / 2, size / 2);
    Value low = vector::ShuffleOp::create(b, loc, v, v, lo);
    Value high = vector::ShuffleOp::create(b, loc, v, v, hi);
    v = add(low, high);
  }
  return v;
}

Value sliceLanes(OpBuilder &b, Location loc, Value v, int64_t first,
              int64_t count) {
  if (first == 0 && cast<VectorType>(v.getType()).getDimSize(0) == count)
    return v;
  return vector::ExtractStridedSliceOp::create(
      b, loc, v, ArrayRef<int64_t>{first}, ArrayRef<int64_t>{count},
      ArrayRef<int64_t>{1});
}

Value spreadScalars(OpBuilder &b, Location loc, ArrayRef<Value> scalars,
                           ArrayRef<int64_t> mask) {
  Value packed = vector::FromElementsOp::create(
      b, loc,
      VectorType::get({int64_t(scalars.size())}, scalars.front().getType()),
      scalars);
  return vector::ShuffleOp::create(b, loc, packed, packed, mask);
}

Value repeatPerHead(OpBuilder &b, Location loc, ArrayRef<Value> perRow,
                    int64_t group) {
  SmallVector<int64_t> mask;
  for (int64_t hh = 0; hh < group; ++hh)
    for (int64_t r = 0; r < int64_t(perRow.size()); ++r)
      mask.push_back(r);
  return spreadScalars(b, loc, perRow, mask);
}

Value repeatPerRow(OpBuilder &b, Location loc, ArrayRef<Value> perHead,
                   int64_t rows) {
  SmallVector<int64_t> mask;
  for (int64_t hh = 0; hh < int64_t(perHead.size()); ++hh)
    for (int64_t r = 0; r < rows; ++r)
      mask.push_back(hh);
  return spreadScalars(b, loc, perHead, mask);
}

int64_t scoreRowsPerStep(int64_t perRow, int64_t lanes, int64_t most) {
  const int64_t padded = int64_t(llvm::PowerOf2Ceil(uint64_t(perRow)));
  int64_t step = 1;
  while (2 * step <= most && 2 * step * padded <= lanes)
    step *= 2;
  return step;
}

Value readChunk(OpBuilder &b, Location loc, Value tensor, Value i, Value h,
                Value offset, int64_t lanes) {
  Value zero = f32Const(b, loc, 0.0f);
  return vector::TransferReadOp::create(
      b, loc, VectorType::get({lanes}, b.getF32Type()), tensor,
      ValueRange{i, h, offset}, zero, ArrayRef<bool>{true});
}

std::pair<ChunkLoop, ChunkLoop> chunkLoops(const VectorRowDecoder &rows,
                                           int64_t lanes,
                                           int64_t maxUnrolled) {
  ChunkLoop values{1, rows.width() / lanes, 0, 0, {}};
  ChunkLoop signs{1, rows.qjlRows() / lanes, 0, 0, {}};
  if (values.chunks + signs.chunks <= maxUnrolled)
    return {values, signs};
  const int64_t minValues = kMinPeriodChunks * lanes;
  if (auto period = rows.valuePeriod(lanes, minValues))
    values = {rows.width() / period->values, period->values / lanes,
              period->bytes, period->reference, period->planeBytes};
  if (auto period = rows.signPeriod(lanes, minValues))
    signs = {rows.qjlRows() / period->values, period->values / lanes,
             period->bytes, period->reference, {}};
  return {values, signs};
}

SmallVector<Value>
forEachPeriod(OpBuilder &b, Location loc, const ChunkLoop &loop,
              int64_t lanes, SmallVector<Value> state,
              function_ref<void(OpBuilder &, Location, const PeriodStart &,
                                SmallVector<Value> &)>
                  body) {
  if (loop.periods == 1) {
    body(b, loc, PeriodStart{}, state);
    return state;
  }
  for (Value &v : state)
    if (!v)
      v = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(VectorType::get({lanes}, b.getF32Type()),
                                 0.0f));
  auto periods = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), indexConst(b, loc, loop.periods),
      indexConst(b, loc, 1), state,
      [&](OpBuilder &b, Location loc, Value k, ValueRange carried) {
        // (k - reference) * stride.
        auto moved = [&](int64_t stride) -> Value {
          Value bytes =
              arith::MulIOp::create(b, loc, k, indexConst(b, loc, stride));
          if (!loop.reference)
            return bytes;
          return arith::SubIOp::create(
              b, loc, bytes, indexConst(b, loc, loop.reference * stride));
        };
        SmallVector<Value, 2> planeBytes;
        // (Planes that all move with the row need no bases of their own.)
        if (llvm::any_of(loop.planeBytes,
                         [&](int64_t s) { return s != loop.bytes; }))
          for (int64_t stride : loop.planeBytes)
            planeBytes.push_back(moved(stride));
        PeriodStart start{
            moved(loop.bytes),
            arith::MulIOp::create(b, loc, k,
                                  indexConst(b, loc, loop.chunks * lanes)),
            planeBytes};
        SmallVector<Value> next(carried.begin(), carried.end());
        body(b, loc, start, next);
        scf::YieldOp::create(b, loc, next);
      });
  return SmallVector<Value>(periods.getResults());
}

Value writeChunk(OpBuilder &b, Location loc, Value chunk, Value tensor,
                 Value i, Value h, Value offset) {
  return vector::TransferWriteOp::create(b, loc, chunk, tensor,
                                         ValueRange{i, h, offset},
                                         ArrayRef<bool>{true})
      .getResult();
}

Value forEach(OpBuilder &b, Location loc, Value n, Value init,
              function_ref<Value(OpBuilder &, Location, Value, Value)> body) {
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), n, indexConst(b, loc, 1),
      ValueRange{init},
      [&](OpBuilder &b, Location loc, Value x, ValueRange state) {
        scf::YieldOp::create(b, loc, body(b, loc, x, state[0]));
      });
  return loop.getResult(0);
}

Value permuteRows(OpBuilder &b, Location loc, Value in,
                  ArrayRef<int64_t> order) {
  auto type = cast<RankedTensorType>(in.getType());
  const int64_t width = type.getDimSize(2);
  auto rowType = VectorType::get({width}, b.getF32Type());
  Value out = tensor::EmptyOp::create(
      b, loc,
      SmallVector<OpFoldResult>{sizeOf(b, loc, in, 0), sizeOf(b, loc, in, 1),
                                b.getIndexAttr(width)},
      b.getF32Type());
  Value c0 = indexConst(b, loc, 0);
  return forEach(
      b, loc, tensor::DimOp::create(b, loc, in, 0), out,
      [&](OpBuilder &b, Location loc, Value i, Value out) {
        return forEach(
            b, loc, tensor::DimOp::create(b, loc, in, 1), out,
            [&](OpBuilder &b, Location loc, Value h, Value out) {
              Value row = vector::TransferReadOp::create(
                  b, loc, rowType, in, ValueRange{i, h, c0},
                  f32Const(b, loc, 0.0f), ArrayRef<bool>{true});
              Value permuted =
                  vector::ShuffleOp::create(b, loc, row, row, order);
              return vector::TransferWriteOp::create(
                         b, loc, permuted, out, ValueRange{i, h, c0},
                         ArrayRef<bool>{true})
                  .getResult();
            });
      });
}

SmallVector<int64_t> inverseOrder(ArrayRef<int64_t> order) {
  SmallVector<int64_t> inverse(order.size());
  for (size_t l = 0; l < order.size(); ++l)
    inverse[order[l]] = int64_t(l);
  return inverse;
}

Value splatF32(OpBuilder &b, Location loc, Value scalar, int64_t lanes) {
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({lanes}, b.getF32Type()), scalar);
}

/// Steps of at least this many rows take the one-page path of
/// forEachDecodedRows (shorter ones gain too little for a second copy of
/// their body).
constexpr int64_t kMinRunRows = 4;

Value forEachDecodedRows(OpBuilder &b, Location loc, VectorRowDecoder &rows,
                         int64_t kvHeads, int64_t lanes, int64_t step,
                         Value init, RowsBody body, bool decode) {
  const CacheAccess &access = rows.rowDecoder().access();
  Value tokens = getValueOrCreateConstantIndexOp(b, loc, access.numTokens);
  rows.computeRowFactors(b, loc, kvHeads);
  Value prefetch = rows.prefetchBuffer(b, loc);
  const int64_t numChunks = rows.width() / lanes;
  Value last = arith::SubIOp::create(b, loc, tokens, indexConst(b, loc, 1));
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, 0), tokens, indexConst(b, loc, step),
      ValueRange{init},
      [&](OpBuilder &b, Location loc, Value t0, ValueRange state) {
        Value next = forEach(
            b, loc, indexConst(b, loc, kvHeads), state[0],
            [&](OpBuilder &b, Location loc, Value kvh, Value state) {
              // Any rows: each row's page and slot looked up, its next
              // range row prefetched where the sequence has it.
              auto anyRows = [&](OpBuilder &b, Location loc) {
                SmallVector<DecodedRow> decoded;
                for (int64_t k = 0; k < step; ++k) {
                  DecodedRow r;
                  r.t = t0;
                  if (k > 0) {
                    Value t = arith::AddIOp::create(b, loc, t0,
                                                    indexConst(b, loc, k));
                    r.valid = arith::CmpIOp::create(
                        b, loc, arith::CmpIPredicate::ult, t, tokens);
                    r.t = arith::MinUIOp::create(b, loc, t, last);
                  }
                  rows.prefetchNextRange(b, loc, prefetch, r.t, kvh);
                  r.row = rows.rowBytes(b, loc, r.t, kvh);
                  if (decode)
                    r.chunks = decodeChunks(b, loc, rows, r.row, lanes, 0,
                                            numChunks);
                  decoded.push_back(std::move(r));
                }
                return body(b, loc, kvh, decoded, state);
              };
              if (step < kMinRunRows)
                return anyRows(b, loc);
              // The step's rows at consecutive slots of one page (all but
              // a page's or the cache's last step): one address, each row
              // a slot further, and the next range's rows prefetched the
              // same way where they are in one page too. The per-row
              // table reads, address arithmetic and prefetch checks would
              // otherwise take a third of a token's instructions.
              const RowDecoder &decoder = rows.rowDecoder();
              auto [run, page, slot] =
                  decoder.rowsInOnePage(b, loc, t0, step, false);
              auto ifRun = scf::IfOp::create(
                  b, loc, TypeRange{state.getType()}, run,
                  /*withElseRegion=*/true);
              {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPointToStart(ifRun.thenBlock());
                auto [nextRun, nextPage, nextSlot] =
                    decoder.rowsInOnePage(b, loc, t0, step, true);
                scf::IfOp::create(
                    b, loc, nextRun, [&](OpBuilder &b, Location loc) {
                      for (int64_t k = 0; k < step; ++k)
                        rows.prefetchRowAt(
                            b, loc, prefetch, nextPage,
                            arith::AddIOp::create(b, loc, nextSlot,
                                                  indexConst(b, loc, k)),
                            kvh);
                      scf::YieldOp::create(b, loc);
                    });
                SmallVector<DecodedRow> decoded;
                for (int64_t k = 0; k < step; ++k) {
                  DecodedRow r;
                  Value at = indexConst(b, loc, k);
                  r.t = k ? arith::AddIOp::create(b, loc, t0, at).getResult()
                          : t0;
                  r.row = rows.rowBytesAt(
                      page,
                      k ? arith::AddIOp::create(b, loc, slot, at).getResult()
                        : slot,
                      kvh);
                  if (decode)
                    r.chunks = decodeChunks(b, loc, rows, r.row, lanes, 0,
                                            numChunks);
                  decoded.push_back(std::move(r));
                }
                scf::YieldOp::create(b, loc,
                                     body(b, loc, kvh, decoded, state));
                b.setInsertionPointToStart(ifRun.elseBlock());
                scf::YieldOp::create(b, loc, anyRows(b, loc));
              }
              return ifRun.getResult(0);
            });
        scf::YieldOp::create(b, loc, next);
      });
  return loop.getResult(0);
}

} // namespace mlir::tq::fused
