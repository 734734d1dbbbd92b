"""Writes rows of little-endian float32 for tq-quant tests.

usage: write_f32.py --rows R --dim D [--value V] [--bad-at I --bad nan|inf|-inf]
       [--truncate N] OUT
"""
import argparse
import math
import struct

p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, required=True)
p.add_argument("--dim", type=int, required=True)
p.add_argument("--value", type=float, default=None,
               help="constant value (default: a deterministic ramp)")
p.add_argument("--bad-at", type=int, default=-1)
p.add_argument("--bad", default="nan")
p.add_argument("--truncate", type=int, default=0, help="drop N trailing bytes")
p.add_argument("out")
a = p.parse_args()

n = a.rows * a.dim
vals = [a.value if a.value is not None else math.sin(0.37 * i) * 3.0
        for i in range(n)]
if a.bad_at >= 0:
    vals[a.bad_at] = float(a.bad)
data = struct.pack("<%df" % n, *vals)
if a.truncate:
    data = data[:-a.truncate]
with open(a.out, "wb") as f:
    f.write(data)
