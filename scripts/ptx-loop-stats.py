#!/usr/bin/env python3
"""Static cost of tq attention kernels: instructions in each kernel's
largest PTX loop (for the decode kernels, the token loop one warp runs per
token), with the global loads, shuffles, selects and FMAs among them.

    scripts/ptx-loop-stats.py LIBRARY/tq_kernels.ptx
"""
import re
import sys


def largest_loop(body):
    lines = [l.strip() for l in body.split("\n")]
    labels = {l[:-1]: i for i, l in enumerate(lines) if re.match(r"^\$?\w+:$", l)}
    best = []
    for i, line in enumerate(lines):
        m = re.search(r"bra(?:\.uni)?\s+(\$?\w+);", line)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            seg = [s for s in lines[labels[m.group(1)]:i + 1]
                   if s and not s.endswith(":") and not s.startswith(("//", "."))]
            if len(seg) > len(best):
                best = seg
    return best


def count(seg, pattern):
    return sum(1 for s in seg if re.match(r"(@!?%p\d+\s+)?" + pattern, s))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    print(f"{'kernel':60} {'loop':>5} {'ld.g':>5} {'shfl':>5} {'selp':>5} {'fma':>5}")
    for m in re.finditer(r"\.entry (\w+)\((.*?)\n\}\n", text, re.S):
        seg = largest_loop(m.group(2))
        counts = [len(seg)] + [count(seg, p) for p in
                               (r"ld\.global", "shfl", "selp", "fma")]
        print(f"{m.group(1):60} " + " ".join(f"{n:5}" for n in counts))


if __name__ == "__main__":
    main()
