#!/usr/bin/env bash
# Builds ${TQC_LLAMA_DIR:-${TQC_BUILD_DIR:-build}/llama.cpp}/lib/libtq_bench_ggml.so,
# tq-bench's ggml baselines (tq-bench --ggml-bench), against the ggml that
# integrations/llama.cpp/build.sh patched: ggml alone is built again with
# position-independent code into ${TQC_LLAMA_DIR}/build-pic (a few minutes
# the first time, incremental after) and linked in statically. build.sh runs
# this as its last step; run it alone after build.sh to (re)build just the
# library. Only the tqbg_* symbols are exported: ggml stays local to the
# library, so nothing of it clashes with the program that dlopens it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
base="${TQC_LLAMA_DIR:-$build/llama.cpp}"
src="$base/src"

pic="$base/build-pic"
jobs="${JOBS:-$(nproc)}"
tq_runtime="$build/lib/libtq_runtime.so"

for f in "$src/CMakeLists.txt" "$src/.tqc-applied.patch" "$tq_runtime"; do
  if [[ ! -f "$f" ]]; then
    echo "bench-ggml/build.sh: error: $f is missing; run integrations/llama.cpp/build.sh" >&2
    exit 1
  fi
done
tq_runtime="$(realpath "$tq_runtime")"

# ggml's libraries from the patched tree build.sh prepared, configured with
# build.sh's options plus position-independent code (build.sh's static
# libraries are not PIC and cannot go into a shared library); only the ggml
# targets are built.
cmake -G Ninja -S "$src" -B "$pic" -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON \
  -DGGML_OPENMP=OFF \
  -DGGML_CCACHE=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_TOOLS=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  "-DTQ_RUNTIME_LIBRARY=$tq_runtime" \
  "-DTQ_RUNTIME_INCLUDE_DIR=$root/runtime/include" \
  "-DTQ_GGML_PACK_DEFAULT=$base/pack/libtq_ggml_kernels.so" > "$pic.configure.log" ||
  { cat "$pic.configure.log" >&2; exit 1; }
ninja -C "$pic" -j "$jobs" ggml ggml-base ggml-cpu

mkdir -p "$base/lib"
out="$base/lib/libtq_bench_ggml.so"
map="$base/lib/.tq_bench_ggml.map"
printf '{ global: tqbg_*; local: *; };\n' > "$map"
# The version script keeps ggml's symbols local to the library.
cc -O2 -std=c11 -fPIC -shared -I"$src/ggml/include" "$here/tq-bench-ggml.c" -o "$out.tmp" \
  -Wl,--version-script="$map" -Wl,--no-undefined \
  "$pic/ggml/src/libggml.a" "$pic/ggml/src/libggml-cpu.a" "$pic/ggml/src/libggml-base.a" \
  "$tq_runtime" "-Wl,-rpath,$(dirname "$tq_runtime")" -lstdc++ -lm -lpthread -ldl
mv -f "$out.tmp" "$out"
echo "bench-ggml/build.sh: $out"
