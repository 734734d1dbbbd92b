// Uses an installed tqc's C++ libraries: registers the tq dialect, parses
// and verifies tq IR (and sees the verifier refuse a cache whose row bytes
// do not match its format), round-trips a row through lib/Quant, and names
// and describes a runtime kernel through the pipelines/target libraries.
#include "tq/Dialect/TQ/IR/TQDialect.h"
#include "tq/Pipelines/RuntimeKernels.h"
#include "tq/Quant/Format.h"
#include "tq/Target/KernelLibrary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

static std::string decode(unsigned rowBytes) {
  std::string b = std::to_string(rowBytes);
  std::string cache = "!tq.cache<?x8x128, #tq.format<\"turbo3_0\">>";
  return "func.func @decode(%q: tensor<1x32x128xf32>, %kb: tensor<?x8x" + b +
         "xi8>, %vb: tensor<?x8x" + b + "xi8>) -> tensor<1x32x128xf32> {\n"
         "  %k = tq.from_bytes %kb : tensor<?x8x" + b + "xi8> -> " + cache +
         "\n  %v = tq.from_bytes %vb : tensor<?x8x" + b + "xi8> -> " + cache +
         "\n  %o = tq.attention %q, %k, %v : tensor<1x32x128xf32>, " + cache +
         ", " + cache + " -> tensor<1x32x128xf32>\n"
         "  return %o : tensor<1x32x128xf32>\n}\n";
}

int main() {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::tq::TQDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  auto format = tq::quant::Format::get("turbo3_0", 128);
  if (!format) {
    std::fprintf(stderr, "Format::get: %s\n", format.status().message().c_str());
    return 1;
  }
  unsigned rowBytes = unsigned(format->rowBytes());

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(decode(rowBytes), &context);
  if (!module || mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "the turbo3_0 decode does not parse or verify\n");
    return 1;
  }
  unsigned attentions = 0;
  module->walk([&](mlir::Operation *op) {
    attentions += op->getName().getStringRef() == "tq.attention";
  });
  std::printf("parsed: %u tq.attention\n", attentions);
  if (attentions != 1)
    return 1;

  // One byte too many per row: the verifier says so.
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> bad =
        mlir::parseSourceString<mlir::ModuleOp>(decode(rowBytes + 1), &context);
    if (bad && mlir::succeeded(mlir::verify(*bad))) {
      std::fprintf(stderr, "a %u-byte turbo3_0 row verified\n", rowBytes + 1);
      return 1;
    }
  }
  std::printf("refused: %s", diagnostics.c_str());
  if (diagnostics.empty())
    return 1;

  // lib/Quant: encode and decode a row.
  std::vector<float> x(128), y(128);
  for (unsigned i = 0; i < 128; ++i)
    x[i] = std::sin(0.37f * float(i)) + 0.01f * float(i);
  std::vector<uint8_t> bytes(rowBytes);
  if (!format->encodeRow(x, bytes).ok() || !format->decodeRow(bytes, y).ok())
    return 1;
  double err = 0, norm = 0;
  for (unsigned i = 0; i < 128; ++i) {
    err += (x[i] - y[i]) * (x[i] - y[i]);
    norm += x[i] * x[i];
  }
  std::printf("turbo3_0 row: %u bytes, relative error %.3f\n", rowBytes,
              std::sqrt(err / norm));
  if (!(std::sqrt(err / norm) < 0.3))
    return 1;

  // The pipelines and target libraries: a kernel's name and self-description.
  mlir::tq::RuntimeKernelSpec spec;
  spec.kind = mlir::tq::RuntimeKernelKind::Decode;
  spec.keyFormat = spec.valueFormat = "turbo3_0";
  spec.headDim = 128;
  spec.group = 4;
  llvm::SmallVector<int64_t> info = mlir::tq::kernelInfo(spec);
  std::printf("kernel: %s, info k_row_bytes %lld\n", spec.name().c_str(),
              info.size() > 4 ? (long long)info[4] : -1ll);
  return spec.name() == "tq_decode_turbo3_0_turbo3_0_d128_g4" &&
                 info.size() > 4 && info[4] == rowBytes
             ? 0
             : 1;
}
