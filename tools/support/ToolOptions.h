//===- ToolOptions.h - Command lines of the tq tools -------------*- C++ -*-===//
//
// What every tq tool does with its command line: --version prints tqc's
// version and git revision (and LLVM's), --help shows only the tool's
// options, and a malformed option is one `<tool>: error: ...` line and
// exit status 1, like every other error of the tools.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_TOOLS_SUPPORT_TOOLOPTIONS_H
#define TQ_TOOLS_SUPPORT_TOOLOPTIONS_H

#include "llvm/Support/CommandLine.h"

namespace tq::tools {

/// "tqc <version> (git <revision>)".
const char *versionString();

/// Makes --version print `tool`'s line with versionString() (before
/// LLVM's own), for tools that parse with llvm::cl or MlirOptMain.
void addVersionPrinter(const char *tool);

/// Parses argv with llvm::cl, showing only `category` in --help; on a
/// malformed command line prints each of llvm::cl's complaints as
/// "<tool>: error: ..." and exits with status 1.
void parseCommandLine(int argc, char **argv, const char *tool,
                      const char *overview, llvm::cl::OptionCategory &category);

} // namespace tq::tools

#endif // TQ_TOOLS_SUPPORT_TOOLOPTIONS_H
