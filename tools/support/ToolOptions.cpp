//===- ToolOptions.cpp - Command lines of the tq tools ---------------------===//

#include "ToolOptions.h"

#include "tq/Version.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace tq::tools {

const char *versionString() {
  return "tqc " TQC_VERSION " (git " TQC_GIT_REVISION ")";
}

void addVersionPrinter(const char *tool) {
  // LLVM prints its extra printers after its own lines; ours comes first
  // by replacing the printer and repeating LLVM's version line.
  llvm::cl::SetVersionPrinter([tool](llvm::raw_ostream &os) {
    os << tool << " (" << versionString() << ")\n";
    os << "  built with LLVM " << LLVM_VERSION_STRING << "\n";
  });
}

void parseCommandLine(int argc, char **argv, const char *tool,
                      const char *overview,
                      llvm::cl::OptionCategory &category) {
  addVersionPrinter(tool);
  llvm::cl::HideUnrelatedOptions(category);
  // llvm::cl writes some complaints to the stream it is given and others
  // (a bad option value) straight to stderr: catch stderr in a temporary
  // file while it parses.
  std::fflush(stderr);
  llvm::errs().flush();
  std::FILE *caught = std::tmpfile();
  const int saved = caught ? dup(2) : -1;
  if (saved >= 0)
    dup2(fileno(caught), 2);
  std::string errors;
  llvm::raw_string_ostream os(errors);
  const bool parsed =
      llvm::cl::ParseCommandLineOptions(argc, argv, overview, &os);
  llvm::errs().flush();
  if (saved >= 0) {
    dup2(saved, 2);
    close(saved);
    std::rewind(caught);
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, caught)) > 0;)
      errors.append(buffer, n);
  }
  if (caught)
    std::fclose(caught);
  if (parsed) {
    llvm::errs() << errors; // warnings, if any
    return;
  }
  // llvm::cl writes "<argv[0]>: <message>" lines; one error line each.
  for (llvm::StringRef line : llvm::split(llvm::StringRef(errors), '\n')) {
    line = line.trim();
    if (line.empty())
      continue;
    if (size_t colon = line.find(": "); colon != llvm::StringRef::npos &&
                                        line.take_front(colon).ends_with(tool))
      line = line.drop_front(colon + 2);
    llvm::errs() << tool << ": error: " << line << "\n";
  }
  std::exit(1);
}

} // namespace tq::tools
