#!/usr/bin/env bash
# Compiles the PTX kernel libraries the GPU check runs (on the build
# machine, with tq-aot), one directory each under OUT_DIR:
#   plain   every format but tqprod as K with itself: head dims 64..256,
#           GQA groups 1/4/8, append, decode and prefill;
#   qjl     tqprod2/3/4 the same way at groups 1/4 (a QJL K at d = 256
#           with a group of 8 exceeds the 48 KiB of static shared memory);
#   mixed   asymmetric pairs (q8_0 / f16 / turbo4_0 / tqprod3 V);
#   masked  causal, windowed, soft-capped prefill.
# Usage: scripts/gpu-library.sh OUT_DIR [CHIP]
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
  --k-format=tqprod2,tqprod3,tqprod4 \
  --head-dim=64,80,96,112,128,160,192,256 --gqa=1,4 -o "$out/qjl"
"$aot" --quiet --target=nvptx --chip="$chip" --kind=append,decode,prefill \
  --k-format=turbo3_0,polar4,tq3_0,tqprod3 \
  --v-format=q8_0,f16,turbo4_0,tqprod3 \
  --head-dim=128 --gqa=4,7 -o "$out/mixed"
"$aot" --quiet --target=nvptx --chip="$chip" --kind=prefill \
  --k-format=turbo3_0,haar4 --head-dim=128 --gqa=4 --causal --window=512 \
  --softcap=30 -o "$out/masked"
echo "wrote $out/{plain,qjl,mixed,masked}"
