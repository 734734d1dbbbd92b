//===- VectorSoftmax.cpp - A tile's online softmax as vector loops --------===//
//
// tq.online_softmax of a tile [queries x heads x T] on 16-lane vectors (the
// CPU pipeline's `vector-softmax`): per query row, one pass over the tokens
// for every head's maximum and one for every head's probabilities and
// their sums, the heads' chains side by side in blocks of at most 16. The exp there has a bounded
// argument (a logit minus a maximum over it): see boundedExp.
//
//===----------------------------------------------------------------------===//

#include "VectorSoftmax.h"

#include "FusedLoops.h"
#include "LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::tq;

namespace {
constexpr int64_t kLanes = 16;
/// At most this many heads' chains side by side.
constexpr int64_t kMaxHeadsTogether = 16;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Value splat(OpBuilder &b, Location loc, float v) {
  auto type = VectorType::get({kLanes}, b.getF32Type());
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
}
} // namespace

/// exp(d) for d <= 0 or NaN: 0 below -87 (exp(-87) ~ 1.6e-38; -inf, a
/// hidden key, gives exactly 0); else d = n ln2 + r with n = d / ln2
/// rounded to nearest (adding and subtracting 1.5 * 2^23, whose bits then
/// hold n as an integer), n in [-126, 0], |r| <= ln2 / 2 (ln2 in two
/// parts), e^r by a degree-5 polynomial with p(0) = 1 fitted for the least
/// largest relative error on that interval (9.5e-8 with its f32
/// coefficients, p in [0.70, 1.42]; with the f32 arithmetic 1.61e-7 at
/// most over [-87, 0] where the degree-6 Taylor polynomial it replaced,
/// one multiply-add more, gave 2.25e-7: BoundedExpExecutionTest), and n
/// added to p's exponent bits (a normal float: no overflow, no denormal).
/// Multiplies and adds may contract to fma; no rounding or fma intrinsic,
/// so no target needs a libm call. 14 operations where the general
/// approximation, which must handle any argument, takes 22.
Value mlir::tq::boundedExp(OpBuilder &b, Location loc, Value d) {
  auto i32s = VectorType::get({kLanes}, b.getI32Type());
  auto contract = arith::FastMathFlags::contract;
  auto mulAdd = [&](Value x, Value y, Value z) -> Value {
    return arith::AddFOp::create(
        b, loc, arith::MulFOp::create(b, loc, x, y, contract), z, contract);
  };
  auto i32Splat = [&](int32_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(i32s, b.getI32IntegerAttr(v)));
  };
  Value tiny = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, d,
                                     splat(b, loc, -87.0f));
  Value x = arith::SelectOp::create(b, loc, tiny, splat(b, loc, -87.0f), d);
  const float magic = 12582912.0f; // 1.5 * 2^23
  Value shifted =
      mulAdd(x, splat(b, loc, float(M_LOG2E)), splat(b, loc, magic));
  Value n = arith::SubFOp::create(b, loc, shifted, splat(b, loc, magic));
  Value whole = arith::SubIOp::create(
      b, loc, vector::BitCastOp::create(b, loc, i32s, shifted),
      i32Splat(0x4b400000)); // the bits of 1.5 * 2^23
  // ln 2 = 0.693359375 (10 bits, so n times it is exact) - 2.12194440e-4.
  Value r = mulAdd(n, splat(b, loc, -0.693359375f), x);
  r = mulAdd(n, splat(b, loc, 2.12194440e-4f), r);
  Value p = splat(b, loc, 8.290230297e-3f);
  for (float c : {4.189790040e-2f, 1.666763723e-1f, 4.999915063e-1f,
                  9.999997020e-1f, 1.0f})
    p = mulAdd(p, r, splat(b, loc, c));
  Value e = vector::BitCastOp::create(
      b, loc, p.getType(),
      arith::AddIOp::create(
          b, loc, vector::BitCastOp::create(b, loc, i32s, p),
          arith::ShLIOp::create(b, loc, whole, i32Splat(23))));
  return arith::SelectOp::create(b, loc, tiny, splat(b, loc, 0.0f), e);
}

FailureOr<OnlineSoftmaxValues>
mlir::tq::vectorOnlineSoftmax(OpBuilder &b, Location loc, Value masked,
                              Value oldMax, Value oldSum) {
  auto type = dyn_cast<RankedTensorType>(masked.getType());
  if (!type || type.getRank() != 3 || !type.getElementType().isF32() ||
      type.isDynamicDim(1))
    return failure();
  const int64_t heads = type.getDimSize(1);
  // Heads side by side in blocks of at most kMaxHeadsTogether (a divisor
  // of the heads), a loop over the blocks beyond: the unrolled heads'
  // chains and loop-carried vectors stay bounded, so a large group costs
  // neither registers nor IR (a group of 256 took 75 s to compile).
  const int64_t block = fused::headBlock(heads, kMaxHeadsTogether);
  Type f32 = b.getF32Type();
  auto f32s = VectorType::get({kLanes}, f32);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value step = arith::ConstantIndexOp::create(b, loc, kLanes);
  Value negInf = f32Const(b, loc, kNegInf);
  Value queries = tensor::DimOp::create(b, loc, masked, 0);
  Value tokens = tensor::DimOp::create(b, loc, masked, 2);
  Value correctionInit =
      tensor::EmptyOp::create(b, loc, sizesOf(b, loc, oldMax), f32);
  Value probsInit =
      tensor::EmptyOp::create(b, loc, sizesOf(b, loc, masked), f32);
  // Head h's logits of tokens [t, t + 16) of row i; -inf past the tokens
  // (a masked read).
  auto logitsAt = [&](OpBuilder &b, Location loc, Value i, Value h,
                      Value t) -> Value {
    return vector::TransferReadOp::create(b, loc, f32s, masked,
                                          ValueRange{i, h, t}, negInf,
                                          ArrayRef<bool>{false});
  };
  // Row i's heads [first, first + block): state and result are (probs,
  // max, sum, correction).
  auto headsOfRow = [&](OpBuilder &b, Location loc, Value i, Value first,
                        ValueRange state) -> SmallVector<Value> {
    // Head indices: constants where the block is every head (first = 0).
    SmallVector<Value> headAt;
    for (int64_t h = 0; h < block; ++h) {
      Value at = arith::ConstantIndexOp::create(b, loc, h);
      if (block != heads)
        at = h == 0 ? first : arith::AddIOp::create(b, loc, first, at);
      headAt.push_back(at);
    }
    // Every head's maximum over the tile.
    ValueRange maxima =
        scf::ForOp::create(
            b, loc, c0, tokens, step,
            SmallVector<Value>(block, splat(b, loc, kNegInf)),
            [&](OpBuilder &b, Location loc, Value t, ValueRange acc) {
              // No NaN handling (one vmaxps): a NaN logit still
              // reaches the output through its probability.
              SmallVector<Value> next;
              for (int64_t h = 0; h < block; ++h)
                next.push_back(arith::MaximumFOp::create(
                    b, loc, acc[h], logitsAt(b, loc, i, headAt[h], t),
                    arith::FastMathFlags::nnan | arith::FastMathFlags::nsz));
              scf::YieldOp::create(b, loc, next);
            })
            .getResults();
    // Every head's old maximum and sum read before the first insert:
    // the inserts update the loop-carried tensors in place.
    SmallVector<Value> oldMaxOf, oldSumOf;
    for (int64_t h = 0; h < block; ++h) {
      oldMaxOf.push_back(tensor::ExtractOp::create(b, loc, state[1],
                                                   ValueRange{i, headAt[h]}));
      oldSumOf.push_back(tensor::ExtractOp::create(b, loc, state[2],
                                                   ValueRange{i, headAt[h]}));
    }
    Value newMax = state[1], correction = state[3];
    SmallVector<Value> maxOf, emptyOf, corrOf;
    for (int64_t h = 0; h < block; ++h) {
      Value old = oldMaxOf[h];
      Value tileMax = vector::ReductionOp::create(
          b, loc, vector::CombiningKind::MAXIMUMF, maxima[h]);
      Value m = arith::MaximumFOp::create(b, loc, old, tileMax);
      // exp(old - m); 1 while nothing was visible (m = -inf).
      Value corr = guardedExp(b, loc, old, m, 1.0f);
      Value empty =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, negInf);
      newMax =
          tensor::InsertOp::create(b, loc, m, newMax, ValueRange{i, headAt[h]});
      correction = tensor::InsertOp::create(b, loc, corr, correction,
                                            ValueRange{i, headAt[h]});
      maxOf.push_back(vector::BroadcastOp::create(b, loc, f32s, m));
      emptyOf.push_back(vector::BroadcastOp::create(
          b, loc, VectorType::get({kLanes}, b.getI1Type()), empty));
      corrOf.push_back(corr);
    }
    // Every head's probabilities exp(x - m) (0 where m = -inf, and
    // past the tokens) and their sums.
    SmallVector<Value> init = {state[0]};
    init.append(block, splat(b, loc, 0.0f));
    ValueRange exps =
        scf::ForOp::create(
            b, loc, c0, tokens, step, init,
            [&](OpBuilder &b, Location loc, Value t, ValueRange acc) {
              Value probs = acc[0];
              SmallVector<Value> sums;
              for (int64_t h = 0; h < block; ++h) {
                Value e = boundedExp(
                    b, loc,
                    arith::SubFOp::create(
                        b, loc, logitsAt(b, loc, i, headAt[h], t), maxOf[h]));
                Value p = arith::SelectOp::create(b, loc, emptyOf[h],
                                                  splat(b, loc, 0.0f), e);
                probs = vector::TransferWriteOp::create(
                            b, loc, p, probs, ValueRange{i, headAt[h], t},
                            ArrayRef<bool>{false})
                            .getResult();
                sums.push_back(arith::AddFOp::create(b, loc, acc[1 + h], p));
              }
              SmallVector<Value> next = {probs};
              next.append(sums);
              scf::YieldOp::create(b, loc, next);
            })
            .getResults();
    // new sum = sum * correction + the tile's sum.
    Value newSum = state[2];
    for (int64_t h = 0; h < block; ++h) {
      // Reassociable: a shuffle tree (4 shuffles and 4 adds) where
      // the ordered sum is 16 dependent scalar adds and 15 extracts.
      Value tileSum = vector::ReductionOp::create(
          b, loc, vector::CombiningKind::ADD, exps[1 + h],
          arith::FastMathFlags::reassoc);
      newSum = tensor::InsertOp::create(
          b, loc,
          arith::AddFOp::create(
              b, loc, arith::MulFOp::create(b, loc, oldSumOf[h], corrOf[h]),
              tileSum),
          newSum, ValueRange{i, headAt[h]});
    }
    return {exps[0], newMax, newSum, correction};
  };
  auto rows = scf::ForOp::create(
      b, loc, c0, queries, c1,
      ValueRange{probsInit, oldMax, oldSum, correctionInit},
      [&](OpBuilder &b, Location loc, Value i, ValueRange state) {
        if (block == heads) {
          scf::YieldOp::create(b, loc, headsOfRow(b, loc, i, c0, state));
          return;
        }
        auto blocks = scf::ForOp::create(
            b, loc, c0, arith::ConstantIndexOp::create(b, loc, heads),
            arith::ConstantIndexOp::create(b, loc, block), state,
            [&](OpBuilder &b, Location loc, Value first, ValueRange state) {
              scf::YieldOp::create(b, loc, headsOfRow(b, loc, i, first, state));
            });
        scf::YieldOp::create(b, loc, blocks.getResults());
      });
  return OnlineSoftmaxValues{rows.getResult(0), rows.getResult(1),
                             rows.getResult(2), rows.getResult(3)};
}
