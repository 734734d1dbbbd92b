//===- HoistTileBuffers.cpp - One buffer per loop nest, not per iteration -===//
//
// The flash loop's per-tile buffers (scores, weights, row tables) are
// allocated and freed in every iteration: a malloc/free pair per buffer and
// tile. A buffer whose lifetime is one iteration (its only dealloc is in the
// alloc's block) is instead allocated once before the outermost enclosing
// scf.for and freed after it. A dynamically sized buffer gets the size
// integer range analysis bounds it by; each iteration views its prefix with
// memref.view, whose identity layout leaves the users' types unchanged.
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/Passes.h"

#include "mlir/Analysis/DataFlow/IntegerRangeAnalysis.h"
#include "mlir/Analysis/DataFlow/Utils.h"
#include "mlir/Analysis/DataFlowFramework.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir::tq {
#define GEN_PASS_DEF_TQHOISTTILEBUFFERS
#include "tq/Conversion/Passes.h.inc"
} // namespace mlir::tq

using namespace mlir;

namespace {
/// The outermost scf.for reached from `op` through scf.for parents only (an
/// scf.forall, scf.if or function ends the climb: a forall's iterations may
/// run at once, and a buffer under an if may never be needed).
scf::ForOp outermostLoop(Operation *op) {
  scf::ForOp outer;
  for (Operation *parent = op->getParentOp(); auto loop =
           dyn_cast_or_null<scf::ForOp>(parent);
       parent = loop->getParentOp())
    outer = loop;
  return outer;
}

/// The alloc's only dealloc, in the alloc's block; null where the buffer may
/// outlive the iteration (no dealloc there, several, or a terminator using
/// it).
memref::DeallocOp iterationDealloc(memref::AllocOp alloc) {
  memref::DeallocOp dealloc;
  for (Operation *user : alloc->getUsers()) {
    if (user->hasTrait<OpTrait::IsTerminator>())
      return {};
    auto free = dyn_cast<memref::DeallocOp>(user);
    if (!free)
      continue;
    if (dealloc || free->getBlock() != alloc->getBlock())
      return {};
    dealloc = free;
  }
  return dealloc;
}

/// The byte size of `type` with each dynamic size at its bound; nullopt
/// where a size is unbounded or the total exceeds `limit`.
std::optional<uint64_t> boundedBytes(MemRefType type, ValueRange dynamicSizes,
                                     DataFlowSolver &solver, uint64_t limit) {
  // (index and vector elements have no fixed byte size here.)
  if (!type.getElementType().isIntOrFloat())
    return std::nullopt;
  unsigned bits = type.getElementTypeBitWidth();
  if (bits == 0 || bits % 8 != 0)
    return std::nullopt;
  uint64_t bytes = bits / 8;
  unsigned next = 0;
  for (int64_t size : type.getShape()) {
    uint64_t bound = size;
    if (ShapedType::isDynamic(size)) {
      auto *lattice = solver.lookupState<dataflow::IntegerValueRangeLattice>(
          dynamicSizes[next++]);
      if (!lattice || lattice->getValue().isUninitialized())
        return std::nullopt;
      const APInt &umax = lattice->getValue().getValue().umax();
      if (umax.getActiveBits() > 32)
        return std::nullopt;
      bound = umax.getZExtValue();
    }
    if (bound != 0 && bytes > limit / bound)
      return std::nullopt;
    bytes *= bound;
  }
  return bytes;
}

struct TQHoistTileBuffersPass
    : public tq::impl::TQHoistTileBuffersBase<TQHoistTileBuffersPass> {
  using TQHoistTileBuffersBase::TQHoistTileBuffersBase;

  void runOnOperation() override {
    DataFlowSolver solver;
    dataflow::loadBaselineAnalyses(solver);
    solver.load<dataflow::IntegerRangeAnalysis>();
    if (failed(solver.initializeAndRun(getOperation())))
      return signalPassFailure();
    SmallVector<memref::AllocOp> allocs;
    getOperation()->walk([&](memref::AllocOp op) { allocs.push_back(op); });
    for (memref::AllocOp alloc : allocs)
      hoist(alloc, solver);
  }

  void hoist(memref::AllocOp alloc, DataFlowSolver &solver) {
    scf::ForOp loop = outermostLoop(alloc);
    memref::DeallocOp dealloc = iterationDealloc(alloc);
    MemRefType type = alloc.getType();
    if (!loop || !dealloc || !type.getLayout().isIdentity() ||
        type.getMemorySpace() || !alloc.getSymbolOperands().empty())
      return;
    OpBuilder b(loop);
    if (type.hasStaticShape()) {
      alloc->moveBefore(loop);
      dealloc->moveAfter(loop);
      return;
    }
    std::optional<uint64_t> bytes = boundedBytes(
        type, alloc.getDynamicSizes(), solver, uint64_t(maxBytes));
    if (!bytes)
      return;
    Location loc = alloc.getLoc();
    auto storageType =
        MemRefType::get({int64_t(*bytes)}, b.getIntegerType(8));
    Value storage = memref::AllocOp::create(b, loc, storageType, ValueRange{},
                                            alloc.getAlignmentAttr());
    Value start = arith::ConstantIndexOp::create(b, loc, 0);
    b.setInsertionPoint(alloc);
    Value view = memref::ViewOp::create(b, loc, type, storage, start,
                                        alloc.getDynamicSizes());
    alloc.replaceAllUsesWith(view);
    dealloc.erase();
    alloc.erase();
    b.setInsertionPointAfter(loop);
    memref::DeallocOp::create(b, loc, storage);
  }
};
} // namespace
