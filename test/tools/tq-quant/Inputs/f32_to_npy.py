"""Wraps a raw little-endian float32 file in an .npy header (no NumPy).

usage: f32_to_npy.py --shape A,B,... [--descr '<f4'] [--fortran] IN OUT
The shape is written as given, so a test can make one that disagrees with
the data or with the tool's options.
"""
import argparse

p = argparse.ArgumentParser()
p.add_argument("--shape", required=True)
p.add_argument("--descr", default="<f4")
p.add_argument("--fortran", action="store_true")
p.add_argument("inp")
p.add_argument("out")
a = p.parse_args()

dims = [d for d in a.shape.split(",") if d]
shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
    a.descr, "True" if a.fortran else "False", shape)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(a.inp, "rb") as f:
    data = f.read()
with open(a.out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little"))
    f.write(header.encode("latin1"))
    f.write(data)
