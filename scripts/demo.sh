#!/usr/bin/env bash
# The README's first command: set up, build, and run the main job on the
# built-in example:
#   1. encode the built-in K/V sample with every format (quality table);
#   2. compile a turbo3_0 decode kernel and an f16 baseline with tq-aot,
#      append the sample through the runtime and decode, printing accuracy
#      (vs lib/Quant's reference and vs exact attention) and speed, each
#      call timed with the caches flushed first (as a model's layer finds
#      its KV in memory).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/bootstrap.sh"
"$root/scripts/build.sh"
build="${TQC_BUILD_DIR:-$root/build}"
export PATH="/usr/lib/llvm-22/bin:$PATH"
bin="$build/bin"

"$bin/tq-quant" formats
echo
"$bin/tq-quant" demo
echo

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# 4096 tokens x 2 KV heads x 128 of the sample for K and V; one query token
# with 8 heads (GQA group 4).
"$bin/tq-quant" sample --rows 8192 --dim 128 --seed 1 "$work/k.f32"
"$bin/tq-quant" sample --rows 8192 --dim 128 --seed 2 "$work/v.f32"
"$bin/tq-quant" sample --rows 8 --dim 128 --seed 3 "$work/q.f32"

for fmt in turbo3_0 f16; do
  echo "== decode over a $fmt cache: 4096 tokens, 8 query heads, 2 KV heads, d=128"
  "$bin/tq-aot" --quiet --kind=decode,append --k-format=$fmt --head-dim=128 \
    --gqa=4 -o "$work/lib-$fmt"
  "$bin/tq-run" attention --k-format $fmt --v-format $fmt --head-dim 128 \
    --q-heads 8 --kv-heads 2 --library "$work/lib-$fmt" \
    --q "$work/q.f32" --k "$work/k.f32" --v "$work/v.f32" \
    --out "$work/o-$fmt.f32" --check --repeat 10 --flush-mib 64
done
