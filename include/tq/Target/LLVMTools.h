//===- LLVMTools.h - The LLVM tools the kernel libraries run ----*- C++ -*-===//
//
// tq-aot links CPU libraries with a C compiler driver and assembles AMDGCN
// code objects with llvm-mc and ld.lld. These must be the tools of the
// LLVM tqc was built with (another LLVM's llvm-mc rejects this one's
// assembly), so they are looked for in that LLVM's bin directory first,
// then on PATH; a failure names the binary that ran.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_TARGET_LLVMTOOLS_H
#define TQ_TARGET_LLVMTOOLS_H

#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace mlir::tq {

/// The directory of the LLVM tools tqc was built with.
StringRef llvmToolsDir();

/// The path of `tool`: llvmToolsDir()/tool if it exists, else the first
/// `tool` on PATH; nullopt if neither.
std::optional<std::string> findLLVMTool(StringRef tool);

/// Runs `tool` (found by findLLVMTool) with `args`. On failure `error`
/// says which binary ran, its exit status and the end of what it printed.
bool runLLVMTool(StringRef tool, ArrayRef<StringRef> args,
                 std::string &error);

} // namespace mlir::tq

#endif // TQ_TARGET_LLVMTOOLS_H
