#!/usr/bin/env bash
# The README's second command: set up, build, and run every test (GoogleTest
# and lit, through ctest).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/bootstrap.sh"
"$root/scripts/build.sh"
build="${TQC_BUILD_DIR:-$root/build}"
export PATH="/usr/lib/llvm-22/bin:$PATH"
cd "$build"
ctest --output-on-failure -j"$(nproc)"
