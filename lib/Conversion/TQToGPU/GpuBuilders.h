//===- GpuBuilders.h - Scalar and warp-level IR helpers ---------*- C++ -*-===//
//
// The pieces every tq GPU kernel is made of, emitted as vendor-neutral
// gpu/arith/memref ops:
//   - PackedRowReader: one element of a packed cache row in global memory
//     (scale, codebook index from the format's bit planes, centroid from a
//     lookup table in workgroup memory);
//   - warp reductions by xor shuffles;
//   - a lane-distributed vector: each lane holds R = ceil(dim / warp)
//     elements of a row in registers, and rotations act on it in place
//     (Hadamard kinds as a shuffle butterfly, Haar through workgroup memory).
//
//===----------------------------------------------------------------------===//

#ifndef TQ_LIB_CONVERSION_TQTOGPU_GPUBUILDERS_H
#define TQ_LIB_CONVERSION_TQTOGPU_GPUBUILDERS_H

#include "tq/Quant/Format.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::tq::gpukernel {

Value indexConst(OpBuilder &b, Location loc, int64_t v);
/// An i32 kernel argument as an index.
Value toIndex(OpBuilder &b, Location loc, Value i32);
/// memref<? x element>: a buffer argument in global memory.
MemRefType globalBuffer(OpBuilder &b, Type element);
/// Division of positions (i32, below 2^31 as the ABI's) by the page size,
/// a kernel invariant: get() computes m = floor(2^32 / size) + 1 once;
/// then floor(n * m / 2^32) is n / size or one more (n < 2^31), so a
/// division is a wide multiply and one correction instead of the
/// reciprocal sequence ptxas expands a div.u32 into.
struct PageDivisor {
  Value size;  // i32
  Value magic; // i64; null: divide directly
  /// `pageSize` (index) must be positive (the runtime checks it).
  static PageDivisor get(OpBuilder &b, Location loc, Value pageSize);
  /// Without the multiplier, for a single division (computing m takes a
  /// 64-bit division).
  static PageDivisor direct(OpBuilder &b, Location loc, Value pageSize);
  /// (position / size, position % size) of an i32 position, as i32.
  std::pair<Value, Value> divRem(OpBuilder &b, Location loc,
                                 Value position) const;
};

/// The pool row (in rows of [pages][pageSize][kvHeads][rowBytes]) of
/// position `position` and KV head `kvHead` of a sequence whose page
/// table starts at entry `firstPage` of `pageTable` (i32 entries).
Value pagedRow(OpBuilder &b, Location loc, Value pageTable, Value firstPage,
               Value position, const PageDivisor &pages, Value kvHeads,
               Value kvHead);
/// A kernel gpu.func with `workgroup` attributions and a known block size
/// of blockSize x 1 x 1, its entry block empty.
gpu::GPUFuncOp createKernel(OpBuilder &b, Location loc, StringRef name,
                            ArrayRef<Type> args, ArrayRef<Type> workgroup,
                            unsigned blockSize);
Value f32Const(OpBuilder &b, Location loc, float v);
/// x * y + z as mulf + addf marked contractible: the backends emit one
/// FMA. (math.fma would become a libdevice / ocml call.)
Value fusedMultiplyAdd(OpBuilder &b, Location loc, Value x, Value y, Value z);
/// 1 / sqrt(x) for x > 0 in arith ops only: the classic bit-level first
/// guess and three Newton steps (relative error at f32 rounding level).
/// math.rsqrt / math.sqrt would become libdevice or ocml calls.
Value reciprocalSqrt(OpBuilder &b, Location loc, Value x);

/// Marks `loop` not to be unrolled by LLVM (scf-to-cf carries the
/// annotation to the loop's branch): unrolled loops holding the group's
/// accumulators, or streaming many loads, run out of registers.
void disableUnrolling(Operation *loop);

/// Entries of a format's centroid table: 2^indexBits (0 without a
/// codebook), the codebook padded with its last centroid.
unsigned codebookTableSize(const ::tq::quant::FormatSpec &spec);

/// The table as a constant memref.global in `symbolTable` (created once),
/// read with memref.get_global at the builder's point.
Value getCodebookTable(OpBuilder &b, Location loc, Operation *symbolTable,
                       const ::tq::quant::FormatSpec &spec);

/// Reads elements of packed rows from a memref<? x i8> of row bytes.
class PackedRowReader {
public:
  /// `table` holds the format's centroid table (codebookTableSize entries)
  /// from `tableBase`: workgroup memory, where the 8 or 16 entries sit in
  /// distinct banks, so a warp's lookups never conflict.
  PackedRowReader(const ::tq::quant::FormatSpec &spec, Value bytes,
                  Value table, Value tableBase)
      : spec_(spec), bytes_(bytes), table_(table), tableBase_(tableBase) {}

  const ::tq::quant::FormatSpec &spec() const { return spec_; }
  /// Rotated-domain value of element j of the row starting at byte
  /// rowBase: scale * C[idx], d * int8 (q8_0) or the half (f16). For
  /// haar4 the bare centroid (the caller applies scale / ||C[idx]||).
  Value element(OpBuilder &b, Location loc, Value rowBase, Value j) const;
  /// The scale of the block holding element j.
  Value scale(OpBuilder &b, Location loc, Value rowBase, Value j) const;
  /// tqprod: the row's fp16 residual norm ||r||.
  Value residualNorm(OpBuilder &b, Location loc, Value rowBase) const;
  /// tqprod: i1, QJL sign bit j of the row is set (sign +1).
  Value qjlBit(OpBuilder &b, Location loc, Value rowBase, Value j) const;

private:
  friend class LaneRowReader;
  Value byteAt(OpBuilder &b, Location loc, Value offset) const;
  Value halfAt(OpBuilder &b, Location loc, Value offset) const;
  Value f32At(OpBuilder &b, Location loc, Value offset) const;
  /// The block scale (f16 or f32 per the format) at byte `offset`.
  Value scaleAt(OpBuilder &b, Location loc, Value offset) const;
  Value index(OpBuilder &b, Location loc, Value rowBase, Value j) const;
  /// What an assembled index stands for before the block scale: the
  /// int8 value (q8_0) or the centroid.
  Value unscaled(OpBuilder &b, Location loc, Value index) const;
  /// i32: element inBlock's field of `plane` in the block at blockBase.
  Value field(OpBuilder &b, Location loc, Value blockBase,
              const ::tq::quant::BitPlane &plane, Value inBlock) const;
  Value centroid(OpBuilder &b, Location loc, Value index) const;

  const ::tq::quant::FormatSpec &spec_;
  Value bytes_;
  Value table_, tableBase_;
};

struct LaneRow;

/// Reads one lane's elements of a blocked LaneRow (R consecutive elements
/// lane * R .. lane * R + R - 1, inside one block) from packed rows.
/// Everything that depends on the lane alone (the byte of each plane where
/// its fields start, its block's scale offset) is computed once by get(),
/// outside the token loop: a row then costs one add per plane and loads at
/// constant offsets from it, each byte loaded once, and the block scale is
/// left to the caller (one multiply per head instead of one per element).
class LaneRowReader {
public:
  /// nullopt where the row is not blocked or a lane's elements would
  /// straddle blocks (then PackedRowReader::element reads element-wise).
  static std::optional<LaneRowReader> get(OpBuilder &b, Location loc,
                                          const PackedRowReader &reader,
                                          const LaneRow &row);
  /// The lane's R elements of the row starting at byte rowBase, without
  /// the block scale: C[idx] (haar4: its bare centroid), the int8 value
  /// (q8_0) or the half (f16). Lanes past the row's dim read its last
  /// elements (the caller masks them).
  SmallVector<Value> values(OpBuilder &b, Location loc, Value rowBase) const;
  /// The scale of the lane's block (f32), or a null Value where the values
  /// are final (f16) or the caller scales them itself (haar4).
  Value scale(OpBuilder &b, Location loc, Value rowBase) const;

private:
  LaneRowReader(const PackedRowReader &reader, unsigned regs)
      : reader_(&reader), regs_(regs) {}
  /// Field c (0 <= c < R) of `plane`, whose lane bytes start at `base`.
  Value field(OpBuilder &b, Location loc, Value base,
              const ::tq::quant::BitPlane &plane, Value laneShift,
              unsigned c, SmallVectorImpl<std::pair<int64_t, Value>> &bytes)
      const;

  const PackedRowReader *reader_;
  unsigned regs_;
  /// Per index plane: the row byte of the lane's first field, and (where
  /// a lane's fields fill less than a byte) their bit offset in it, i32.
  SmallVector<Value> planeByte_, planeShift_;
  /// The row byte of the lane's first element (f16) or block scale.
  Value firstByte_, scaleByte_;
};

/// The sum of x over each aligned group of `lanes` lanes of a warp of
/// `warpSize` threads, in every lane of the group (log2(lanes) xor
/// shuffles; xor offsets below `lanes` never leave the group).
Value warpAllReduceSum(OpBuilder &b, Location loc, Value x, unsigned lanes,
                       unsigned warpSize);

/// A row of `dim` values spread over a warp, R = regsFor(dim, warpSize)
/// registers per lane. When R is a power of two the layout is blocked:
/// lane l holds the consecutive elements l * R + c in regs[c], so its
/// packed fields share bytes (one load serves several elements) and the
/// first log2(R) butterfly stages stay in registers. Otherwise it is
/// cyclic: lane l holds c * warpSize + l. Elements >= dim are zero and
/// never stored.
struct LaneRow {
  SmallVector<Value> regs;
  unsigned dim = 0;
  /// Lanes the row is spread over: a whole warp, or an aligned group of
  /// lanes within one (then `lane` is the index in the group).
  unsigned warpSize = 32;
  Value lane;
  /// The hardware warp's width, for shuffles (0: warpSize).
  unsigned shuffleWidth = 0;

  static unsigned regsFor(unsigned dim, unsigned warpSize) {
    return (dim + warpSize - 1) / warpSize;
  }
  unsigned regsPerLane() const { return regsFor(dim, warpSize); }
  /// The shuffle width: the hardware warp.
  unsigned width() const { return shuffleWidth ? shuffleWidth : warpSize; }
  bool blocked() const {
    unsigned r = regsPerLane();
    return r > 0 && (r & (r - 1)) == 0;
  }
  /// The element index held in register c (index value).
  Value element(OpBuilder &b, Location loc, unsigned c) const;
  /// i1: register c holds a real element (< dim).
  Value valid(OpBuilder &b, Location loc, unsigned c) const;
};

/// True when rotateLaneRow needs workgroup scratch and barriers (Haar).
bool rotationNeedsScratch(const ::tq::quant::FormatSpec &spec);

/// The format's dense block rotation M (forward(x) = M x per block) as a
/// constant memref.global in `symbolTable` (created once, named after the
/// format), read with memref.get_global at the builder's point.
Value getRotationMatrix(OpBuilder &b, Location loc, Operation *symbolTable,
                        const ::tq::quant::FormatSpec &spec);
/// The format's QJL projection S (m x d, m == d == paddedDim), the same way.
Value getQjlMatrix(OpBuilder &b, Location loc, Operation *symbolTable,
                   const ::tq::quant::FormatSpec &spec);

/// sqrt(pi / 2) / m: with it, c * ||r|| * <S y, sign(S r)> estimates <y, r>
/// and c * ||r|| * S^T sign(S r) reconstructs r (lib/Quant/Qjl.h).
float qjlScale(const ::tq::quant::FormatSpec &spec);

/// Applies the format's block rotation (forward, or its inverse) to a lane
/// row of spec.paddedDim values. Hadamard kinds use only shuffles, in
/// place. Haar multiplies by `matrix` (getRotationMatrix) through
/// `scratch` (workgroup memory; this warp owns paddedDim floats from
/// scratchBase), with block barriers: then every thread of the block must
/// make the call (uniform control flow).
void rotateLaneRow(OpBuilder &b, Location loc, LaneRow &row,
                   const ::tq::quant::FormatSpec &spec, bool inverse,
                   Value matrix, Value scratch, Value scratchBase);

/// y = M x (M^T x with `transpose`) per block of n elements of a lane row,
/// through `scratch` (workgroup memory; this warp owns row.dim floats from
/// scratchBase), with block barriers: every thread of the block must make
/// the call (uniform control flow).
void denseProductLaneRow(OpBuilder &b, Location loc, LaneRow &row, unsigned n,
                         bool transpose, Value matrix, Value scratch,
                         Value scratchBase);

/// Block-level dense product of `rows` rows of `dim` floats in workgroup
/// memory, per block of n elements: dst[r][e] = sum_j M[e % n][j]
/// src[r][e - e % n + j] (M^T with `transpose`), every thread of a block
/// of `blockSize` computing a strided share, then a barrier. Uniform
/// control flow.
void denseProductRows(OpBuilder &b, Location loc, unsigned dim, unsigned n,
                      bool transpose, Value matrix, Value src, Value dst,
                      unsigned rows, unsigned blockSize);

} // namespace mlir::tq::gpukernel

#endif // TQ_LIB_CONVERSION_TQTOGPU_GPUBUILDERS_H
