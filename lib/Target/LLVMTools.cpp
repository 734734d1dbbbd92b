//===- LLVMTools.cpp - The LLVM tools the kernel libraries run ------------===//

#include "tq/Target/LLVMTools.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

using namespace mlir;

StringRef mlir::tq::llvmToolsDir() { return TQ_LLVM_TOOLS_DIR; }

std::optional<std::string> mlir::tq::findLLVMTool(StringRef tool) {
  SmallString<256> own(llvmToolsDir());
  llvm::sys::path::append(own, tool);
  if (llvm::sys::fs::can_execute(own))
    return std::string(own);
  if (llvm::ErrorOr<std::string> onPath = llvm::sys::findProgramByName(tool))
    return *onPath;
  return std::nullopt;
}

bool mlir::tq::runLLVMTool(StringRef tool, ArrayRef<StringRef> args,
                           std::string &error) {
  std::optional<std::string> path = findLLVMTool(tool);
  if (!path) {
    error = "cannot find '" + tool.str() + "' in " + llvmToolsDir().str() +
            " or on PATH";
    return false;
  }
  SmallVector<StringRef> argv = {*path};
  argv.append(args.begin(), args.end());
  // What the tool prints goes to a temporary file, quoted on failure.
  SmallString<128> log;
  int fd = -1;
  const bool logged =
      !llvm::sys::fs::createTemporaryFile("tq-tool", "log", fd, log);
  if (logged)
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  std::optional<StringRef> redirects[] = {
      std::nullopt, logged ? std::optional<StringRef>(log) : std::nullopt,
      logged ? std::optional<StringRef>(log) : std::nullopt};
  std::string message;
  const int status = llvm::sys::ExecuteAndWait(*path, argv, std::nullopt,
                                               redirects, 0, 0, &message);
  std::string output;
  if (logged) {
    if (auto buffer = llvm::MemoryBuffer::getFile(log))
      output = (*buffer)->getBuffer().take_back(2000).trim().str();
    llvm::sys::fs::remove(log);
  }
  if (status == 0)
    return true;
  error = *path + " failed (" +
          (status < 0 ? "could not run: " + message
                      : "exit status " + std::to_string(status)) +
          ")" + (output.empty() ? "" : ":\n" + output);
  return false;
}
