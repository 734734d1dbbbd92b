#!/usr/bin/env python3
"""Per-kernel GPU resources of a tq-aot GPU library, with a spill budget.

  gpu-resources.py ptx  --ptxas PTXAS --arch sm_90a  tq_kernels.ptx
  gpu-resources.py amdgcn tq_kernels.s

Prints one line per kernel (registers, shared / LDS bytes, spill bytes)
and exits 1 when a kernel spills more than --max-spill-bytes (default 0)
to local / scratch memory or uses more registers than --max-registers. For PTX it runs `ptxas -v`, so the file is
also proven to assemble for the chip.
"""
import argparse
import re
import subprocess
import sys


def ptx_kernels(args):
    proc = subprocess.run(
        [args.ptxas, "-v", f"-arch={args.arch}", args.file, "-o", "/dev/null"],
        capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(f"gpu-resources: ptxas failed on {args.file} ({args.arch})")
    kernels, current = [], None
    for line in proc.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = {"name": m.group(1), "registers": 0, "shared": 0,
                       "spill": 0}
            kernels.append(current)
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            current["spill"] = int(m.group(1))  # bytes stored to local memory
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
        m = re.search(r"(\d+) bytes smem", line)
        if m:
            current["shared"] = int(m.group(1))
    return kernels


def amdgcn_kernels(args):
    text = open(args.file).read()
    meta = text[text.find("amdhsa.kernels:"):]
    kernels = []
    # Each kernel is a "  - " item of amdhsa.kernels; its keys are indented
    # four spaces (argument entries deeper).
    for item in re.split(r"\n  - ", meta)[1:]:
        fields = dict(re.findall(r"\n    \.(\w+):\s+(\S+)", "\n" + item))
        if "name" not in fields:
            continue
        kernels.append({
            "name": fields["name"],
            "registers": int(fields.get("vgpr_count", 0)),
            "shared": int(fields.get("group_segment_fixed_size", 0)),
            "spill": int(fields.get("vgpr_spill_count", 0)) +
                     int(fields.get("sgpr_spill_count", 0)) +
                     int(fields.get("private_segment_fixed_size", 0)),
        })
    return kernels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["ptx", "amdgcn"])
    parser.add_argument("file")
    parser.add_argument("--ptxas", default="ptxas")
    parser.add_argument("--arch", default="sm_80")
    parser.add_argument("--max-registers", type=int,
                        help="register budget (default: the architectural "
                        "maximum, 255 on NVIDIA, 512 VGPRs on AMD)")
    parser.add_argument("--max-spill-bytes", type=int, default=0,
                        help="spill budget per kernel in bytes (default 0)")
    args = parser.parse_args()
    if args.max_registers is None:
        args.max_registers = 255 if args.kind == "ptx" else 512
    kernels = ptx_kernels(args) if args.kind == "ptx" else amdgcn_kernels(args)
    if not kernels:
        sys.exit(f"gpu-resources: no kernels found in {args.file}")
    failed = 0
    print(f"{'kernel':60} {'regs':>5} {'shared':>7} {'spill':>6}")
    for k in kernels:
        bad = (k["spill"] > args.max_spill_bytes or
               k["registers"] > args.max_registers)
        failed += bad
        print(f"{k['name']:60} {k['registers']:5} {k['shared']:7} "
              f"{k['spill']:6}{'  OVER BUDGET' if bad else ''}")
    print(f"{len(kernels)} kernels, {failed} over budget "
          f"(> {args.max_spill_bytes} spill bytes or > {args.max_registers} "
          f"registers)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
