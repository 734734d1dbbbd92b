//===- ExactMath.cpp - sqrt / round / absf as exact arith expansions ------===//
//
// The expansions give the IEEE results bit for bit (correctly rounded
// sqrt, round half away from zero), so a kernel using them computes what
// the host library computes, on any target and without a device library.
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::tq {
#define GEN_PASS_DEF_TQEXACTMATH
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {

/// Scalar f32 / f64 arithmetic at one location, with its integer twin.
struct Arith {
  OpBuilder &b;
  Location loc;
  FloatType type;

  unsigned width() const { return type.getIntOrFloatBitWidth(); }
  IntegerType intType() const { return b.getIntegerType(width()); }
  Value f(double v) const {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
  }
  Value i(int64_t v) const {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(intType(), v));
  }
  Value bits(Value x) const {
    return arith::BitcastOp::create(b, loc, intType(), x);
  }
  Value real(Value n) const { return arith::BitcastOp::create(b, loc, type, n); }
  Value add(Value x, Value y) const { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) const { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) const { return arith::MulFOp::create(b, loc, x, y); }
  /// x * y + z with one rounding.
  Value fma(Value x, Value y, Value z) const {
    return LLVM::FMAOp::create(b, loc, x, y, z);
  }
  Value neg(Value x) const { return arith::NegFOp::create(b, loc, x); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) const {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) const {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value signMask() const {
    return i(int64_t(uint64_t(1) << (width() - 1)));
  }
  Value abs(Value x) const {
    Value clear = arith::XOrIOp::create(b, loc, signMask(), i(-1));
    return real(arith::AndIOp::create(b, loc, bits(x), clear));
  }
};

/// The correctly rounded square root of an f64 x.
Value exactSqrt64(const Arith &a, Value x) {
  using P = arith::CmpFPredicate;
  // Subnormals: scale by 2^108 (exact) so the first guess is meaningful,
  // and the root back by 2^-54.
  Value tiny = a.cmp(P::OLT, x, a.f(std::ldexp(1.0, -1000)));
  Value xs = a.select(tiny, a.mul(x, a.f(std::ldexp(1.0, 108))), x);
  // 1/sqrt(xs): the classic bit-level guess (within 3.5%), four Newton
  // steps (error below f64 rounding).
  Value one = a.i(1);
  Value guess = arith::SubIOp::create(
      a.b, a.loc, a.i(0x5FE6EB50C7B537A9LL),
      arith::ShRUIOp::create(a.b, a.loc, a.bits(xs), one));
  Value r = a.real(guess);
  Value half = a.mul(xs, a.f(0.5));
  for (int step = 0; step < 4; ++step)
    r = a.mul(r, a.sub(a.f(1.5), a.mul(a.mul(half, r), r)));
  // s = xs * r, one Heron step on the exact residual (within an ulp).
  Value s = a.mul(xs, r);
  s = a.fma(a.fma(a.neg(s), s, xs), a.mul(r, a.f(0.5)), s);
  // Tuckerman: s is correctly rounded iff pred(s) * s < xs <= s * succ(s);
  // two rounds move s by up to two ulps.
  for (int round = 0; round < 2; ++round) {
    Value sb = a.bits(s);
    Value pred = a.real(arith::SubIOp::create(a.b, a.loc, sb, one));
    Value succ = a.real(arith::AddIOp::create(a.b, a.loc, sb, one));
    Value tooBig = a.cmp(P::OLE, a.fma(a.neg(pred), s, xs), a.f(0.0));
    Value tooSmall = a.cmp(P::OGT, a.fma(a.neg(s), succ, xs), a.f(0.0));
    s = a.select(tooBig, pred, a.select(tooSmall, succ, s));
  }
  s = a.select(tiny, a.mul(s, a.f(std::ldexp(1.0, -54))), s);
  // 0, -0 and +inf are their own roots; negative and NaN give NaN.
  Value identity = arith::OrIOp::create(
      a.b, a.loc, a.cmp(P::OEQ, x, a.f(0.0)),
      a.cmp(P::OEQ, x, a.f(INFINITY)));
  Value positive = a.cmp(P::OGT, x, a.f(0.0));
  return a.select(identity, x, a.select(positive, s, a.f(NAN)));
}

/// The op's f32 / f64 scalar type, or null (then the op is left alone).
FloatType scalarF32OrF64(Operation *op) {
  auto type = dyn_cast<FloatType>(op->getResult(0).getType());
  return type && (type.isF32() || type.isF64()) ? type : FloatType();
}

struct SqrtExactly : public OpRewritePattern<math::SqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::SqrtOp op,
                                PatternRewriter &rewriter) const override {
    FloatType type = scalarF32OrF64(op);
    if (!type)
      return rewriter.notifyMatchFailure(op, "not an f32 / f64 scalar");
    Location loc = op.getLoc();
    Arith f64{rewriter, loc, rewriter.getF64Type()};
    Value x = op.getOperand();
    if (type.isF64()) {
      rewriter.replaceOp(op, exactSqrt64(f64, x));
      return success();
    }
    // f64 has more than 2 * 24 + 2 bits: rounding the f64 root to f32 gives
    // the correctly rounded f32 root.
    Value wide = arith::ExtFOp::create(rewriter, loc, f64.type, x);
    rewriter.replaceOpWithNewOp<arith::TruncFOp>(op, type,
                                                 exactSqrt64(f64, wide));
    return success();
  }
};

/// round(x), halves away from zero: |x| below 2^mantissa truncates through
/// an integer (exact), adds one when the dropped fraction is >= 1/2, and
/// takes x's sign back; larger magnitudes and NaN are integral already.
struct RoundExactly : public OpRewritePattern<math::RoundOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::RoundOp op,
                                PatternRewriter &rewriter) const override {
    FloatType type = scalarF32OrF64(op);
    if (!type)
      return rewriter.notifyMatchFailure(op, "not an f32 / f64 scalar");
    Location loc = op.getLoc();
    Arith a{rewriter, loc, type};
    Value x = op.getOperand();
    Value mag = a.abs(x);
    Value integral = a.cmp(arith::CmpFPredicate::UGE, mag,
                           a.f(std::ldexp(1.0, type.getFPMantissaWidth() - 1)));
    // Out-of-range magnitudes never reach the conversion.
    Value inRange = a.select(integral, a.f(0.0), mag);
    Value truncated = arith::SIToFPOp::create(
        rewriter, loc, type,
        arith::FPToSIOp::create(rewriter, loc, a.intType(), inRange));
    Value up = a.cmp(arith::CmpFPredicate::OGE, a.sub(inRange, truncated),
                     a.f(0.5));
    Value rounded = a.select(up, a.add(truncated, a.f(1.0)), truncated);
    Value sign = arith::AndIOp::create(rewriter, loc, a.bits(x), a.signMask());
    Value signedRounded =
        a.real(arith::OrIOp::create(rewriter, loc, a.bits(rounded), sign));
    rewriter.replaceOp(op, a.select(integral, x, signedRounded));
    return success();
  }
};

struct AbsExactly : public OpRewritePattern<math::AbsFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::AbsFOp op,
                                PatternRewriter &rewriter) const override {
    FloatType type = scalarF32OrF64(op);
    if (!type)
      return rewriter.notifyMatchFailure(op, "not an f32 / f64 scalar");
    Arith a{rewriter, op.getLoc(), type};
    rewriter.replaceOp(op, a.abs(op.getOperand()));
    return success();
  }
};

struct TQExactMathPass
    : public mlir::tq::impl::TQExactMathBase<TQExactMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SqrtExactly, RoundExactly, AbsExactly>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
