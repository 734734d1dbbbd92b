#!/usr/bin/env bash
# Builds ${TQC_LLAMA_DIR:-${TQC_BUILD_DIR:-build}/llama.cpp}/lib/libtq_bench_ggml.so,
# tq-bench's ggml baselines (tq-bench --ggml-bench), from the patched ggml
# libraries integrations/llama.cpp/build.sh built (position-independent,
# static) in ${TQC_LLAMA_DIR}/build, linked in statically. build.sh runs
# this as its last step; run it alone after build.sh to (re)build just the
# library. Only the tqbg_* symbols are exported: ggml stays local to the
# library, so nothing of it clashes with the program that dlopens it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
base="${TQC_LLAMA_DIR:-$build/llama.cpp}"
src="$base/src"
obj="$base/build"
jobs="${JOBS:-$(nproc)}"
tq_runtime="$build/lib/libtq_runtime.so"

for f in "$src/CMakeLists.txt" "$src/.tqc-applied.patch" "$tq_runtime" \
         "$obj/CMakeCache.txt"; do
  if [[ ! -f "$f" ]]; then
    echo "bench-ggml/build.sh: error: $f is missing; run integrations/llama.cpp/build.sh" >&2
    exit 1
  fi
done
# A build directory from before build.sh made ggml position-independent
# cannot go into a shared library.
if ! grep -Eiq '^CMAKE_POSITION_INDEPENDENT_CODE:[A-Z]*=(ON|TRUE|YES|1)$' "$obj/CMakeCache.txt"; then
  echo "bench-ggml/build.sh: error: $obj was not configured with position-independent code; run integrations/llama.cpp/build.sh again" >&2
  exit 1
fi
tq_runtime="$(realpath "$tq_runtime")"
# (Up to date after build.sh: ninja only checks.)
ninja -C "$obj" -j "$jobs" ggml ggml-base ggml-cpu

mkdir -p "$base/lib"
out="$base/lib/libtq_bench_ggml.so"
map="$base/lib/.tq_bench_ggml.map"
printf '{ global: tqbg_*; local: *; };\n' > "$map"
# The version script keeps ggml's symbols local to the library.
cc -O2 -std=c11 -fPIC -shared -I"$src/ggml/include" "$here/tq-bench-ggml.c" -o "$out.tmp" \
  -Wl,--version-script="$map" -Wl,--no-undefined \
  "$obj/ggml/src/libggml.a" "$obj/ggml/src/libggml-cpu.a" "$obj/ggml/src/libggml-base.a" \
  "$tq_runtime" "-Wl,-rpath,$(dirname "$tq_runtime")" -lstdc++ -lm -lpthread -ldl
mv -f "$out.tmp" "$out"
echo "bench-ggml/build.sh: $out"
