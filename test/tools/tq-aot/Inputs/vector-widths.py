"""Reads llvm-objdump -d output on stdin and fails unless at least
--min-zmm-share of the instructions naming a ymm or zmm register name a
zmm one (the kernels' 512-bit vectors were not split into ymm halves)."""
import argparse
import re
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--min-zmm-share", type=float, required=True)
args = parser.parse_args()
zmm = ymm = 0
for line in sys.stdin:
    if "%zmm" in line:
        zmm += 1
    elif "%ymm" in line:
        ymm += 1
share = zmm / max(1, zmm + ymm)
print(f"zmm {zmm} ymm {ymm} share {share:.2f}")
if zmm == 0 or share < args.min_zmm_share:
    sys.exit(f"error: zmm share {share:.2f} below {args.min_zmm_share}")
