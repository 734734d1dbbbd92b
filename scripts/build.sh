#!/usr/bin/env bash
# Configures and builds tqc into ${TQC_BUILD_DIR:-build} with ninja, clang-22
# and lld-22 against Debian's LLVM/MLIR 22.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
export PATH="/usr/lib/llvm-22/bin:$PATH"

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE="${TQC_BUILD_TYPE:-Release}" \
    -DCMAKE_C_COMPILER=/usr/lib/llvm-22/bin/clang \
    -DCMAKE_CXX_COMPILER=/usr/lib/llvm-22/bin/clang++ \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    ${TQC_CMAKE_ARGS:-}
fi
cmake --build "$build"
