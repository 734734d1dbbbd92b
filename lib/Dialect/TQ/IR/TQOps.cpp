//===- TQOps.cpp - Operations of the tq dialect ---------------------------===//
//
// Verifiers check every shape relation an op's semantics rely on (dynamic
// sizes are accepted where a static one is expected); folders and
// canonicalisation patterns remove rotations that cancel.
//
//===----------------------------------------------------------------------===//

#include "tq/Dialect/TQ/IR/TQDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tq;

#define GET_OP_CLASSES
#include "tq/Dialect/TQ/IR/TQOps.cpp.inc"

namespace {

/// A size for diagnostics: "?" when dynamic.
std::string sizeStr(int64_t size) {
  return ShapedType::isDynamic(size) ? "?" : std::to_string(size);
}

/// Sizes agree when equal or when either is dynamic.
bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Emits "<what> is <actual>, expected <expected>" unless compatible.
LogicalResult expectSize(Operation *op, int64_t actual, int64_t expected,
                         const Twine &what) {
  if (compatible(actual, expected))
    return success();
  return op->emitOpError() << what << " is " << sizeStr(actual)
                           << ", expected " << sizeStr(expected);
}

/// Checks that every dimension of `actual` agrees with `expected`.
LogicalResult expectShape(Operation *op, ShapedType actual,
                          ArrayRef<int64_t> expected, StringRef what,
                          ArrayRef<StringRef> dimNames) {
  for (auto [i, size] : llvm::enumerate(expected))
    if (failed(expectSize(op, actual.getDimSize(i), size,
                          what + " " + dimNames[i])))
      return failure();
  return success();
}

/// Query heads must be a whole multiple of the KV heads (GQA groups).
LogicalResult verifyHeads(Operation *op, int64_t qHeads, int64_t kvHeads) {
  if (ShapedType::isDynamic(qHeads) || ShapedType::isDynamic(kvHeads))
    return success();
  if (kvHeads <= 0 || qHeads % kvHeads != 0)
    return op->emitOpError()
           << "query heads (" << qHeads << ") must be a multiple of kv heads ("
           << kvHeads << ")";
  return success();
}

/// Checks the options shared by tq.softmax and tq.attention.
LogicalResult verifyMaskingOptions(Operation *op, int64_t queries,
                                   int64_t tokens, Value mask,
                                   std::optional<float> scale, bool causal,
                                   int64_t window, float softcap) {
  if (scale && (!std::isfinite(*scale) || *scale <= 0.0f))
    return op->emitOpError() << "scale must be finite and positive, got "
                             << *scale;
  if (window < 0)
    return op->emitOpError() << "window must be non-negative, got " << window;
  if (!std::isfinite(softcap) || softcap < 0.0f)
    return op->emitOpError()
           << "softcap must be finite and non-negative, got " << softcap;
  if (causal && !ShapedType::isDynamic(queries) &&
      !ShapedType::isDynamic(tokens) && queries > tokens)
    return op->emitOpError() << "causal attention needs queries (" << queries
                             << ") <= tokens (" << tokens << ")";
  if (mask) {
    auto maskType = cast<ShapedType>(mask.getType());
    if (failed(expectShape(op, maskType, {queries, tokens}, "mask",
                           {"queries", "tokens"})))
      return failure();
  }
  return success();
}

/// ALiBi slopes scale the mask and need one; slopes and sinks have one
/// entry per query head.
LogicalResult verifyHeadVectors(Operation *op, int64_t heads, Value mask,
                                Value slopes, Value sinks) {
  if (slopes && !mask)
    return op->emitOpError() << "slopes scale the mask, but there is no mask";
  for (auto [value, what] : {std::pair{slopes, "slopes"}, {sinks, "sinks"}})
    if (value &&
        failed(expectSize(op, cast<ShapedType>(value.getType()).getDimSize(0),
                          heads, Twine(what) + " (one per query head)")))
      return failure();
  return success();
}

const StringRef kQHD[] = {"queries", "heads", "head dim"};
const StringRef kQHT[] = {"queries", "heads", "tokens"};
const StringRef kTHD[] = {"tokens", "kv heads", "head dim"};
const StringRef kTHB[] = {"tokens", "kv heads", "row bytes"};

} // namespace

//===----------------------------------------------------------------------===//
// FromBytesOp / ToBytesOp
//===----------------------------------------------------------------------===//

LogicalResult LaneLookupOp::verify() {
  const size_t size = getTable().size();
  if (size == 0 || size > 16 || !llvm::isPowerOf2_64(size))
    return emitOpError()
           << "table needs a power of two from 1 to 16 entries, got " << size;
  return success();
}

LogicalResult ByteLookupOp::verify() {
  const size_t size = getTable().size();
  if (size == 0 || size > 16 || !llvm::isPowerOf2_64(size))
    return emitOpError()
           << "table needs a power of two from 1 to 16 entries, got " << size;
  return success();
}

LogicalResult SelectBitsOp::verify() {
  const int64_t bytes = getSource().getType().getDimSize(0);
  if (bytes % 8 != 0)
    return emitOpError() << "needs whole 64-bit lanes, got " << bytes
                         << " bytes";
  ArrayRef<int8_t> offsets = getOffsets();
  if (int64_t(offsets.size()) != bytes)
    return emitOpError() << "needs one offset per byte, got "
                         << offsets.size() << " for " << bytes << " bytes";
  for (int8_t offset : offsets)
    if (offset < 0 || offset > 63)
      return emitOpError() << "offsets are bits of a 64-bit lane (0 to 63), "
                              "got "
                           << int(offset);
  return success();
}

LogicalResult ByteDotOp::verify() {
  const int64_t bytes = getLhs().getType().getDimSize(0);
  const int64_t lanes = getAcc().getType().getDimSize(0);
  if (bytes != 4 * lanes)
    return emitOpError() << "needs four bytes per i32 lane, got " << bytes
                         << " bytes for " << lanes << " lanes";
  if (getNarrow())
    if (auto lookup = getLhs().getDefiningOp<ByteLookupOp>())
      for (int8_t entry : lookup.getTable())
        if (entry < 0)
          return emitOpError()
                 << "is narrow (lhs bytes below 128), but its lhs looks up "
                    "the byte "
                 << unsigned(uint8_t(entry));
  return success();
}

LogicalResult WordLookupOp::verify() {
  const size_t size = getTable().size();
  if (size == 0 || size > 32 || !llvm::isPowerOf2_64(size))
    return emitOpError()
           << "table needs a power of two from 1 to 32 entries, got " << size;
  return success();
}

LogicalResult PairDotOp::verify() {
  const int64_t words = getLhs().getType().getDimSize(0);
  const int64_t lanes = getAcc().getType().getDimSize(0);
  if (words != 2 * lanes)
    return emitOpError() << "needs two words per 32-bit lane, got " << words
                         << " words for " << lanes << " lanes";
  const bool floats = isa<Float32Type>(getAcc().getType().getElementType());
  const bool bf16 = isa<BFloat16Type>(getLhs().getType().getElementType());
  if (floats != bf16)
    return emitOpError() << "needs bf16 operands with an f32 accumulator or "
                            "i16 operands with an i32 one";
  return success();
}

LogicalResult FromBytesOp::verify() {
  return expectShape(*this, getBytes().getType(),
                     getCache().getType().getBytesType().getShape(), "bytes",
                     kTHB);
}

OpFoldResult FromBytesOp::fold(FoldAdaptor) {
  if (auto toBytes = getBytes().getDefiningOp<ToBytesOp>())
    if (toBytes.getCache().getType() == getType())
      return toBytes.getCache();
  return {};
}

LogicalResult ToBytesOp::verify() {
  return expectShape(*this, getBytes().getType(),
                     getCache().getType().getBytesType().getShape(), "bytes",
                     kTHB);
}

OpFoldResult ToBytesOp::fold(FoldAdaptor) {
  if (auto fromBytes = getCache().getDefiningOp<FromBytesOp>())
    if (fromBytes.getBytes().getType() == getType())
      return fromBytes.getBytes();
  return {};
}

LogicalResult FromPagesOp::verify() {
  auto pages = cast<ShapedType>(getPages().getType());
  CacheType cache = getCache().getType();
  if (failed(expectSize(*this, pages.getDimSize(2), cache.getNumKvHeads(),
                        "pages kv heads")) ||
      failed(expectSize(*this, pages.getDimSize(3), cache.getRowBytes(),
                        "pages row bytes")))
    return failure();
  // The lowering addresses a page's slots in 32 bits (as the runtime's and
  // ggml's layouts do).
  const int64_t pageSize = pages.getDimSize(1);
  if (!ShapedType::isDynamic(pageSize) && pageSize > int64_t(UINT32_MAX))
    return emitOpError() << "page size is " << pageSize
                         << ", more than 2^32 - 1 slots";
  return success();
}

//===----------------------------------------------------------------------===//
// QuantizeOp / GatherOp
//===----------------------------------------------------------------------===//

LogicalResult QuantizeOp::verify() {
  return expectShape(*this, getInput().getType(),
                     getCache().getType().getValuesType().getShape(), "input",
                     kTHD);
}

LogicalResult GatherOp::verify() {
  CacheType cache = getCache().getType();
  return expectShape(*this, getResult().getType(),
                     cache.getRotatedType().getShape(), "result",
                     {"tokens", "kv heads", "padded head dim"});
}

//===----------------------------------------------------------------------===//
// RotateOp
//===----------------------------------------------------------------------===//

LogicalResult RotateOp::verify() {
  auto type = cast<RankedTensorType>(getInput().getType());
  if (type.getRank() < 1)
    return emitOpError() << "rotates the last dimension; operand is rank 0";
  int64_t last = type.getShape().back();
  if (ShapedType::isDynamic(last) || last != int64_t(getRotation().getDim()))
    return emitOpError() << "last dimension is " << sizeStr(last)
                         << ", the rotation acts on "
                         << getRotation().getDim();
  return success();
}

OpFoldResult RotateOp::fold(FoldAdaptor) {
  if (getRotation().isIdentity())
    return getInput();
  return {};
}

namespace {
/// rotate(rotate(x, R), R, inverse) -> x and rotate(rotate(x, R, inverse), R)
/// -> x: R is orthogonal.
struct CancelInverseRotations : public OpRewritePattern<RotateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RotateOp op,
                                PatternRewriter &rewriter) const override {
    auto producer = op.getInput().getDefiningOp<RotateOp>();
    if (!producer)
      return rewriter.notifyMatchFailure(op, "operand is not a rotation");
    if (producer.getRotation() != op.getRotation())
      return rewriter.notifyMatchFailure(op, "different rotations");
    if (producer.getInverse() == op.getInverse())
      return rewriter.notifyMatchFailure(op, "same direction twice");
    rewriter.replaceOp(op, producer.getInput());
    return success();
  }
};
} // namespace

void RotateOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<CancelInverseRotations>(context);
}

//===----------------------------------------------------------------------===//
// QKOp / SoftmaxOp / PVOp
//===----------------------------------------------------------------------===//

LogicalResult QKOp::verify() {
  auto q = getQuery().getType();
  auto k = getKeys().getType();
  if (failed(expectSize(*this, k.getDimSize(2), q.getDimSize(2),
                        "key head dim")) ||
      failed(verifyHeads(*this, q.getDimSize(1), k.getDimSize(1))))
    return failure();
  return expectShape(*this, getResult().getType(),
                     {q.getDimSize(0), q.getDimSize(1), k.getDimSize(0)},
                     "result", kQHT);
}

namespace {
/// A [queries x heads] row tensor must match the leading dims of `rows3`.
LogicalResult expectRowShape(Operation *op, ShapedType rows, ShapedType rows3,
                             StringRef what) {
  return expectShape(op, rows, {rows3.getDimSize(0), rows3.getDimSize(1)},
                     what, {"queries", "heads"});
}
} // namespace

LogicalResult SoftmaxOp::verify() {
  auto logits = getLogits().getType();
  if (getResult().getType() != logits)
    return emitOpError() << "result type " << getResult().getType()
                         << " differs from the logits type " << logits;
  if (getLse() &&
      failed(expectRowShape(*this, getLse().getType(), logits, "lse")))
    return failure();
  if (failed(verifyHeadVectors(*this, logits.getDimSize(1), getMask(),
                               getSlopes(), getSinks())))
    return failure();
  return verifyMaskingOptions(*this, logits.getDimSize(0),
                              logits.getDimSize(2), getMask(),
                              getScale().convertToFloat(), getCausal(),
                              getWindow(), getSoftcap().convertToFloat());
}

LogicalResult PVOp::verify() {
  auto p = getProbs().getType();
  auto v = getValues().getType();
  if (failed(expectSize(*this, v.getDimSize(0), p.getDimSize(2),
                        "value tokens")) ||
      failed(verifyHeads(*this, p.getDimSize(1), v.getDimSize(1))))
    return failure();
  return expectShape(*this, getResult().getType(),
                     {p.getDimSize(0), p.getDimSize(1), v.getDimSize(2)},
                     "result", kQHD);
}

//===----------------------------------------------------------------------===//
// ScoreOp / AccumulateOp
//===----------------------------------------------------------------------===//

LogicalResult ScoreOp::verify() {
  auto q = getQuery().getType();
  CacheType keys = getKeys().getType();
  if (failed(expectSize(*this, q.getDimSize(2), keys.getPaddedDim(),
                        "query dim (the key format's padded head dim)")) ||
      failed(verifyHeads(*this, q.getDimSize(1), keys.getNumKvHeads())))
    return failure();
  return expectShape(*this, getResult().getType(),
                     {q.getDimSize(0), q.getDimSize(1), keys.getNumTokens()},
                     "result", kQHT);
}

LogicalResult AccumulateOp::verify() {
  auto p = getProbs().getType();
  CacheType values = getValues().getType();
  if (failed(expectSize(*this, values.getNumTokens(), p.getDimSize(2),
                        "value tokens")) ||
      failed(verifyHeads(*this, p.getDimSize(1), values.getNumKvHeads())))
    return failure();
  return expectShape(*this, getResult().getType(),
                     {p.getDimSize(0), p.getDimSize(1),
                      int64_t(values.getPaddedDim())},
                     "result", {"queries", "heads", "padded head dim"});
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  auto q = getQuery().getType();
  CacheType keys = getKeys().getType();
  CacheType values = getValues().getType();
  if (failed(expectSize(*this, q.getDimSize(2), keys.getHeadDim(),
                        "query head dim")))
    return failure();
  if (keys.getNumKvHeads() != values.getNumKvHeads())
    return emitOpError() << "key cache has " << keys.getNumKvHeads()
                         << " kv heads, value cache "
                         << values.getNumKvHeads();
  if (failed(expectSize(*this, values.getNumTokens(), keys.getNumTokens(),
                        "value tokens")) ||
      failed(verifyHeads(*this, q.getDimSize(1), keys.getNumKvHeads())))
    return failure();
  // K and V head dims may differ (DeepSeek's MLA: 576 and 512); the
  // output rows have V's.
  if (failed(expectShape(*this, getResult().getType(),
                         {q.getDimSize(0), q.getDimSize(1),
                          int64_t(values.getHeadDim())},
                         "result", kQHD)))
    return failure();
  if (getLse() && failed(expectRowShape(*this, getLse().getType(), q, "lse")))
    return failure();
  if (failed(verifyHeadVectors(*this, q.getDimSize(1), getMask(), getSlopes(),
                               getSinks())))
    return failure();
  std::optional<float> scale;
  if (getScale())
    scale = getScale()->convertToFloat();
  return verifyMaskingOptions(*this, q.getDimSize(0), keys.getNumTokens(),
                              getMask(), scale, getCausal(), getWindow(),
                              getSoftcap().convertToFloat());
}

float AttentionOp::getScaleOrDefault() {
  if (getScale())
    return getScale()->convertToFloat();
  return float(1.0 / std::sqrt(double(getKeys().getType().getHeadDim())));
}

//===----------------------------------------------------------------------===//
// Flash attention ops
//===----------------------------------------------------------------------===//

LogicalResult SliceTokensOp::verify() {
  CacheType in = getCache().getType(), out = getResult().getType();
  if (in.getFormat() != out.getFormat() ||
      in.getNumKvHeads() != out.getNumKvHeads() ||
      in.getHeadDim() != out.getHeadDim())
    return emitOpError() << "result " << out
                         << " must differ from the source " << in
                         << " in its token count only";
  return success();
}

LogicalResult OnlineSoftmaxOp::verify() {
  auto logits = getLogits().getType();
  if (failed(expectRowShape(*this, getMax().getType(), logits, "max")) ||
      failed(verifyHeadVectors(*this, logits.getDimSize(1), getMask(),
                               getSlopes(), Value())))
    return failure();
  return verifyMaskingOptions(*this, logits.getDimSize(0),
                              logits.getDimSize(2), getMask(),
                              getScale().convertToFloat(), /*causal=*/false,
                              getWindow(), getSoftcap().convertToFloat());
}

LogicalResult MergeTileOp::verify() {
  return expectRowShape(*this, getCorrection().getType(), getAcc().getType(),
                        "correction");
}

LogicalResult NormalizeOp::verify() {
  return expectRowShape(*this, getSum().getType(), getAcc().getType(), "sum");
}

LogicalResult CombineOp::verify() {
  auto max = getMax().getType();
  auto acc = getAcc().getType();
  if (failed(expectShape(*this, acc,
                         {max.getDimSize(0), max.getDimSize(1),
                          max.getDimSize(2)},
                         "acc", {"splits", "queries", "heads"})))
    return failure();
  return expectShape(*this, getResult().getType(),
                     {acc.getDimSize(1), acc.getDimSize(2), acc.getDimSize(3)},
                     "result", {"queries", "heads", "width"});
}
