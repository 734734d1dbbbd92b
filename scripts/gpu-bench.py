#!/usr/bin/env python3
"""Decode benchmark on an NVIDIA GPU: tq kernels next to PyTorch baselines.

In one run: a device-to-device copy (the bandwidth probe), PyTorch's fp16
scaled_dot_product_attention decode (and fp8-stored KV upcast per step,
where torch has float8), and tq-gpu-check --bench for the library's decode
kernels; each row prints ms per step, bytes of KV read and GB/s as a share
of the copy bandwidth.
"""
import argparse
import re
import subprocess
import sys
import time


def torch_rows(contexts, batches, kv_heads, q_heads, dim):
    import torch
    dev = torch.device("cuda")
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        b.copy_(a)
    torch.cuda.synchronize()
    copy_gbs = 2 * n * 20 / (time.perf_counter() - t0) / 1e9
    print(f"probe d2d copy: {copy_gbs:.1f} GB/s (read + write)")
    del a, b
    rows = []
    for ctx in contexts:
        for batch in batches:
            kv_bytes = 2 * batch * ctx * kv_heads * dim * 2
            if kv_bytes > 40e9:
                continue
            q = torch.randn(batch, q_heads, 1, dim, device=dev,
                            dtype=torch.float16)
            k = torch.randn(batch, kv_heads, ctx, dim, device=dev,
                            dtype=torch.float16)
            v = torch.randn_like(k)
            f = lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, enable_gqa=True)
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                f()
            torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) / 20 * 1e3
            gbs = kv_bytes / ms / 1e6
            print(f"torch-fp16-sdpa ctx={ctx} batch={batch}: {ms:.4f} ms, "
                  f"{kv_bytes / 1e6:.1f} MB KV, {gbs:.1f} GB/s "
                  f"({100 * gbs / copy_gbs:.0f}% of copy)")
            del q, k, v
            torch.cuda.empty_cache()
    return copy_gbs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", required=True, help="tq-gpu-check binary")
    parser.add_argument("--library", required=True)
    parser.add_argument("--contexts", default="1024,8192,32768,131072")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--filter", default="_d128_g4")
    args = parser.parse_args()
    contexts = [int(x) for x in args.contexts.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    copy_gbs = torch_rows(contexts, batches, kv_heads=8, q_heads=32, dim=128)
    proc = subprocess.run(
        [args.check, "--library", args.library, "--bench", "--filter",
         args.filter, "--contexts", args.contexts, "--batches", args.batches],
        capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        m = re.search(r"([0-9.]+) GB/s$", line)
        if line.startswith("bench") and m:
            share = 100 * float(m.group(1)) / copy_gbs
            print(f"{line} ({share:.0f}% of copy)")
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr)
        sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
