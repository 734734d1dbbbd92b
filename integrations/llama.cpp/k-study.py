#!/usr/bin/env python3
"""Why K suffers: per-layer statistics of a model's real K rows and the
attention error each format gives them, with and without centring.

    k-study.py CAPTURE_DIR [--formats turbo3_0,turbo4_0] [--tokens 768]
               [--scale 0.0625] [--centres FILE.npy] [--calibration DIR]

CAPTURE_DIR holds Q_L<il>.npy, K_L<il>.npy, V_L<il>.npy from tq-capture-kv
(float32 [tokens, heads, head_dim]). For each layer it prints |k|, the
share of K's energy in its mean direction, and, per format, the mean KL
divergence of the causal attention distributions (exact K vs K encoded and
decoded by tq-quant) plain and centred (K minus a per-head centre: the
layer's own mean, or --centres from another text). Attention uses V as is,
so the numbers isolate K's error. Needs numpy; tq-quant from the build.

--calibration DIR (a capture of other text) takes each layer's centre from
DIR and adds a column per format: centred and scaled per channel before
encoding, s_i = (E[q_i^2] / var(k_i))^(1/4) from DIR (geometric mean 1),
decoded rows divided by s again. Queries see q.(k - c) unchanged when q is
divided by s, so an engine could apply it exactly like a centre; scaled
this way an isotropic quantiser's error lands where queries look least.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TQ_QUANT = os.path.join(os.environ.get("TQC_BUILD_DIR", os.path.join(ROOT, "build")),
                        "bin", "tq-quant")


def roundtrip(rows, fmt, work):
    """rows [n, d] float32 -> encoded and decoded by tq-quant."""
    d = rows.shape[-1]
    src, enc, dec = (os.path.join(work, n) for n in ("in.f32", "out.bin", "out.f32"))
    rows.astype(np.float32).tofile(src)
    for cmd in (["encode", src, enc], ["decode", enc, dec]):
        subprocess.run([TQ_QUANT, cmd[0], "--format", fmt, "--dim", str(d)] + cmd[1:],
                       check=True, capture_output=True)
    return np.fromfile(dec, dtype=np.float32).reshape(rows.shape)


def attention_kl(q, k, k_hat, scale):
    """Mean KL(p || p_hat) over causal rows and query heads.
    q [T, H, D], k and k_hat [T, D] (one KV head)."""
    t = q.shape[0]
    hidden = np.triu(np.ones((t, t), bool), 1)
    total = 0.0
    for h in range(q.shape[1]):
        out = []
        for keys in (k, k_hat):
            s = (q[:, h, :] @ keys.T) * scale
            s[hidden] = -np.inf
            s -= s.max(-1, keepdims=True)
            e = np.exp(s)
            out.append(e / e.sum(-1, keepdims=True))
        p, p_hat = out
        total += np.mean(np.sum(p * (np.log(p + 1e-30) - np.log(p_hat + 1e-30)), -1))
    return total / q.shape[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture")
    ap.add_argument("--formats", default="turbo3_0,turbo4_0")
    ap.add_argument("--tokens", type=int, default=768)
    ap.add_argument("--scale", type=float, default=1.0 / 16,
                    help="logit scale (Gemma 3: query_pre_attn_scalar^-1/2 = 1/16)")
    ap.add_argument("--centres", help="centres .npy [layers, kv_heads, dim]")
    ap.add_argument("--calibration", help="capture dir for centres and channel scales")
    a = ap.parse_args()
    if not os.path.exists(TQ_QUANT):
        sys.exit(f"k-study.py: {TQ_QUANT} is missing (build tqc first)")
    centres = np.load(a.centres) if a.centres else None
    formats = a.formats.split(",")
    per = 3 if a.calibration else 2
    print("| layer | mean |k| | mean-direction energy | "
          + " | ".join(f"{f} KL plain | {f} KL centred"
                       + (f" | {f} KL centred+scaled" if a.calibration else "")
                       for f in formats) + " |")
    print("|---" * (3 + per * len(formats)) + "|")
    with tempfile.TemporaryDirectory() as work:
        layer = 0
        while os.path.exists(os.path.join(a.capture, f"K_L{layer}.npy")):
            k = np.load(os.path.join(a.capture, f"K_L{layer}.npy"))[: a.tokens]
            q = np.load(os.path.join(a.capture, f"Q_L{layer}.npy"))[: a.tokens]
            if k.shape[1] != 1:
                sys.exit("k-study.py: one KV head per layer is supported")
            k = k[:, 0, :]
            mean = k.mean(0)
            centre = centres[layer, 0] if centres is not None else mean
            scales = None
            if a.calibration:
                kc = np.load(os.path.join(a.calibration, f"K_L{layer}.npy"))[:, 0, :]
                qc = np.load(os.path.join(a.calibration, f"Q_L{layer}.npy"))
                centre = kc.mean(0)
                w = (qc.reshape(-1, qc.shape[-1]) ** 2).mean(0) / (kc.var(0) + 1e-12)
                scales = (w + 1e-12) ** 0.25
                scales /= np.exp(np.mean(np.log(scales)))
            energy = float(mean @ mean / np.mean(np.sum(k * k, 1)))
            row = [str(layer), f"{np.linalg.norm(k, axis=1).mean():.1f}", f"{energy:.2f}"]
            for f in formats:
                plain = attention_kl(q, k, roundtrip(k, f, work), a.scale)
                centred = attention_kl(q, k, roundtrip(k - centre, f, work) + centre, a.scale)
                row += [f"{plain:.4f}", f"{centred:.4f}"]
                if scales is not None:
                    scaled = roundtrip((k - centre) * scales, f, work) / scales + centre
                    row.append(f"{attention_kl(q, k, scaled, a.scale):.4f}")
            print("| " + " | ".join(row) + " |", flush=True)
            layer += 1
        if layer == 0:
            sys.exit(f"k-study.py: no K_L0.npy in {a.capture}")


if __name__ == "__main__":
    main()
