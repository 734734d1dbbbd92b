//===- tq-opt.cpp - Pass driver for the tq dialect ------------------------===//
//
// mlir-opt plus the tq dialect and its passes: runs any pipeline over IR
// files, from tq.attention down to the LLVM dialect.
//
//===----------------------------------------------------------------------===//

#include "tq/Conversion/Passes.h"
#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Dialect/TQ/Transforms/Passes.h"
#include "tq/Pipelines/Pipelines.h"

#include "ToolOptions.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  ::tq::tools::addVersionPrinter("tq-opt");
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::tq::TQDialect>();
  mlir::registerAllPasses();
  mlir::tq::registerTQPasses();
  mlir::tq::registerTQConversionPasses();
  mlir::tq::registerTQPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "tq-opt: passes over the tq dialect\n", registry));
}
