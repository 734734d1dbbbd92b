#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU (CUDA 13, PyTorch):
#
#   scripts/gpu-check.sh LIBRARY_DIR [OUT_DIR]
#
# LIBRARY_DIR is a PTX kernel library compiled beforehand on the build
# machine, or a directory of them (scripts/gpu-library.sh writes plain/,
# qjl/, mixed/ and masked/). This script builds the runtime and
# tq-gpu-check from the working tree (gpu/CMakeLists.txt: no LLVM
# needed), then
#   1. runs every attention kernel of every library against lib/Quant's
#      reference and every append kernel against lib/Quant's encoder
#      (tq-gpu-check), all format pairs and head dims they hold;
#   2. runs compute-sanitizer memcheck and racecheck on a subset of the
#      first library;
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
# One library, or the libraries one level below LIBRARY_DIR.
libs=()
if [ -f "$lib/kernels.json" ]; then
  libs=("$lib")
else
  for d in "$lib"/*/; do
    [ -f "$d/kernels.json" ] && libs+=("${d%/}")
  done
fi
if [ ${#libs[@]} -eq 0 ]; then
  echo "gpu-check: no kernels.json in $lib or its subdirectories" >&2
  exit 2
fi
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo "unknown GPU")
stamp="$(date -u +%Y-%m-%dT%H:%MZ) on ${device}"

echo "== building runtime + tq-gpu-check"
cmake -S "$root/gpu" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build-gpu" -j"$(nproc)" >/dev/null
check="$root/build-gpu/bin/tq-gpu-check"

echo "== correctness ($stamp)"
status=0
{
  echo "# $stamp"
  for l in "${libs[@]}"; do
    echo "## $l"
    "$check" --library "$l" || status=1
  done
  exit $status
} | tee "$out/check.txt" || status=1

echo "== compute-sanitizer"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
  echo "# $stamp"
  for tool in memcheck racecheck; do
    echo "## $tool"
    "$sanitizer" --tool "$tool" --error-exitcode 3 \
      "$check" --library "${libs[0]}" --filter turbo3_0_turbo3_0_d128
  done
} 2>&1 | tee "$out/sanitizer.txt"

echo "== benchmark"
{
  echo "# $stamp"
  python3 "$root/scripts/gpu-bench.py" --check "$check" --library "${libs[0]}"
} 2>&1 | tee "$out/bench.txt"
# Non-zero when any library's correctness check failed.
exit $status
