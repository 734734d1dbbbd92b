#!/usr/bin/env bash
# Builds llama.cpp (from the pinned llama-cpp-python 0.3.36 sdist) patched to
# keep its KV cache in tqc formats, and the kernel pack it loads:
#   ${TQC_BUILD_DIR:-build}/llama.cpp/bin/{llama-completion,llama-perplexity,
#                                          llama-bench,llama-server}
#   ${TQC_BUILD_DIR:-build}/llama.cpp/pack/libtq_ggml_kernels.so
# and checks the ggml ops a tqc cache uses (ops-check.c) on every tqc format
# in the pack. Also builds tq-capture-kv and the test programs ctest runs
# (fa-check, rows-check, state-check; see test.sh) into the same bin/, and
# lib/libtq_bench_ggml.so, the ggml baselines of tq-bench --ggml-bench
# (bench-ggml/build.sh).
# Needs tqc built first (scripts/build.sh): bin/tq-aot and lib/libtq_runtime.so.
# Idempotent; a changed patch is reverse-applied and the new one applied.
#
# Environment:
#   TQ_GGML_PAIRS      K:V format pairs the pack holds (space separated;
#                      tq-aot --pairs)
#   TQ_GGML_HEAD_DIMS  head dims (comma separated)
#   TQ_GGML_GQA        query heads per KV head (comma separated)
#   TQ_GGML_DOT        dot products of the attention kernels: auto (default:
#                      the int8 score and bf16/int16 pair sums where the CPU
#                      has AVX512-VNNI/BF16 or AVX2, f32 elsewhere; tq-aot
#                      --score-dot=auto --value-dot=auto) or f32 (the
#                      reference kernels)
#   TQ_GGML_AMX        AMX-BF16 tile products in the prefill kernels
#                      (tq-aot --amx): auto (default with TQ_GGML_DOT=auto:
#                      on where the CPU has AMX-BF16), on, or off (default
#                      with TQ_GGML_DOT=f32)
#   TQ_GGML_TUNING_DB  a tuning database (python -m tqc.tune --kind
#                      ggml_decode,ggml_prefill ...): each attention kernel
#                      of the pack is built with its best record for this
#                      CPU (tq-aot --tuning-db; the others keep the
#                      defaults); a changed database rebuilds the pack
#   TQ_SKIP_PACK=1     build llama.cpp only (no tq-aot run)
#   JOBS               parallel compile jobs (default: nproc)
#   TQC_LLAMA_DIR      where the source, build, pack and bin go (default:
#                      ${TQC_BUILD_DIR:-build}/llama.cpp)
set -euo pipefail

# Gemma 3 270M's shape: head dim 256, 4 query heads over 1 KV head.
# The pairs the quality and speed runs of docs/perf/llama.cpp.md use; K rows
# also get centred encoders (tq-aot --centred-k) for TQ_K_CENTRES.
pairs="${TQ_GGML_PAIRS:-turbo2_0:turbo2_0 turbo3_0:turbo3_0 turbo4_0:turbo4_0 tq3_0:tq3_0 polar3:polar3 polar4:polar4 q8_0:turbo3_0 q8_0:turbo4_0 turbo3_0:q8_0 turbo4_0:q8_0 f16:turbo3_0 turbo4_0:turbo3_0 turbo4_0:turbo2_0 polar4:turbo3_0}"
head_dims="${TQ_GGML_HEAD_DIMS:-256}"
gqa="${TQ_GGML_GQA:-4}"
dot="${TQ_GGML_DOT:-auto}"
if [[ "$dot" != auto && "$dot" != f32 ]]; then
  echo "build.sh: error: TQ_GGML_DOT must be auto or f32, got '$dot'" >&2
  exit 1
fi
if [[ "$dot" == auto ]]; then amx="${TQ_GGML_AMX:-auto}"; else amx="${TQ_GGML_AMX:-off}"; fi
if [[ "$amx" != auto && "$amx" != on && "$amx" != off ]]; then
  echo "build.sh: error: TQ_GGML_AMX must be auto, on or off, got '$amx'" >&2
  exit 1
fi
tuning_db="${TQ_GGML_TUNING_DB:-}"
if [[ -n "$tuning_db" && ! -f "$tuning_db" ]]; then
  echo "build.sh: error: TQ_GGML_TUNING_DB '$tuning_db' is not a file" >&2
  exit 1
fi

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
base="${TQC_LLAMA_DIR:-$build/llama.cpp}"
src="$base/src"
obj="$base/build"
pack="$base/pack"
jobs="${JOBS:-$(nproc)}"

tq_runtime="$build/lib/libtq_runtime.so"
tq_aot="$build/bin/tq-aot"
if [[ ! -f "$tq_runtime" ]]; then
  echo "build.sh: error: $tq_runtime is missing; build tqc first (scripts/build.sh)" >&2
  exit 1
fi
tq_runtime="$(realpath "$tq_runtime")"

# 1. Source.
"$here/fetch.sh"

# 2. Glue: the patch, then ggml-tq.{h,c} copied in (only when they differ, so
#    an unchanged tree rebuilds nothing).
applied="$src/.tqc-applied.patch"
if [[ -f "$applied" ]] && ! cmp -s "$applied" "$here/glue/llama.cpp.patch"; then
  echo "build.sh: the glue patch changed; reverting the applied one"
  if (cd "$src" && patch -p1 -R --batch --quiet < "$applied"); then
    rm -f "$applied"
  else
    keep="$src.local.$(date +%Y%m%d-%H%M%S)"
    echo "build.sh: could not revert it (edited tree?); moved the tree to $keep and extracting the source again" >&2
    mv "$src" "$keep"
    "$here/fetch.sh"
  fi
fi
if [[ ! -f "$applied" ]]; then
  (cd "$src" && patch -p1 --forward --batch --quiet < "$here/glue/llama.cpp.patch")
  cp "$here/glue/llama.cpp.patch" "$applied"
  echo "build.sh: glue patch applied"
fi
# A copy edited in the tree since build.sh installed it is kept aside, not lost.
install_glue() { # FILE DEST
  local installed="$src/.tqc-installed/$(basename "$1")"
  mkdir -p "$src/.tqc-installed"
  if cmp -s "$1" "$2"; then
    cp "$1" "$installed"
    return 0
  fi
  if [[ -f "$2" ]] && ! cmp -s "$2" "$installed"; then
    local keep="$2.local.$(date +%Y%m%d-%H%M%S)"
    mv "$2" "$keep"
    echo "build.sh: $2 was edited in the tree; kept as $keep" >&2
  fi
  cp "$1" "$2"
  cp "$1" "$installed"
}
install_glue "$here/glue/ggml-tq.h" "$src/ggml/include/ggml-tq.h"
install_glue "$here/glue/ggml-tq.c" "$src/ggml/src/ggml-tq.c"

# 3. The kernel pack (rebuilt when the pair list or tq-aot changes).
pair_list="$(echo $pairs | tr ' ' ',')"
k_list="$(for p in $pairs; do echo "${p%%:*}"; done | awk '!s[$0]++' | paste -sd,)"
v_list="$(for p in $pairs; do echo "${p##*:}"; done | awk '!s[$0]++' | paste -sd,)"
aot_cmd=("$tq_aot" --abi=ggml --centred-k "--pairs=$pair_list"
         "--head-dim=$head_dims" "--gqa=$gqa" "--score-dot=$dot"
         "--value-dot=$dot" "--amx=$amx" -o "$pack")
db_hash=""
if [[ -n "$tuning_db" ]]; then
  aot_cmd+=("--tuning-db=$(realpath "$tuning_db")")
  db_hash="$(sha256sum "$tuning_db" | cut -d' ' -f1)"
fi
if [[ "${TQ_SKIP_PACK:-0}" != 1 ]]; then
  if [[ ! -x "$tq_aot" ]]; then
    echo "build.sh: error: $tq_aot is missing; build tqc first (scripts/build.sh)" >&2
    exit 1
  fi
  stamp="$(printf '%s\n' "${aot_cmd[*]}" "$db_hash"; sha256sum "$tq_aot" | cut -d' ' -f1)"
  if [[ ! -f "$pack/libtq_ggml_kernels.so" || "$(cat "$pack/.tqc-stamp" 2>/dev/null)" != "$stamp" ]]; then
    echo "build.sh: ${aot_cmd[*]}"
    mkdir -p "$pack"
    rm -f "$pack/.tqc-stamp"
    "${aot_cmd[@]}"
    echo "$stamp" > "$pack/.tqc-stamp"
  else
    echo "build.sh: kernel pack up to date at $pack"
  fi
fi

# 4. llama.cpp: CPU backend only, static libraries (the binaries need only
#    libtq_runtime.so, found through their rpath), four tools. The code is
#    position-independent, so that step 7 links the same ggml libraries
#    into a shared library instead of building ggml a second time.
#    ggml is built for this CPU (-march=native) less AMX: its AMX matmul,
#    compiled in wherever __AMX_INT8__ is defined, segfaults on the Q4_K_M
#    model (ggml_backend_amx_mul_mat; llama.cpp issue 20824, open upstream).
#    GGML_NATIVE would add -march=native after any CMAKE_C_FLAGS, so it is
#    off and the flags are given here, with ggml's own ISA options off.
native_flags="-march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
ggml_isa_off=()
for o in SSE42 AVX AVX2 BMI2 FMA F16C AVX_VNNI AVX512 AVX512_VBMI AVX512_VNNI \
         AVX512_BF16 AMX_TILE AMX_INT8 AMX_BF16; do
  ggml_isa_off+=("-DGGML_$o=OFF")
done
cmake -G Ninja -S "$src" -B "$obj" -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF \
  "${ggml_isa_off[@]}" \
  "-DCMAKE_C_FLAGS=$native_flags" \
  "-DCMAKE_CXX_FLAGS=$native_flags" \
  -DGGML_OPENMP=OFF \
  -DGGML_CCACHE=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  "-DTQ_RUNTIME_LIBRARY=$tq_runtime" \
  "-DTQ_RUNTIME_INCLUDE_DIR=$root/runtime/include" \
  "-DTQ_GGML_PACK_DEFAULT=$pack/libtq_ggml_kernels.so" > "$obj.configure.log" ||
  { cat "$obj.configure.log" >&2; exit 1; }
targets=(llama-completion llama-perplexity llama-bench llama-server)
ninja -C "$obj" -j "$jobs" "${targets[@]}"
if nm -C "$obj/ggml/src/libggml-cpu.a" 2>/dev/null | grep -q ' T ggml_backend_amx_mul_mat'; then
  echo "build.sh: error: ggml was built with its AMX matmul (crashes on the Q4_K_M model); the -mno-amx flags did not take" >&2
  exit 1
fi

mkdir -p "$base/bin"
for t in "${targets[@]}"; do
  cp -p "$obj/bin/$t" "$base/bin/$t.tmp"
  mv -f "$base/bin/$t.tmp" "$base/bin/$t"
done
echo "build.sh: binaries in $base/bin"

# 5. ops-check: SET_ROWS / GET_ROWS / CPY of every tqc format in the pack
#    through ggml's CPU backend against the bridge called directly.
cc -O1 -std=c11 -I"$src/ggml/include" "$here/ops-check.c" -o "$base/bin/ops-check" \
  "$obj/ggml/src/libggml.a" "$obj/ggml/src/libggml-cpu.a" "$obj/ggml/src/libggml-base.a" \
  "$tq_runtime" "-Wl,-rpath,$(dirname "$tq_runtime")" -lstdc++ -lm -lpthread
if [[ "${TQ_SKIP_PACK:-0}" != 1 ]]; then
  for f in $(echo "$k_list,$v_list" | tr , '\n' | awk '!s[$0]++'); do
    [[ "$f" == f16 || "$f" == q8_0 ]] && continue
    for d in ${head_dims//,/ }; do
      TQ_GGML_PACK="$pack/libtq_ggml_kernels.so" "$base/bin/ops-check" "$f" "$d" | tail -1 |
        sed "s/^/build.sh: ops-check $f d$d: /"
      [[ "${PIPESTATUS[0]}" == 0 ]] || { echo "build.sh: error: ops-check $f $d failed" >&2; exit 1; }
    done
  done
fi

# 6. The test programs ctest runs (integrations/llama.cpp/test.sh, label
#    llama): fa-check and rows-check against the patched ggml like
#    ops-check, state-check against libllama like the tools; and
#    tq-capture-kv.
for t in fa-check rows-check; do
  cc -O1 -std=c11 -I"$src/ggml/include" "$here/$t.c" -o "$base/bin/$t" \
    "$obj/ggml/src/libggml.a" "$obj/ggml/src/libggml-cpu.a" "$obj/ggml/src/libggml-base.a" \
    "$tq_runtime" "-Wl,-rpath,$(dirname "$tq_runtime")" -lstdc++ -lm -lpthread
done
for t in "$here/state-check.cpp" "$here/tools/tq-capture-kv.cpp"; do
  c++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" "$t" \
    -o "$base/bin/$(basename "$t" .cpp)" "$obj/src/libllama.a" \
    "$obj/ggml/src/libggml.a" "$obj/ggml/src/libggml-cpu.a" "$obj/ggml/src/libggml-base.a" \
    "$tq_runtime" "-Wl,-rpath,$(dirname "$tq_runtime")" -lpthread -ldl -lm
done
echo "build.sh: fa-check, rows-check, state-check and tq-capture-kv in $base/bin"

# 7. tq-bench's ggml baselines (tq-bench --ggml-bench):
#    lib/libtq_bench_ggml.so over step 4's ggml libraries.
JOBS="$jobs" "$here/bench-ggml/build.sh"
