//===- GpuKernels.cpp - Attention kernels in the gpu dialect --------------===//
//
// Thread layout: a block of target.warpsPerBlock() hardware warps. The
// attention kernel splits it into lane groups ("warps" below: a whole
// hardware warp, or an aligned half / quarter of one when the rows are
// short) that each hold a head-dim row (a LaneRow), take every
// groups-th token of the chunk and keep, per query head of the group,
// the running max, sum and accumulator in registers; the groups merge
// through workgroup memory at the end. The combine kernel uses whole
// warps. All control flow around barriers is uniform.
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/TQToGPU/GpuKernels.h"

#include "GpuAppendKernel.h"
#include "GpuBuilders.h"

#include "tq/Quant/Format.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::tq;
using namespace mlir::tq::gpukernel;
namespace quant = ::tq::quant;

namespace {

constexpr float kLog2e = 1.4426950408889634f;
/// Lanes per row group of the attention kernel for rows of <= 128 values.
constexpr unsigned kShortRowLanes = 16;
/// Accumulators per lane up to which 16-lane groups are used.
constexpr unsigned kMaxGroupAccumulators = 32;
/// Query elements per lane kept in registers across the token loop.
constexpr unsigned kMaxQueryRegisters = 32;

Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddIOp::create(b, loc, x, y);
}
Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MulIOp::create(b, loc, x, y);
}
Value addF(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y);
}
Value mulF(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}
Value loadIndex(OpBuilder &b, Location loc, Value memref, Value at) {
  return toIndex(b, loc, memref::LoadOp::create(b, loc, memref, at));
}
Value exp2(OpBuilder &b, Location loc, Value x) {
  return math::Exp2Op::create(b, loc, x);
}

MemRefType workgroupBuffer(OpBuilder &b, int64_t size) {
  return MemRefType::get(
      {std::max<int64_t>(size, 1)}, b.getF32Type(), AffineMap(),
      gpu::AddressSpaceAttr::get(b.getContext(),
                                 gpu::AddressSpace::Workgroup));
}

/// The ids every kernel starts from.
struct ThreadIds {
  Value lane, warp;
};

ThreadIds threadIds(OpBuilder &b, Location loc, unsigned warpSize) {
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value w = indexConst(b, loc, warpSize);
  return {arith::RemUIOp::create(b, loc, tid, w),
          arith::DivUIOp::create(b, loc, tid, w)};
}

/// Runs `body` under `cond` (no results).
void ifThen(OpBuilder &b, Location loc, Value cond,
            function_ref<void(OpBuilder &)> body) {
  auto op = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&op.getThenRegion().front());
  body(b);
}

/// Everything the attention kernel builder needs about its spec.
struct AttentionLayout {
  const quant::FormatSpec &keys;
  const quant::FormatSpec &values;
  /// warpSize: lanes of a row group; hardwareWarp: the shuffle width.
  unsigned headDim, group, warpSize, warps, hardwareWarp;
  unsigned dk, dv; // padded dims of K and V rows
  unsigned ck, cv; // registers per lane of a K / V row
  bool causal;
  int64_t window;
  float softcap;
  /// Tokens each lane group takes per step of the token loop.
  unsigned tokensPerStep = 1;

  unsigned blockSize() const { return warps * warpSize; }
  /// tqprod: the format carries a QJL residual sign plane.
  bool qjlK() const { return keys.qjl != nullptr; }
  bool qjlV() const { return values.qjl != nullptr; }
  /// Floats of one query head's split partial.
  unsigned partialStride() const { return gpuPartialStride(values); }
  /// Query heads handled by each warp in the prologue / combine.
  unsigned headsPerWarp() const { return (group + warps - 1) / warps; }
};

/// Bytes of workgroup memory of a kernel's attributions.
int64_t workgroupBytes(gpu::GPUFuncOp func) {
  int64_t bytes = 0;
  for (BlockArgument a : func.getWorkgroupAttributions())
    bytes += cast<MemRefType>(a.getType()).getNumElements() * 4;
  return bytes;
}

//===----------------------------------------------------------------------===//
// Attention (split-KV) kernel
//===----------------------------------------------------------------------===//

gpu::GPUFuncOp buildAttentionKernel(OpBuilder &b, Location loc,
                                    gpu::GPUModuleOp module, StringRef name,
                                    const AttentionLayout &L) {
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type qT = globalBuffer(b, f32), bytesT = globalBuffer(b, b.getI8Type()),
       intsT = globalBuffer(b, i32);
  const bool haarK = rotationNeedsScratch(L.keys);
  // Workgroup memory: rotated queries [G][DK], and the warps' final states
  // [W][G][DV + 2] (a QJL V merges its sign sums through it in a second
  // round). For Haar the unrotated queries [G][DK] are staged in the
  // states buffer first (dead until the token loop ends), which keeps
  // d = 256 with a group of 8 under the 48 KiB of static shared memory.
  // A QJL K adds the projected queries S q [G][DK]; formats with a
  // codebook add their centroid tables (K's, then V's).
  const int64_t stateFloats = int64_t(L.warps) * L.group * (L.dv + 2);
  SmallVector<Type> workgroup = {
      workgroupBuffer(b, int64_t(L.group) * L.dk),
      workgroupBuffer(b, haarK ? std::max(stateFloats,
                                          int64_t(L.group) * L.dk)
                               : stateFloats)};
  if (L.qjlK())
    workgroup.push_back(workgroupBuffer(b, int64_t(L.group) * L.dk));
  const unsigned kTable = codebookTableSize(L.keys),
                 vTable = codebookTableSize(L.values);
  const unsigned tableIndex = workgroup.size();
  if (kTable + vTable)
    workgroup.push_back(workgroupBuffer(b, kTable + vTable));
  auto func = createKernel(
      b, loc, name,
      {qT, bytesT, bytesT, intsT, intsT, intsT, intsT, intsT, qT, i32, i32, i32,
       f32},
      workgroup, L.blockSize());
  Block &entry = func.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&entry);
  auto args = func.getArguments();
  Value q = args[0], kBytes = args[1], vBytes = args[2], indptr = args[3],
        indices = args[4], seqLens = args[5], rowSeq = args[6],
        rowPos = args[7], partial = args[8];
  const PageDivisor pages = PageDivisor::get(b, loc, toIndex(b, loc, args[9]));
  Value kvHeads = toIndex(b, loc, args[10]);
  // The split count is an argument, not gpu.grid_dim: on AMD that lowers
  // to an ockl call, and kernels must not need ROCm's device library.
  Value numSplits = toIndex(b, loc, args[11]);
  Value scale = args[12];
  auto wg = func.getWorkgroupAttributions();
  Value qShared = wg[0], states = wg[1];
  Value sqShared = L.qjlK() ? Value(wg[2]) : Value();
  Value tables = kTable + vTable ? Value(wg[tableIndex]) : Value();
  Value scratch = haarK ? states : Value();

  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  ThreadIds ids = threadIds(b, loc, L.warpSize);
  // Rows on x (up to 2^31 - 1 blocks), splits on z (at most 64).
  Value row = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value split = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
  Value kvHead = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  Value G = indexConst(b, loc, L.group);

  // The centroid tables into workgroup memory (visible to every thread
  // after the prologue's barrier).
  auto fillTable = [&](const quant::FormatSpec &spec, unsigned size,
                       unsigned base) {
    if (!size)
      return;
    Value global = getCodebookTable(b, loc, module, spec);
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    auto fill = scf::ForOp::create(
        b, loc, tid, indexConst(b, loc, size),
        indexConst(b, loc, L.blockSize()), ValueRange{},
        [&](OpBuilder &b, Location loc, Value i, ValueRange) {
          memref::StoreOp::create(
              b, loc, memref::LoadOp::create(b, loc, global, ValueRange{i}),
              tables, ValueRange{add(b, loc, i, indexConst(b, loc, base))});
          scf::YieldOp::create(b, loc);
        });
    disableUnrolling(fill);
  };
  fillTable(L.keys, kTable, 0);
  fillTable(L.values, vTable, kTable);

  // The tokens this row sees, and this split's chunk [begin, end).
  Value seq = loadIndex(b, loc, rowSeq, row);
  Value pos = loadIndex(b, loc, rowPos, row);
  Value hi = loadIndex(b, loc, seqLens, seq);
  if (L.causal)
    hi = arith::MinSIOp::create(b, loc, hi, add(b, loc, pos, c1));
  Value lo = c0;
  if (L.window > 0)
    lo = arith::MaxSIOp::create(
        b, loc, c0,
        arith::SubIOp::create(b, loc, pos,
                              indexConst(b, loc, L.window - 1)));
  Value span = arith::MaxSIOp::create(b, loc, c0,
                                      arith::SubIOp::create(b, loc, hi, lo));
  Value chunk = arith::CeilDivUIOp::create(b, loc, span, numSplits);
  Value begin = add(b, loc, lo, mul(b, loc, split, chunk));
  Value end = arith::MinSIOp::create(b, loc, hi, add(b, loc, begin, chunk));
  Value pageBegin = loadIndex(b, loc, indptr, seq);

  // Prologue: the group's queries, rotated by K's rotation and scaled by
  // the logit scale, into workgroup memory.
  Value factor = arith::SelectOp::create(
      b, loc,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, scale,
                            f32Const(b, loc, 0.0f)),
      scale, f32Const(b, loc, float(1.0 / std::sqrt(double(L.headDim)))));
  // Without a soft-cap the scores go straight into exp2: the queries carry
  // log2(e) as well, so no score needs its own multiply.
  if (L.softcap <= 0.0f)
    factor = mulF(b, loc, factor, f32Const(b, loc, kLog2e));
  Value H = mul(b, loc, kvHeads, G);
  if (haarK) {
    // Dense rotation: the block stages the scaled queries in scratch, then
    // every thread computes entries of the rotated rows.
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value entries = indexConst(b, loc, int64_t(L.group) * L.dk);
    Value dk = indexConst(b, loc, L.dk);
    auto stage = scf::ForOp::create(
        b, loc, tid, entries, indexConst(b, loc, L.blockSize()), ValueRange{},
        [&](OpBuilder &b, Location loc, Value i, ValueRange) {
          Value g = arith::DivUIOp::create(b, loc, i, dk);
          Value e = arith::RemUIOp::create(b, loc, i, dk);
          Value inHead = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ult, e,
              indexConst(b, loc, L.headDim));
          Value clamped = arith::MinUIOp::create(
              b, loc, e, indexConst(b, loc, L.headDim - 1));
          Value at = add(b, loc,
                         mul(b, loc,
                             add(b, loc, mul(b, loc, row, H),
                                 add(b, loc, mul(b, loc, kvHead, G), g)),
                             indexConst(b, loc, L.headDim)),
                         clamped);
          Value v = mulF(b, loc, memref::LoadOp::create(b, loc, q, at), factor);
          memref::StoreOp::create(
              b, loc,
              arith::SelectOp::create(b, loc, inHead, v,
                                      f32Const(b, loc, 0.0f)),
              scratch, i);
          scf::YieldOp::create(b, loc);
        });
    disableUnrolling(stage);
    gpu::BarrierOp::create(b, loc);
    denseProductRows(b, loc, L.dk, L.keys.rotation->dim(),
                     /*transpose=*/false,
                     getRotationMatrix(b, loc, module, L.keys), scratch,
                     qShared, L.group, L.blockSize());
  } else {
    // Hadamard kinds (or none): each warp rotates its heads in registers.
    for (unsigned gi = 0; gi < L.headsPerWarp(); ++gi) {
      Value g = add(b, loc, ids.warp, indexConst(b, loc, gi * L.warps));
      Value live =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, g, G);
      Value gLoad =
          arith::MinUIOp::create(b, loc, g, indexConst(b, loc, L.group - 1));
      Value qBase = mul(b, loc,
                        add(b, loc, mul(b, loc, row, H),
                            add(b, loc, mul(b, loc, kvHead, G), gLoad)),
                        indexConst(b, loc, L.headDim));
      LaneRow x{{}, L.dk, L.warpSize, ids.lane, L.hardwareWarp};
      for (unsigned c = 0; c < L.ck; ++c) {
        Value e = x.element(b, loc, c);
        Value inHead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             e, indexConst(b, loc, L.headDim));
        // Lanes past the head read its last element and keep zero.
        Value clamped = arith::MinUIOp::create(
            b, loc, e, indexConst(b, loc, L.headDim - 1));
        Value v = memref::LoadOp::create(
            b, loc, q, ValueRange{add(b, loc, qBase, clamped)});
        x.regs.push_back(arith::SelectOp::create(b, loc, inHead, v,
                                                 f32Const(b, loc, 0.0f)));
      }
      rotateLaneRow(b, loc, x, L.keys, /*inverse=*/false, Value(), Value(),
                    Value());
      for (unsigned c = 0; c < L.ck; ++c) {
        Value e = x.element(b, loc, c);
        Value ok = arith::AndIOp::create(b, loc, live, x.valid(b, loc, c));
        Value v = mulF(b, loc, x.regs[c], factor);
        ifThen(b, loc, ok, [&](OpBuilder &nb) {
          memref::StoreOp::create(
              nb, loc, v, qShared,
              ValueRange{
                  add(nb, loc, mul(nb, loc, g, indexConst(nb, loc, L.dk)), e)});
        });
      }
    }
  }
  gpu::BarrierOp::create(b, loc);
  // QJL K: the residual's score term needs S q per head (m = DK rows).
  if (L.qjlK())
    denseProductRows(b, loc, L.dk, L.dk, /*transpose=*/false,
                     getQjlMatrix(b, loc, module, L.keys), qShared, sqShared,
                     L.group, L.blockSize());

  // This lane's query elements (and S q's), per head of the group: in
  // registers when they are few, else read from workgroup memory at each
  // token (a large group at a large head dim would otherwise spill).
  const bool queriesInRegisters =
      L.group * L.ck * (L.qjlK() ? 2 : 1) <= kMaxQueryRegisters;
  LaneRow kRow{{}, L.dk, L.warpSize, ids.lane, L.hardwareWarp};
  LaneRow vRow{{}, L.dv, L.warpSize, ids.lane, L.hardwareWarp};
  auto loadQuery = [&](OpBuilder &b, Value buffer, unsigned g,
                       unsigned c) -> Value {
    Value e = arith::MinUIOp::create(b, loc, kRow.element(b, loc, c),
                                     indexConst(b, loc, L.dk - 1));
    Value v = memref::LoadOp::create(
        b, loc, buffer,
        ValueRange{add(b, loc, indexConst(b, loc, g * L.dk), e)});
    return arith::SelectOp::create(b, loc, kRow.valid(b, loc, c), v,
                                   f32Const(b, loc, 0.0f));
  };
  SmallVector<SmallVector<Value>> qReg(L.group), sqReg(L.group);
  if (queriesInRegisters)
    for (unsigned g = 0; g < L.group; ++g)
      for (unsigned c = 0; c < L.ck; ++c) {
        qReg[g].push_back(loadQuery(b, qShared, g, c));
        if (L.qjlK())
          sqReg[g].push_back(loadQuery(b, sqShared, g, c));
      }
  auto query = [&](OpBuilder &b, unsigned g, unsigned c) {
    return queriesInRegisters ? qReg[g][c] : loadQuery(b, qShared, g, c);
  };
  auto projectedQuery = [&](OpBuilder &b, unsigned g, unsigned c) {
    return queriesInRegisters ? sqReg[g][c] : loadQuery(b, sqShared, g, c);
  };

  // The token loop: state = m[G], l[G], acc[G][CV], and with a QJL V the
  // weighted sign sums sgn[G][CV] (S^T is applied once, in combine).
  const float negInf = -std::numeric_limits<float>::infinity();
  SmallVector<Value> init;
  for (unsigned g = 0; g < L.group; ++g)
    init.push_back(f32Const(b, loc, negInf));
  for (unsigned g = 0; g < L.group; ++g)
    init.push_back(f32Const(b, loc, 0.0f));
  const unsigned accs = L.group * L.cv * (L.qjlV() ? 2 : 1);
  for (unsigned i = 0; i < accs; ++i)
    init.push_back(f32Const(b, loc, 0.0f));
  const unsigned signBase = 2 * L.group + L.group * L.cv;
  PackedRowReader kReader(L.keys, kBytes, tables, c0),
      vReader(L.values, vBytes, tables, indexConst(b, loc, kTable));
  // Per-lane byte offsets of the blocked layouts, computed once.
  std::optional<LaneRowReader> kLane = LaneRowReader::get(b, loc, kReader,
                                                          kRow),
                               vLane = LaneRowReader::get(b, loc, vReader,
                                                          vRow);
  Value kRowBytes = indexConst(b, loc, L.keys.rowBytes());
  Value vRowBytes = indexConst(b, loc, L.values.rowBytes());
  // A hardware warp holds `perWarp` lane groups and each group takes T =
  // L.tokensPerStep tokens per step: token i of group `sub` is t0 + sub +
  // i * L.warps, so every lane of a warp runs the same iterations and
  // reaches the same shuffles. A token past the chunk's end re-reads token
  // t0 and adds nothing. With T > 1 the softmax bookkeeping (new maximum,
  // alpha, the accumulators' rescale) is shared by the step's tokens.
  const unsigned perWarp = L.hardwareWarp / L.warpSize;
  const unsigned T = L.tokensPerStep;
  Value sub = perWarp > 1 ? arith::RemUIOp::create(
                                b, loc, ids.warp, indexConst(b, loc, perWarp))
                          : c0;
  Value firstToken =
      add(b, loc, begin, arith::SubIOp::create(b, loc, ids.warp, sub));
  // One token's K and V rows as this lane holds them.
  struct TokenRows {
    LaneRow k, v;
    Value live; // i1; null: always live
    Value kScale, kFactor, kSignFactor, vScale, vFactor, vSignFactor;
    SmallVector<Value> kBits, vBits;
  };
  auto loop = scf::ForOp::create(
      b, loc, firstToken, end, indexConst(b, loc, int64_t(L.warps) * T),
      init, [&](OpBuilder &b, Location loc, Value t0, ValueRange state) {
        // Returns the scale the values still need (null: none).
        auto decode = [&](const PackedRowReader &reader,
                          const std::optional<LaneRowReader> &lane,
                          LaneRow &lr, Value base, unsigned regs) -> Value {
          lr.regs.clear();
          if (lane) {
            for (auto [c, v] : llvm::enumerate(lane->values(b, loc, base)))
              lr.regs.push_back(arith::SelectOp::create(
                  b, loc, lr.valid(b, loc, c), v, f32Const(b, loc, 0.0f)));
            return lane->scale(b, loc, base);
          }
          for (unsigned c = 0; c < regs; ++c) {
            Value e = arith::MinUIOp::create(b, loc, lr.element(b, loc, c),
                                             indexConst(b, loc, lr.dim - 1));
            Value v = reader.element(b, loc, base, e);
            lr.regs.push_back(arith::SelectOp::create(
                b, loc, lr.valid(b, loc, c), v, f32Const(b, loc, 0.0f)));
          }
          return Value();
        };
        // haar4: the row's value is scale * C[idx] / ||C[idx]||.
        auto haarFactor = [&](const PackedRowReader &reader, LaneRow &lr,
                              Value base) -> Value {
          if (reader.spec().family != quant::FormatFamily::Haar)
            return Value();
          Value sq = f32Const(b, loc, 0.0f);
          for (Value x : lr.regs)
            sq = addF(b, loc, sq, mulF(b, loc, x, x));
          sq = warpAllReduceSum(b, loc, sq, L.warpSize, L.hardwareWarp);
          return mulF(b, loc, reader.scale(b, loc, base, c0),
                      reciprocalSqrt(b, loc, sq));
        };
        // tqprod: the lane's QJL sign bits, and the row's residual factor
        // ||x|| * ||r|| * sqrt(pi/2) / m (the stored vector is
        // ||x|| (C[idx] + ||r|| sqrt(pi/2)/m S^T sign)).
        auto qjlSigns = [&](const PackedRowReader &reader, LaneRow &lr,
                            Value base, unsigned regs,
                            SmallVector<Value> &bits) -> Value {
          if (!reader.spec().qjl)
            return Value();
          for (unsigned c = 0; c < regs; ++c)
            bits.push_back(reader.qjlBit(
                b, loc, base,
                arith::MinUIOp::create(b, loc, lr.element(b, loc, c),
                                       indexConst(b, loc, lr.dim - 1))));
          return mulF(b, loc,
                      mulF(b, loc, reader.scale(b, loc, base, c0),
                           reader.residualNorm(b, loc, base)),
                      f32Const(b, loc, qjlScale(reader.spec())));
        };
        // Each lane decodes its elements of the step's K and V rows once
        // for the whole group.
        SmallVector<TokenRows, 2> rows(T);
        for (unsigned i = 0; i < T; ++i) {
          TokenRows &r = rows[i];
          r.k = kRow;
          r.v = vRow;
          Value t = t0;
          if (perWarp > 1 || i > 0) {
            Value mine = add(b, loc, add(b, loc, t0, sub),
                             indexConst(b, loc, int64_t(i) * L.warps));
            r.live = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           mine, end);
            t = arith::SelectOp::create(b, loc, r.live, mine, t0);
          }
          Value rowIndex = pagedRow(b, loc, indices, pageBegin, t, pages,
                                    kvHeads, kvHead);
          Value kBase = mul(b, loc, rowIndex, kRowBytes);
          Value vBase = mul(b, loc, rowIndex, vRowBytes);
          r.kScale = decode(kReader, kLane, r.k, kBase, L.ck);
          r.kFactor = haarFactor(kReader, r.k, kBase);
          r.kSignFactor = qjlSigns(kReader, r.k, kBase, L.ck, r.kBits);
          r.vScale = decode(vReader, vLane, r.v, vBase, L.cv);
          r.vFactor = haarFactor(vReader, r.v, vBase);
          r.vSignFactor = qjlSigns(vReader, r.v, vBase, L.cv, r.vBits);
        }

        // The score of head g for one token, in log2 units (-inf where
        // the token is dead).
        auto score = [&](const TokenRows &r, unsigned g) -> Value {
          Value dot = f32Const(b, loc, 0.0f);
          for (unsigned c = 0; c < L.ck; ++c)
            dot = fusedMultiplyAdd(b, loc, query(b, g, c), r.k.regs[c], dot);
          if (r.kScale)
            dot = mulF(b, loc, dot, r.kScale);
          if (r.kSignFactor) {
            // + factor * <S q, sign>, sign = +1 where the bit is set.
            Value signDot = f32Const(b, loc, 0.0f);
            for (unsigned c = 0; c < L.ck; ++c) {
              Value sq = projectedQuery(b, g, c);
              signDot = addF(b, loc, signDot,
                             arith::SelectOp::create(
                                 b, loc, r.kBits[c], sq,
                                 arith::NegFOp::create(b, loc, sq)));
            }
            dot = fusedMultiplyAdd(b, loc, signDot, r.kSignFactor, dot);
          }
          dot = warpAllReduceSum(b, loc, dot, L.warpSize, L.hardwareWarp);
          if (r.kFactor)
            dot = mulF(b, loc, dot, r.kFactor);
          if (L.softcap > 0.0f) {
            // softcap * tanh(dot / softcap), tanh(x) = 1 - 2 / (e^2x + 1).
            Value e2x = exp2(b, loc, mulF(b, loc, dot,
                                          f32Const(b, loc, 2.0f * kLog2e /
                                                               L.softcap)));
            Value tanh = arith::SubFOp::create(
                b, loc, f32Const(b, loc, 1.0f),
                arith::DivFOp::create(b, loc, f32Const(b, loc, 2.0f),
                                      addF(b, loc, e2x,
                                           f32Const(b, loc, 1.0f))));
            dot = mulF(b, loc, tanh, f32Const(b, loc, L.softcap));
          }
          Value s = L.softcap > 0.0f
                        ? mulF(b, loc, dot, f32Const(b, loc, kLog2e))
                        : dot;
          if (r.live)
            s = arith::SelectOp::create(b, loc, r.live, s,
                                        f32Const(b, loc, negInf));
          return s;
        };

        SmallVector<Value> next(state.size());
        const bool mayBeDead = rows.back().live != nullptr;
        for (unsigned g = 0; g < L.group; ++g) {
          SmallVector<Value> scores;
          Value m = state[g], mNew = m;
          for (const TokenRows &r : rows) {
            scores.push_back(score(r, g));
            // (maxnum: m never becomes NaN; a NaN score still poisons l
            // and acc through p.)
            mNew = arith::MaxNumFOp::create(b, loc, mNew, scores.back());
          }
          // Weights are exp2(x - base). A dead token's score is -inf, so
          // its weight is 0 as long as base is finite: before the first
          // live token (mNew = -inf) base is 0, and alpha = exp2(m - 0)
          // is 0 or 1 against a state that is still all zeros.
          Value base = mNew;
          if (mayBeDead)
            base = arith::SelectOp::create(
                b, loc,
                arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                      mNew, f32Const(b, loc, negInf)),
                f32Const(b, loc, 0.0f), mNew);
          Value alpha = exp2(b, loc, arith::SubFOp::create(b, loc, m, base));
          next[g] = mNew;
          // The state times alpha, then each token's terms added: the
          // first token's fused with the rescale.
          const unsigned accAt = 2 * L.group + g * L.cv,
                         signAt = signBase + g * L.cv;
          Value sum;
          SmallVector<Value> acc(L.cv), sgn(L.qjlV() ? L.cv : 0);
          for (auto [i, r, s] : llvm::enumerate(rows, scores)) {
            Value p = exp2(b, loc, arith::SubFOp::create(b, loc, s, base));
            // x * alpha + y for the first token, x + y after it.
            auto accumulate = [&](Value x, unsigned at, Value y) -> Value {
              return i == 0 ? fusedMultiplyAdd(b, loc, state[at], alpha, y)
                            : addF(b, loc, x, y);
            };
            sum = accumulate(sum, L.group + g, p);
            Value pv = r.vFactor ? mulF(b, loc, p, r.vFactor) : p;
            if (r.vScale)
              pv = mulF(b, loc, pv, r.vScale);
            for (unsigned c = 0; c < L.cv; ++c)
              acc[c] = fusedMultiplyAdd(
                  b, loc, pv, r.v.regs[c],
                  i == 0 ? mulF(b, loc, state[accAt + c], alpha) : acc[c]);
            if (r.vSignFactor) {
              Value ps = mulF(b, loc, p, r.vSignFactor);
              Value negPs = arith::NegFOp::create(b, loc, ps);
              for (unsigned c = 0; c < L.cv; ++c)
                sgn[c] = accumulate(sgn[c], signAt + c,
                                    arith::SelectOp::create(
                                        b, loc, r.vBits[c], ps, negPs));
            }
          }
          next[L.group + g] = sum;
          for (unsigned c = 0; c < L.cv; ++c) {
            next[accAt + c] = acc[c];
            if (L.qjlV())
              next[signAt + c] = sgn[c];
          }
        }
        scf::YieldOp::create(b, loc, next);
      });
  // Unrolling the token loop would multiply the live registers (the
  // group's accumulators are already in registers); scf-to-cf carries the
  // annotation to the loop's branch.
  disableUnrolling(loop);
  ValueRange state = loop.getResults();

  // Each warp leaves its state in workgroup memory, [warp][g][DV + 2]:
  // accumulator `accAt` (first round: acc, m and l; second round, QJL V
  // only: the sign sums and m again), then the block merges the warps into
  // this split's partial at `offset` within each head's partialStride.
  Value stride = indexConst(b, loc, L.dv + 2);
  auto stateBase = [&](OpBuilder &b, Value warp, Value g) {
    return mul(b, loc, add(b, loc, mul(b, loc, warp, G), g), stride);
  };
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value partialStride = indexConst(b, loc, L.partialStride());
  Value partialBase = mul(
      b, loc,
      add(b, loc, mul(b, loc, add(b, loc, mul(b, loc, row, kvHeads), kvHead),
                      numSplits),
          split),
      mul(b, loc, G, partialStride));
  auto mergeWarps = [&](unsigned accAt, bool withSum, unsigned offset) {
    for (unsigned g = 0; g < L.group; ++g) {
      Value base = stateBase(b, ids.warp, indexConst(b, loc, g));
      for (unsigned c = 0; c < L.cv; ++c) {
        Value e = vRow.element(b, loc, c);
        Value v = state[accAt + g * L.cv + c];
        ifThen(b, loc, vRow.valid(b, loc, c), [&](OpBuilder &nb) {
          memref::StoreOp::create(nb, loc, v, states,
                                  ValueRange{add(nb, loc, base, e)});
        });
      }
      Value isLane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            ids.lane, c0);
      ifThen(b, loc, isLane0, [&](OpBuilder &nb) {
        Value at = add(nb, loc, base, indexConst(nb, loc, L.dv));
        memref::StoreOp::create(nb, loc, state[g], states, ValueRange{at});
        if (withSum)
          memref::StoreOp::create(nb, loc, state[L.group + g], states,
                                  ValueRange{add(nb, loc, at, c1)});
      });
    }
    gpu::BarrierOp::create(b, loc);

    // Thread i handles entries i, i + block, ... of [G][width].
    const unsigned width = withSum ? L.dv + 2 : L.dv;
    Value widthConst = indexConst(b, loc, width);
    scf::ForOp::create(
        b, loc, tid, indexConst(b, loc, int64_t(L.group) * width),
        indexConst(b, loc, L.blockSize()), ValueRange{},
        [&](OpBuilder &b, Location loc, Value i, ValueRange) {
          Value g = arith::DivUIOp::create(b, loc, i, widthConst);
          Value e = arith::RemUIOp::create(b, loc, i, widthConst);
          // The largest max of the warps, then each warp's weight.
          Value mMax = f32Const(b, loc, negInf);
          SmallVector<Value> ms;
          for (unsigned w = 0; w < L.warps; ++w) {
            Value at = add(b, loc, stateBase(b, indexConst(b, loc, w), g),
                           indexConst(b, loc, L.dv));
            ms.push_back(
                memref::LoadOp::create(b, loc, states, ValueRange{at}));
            mMax = arith::MaximumFOp::create(b, loc, mMax, ms.back());
          }
          Value empty = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OEQ, mMax,
              f32Const(b, loc, negInf));
          Value sum = f32Const(b, loc, 0.0f);
          for (unsigned w = 0; w < L.warps; ++w) {
            Value weight = arith::SelectOp::create(
                b, loc, empty, f32Const(b, loc, 0.0f),
                exp2(b, loc, arith::SubFOp::create(b, loc, ms[w], mMax)));
            Value x = memref::LoadOp::create(
                b, loc, states,
                ValueRange{add(b, loc, stateBase(b, indexConst(b, loc, w), g),
                               e)});
            sum = fusedMultiplyAdd(b, loc, weight, x, sum);
          }
          Value isMax = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::eq, e, indexConst(b, loc, L.dv));
          Value result = arith::SelectOp::create(b, loc, isMax, mMax, sum);
          Value at = add(b, loc,
                         add(b, loc, partialBase,
                             mul(b, loc, g, partialStride)),
                         add(b, loc, indexConst(b, loc, offset), e));
          memref::StoreOp::create(b, loc, result, partial, ValueRange{at});
          scf::YieldOp::create(b, loc);
        });
  };
  mergeWarps(2 * L.group, /*withSum=*/true, /*offset=*/0);
  if (L.qjlV()) {
    // Every thread has read the first round before the buffer is reused.
    gpu::BarrierOp::create(b, loc);
    mergeWarps(signBase, /*withSum=*/false, /*offset=*/L.dv + 2);
  }
  gpu::ReturnOp::create(b, loc);
  return func;
}

//===----------------------------------------------------------------------===//
// Combine kernel
//===----------------------------------------------------------------------===//

gpu::GPUFuncOp buildCombineKernel(OpBuilder &b, Location loc,
                                  gpu::GPUModuleOp module, StringRef name,
                                  const AttentionLayout &L) {
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type bufT = globalBuffer(b, f32);
  const bool haarV = rotationNeedsScratch(L.values);
  // Per warp a row of DV floats for Haar's inverse rotation or QJL's S^T.
  SmallVector<Type> workgroup;
  if (haarV || L.qjlV())
    workgroup.push_back(workgroupBuffer(b, int64_t(L.warps) * L.dv));
  auto func = createKernel(b, loc, name, {bufT, bufT, i32, i32}, workgroup,
                           L.blockSize());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func.getBody().front());
  auto args = func.getArguments();
  Value partial = args[0], out = args[1];
  Value numSplits = toIndex(b, loc, args[2]);
  Value kvHeads = toIndex(b, loc, args[3]);
  Value scratch = workgroup.empty()
                      ? Value()
                      : Value(func.getWorkgroupAttributions()[0]);
  Value rotV = haarV ? getRotationMatrix(b, loc, module, L.values) : Value();

  Value c0 = indexConst(b, loc, 0), c1 = indexConst(b, loc, 1);
  ThreadIds ids = threadIds(b, loc, L.warpSize);
  Value row = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value kvHead = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  Value G = indexConst(b, loc, L.group);
  Value stride = indexConst(b, loc, L.partialStride());
  const float negInf = -std::numeric_limits<float>::infinity();

  for (unsigned gi = 0; gi < L.headsPerWarp(); ++gi) {
    Value g = add(b, loc, ids.warp, indexConst(b, loc, gi * L.warps));
    Value live = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, g, G);
    Value gLoad =
        arith::MinUIOp::create(b, loc, g, indexConst(b, loc, L.group - 1));
    // partial[row][kvHead][s][g][...]
    auto base = [&](OpBuilder &b, Value s) {
      Value rh = add(b, loc, mul(b, loc, row, kvHeads), kvHead);
      return mul(b, loc,
                 add(b, loc, mul(b, loc, add(b, loc, mul(b, loc, rh, numSplits),
                                              s),
                                 G),
                     gLoad),
                 stride);
    };
    auto maxLoop = scf::ForOp::create(
        b, loc, c0, numSplits, c1, ValueRange{f32Const(b, loc, negInf)},
        [&](OpBuilder &b, Location loc, Value s, ValueRange acc) {
          Value m = memref::LoadOp::create(
              b, loc, partial,
              ValueRange{add(b, loc, base(b, s), indexConst(b, loc, L.dv))});
          scf::YieldOp::create(
              b, loc, ValueRange{arith::MaximumFOp::create(b, loc, acc[0], m)});
        });
    Value mMax = maxLoop.getResult(0);
    Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mMax,
                                        f32Const(b, loc, negInf));
    LaneRow y{{}, L.dv, L.warpSize, ids.lane};
    // Accumulators: acc[CV], l, and with a QJL V the sign sums [CV].
    const unsigned sums = L.qjlV() ? 2 * L.cv + 1 : L.cv + 1;
    SmallVector<Value> init(sums, f32Const(b, loc, 0.0f));
    auto sumLoop = scf::ForOp::create(
        b, loc, c0, numSplits, c1, init,
        [&](OpBuilder &b, Location loc, Value s, ValueRange acc) {
          Value at = base(b, s);
          Value m = memref::LoadOp::create(
              b, loc, partial,
              ValueRange{add(b, loc, at, indexConst(b, loc, L.dv))});
          Value l = memref::LoadOp::create(
              b, loc, partial,
              ValueRange{add(b, loc, at, indexConst(b, loc, L.dv + 1))});
          Value w = arith::SelectOp::create(
              b, loc, empty, f32Const(b, loc, 0.0f),
              exp2(b, loc, arith::SubFOp::create(b, loc, m, mMax)));
          SmallVector<Value> next;
          for (unsigned c = 0; c < L.cv; ++c) {
            Value e = arith::MinUIOp::create(b, loc, y.element(b, loc, c),
                                             indexConst(b, loc, L.dv - 1));
            Value x = memref::LoadOp::create(b, loc, partial,
                                             ValueRange{add(b, loc, at, e)});
            next.push_back(fusedMultiplyAdd(b, loc, w, x, acc[c]));
          }
          next.push_back(fusedMultiplyAdd(b, loc, w, l, acc[L.cv]));
          for (unsigned c = 0; L.qjlV() && c < L.cv; ++c) {
            Value e = arith::MinUIOp::create(b, loc, y.element(b, loc, c),
                                             indexConst(b, loc, L.dv - 1));
            Value x = memref::LoadOp::create(
                b, loc, partial,
                ValueRange{add(b, loc, at,
                               add(b, loc, indexConst(b, loc, L.dv + 2), e))});
            next.push_back(fusedMultiplyAdd(b, loc, w, x, acc[L.cv + 1 + c]));
          }
          scf::YieldOp::create(b, loc, next);
        });
    Value l = sumLoop.getResult(L.cv);
    Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                           l, f32Const(b, loc, 0.0f));
    Value inv = arith::SelectOp::create(
        b, loc, positive,
        arith::DivFOp::create(b, loc, f32Const(b, loc, 1.0f), l),
        f32Const(b, loc, 0.0f));
    for (unsigned c = 0; c < L.cv; ++c)
      y.regs.push_back(arith::SelectOp::create(
          b, loc, y.valid(b, loc, c), mulF(b, loc, sumLoop.getResult(c), inv),
          f32Const(b, loc, 0.0f)));
    if (L.qjlV()) {
      // The residual part S^T (sign sums / l), added in the rotated domain.
      LaneRow r{{}, L.dv, L.warpSize, ids.lane};
      for (unsigned c = 0; c < L.cv; ++c)
        r.regs.push_back(arith::SelectOp::create(
            b, loc, y.valid(b, loc, c),
            mulF(b, loc, sumLoop.getResult(L.cv + 1 + c), inv),
            f32Const(b, loc, 0.0f)));
      denseProductLaneRow(b, loc, r, L.dv, /*transpose=*/true,
                          getQjlMatrix(b, loc, module, L.values), scratch,
                          mul(b, loc, ids.warp, indexConst(b, loc, L.dv)));
      for (unsigned c = 0; c < L.cv; ++c)
        y.regs[c] = addF(b, loc, y.regs[c], r.regs[c]);
    }
    rotateLaneRow(b, loc, y, L.values, /*inverse=*/true, rotV, scratch,
                  mul(b, loc, ids.warp, indexConst(b, loc, L.dv)));
    Value H = mul(b, loc, kvHeads, G);
    Value outBase = mul(b, loc,
                        add(b, loc, mul(b, loc, row, H),
                            add(b, loc, mul(b, loc, kvHead, G), g)),
                        indexConst(b, loc, L.headDim));
    for (unsigned c = 0; c < L.cv; ++c) {
      Value e = y.element(b, loc, c);
      Value inHead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           e, indexConst(b, loc, L.headDim));
      Value ok = arith::AndIOp::create(b, loc, live, inHead);
      Value v = y.regs[c];
      ifThen(b, loc, ok, [&](OpBuilder &nb) {
        memref::StoreOp::create(nb, loc, v, out,
                                ValueRange{add(nb, loc, outBase, e)});
      });
    }
  }
  gpu::ReturnOp::create(b, loc);
  return func;
}

} // namespace

FailureOr<SmallVector<GpuKernelInfo>>
mlir::tq::buildGpuKernels(gpu::GPUModuleOp module,
                          const RuntimeKernelSpec &spec,
                          const GpuTarget &target,
                          function_ref<InFlightDiagnostic()> emitError) {
  if (spec.kind == RuntimeKernelKind::Append) {
    const unsigned blockSize = target.warpsPerBlock() * target.warpSize();
    auto format = quant::Format::get(spec.keyFormat, spec.headDim);
    if (!format)
      return emitError() << format.status().message(), failure();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto append = buildGpuAppendKernel(b, module.getLoc(), spec, blockSize);
    if (failed(append.verify()))
      return failure();
    return SmallVector<GpuKernelInfo>{
        {spec.name(), "append", blockSize, workgroupBytes(append)}};
  }
  if (spec.group == 0)
    return emitError() << "the GQA group must be positive", failure();
  auto keys = quant::Format::get(spec.keyFormat, spec.headDim);
  if (!keys)
    return emitError() << keys.status().message(), failure();
  auto values = quant::Format::get(spec.valueFormat, spec.headDim);
  if (!values)
    return emitError() << values.status().message(), failure();
  if (spec.window < 0 || !(spec.softcap >= 0.0f))
    return emitError() << "window and softcap must be non-negative", failure();

  // Lanes per row of the attention kernel: rows of at most 128 elements
  // use groups of kShortRowLanes lanes, so one warp step covers several
  // tokens (shorter score reductions, softmax bookkeeping shared by more
  // bytes), unless a lane would then hold more than kMaxGroupAccumulators
  // accumulators (the group's heads x its V elements, twice for a QJL V:
  // more spill) or the groups' states would not fit in workgroup memory;
  // then whole warps.
  const unsigned w = target.warpSize();
  auto layoutFor = [&](unsigned lanes) {
    AttentionLayout l{keys->spec(),
                      values->spec(),
                      spec.headDim,
                      spec.group,
                      lanes,
                      target.warpsPerBlock() * (w / lanes),
                      w,
                      keys->paddedDim(),
                      values->paddedDim(),
                      LaneRow::regsFor(keys->paddedDim(), lanes),
                      LaneRow::regsFor(values->paddedDim(), lanes),
                      spec.causal,
                      spec.window,
                      spec.softcap};
    return l;
  };
  const AttentionLayout warpLayout = layoutFor(w);
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  SmallVector<GpuKernelInfo> infos;
  gpu::GPUFuncOp attention;
  const unsigned groupAccumulators =
      spec.group * LaneRow::regsFor(values->paddedDim(), kShortRowLanes) *
      (values->spec().qjl ? 2 : 1);
  if (w > kShortRowLanes &&
      std::max(keys->paddedDim(), values->paddedDim()) <= 128 &&
      groupAccumulators <= kMaxGroupAccumulators) {
    // Two tokens per group and step: one softmax update (maximum,
    // alpha, rescale) serves both.
    AttentionLayout shortRows = layoutFor(kShortRowLanes);
    shortRows.tokensPerStep = 2;
    attention = buildAttentionKernel(b, loc, module, spec.name(), shortRows);
    if (workgroupBytes(attention) > target.maxWorkgroupBytes()) {
      attention.erase();
      attention = {};
    }
  }
  if (!attention)
    attention = buildAttentionKernel(b, loc, module, spec.name(), warpLayout);
  infos.push_back({spec.name(), "attention", warpLayout.blockSize(),
                   workgroupBytes(attention)});
  auto combine = buildCombineKernel(b, loc, module, spec.name() + "_combine",
                                    warpLayout);
  infos.push_back({spec.name() + "_combine", "combine",
                   warpLayout.blockSize(), workgroupBytes(combine)});
  if (failed(attention.verify()) || failed(combine.verify()))
    return failure();
  for (const GpuKernelInfo &info : infos)
    if (info.workgroupBytes > target.maxWorkgroupBytes())
      return emitError() << "kernel '" << info.name << "' needs "
                         << info.workgroupBytes
                         << " bytes of workgroup memory, more than the "
                         << target.maxWorkgroupBytes() << " " << target.chip()
                         << " allows; use a smaller GQA group or head dim",
             failure();
  return infos;
}
