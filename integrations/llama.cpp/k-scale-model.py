#!/usr/bin/env python3
"""Per-channel K scaling folded into a Gemma 3 GGUF's QK-norm weights.

    k-scale-model.py MODEL.gguf CALIBRATION_DIR OUT.gguf [--clamp C]

CALIBRATION_DIR is a tq-capture-kv capture (Q_L<il>.npy, K_L<il>.npy of every
layer) of some text. For each layer, channel pair (i, i + D/2) -- the pairs
NEOX RoPE rotates together -- gets s = (E[q^2] / var(k))^(1/4) over the pair
(geometric mean 1 per layer); attn_k_norm.weight is multiplied by s and
attn_q_norm.weight divided by it. RoPE turns each pair by an angle, so it
commutes with a scale equal on both channels of a pair: every logit q.k is
unchanged, while the K cache now holds s * k. An isotropic quantiser
(a rotation, then a codebook) then puts less of its error where queries
look. The scales are rounded to powers of two, so that scaling is exact
in floating point. --clamp C keeps s within [1/C, C] (after the geometric mean is set
to 1). A benchmark tool for docs/perf/llama.cpp.md; needs numpy and gguf
(PyPI).
"""
import os
import shutil
import sys

import numpy as np
import gguf


def pair_scales(q, k, clamp):
    """q [T, H, D], k [T, 1, D] (post-RoPE) -> s [D], equal within pairs."""
    d = k.shape[-1]
    h = d // 2
    q2 = (q.reshape(-1, d).astype(np.float64) ** 2).mean(0)
    kv = k.reshape(-1, d).astype(np.float64).var(0)
    # RoPE preserves a pair's energy: use the pair sums.
    w = (q2[:h] + q2[h:]) / (kv[:h] + kv[h:] + 1e-12)
    s = (w + 1e-12) ** 0.25
    s /= np.exp(np.mean(np.log(s)))
    if clamp:
        s = np.clip(s, 1.0 / clamp, clamp)
    # Powers of two: multiplying by them is exact in floating point, so the
    # scaled model's f16 K rows and logits round exactly as the original's.
    s = np.exp2(np.round(np.log2(s)))
    return np.concatenate([s, s])


def main():
    args = sys.argv[1:]
    clamp = None
    if len(args) == 5 and args[3] == "--clamp":
        clamp = float(args[4])
        args = args[:3]
    if len(args) != 3 or (clamp is not None and not clamp > 1.0):
        sys.exit("usage: " + __doc__.strip().splitlines()[2].strip())
    model, calib, out = args
    shutil.copyfile(model, out)
    reader = gguf.GGUFReader(out, "r+")
    tensors = {t.name: t for t in reader.tensors}
    layer = 0
    while f"blk.{layer}.attn_k_norm.weight" in tensors:
        q = np.load(os.path.join(calib, f"Q_L{layer}.npy"))
        k = np.load(os.path.join(calib, f"K_L{layer}.npy"))
        if k.shape[1] != 1:
            sys.exit("k-scale-model.py: one KV head per layer is supported")
        s = pair_scales(q, k, clamp)
        kn = tensors[f"blk.{layer}.attn_k_norm.weight"].data
        qn = tensors[f"blk.{layer}.attn_q_norm.weight"].data
        if kn.dtype != np.float32 or qn.dtype != np.float32:
            sys.exit("k-scale-model.py: QK-norm weights must be F32")
        kn[:] = (kn * s).astype(np.float32)
        qn[:] = (qn / s).astype(np.float32)
        print(f"layer {layer}: s in [{s.min():.3f}, {s.max():.3f}]")
        layer += 1
    if layer == 0:
        sys.exit("k-scale-model.py: no attn_k_norm weights (not a QK-norm model)")
    reader.data.flush()
    print(f"k-scale-model.py: wrote {out}")


if __name__ == "__main__":
    main()
