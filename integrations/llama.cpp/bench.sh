#!/usr/bin/env bash
# Speed of KV cache types in one llama-bench run: prompt processing (pp512)
# and generation (tg128) at context depths, 2 threads, flash attention on.
# A benchmark, not a test: run it on a quiet machine; prints llama-bench's
# markdown table.
#
#   bench.sh [TYPE ...]     (default: f16 q8_0 q4_0 turbo3_0 turbo4_0 tq3_0 polar4)
#
# Environment: DEPTHS (default 0,4096,16384,32768), REPS (default 2),
# THREADS (2), MODEL.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
bench="$build/llama.cpp/bin/llama-bench"
model="${MODEL:-$build/models/gemma3-270m-q4_k_m.gguf}"
types=("$@")
[[ ${#types[@]} -gt 0 ]] || types=(f16 q8_0 q4_0 turbo3_0 turbo4_0 tq3_0 polar4)
for f in "$bench" "$model"; do
  [[ -e "$f" ]] || { echo "bench.sh: error: $f is missing (build.sh, fetch-model.sh)" >&2; exit 1; }
done
# llama-bench runs the cross product of its lists, so each type is one
# invocation (K and V of that type), one after the other; the first prints
# the table header.
first=1
for t in "${types[@]}"; do
  "$bench" -m "$model" -t "${THREADS:-2}" -fa on -p 512 -n 128 \
    -d "${DEPTHS:-0,4096,16384,32768}" -r "${REPS:-2}" -ctk "$t" -ctv "$t" -o md |
    if [[ $first == 1 ]]; then cat; else tail -n +3; fi
  first=0
done
