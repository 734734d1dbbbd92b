#!/usr/bin/env python3
"""Static cost of a kernel's token loop in SASS (the machine code ptxas
makes of the PTX): instructions of the kernel's largest loop that loads
from global memory (the divergent-shuffle fallback ptxas emits is left
out), and the most frequent opcodes.

    scripts/sass-loop-stats.py [--ptxas P] [--cuobjdump C] \
        LIBRARY/tq_kernels.ptx KERNEL [CHIP]

Needs ptxas and cuobjdump (found on PATH unless given). The CUDA
toolkit's runfile has both; where the toolkit lacks cuobjdump,
`pip download nvidia-cuda-cuobjdump` holds it as a wheel (a zip). CHIP
defaults to sm_90a.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile


def sass(ptx, kernel, chip, ptxas, cuobjdump):
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        subprocess.run([ptxas, f"-arch={chip}", "-O3", ptx, "-o", cubin],
                       check=True)
        out = subprocess.run([cuobjdump, "-sass", "-fun", kernel, cubin],
                             check=True, capture_output=True, text=True)
    code = []
    for line in out.stdout.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            code.append((int(m.group(1), 16), m.group(2).strip()))
    return code


def token_loop(code):
    """The largest backward branch's body that loads global memory and has
    no WARPSYNC (ptxas's fallback for divergent shuffles)."""
    best = None
    for addr, text in code:
        m = re.search(r"BRA\s+(?:\w+,\s*)?0x([0-9a-f]+)", text)
        if not m or "DIV" in text:
            continue
        target = int(m.group(1), 16)
        body = [t for a, t in code if target <= a <= addr]
        if (target < addr and any("LDG" in t for t in body)
                and not any("WARPSYNC" in t for t in body)
                and (best is None or len(body) > len(best))):
            best = body
    return best or []


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--ptxas", default="ptxas")
    parser.add_argument("--cuobjdump", default="cuobjdump")
    parser.add_argument("ptx")
    parser.add_argument("kernel")
    parser.add_argument("chip", nargs="?", default="sm_90a")
    args = parser.parse_args()
    body = token_loop(sass(args.ptx, args.kernel, args.chip, args.ptxas,
                           args.cuobjdump))
    if not body:
        sys.exit(f"{args.kernel}: no token loop found")
    ops = collections.Counter(
        re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0]
        for t in body)
    print(f"{args.kernel} ({args.chip}): {len(body)} SASS instructions per "
          "loop step")
    print(" ".join(f"{op}:{n}" for op, n in ops.most_common(24)))


if __name__ == "__main__":
    main()
