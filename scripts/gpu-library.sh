#!/usr/bin/env bash
# Compiles the PTX kernel library the GPU check runs (on the build
# machine, with tq-aot): every GPU format as K with itself and with q8_0 /
# f16 partners, head dims 64..256, GQA groups 1/4/8, decode and prefill,
# plus masked prefill variants. Usage: scripts/gpu-library.sh OUT_DIR [CHIP]
set -euo pipefail
out=${1:?usage: scripts/gpu-library.sh OUT_DIR [CHIP]}
chip=${2:-sm_90a}
root=$(cd "$(dirname "$0")/.." && pwd)
aot="$root/build/bin/tq-aot"
formats=tq3_0,tq3_0_legacy,turbo2_0,turbo3_0,turbo4_0,polar1,polar2,polar3,polar4,haar4,q8_0,f16
"$aot" --quiet --target=nvptx --chip="$chip" --kind=append,decode,prefill \
  --k-format="$formats" --head-dim=64,80,96,112,128,160,192,256 --gqa=1,4,8 \
  -o "$out/plain"
"$aot" --quiet --target=nvptx --chip="$chip" --kind=append,decode,prefill \
  --k-format=turbo3_0,polar4,tq3_0 --v-format=q8_0,f16,turbo4_0 \
  --head-dim=128 --gqa=4,7 -o "$out/mixed"
"$aot" --quiet --target=nvptx --chip="$chip" --kind=prefill \
  --k-format=turbo3_0,haar4 --head-dim=128 --gqa=4 --causal --window=512 \
  --softcap=30 -o "$out/masked"
echo "wrote $out/{plain,mixed,masked}"
