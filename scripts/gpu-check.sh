#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU (CUDA 13, PyTorch):
#
#   scripts/gpu-check.sh LIBRARY_DIR [OUT_DIR]
#
# LIBRARY_DIR is a PTX kernel library compiled beforehand on the build
# machine (scripts/gpu-library.sh writes one). This script builds the
# runtime and tq-gpu-check from the working tree (gpu/CMakeLists.txt: no
# LLVM needed), then
#   1. runs every attention kernel of the library against lib/Quant's
#      reference (tq-gpu-check), all format pairs and head dims it holds;
#   2. runs compute-sanitizer memcheck and racecheck on a subset;
#   3. benchmarks decode at 1K..128K context, batch 1..64, next to
#      PyTorch's fp16 scaled_dot_product_attention and a device-to-device
#      copy measured in the same run (scripts/gpu-bench.py).
# Results go to OUT_DIR (default gpu-results/): check.txt, sanitizer.txt,
# bench.txt, with the date and device name at the top of each.
set -euo pipefail
lib=${1:?usage: scripts/gpu-check.sh LIBRARY_DIR [OUT_DIR]}
out=${2:-gpu-results}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo "unknown GPU")
stamp="$(date -u +%Y-%m-%dT%H:%MZ) on ${device}"

echo "== building runtime + tq-gpu-check"
cmake -S "$root/gpu" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build-gpu" -j"$(nproc)" >/dev/null
check="$root/build-gpu/bin/tq-gpu-check"

echo "== correctness ($stamp)"
{ echo "# $stamp"; "$check" --library "$lib"; } | tee "$out/check.txt"

echo "== compute-sanitizer"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
  echo "# $stamp"
  for tool in memcheck racecheck; do
    echo "## $tool"
    "$sanitizer" --tool "$tool" --error-exitcode 3 \
      "$check" --library "$lib" --filter turbo3_0_turbo3_0_d128
  done
} 2>&1 | tee "$out/sanitizer.txt"

echo "== benchmark"
{
  echo "# $stamp"
  python3 "$root/scripts/gpu-bench.py" --check "$check" --library "$lib"
} 2>&1 | tee "$out/bench.txt"
