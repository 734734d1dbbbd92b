//===- TQOptFuzzer.cpp - Parser, verifier and passes on any text ----------===//
//
// What tq-opt does with a file: parse it with every dialect tq-opt knows,
// verify it, and run the tq passes and pipelines on what verifies. The
// first input byte picks the pass or pipeline; the rest is the IR text.
// Diagnostics are swallowed; a crash, a sanitizer report or a hang is a
// bug (a failing pass is not).
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/Passes.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Dialect/TQ/Transforms/Passes.h"
#include "tq/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <string>

using namespace mlir;

namespace {

MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registerAllDialects(registry);
    registerAllExtensions(registry);
    registry.insert<mlir::tq::TQDialect>();
    registerAllPasses();
    mlir::tq::registerTQPasses();
    mlir::tq::registerTQConversionPasses();
    mlir::tq::registerTQPipelines();
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->disableMultithreading();
    return c;
  }();
  return *ctx;
}

/// The pass pipelines the fuzzer runs (parsed like tq-opt's option).
const char *const kPipelines[] = {
    "",
    "canonicalize",
    "tq-decompose-attention",
    "tq-hoist-rotation",
    "tq-fuse-codebook",
    ("tq-fuse-codebook{lookup=tile},tq-tile-flash-attention{tile-size=16 "
     "splits=2}"),
    "tq-fusion",
    "tq-fusion{tile-size=0}",
    "tq-lower-to-loops",
    "tq-fusion,tq-lower-to-loops",
    "tq-approximate-math",
    "tq-exact-math",
    "tq-to-llvm",
    // The integer dot paths' ops for each x86 ISA (seeds 15-17).
    "tq-lower-lane-lookup{isa=avx2}",
    "tq-lower-lane-lookup{isa=avxvnni}",
    "tq-lower-to-loops{score-dot=i8 narrow-levels=true value-dot=i16},"
    "tq-lower-lane-lookup{isa=avx2}",
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  MLIRContext &ctx = context();
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  const char *pipeline =
      kPipelines[data[0] % (sizeof kPipelines / sizeof kPipelines[0])];
  std::string text(reinterpret_cast<const char *>(data + 1), size - 1);
  // MLIR's parser recurses once per nesting level, so thousands of nested
  // brackets overflow the stack inside libMLIR (found by this target; an
  // upstream limit, not tqc's code): such inputs are skipped.
  int depth = 0, deepest = 0;
  for (char c : text) {
    depth += (c == '(' || c == '[' || c == '{' || c == '<') -
             (c == ')' || c == ']' || c == '}' || c == '>');
    deepest = depth > deepest ? depth : deepest;
  }
  if (deepest > 256)
    return 0;
  // A dense array of index elements (`array<index: 1>`) crashes MLIR 22's
  // parser (it asks an index type for its float width; mlir-opt too,
  // found by this target): skipped.
  for (size_t at = text.find("array<"); at != std::string::npos;
       at = text.find("array<", at + 1)) {
    size_t type = text.find_first_not_of(" \t\n", at + 6);
    if (type != std::string::npos && text.compare(type, 5, "index") == 0)
      return 0;
  }
  ParserConfig config(&ctx);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, config, "fuzz");
  if (!module || failed(verify(*module)) || !*pipeline)
    return 0;
  PassManager pm(&ctx);
  if (failed(parsePassPipeline(pipeline, pm)))
    return 0;
  (void)pm.run(*module);
  return 0;
}
