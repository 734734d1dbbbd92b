"""The quality harness: what each KV cache format does to rows, beside the
TurboQuant paper's bounds.

Per format and per source of rows (synthetic: ``gaussian``,
``outliers``, ``sphere``; or float32 ``.npy`` files of real K/V rows, e.g.
from ``tq-capture-kv``), rows are encoded and decoded with lib/Quant's
reference codecs (:func:`tqc.encode` / :func:`tqc.decode`) and measured
with numpy:

- ``mse``: mean over rows of ``||x - x_hat||^2 / ||x||^2``;
- ``cosine``: mean over rows of ``cos(x, x_hat)``;
- ``ip_bias``: the mean of ``<q, x_hat> - <q, x>`` over rows and random
  N(0, I) queries, over the RMS of ``<q, x>`` (with ``ip_bias_stderr``,
  its standard error in the same unit);
- ``ip_slope``: the multiplicative bias, ``sum(err * <q,x>) /
  sum(<q,x>^2) `` (an MSE quantiser's estimates shrink or stretch; an
  unbiased one gives 0 up to noise);
- ``ip_rel_error``: RMS of ``<q, x_hat> - <q, x>`` over the RMS of
  ``<q, x>``;
- ``ip_distortion``: ``d * E[(<q, x_hat> - <q, x>)^2 / (|q|^2 |x|^2)]``,
  the paper's ``D_prod`` at unit norms times the head dim;
- ``attn_rel_error``: ``|o - o_hat| / |o|`` (aggregated over queries) of
  softmax attention over contexts of ``context`` keys, K and V both
  quantised, queries scaled so that the exact logits have standard
  deviation ``logit_std``.

The paper's bounds (Zandieh et al., "TurboQuant: Online Vector
Quantization with Near-optimal Distortion Rate", arXiv:2504.19874), for
``b`` bits per coordinate and a uniformly random rotation, at unit norm:

- Theorem 1 (TurboQuant_mse): ``D_mse <= (sqrt(3) pi / 2) * 4^-b``;
- Theorem 2 (TurboQuant_prod): unbiased inner products and
  ``D_prod <= (sqrt(3) pi^2 |y|^2 / d) * 4^-b``;
- Theorem 3 (any quantiser, lower bounds): ``D_mse >= 4^-b``,
  ``D_prod >= (|y|^2 / d) * 4^-b``.

:func:`paper_bounds` says which applies to which format family: the MSE
bound to ``polarB`` (b = B), ``turboB_0`` (b = the index bits) and
``haar4`` (b = 4); the inner-product bound to ``tqprodB`` (b = B, the
(B-1)-bit MSE stage plus the 1-bit QJL residual); none to ``tq3_0``,
``q8_0``, ``f16`` (not TurboQuant quantisers). The theorems assume a
uniformly random (Haar) rotation; polar, tqprod and turbo rotate with a
seeded randomised Hadamard, so on inputs that are not rotation-invariant
(``outliers``, real rows) the bound is a reference, not a guarantee.

The perplexity, KL-divergence and needle-in-a-haystack drivers run the
patched llama.cpp (docs/llama.cpp.md): :func:`perplexity`,
:func:`kl_divergence`, :func:`needle`. ``python -m tqc.quality`` runs all
of this from the command line (docs/quality.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from . import decode, encode, format_info, formats

__all__ = [
    "SOURCES",
    "METRICS",
    "paper_bounds",
    "synthetic_rows",
    "load_rows",
    "measure",
    "evaluate",
    "table",
    "plot",
    "perplexity",
    "kl_divergence",
    "needle",
    "main",
]

#: The synthetic row sources.
SOURCES = ("gaussian", "outliers", "sphere")

#: The metrics :func:`measure` reports, with a short description.
METRICS = {
    "mse": "||x - x_hat||^2 / ||x||^2, mean over rows",
    "cosine": "cos(x, x_hat), mean over rows",
    "ip_bias": "mean(<q,x_hat> - <q,x>) / rms(<q,x>)",
    "ip_slope": "sum(err <q,x>) / sum(<q,x>^2): multiplicative IP bias",
    "ip_rel_error": "rms(<q,x_hat> - <q,x>) / rms(<q,x>)",
    "ip_distortion": "d E[(<q,x_hat> - <q,x>)^2 / (|q|^2 |x|^2)]",
    "attn_rel_error": "|o - o_hat| / |o|, softmax attention, K and V quantised",
}

_SQRT3 = math.sqrt(3.0)
PathLike = Union[str, os.PathLike]


# --------------------------------------------------------------------------
# The paper's bounds
# --------------------------------------------------------------------------


def paper_bounds(fmt: str, head_dim: int = 128) -> dict:
    """The TurboQuant paper's bounds that apply to format ``fmt``.

    Returns ``family`` (``"TurboQuant_mse"``, ``"TurboQuant_prod"`` or
    ``None``), ``bits`` (the b of the theorems: index bits per coordinate,
    or None), ``mse_bound`` / ``mse_lower`` (Theorems 1 and 3, unit norm;
    compare with the ``mse`` metric), ``ip_bound`` / ``ip_lower`` (Theorems
    2 and 3 as ``d * D_prod`` at unit norms; compare with
    ``ip_distortion``), ``unbiased`` (Theorem 2 says inner products are
    unbiased) and ``note`` (why a bound does or does not apply)."""
    out: dict[str, Any] = {"family": None, "bits": None, "mse_bound": None,
                           "mse_lower": None, "ip_bound": None,
                           "ip_lower": None, "unbiased": False, "note": ""}
    m = re.fullmatch(r"polar([1-8])", fmt)
    if m:
        b = int(m.group(1))
        out.update(family="TurboQuant_mse", bits=b,
                   note=f"Thm 1 at b={b}: Lloyd-Max sphere codebook after a "
                        "seeded randomised Hadamard (the theorem assumes a "
                        "Haar rotation), fp16 norm")
    m = re.fullmatch(r"turbo([2-4])_0", fmt)
    if m:
        b = int(m.group(1))
        out.update(family="TurboQuant_mse", bits=b,
                   note=f"Thm 1 at b={b}: per-128 group randomised Hadamard, "
                        "the forks' literal codebooks, corrected fp16 norm")
    if fmt == "haar4":
        out.update(family="TurboQuant_mse", bits=4,
                   note="Thm 1 at b=4: dense Haar rotation (the theorem's "
                        "setting), renormalised reconstruction")
    m = re.fullmatch(r"tqprod([2-8])", fmt)
    if m:
        b = int(m.group(1))
        out.update(family="TurboQuant_prod", bits=b, unbiased=True,
                   note=f"Thm 2 at b={b}: (b-1)-bit polar + 1-bit QJL "
                        "residual; unbiased inner products (no MSE bound)")
    b = out["bits"]
    if out["family"] == "TurboQuant_mse":
        out["mse_bound"] = _SQRT3 * math.pi / 2 * 4.0 ** -b
        out["mse_lower"] = 4.0 ** -b
    elif out["family"] == "TurboQuant_prod":
        out["ip_bound"] = _SQRT3 * math.pi ** 2 * 4.0 ** -b
        out["ip_lower"] = 4.0 ** -b
    else:
        out["note"] = ("no paper bound: not a TurboQuant quantiser"
                       + {"tq3_0": " (per-32 block WHT, amax scale)",
                          "tq3_0_legacy": " (per-32 block WHT, amax scale)",
                          "q8_0": " (per-32 block int8, amax scale)",
                          "f16": " (IEEE half)"}.get(fmt, ""))
    return out


# --------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------


def synthetic_rows(source: str, rows: int, head_dim: int,
                   seed: int = 0) -> np.ndarray:
    """``rows`` float32 rows of ``head_dim`` values: ``gaussian`` (N(0, 1)
    values), ``outliers`` (N(0, 1) with four large channels at 3, 37, 77
    and 101 modulo the dim, scaled by 12, 25, -18 and 40: the shape of
    real key caches, as lib/Quant's built-in sample) or ``sphere`` (uniform
    on the unit sphere)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, head_dim))
    if source == "outliers":
        for ch, s in ((3, 12.0), (37, 25.0), (77, -18.0), (101, 40.0)):
            x[:, ch % head_dim] *= s
    elif source == "sphere":
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    elif source != "gaussian":
        raise ValueError(f"unknown source {source!r}; expected one of "
                         f"{', '.join(SOURCES)} or a .npy file")
    return np.ascontiguousarray(x, dtype=np.float32)


def load_rows(path: PathLike, max_rows: int = 0,
              seed: int = 0) -> np.ndarray:
    """Rows of a ``.npy`` file, ``[..., head_dim]`` (e.g. ``[tokens,
    kv_heads, head_dim]`` from ``tq-capture-kv``) as float32 ``[rows,
    head_dim]``; with ``max_rows``, that many rows drawn without
    replacement. Raises ValueError for a file without rows or with
    non-finite values."""
    a = np.load(path, allow_pickle=False)
    if a.ndim < 2 or a.shape[-1] == 0 or a.size == 0:
        raise ValueError(f"{path}: expected rows [..., head_dim], got shape "
                         f"{a.shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{path}: expected floating-point rows, got {a.dtype}")
    rows = np.ascontiguousarray(a.reshape(-1, a.shape[-1]), dtype=np.float32)
    if not np.isfinite(rows).all():
        bad = int(np.argwhere(~np.isfinite(rows))[0][0])
        raise ValueError(f"{path}: row {bad} holds a non-finite value")
    if max_rows and rows.shape[0] > max_rows:
        idx = np.random.default_rng(seed).choice(rows.shape[0], max_rows,
                                                 replace=False)
        rows = rows[np.sort(idx)]
    return rows


# --------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------


def _roundtrip(rows: np.ndarray, fmt: str) -> np.ndarray:
    d = rows.shape[-1]
    return decode(encode(np.ascontiguousarray(rows, np.float32), fmt), fmt,
                  d).astype(np.float64)


def _softmax_out(logits: np.ndarray, v: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v


def measure(rows: np.ndarray, fmt: str, *, queries: int = 64,
            context: int = 256, logit_std: float = 2.0,
            seed: int = 1) -> dict:
    """The metrics of :data:`METRICS` for format ``fmt`` on float32
    ``rows`` ``[n, head_dim]`` (see the module's docstring), with
    ``queries`` N(0, I) queries and attention over contexts of ``context``
    keys (the rows split into contexts; values are the same contexts'
    rows in reverse order, quantised too), plus ``rows``,
    ``bits_per_value`` and ``row_bytes``. Rows of zeros are left out of
    the per-row ratios."""
    x = np.asarray(rows, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"rows: expected [n, head_dim] with n > 0, got "
                         f"{x.shape}")
    n, d = x.shape
    info = format_info(fmt, d)
    xh = _roundtrip(x, fmt)
    x64 = x.astype(np.float64)
    err = xh - x64
    norm2 = np.einsum("ij,ij->i", x64, x64)
    keep = norm2 > 0
    if not keep.any():
        raise ValueError("rows: every row is zero")
    mse = float(np.mean(np.einsum("ij,ij->i", err, err)[keep] / norm2[keep]))
    xn = np.sqrt(norm2[keep])
    hn = np.linalg.norm(xh[keep], axis=1)
    cos = np.einsum("ij,ij->i", x64[keep], xh[keep]) / np.maximum(xn * hn,
                                                                 1e-300)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((queries, d))
    ip = x64 @ q.T                       # [n, queries]
    e = err @ q.T
    rms_ip = math.sqrt(float(np.mean(ip ** 2))) or 1.0
    ip_bias = float(np.mean(e)) / rms_ip
    ip_bias_se = float(np.std(e) / math.sqrt(e.size)) / rms_ip
    ip_slope = float(np.sum(e * ip) / max(float(np.sum(ip ** 2)), 1e-300))
    qn2 = np.einsum("ij,ij->i", q, q)
    dist = d * np.mean((e[keep] ** 2) / (norm2[keep][:, None] * qn2[None, :]))

    # Attention over contexts of `context` keys.
    c = max(1, min(context, n))
    num_ctx = n // c
    num_sq, num_sd = 0.0, 0.0
    for i in range(num_ctx):
        k = x64[i * c:(i + 1) * c]
        kh = xh[i * c:(i + 1) * c]
        v, vh = k[::-1], kh[::-1]
        base = k @ q.T                   # [c, queries]
        std = float(np.std(base, axis=0).mean()) or 1.0
        s = logit_std / std
        o = _softmax_out((base * s).T, v)
        oh = _softmax_out(((kh @ q.T) * s).T, vh)
        num_sq += float(np.sum((o - oh) ** 2))
        num_sd += float(np.sum(o ** 2))
    attn = math.sqrt(num_sq / num_sd) if num_sd > 0 else float("nan")
    return {
        "format": fmt, "rows": n, "head_dim": d,
        "bits_per_value": float(info["bits_per_value"]),
        "row_bytes": int(info["row_bytes"]),
        "mse": mse, "cosine": float(np.mean(cos)),
        "ip_bias": ip_bias, "ip_bias_stderr": ip_bias_se,
        "ip_slope": ip_slope,
        "ip_rel_error": math.sqrt(float(np.mean(e ** 2))) / rms_ip,
        "ip_distortion": float(dist),
        "attn_rel_error": attn,
    }


def evaluate(fmts: Optional[Sequence[str]] = None,
             sources: Sequence[str] = SOURCES, *, head_dim: int = 128,
             rows: int = 2048, queries: int = 64, context: int = 256,
             logit_std: float = 2.0, seed: int = 0) -> dict:
    """:func:`measure` for every format of ``fmts`` (default: all of
    :func:`tqc.formats`) on every source: a synthetic name of
    :data:`SOURCES` (``rows`` rows of ``head_dim``) or a ``.npy`` path
    (its rows, at most ``rows`` of them when ``rows`` > 0, at the file's
    head dim). Returns ``{"settings": ..., "results": [...]}``, each result
    the metrics plus ``source`` and ``bounds`` (:func:`paper_bounds`)."""
    names = list(fmts) if fmts else [n for n, _ in formats()]
    known = {n for n, _ in formats()}
    for f in names:
        if f not in known:
            raise ValueError(f"unknown format {f!r}; tqc.formats() lists "
                             f"{', '.join(sorted(known))}")
    results = []
    for src in sources:
        if str(src) in SOURCES:
            x = synthetic_rows(str(src), rows, head_dim, seed)
            label = str(src)
        else:
            x = load_rows(src, rows, seed)
            label = str(src)
        for f in names:
            try:
                r = measure(x, f, queries=queries, context=context,
                            logit_std=logit_std, seed=seed + 1)
            except ValueError as e:   # e.g. a format refusing this head dim
                r = {"format": f, "rows": x.shape[0], "head_dim": x.shape[1],
                     "error": str(e)}
            r["source"] = label
            r["bounds"] = paper_bounds(f, x.shape[1])
            results.append(r)
    return {"settings": {"head_dim": head_dim, "rows": rows,
                         "queries": queries, "context": context,
                         "logit_std": logit_std, "seed": seed,
                         "sources": [str(s) for s in sources],
                         "formats": names},
            "results": results}


def _g(v: Optional[float], fmt: str = "{:.4g}") -> str:
    return "" if v is None else fmt.format(v)


def table(report: dict) -> str:
    """A markdown table of :func:`evaluate`'s report: one line per source
    and format, the measured values beside the paper's bounds (``MSE
    bound`` beside ``mse``, ``IP bound`` beside ``d·D_prod``; "—" where
    no paper bound applies to the format), then a legend of which bound
    applies to which family."""
    head = ("| source | format | bits/value | mse | MSE bound | cosine | "
            "IP bias ± se | IP slope | IP rel. err | d·D_prod | IP bound | "
            "attn rel. err |")
    lines = [head, "| " + " | ".join(["---"] * (head.count("|") - 1)) + " |"]
    for r in report["results"]:
        src = Path(r["source"]).name if r["source"] not in SOURCES else r["source"]
        if "error" in r:
            lines.append(f"| {src} | {r['format']} | | {r['error']} |"
                         + " |" * 8)
            continue
        b = r["bounds"]
        nob = "—" if b["family"] is None else ""
        lines.append(
            f"| {src} | {r['format']} | {r['bits_per_value']:.4g} | "
            f"{r['mse']:.4g} | {_g(b['mse_bound']) or nob} | "
            f"{r['cosine']:.5f} | {r['ip_bias']:+.1e} ± "
            f"{r['ip_bias_stderr']:.0e} | {r['ip_slope']:+.3f} | "
            f"{r['ip_rel_error']:.4g} | {r['ip_distortion']:.4g} | "
            f"{_g(b['ip_bound']) or nob} | {r['attn_rel_error']:.4g} |")
    lines += ["", "Bounds (TurboQuant, arXiv:2504.19874; unit norm, b bits "
              "per coordinate):",
              "- MSE bound: Thm 1, D_mse <= (sqrt(3)*pi/2) * 4^-b, for "
              "TurboQuant_mse formats (polarB: b=B; turboB_0: b=B; haar4: "
              "b=4).",
              "- IP bound: Thm 2, d*D_prod <= sqrt(3)*pi^2 * 4^-b with "
              "unbiased inner products, for TurboQuant_prod (tqprodB: b=B).",
              "- '—': no paper bound applies (tq3_0, tq3_0_legacy, q8_0, "
              "f16: not TurboQuant quantisers)."]
    return "\n".join(lines)


_PLOTS = (("mse", "MSE  ||x - x̂||² / ||x||²", True),
          ("one_minus_cosine", "1 − cosine", True),
          ("ip_rel_error", "inner-product relative error", True),
          ("ip_distortion", "d · D_prod (unit norms)", True),
          ("ip_slope", "inner-product multiplicative bias", False),
          ("attn_rel_error", "attention output relative error", True))


def _require_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError(
            "plotting needs matplotlib, which is not installed "
            f"({e}); pip install 'matplotlib' (or tqc[plot])") from e
    return plt


def plot(report: dict, directory: PathLike) -> list[Path]:
    """Writes one PNG per metric (``quality-<metric>.png``: the metric
    against bits per value, one point per format and source, log scale for
    the errors; the paper's bounds as crosses where they apply) into
    ``directory`` and returns the paths. Raises RuntimeError naming the
    problem when matplotlib is not installed."""
    plt = _require_matplotlib()
    from matplotlib import ticker
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    res = [r for r in report["results"] if "error" not in r]
    sources = list(dict.fromkeys(r["source"] for r in res))
    markers = "osD^v<>p*h"
    paths = []
    for key, label, log in _PLOTS:
        fig, ax = plt.subplots(figsize=(7.5, 5))
        for i, src in enumerate(sources):
            pts = [r for r in res if r["source"] == src]
            xs = [r["bits_per_value"] for r in pts]
            ys = [1 - r["cosine"] if key == "one_minus_cosine" else r[key]
                  for r in pts]
            if log:
                ys = [max(y, 1e-12) for y in ys]
            name = src if src in SOURCES else Path(src).name
            ax.scatter(xs, ys, marker=markers[i % len(markers)], label=name,
                       alpha=0.8)
            if i == 0:
                for r, xv, yv in zip(pts, xs, ys):
                    ax.annotate(r["format"], (xv, yv), fontsize=7,
                                xytext=(3, 3), textcoords="offset points")
        bound = {"mse": "mse_bound", "ip_distortion": "ip_bound"}.get(key)
        if bound:
            bx = [(r["bits_per_value"], r["bounds"][bound]) for r in res
                  if r["bounds"][bound] is not None and r["source"] == sources[0]]
            if bx:
                ax.scatter([p[0] for p in bx], [p[1] for p in bx], marker="x",
                           color="black", label="paper bound (Thm 1/2)")
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 3, 4, 6, 8, 16])
        ax.xaxis.set_major_formatter(ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("bits per value")
        ax.set_ylabel(label)
        ax.set_title(f"{label} (head dim {res[0]['head_dim'] if res else '?'})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        p = out / f"quality-{key}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


# --------------------------------------------------------------------------
# Drivers of the patched llama.cpp
# --------------------------------------------------------------------------


def _default_build() -> Path:
    env = os.environ.get("TQC_BUILD_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[1]   # python/ in a checkout
    if here.name == "python" and (here.parent / "build").is_dir():
        return here.parent / "build"
    return Path("build")


def _paths(bin_dir, model, corpus):
    build = _default_build()
    bin_dir = Path(bin_dir) if bin_dir else Path(
        os.environ.get("TQC_LLAMA_DIR", build / "llama.cpp")) / "bin"
    model = Path(model) if model else build / "models" / "gemma3-270m-q4_k_m.gguf"
    corpus = Path(corpus) if corpus else build / "corpus" / "english.txt"
    return bin_dir, model, corpus


def _run(cmd: list, env_extra: Optional[dict] = None,
         timeout: Optional[float] = None, split: bool = False):
    """Runs an argument list (no shell); returns stdout and stderr joined,
    or the pair with ``split``. Raises FileNotFoundError for a missing
    program, RuntimeError with the output's tail when it fails."""
    env = dict(os.environ)
    env.update(env_extra or {})
    if not Path(cmd[0]).exists():
        raise FileNotFoundError(
            f"{cmd[0]} is missing (build the llama.cpp integration: "
            "integrations/llama.cpp/build.sh)")
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env,
                       timeout=timeout, errors="replace")
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-15:])
        raise RuntimeError(f"{Path(cmd[0]).name} exited with {p.returncode}:"
                           f"\n{tail}")
    return (p.stdout, p.stderr) if split else p.stdout + "\n" + p.stderr


def _need(path: Path, what: str) -> None:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing ({what})")


def perplexity(k_type: str = "f16", v_type: Optional[str] = None, *,
               ctx: int = 512, chunks: int = 4, threads: int = 2,
               model: Optional[PathLike] = None,
               corpus: Optional[PathLike] = None,
               bin_dir: Optional[PathLike] = None,
               env: Optional[dict] = None) -> dict:
    """Runs ``llama-perplexity -c ctx --chunks chunks -ctk K -ctv V`` on the
    corpus (default ``build/corpus/english.txt``, model
    ``build/models/gemma3-270m-q4_k_m.gguf``, binaries
    ``build/llama.cpp/bin``; ``TQC_BUILD_DIR`` / ``TQC_LLAMA_DIR`` move
    them) and returns ``{"ppl", "stderr", "chunks": [per-chunk running
    values], "k", "v", "ctx"}``. ``env`` adds environment variables
    (``TQ_K_CENTRES``, ``TQ_K_LAYER_TYPES`` ...). Raises RuntimeError with
    the tool's output when it fails or prints no estimate."""
    v_type = v_type or k_type
    bin_dir, model, corpus = _paths(bin_dir, model, corpus)
    _need(model, "integrations/llama.cpp/fetch-model.sh")
    _need(corpus, "integrations/llama.cpp/fetch-corpus.sh")
    out = _run([bin_dir / "llama-perplexity", "-m", model, "-f", corpus,
                "-c", str(ctx), "--chunks", str(chunks), "-t", str(threads),
                "-b", str(max(ctx, 32)), "-ctk", k_type, "-ctv", v_type],
               env)
    m = re.search(r"Final estimate: PPL = ([0-9.eE+-]+|nan|inf) \+/- "
                  r"([0-9.eE+-]+|nan|inf)", out)
    if not m:
        raise RuntimeError("llama-perplexity printed no final estimate:\n"
                           + "\n".join(out.splitlines()[-10:]))
    running = [float(v) for v in re.findall(r"\[\d+\]([0-9.]+|nan|inf)", out)]
    return {"k": k_type, "v": v_type, "ctx": ctx, "ppl": float(m.group(1)),
            "stderr": float(m.group(2)), "chunks": running}


def kl_divergence(k_type: str, v_type: Optional[str] = None, *,
                  ctx: int = 512, chunks: int = 4, threads: int = 2,
                  base: Optional[PathLike] = None,
                  model: Optional[PathLike] = None,
                  corpus: Optional[PathLike] = None,
                  bin_dir: Optional[PathLike] = None,
                  env: Optional[dict] = None) -> dict:
    """KL divergence of the model's next-token distributions with a
    ``k_type``/``v_type`` cache against an f16 cache's:
    ``llama-perplexity --kl-divergence-base`` with f16 (its logits go to
    ``base``, default a file in a temporary directory; an existing
    ``base`` is reused), then ``--kl-divergence`` with the cache. Returns
    ``{"ppl", "ppl_f16", "kld", "kld_stderr", "kld_median", "kld_max",
    "top1", "top1_stderr", "k", "v", "ctx"}`` (``top1``: the share of
    tokens whose most likely next token is the same, in %)."""
    v_type = v_type or k_type
    bin_dir, model, corpus = _paths(bin_dir, model, corpus)
    _need(model, "integrations/llama.cpp/fetch-model.sh")
    _need(corpus, "integrations/llama.cpp/fetch-corpus.sh")
    tmp = None
    if base is None:
        tmp = tempfile.TemporaryDirectory(prefix="tqc-kld-")
        base = Path(tmp.name) / "f16.kld"
    base = Path(base)
    common = [bin_dir / "llama-perplexity", "-m", model, "-c", str(ctx),
              "--chunks", str(chunks), "-t", str(threads),
              "-b", str(max(ctx, 32))]
    try:
        ppl_f16 = None
        if not base.exists():
            out = _run(common + ["-f", corpus, "-ctk", "f16", "-ctv", "f16",
                                 "--kl-divergence-base", base], env)
            m = re.search(r"Final estimate: PPL = ([0-9.]+)", out)
            ppl_f16 = float(m.group(1)) if m else None
        out = _run(common + ["-ctk", k_type, "-ctv", v_type,
                             "--kl-divergence-base", base, "--kl-divergence"],
                   env)
    finally:
        if tmp is not None:
            tmp.cleanup()

    def num(pattern: str, group: int = 1) -> Optional[float]:
        m = re.search(pattern, out, re.M)
        return float(m.group(group)) if m else None

    res = {"k": k_type, "v": v_type, "ctx": ctx,
           "ppl": num(r"^Mean PPL\(Q\)\s*:\s*([0-9.eE+-]+)"),
           "ppl_f16": num(r"^Mean PPL\(base\)\s*:\s*([0-9.eE+-]+)") or ppl_f16,
           "kld": num(r"^Mean\s+KLD:\s*([0-9.eE+-]+)"),
           "kld_stderr": num(r"^Mean\s+KLD:\s*[0-9.eE+-]+\s*±\s*([0-9.eE+-]+)"),
           "kld_median": num(r"^Median\s+KLD:\s*([0-9.eE+-]+)"),
           "kld_max": num(r"^Maximum\s+KLD:\s*([0-9.eE+-]+)"),
           "top1": num(r"^Same top p:\s*([0-9.eE+-]+)"),
           "top1_stderr": num(r"^Same top p:\s*[0-9.eE+-]+\s*±\s*([0-9.eE+-]+)")}
    if res["kld"] is None:
        raise RuntimeError("llama-perplexity --kl-divergence printed no "
                           "'Mean KLD':\n" + "\n".join(out.splitlines()[-10:]))
    return res


_NEEDLE_CITIES = ("Lisbon", "Oslo", "Nairobi", "Quito", "Hanoi", "Tbilisi",
                  "Lima", "Dakar", "Riga", "Perth")


def needle(k_type: str = "f16", v_type: Optional[str] = None, *,
           contexts: Sequence[int] = (4096, 8192, 16384, 32768),
           depths: Sequence[float] = (0.1, 0.5, 0.9),
           threads: int = 2, seed: int = 0, chars_per_token: float = 4.2,
           model: Optional[PathLike] = None,
           corpus: Optional[PathLike] = None,
           bin_dir: Optional[PathLike] = None,
           env: Optional[dict] = None) -> dict:
    """Needle in a haystack: for each context length (tokens, approximate:
    the haystack is ``context * chars_per_token`` characters of the corpus,
    cut at sentence ends) and depth (0 = start, 1 = end), hides the
    sentence "The secret number of <city> is <n>." in the haystack, asks
    for it at the end ("... The secret number of <city> is") and runs
    ``llama-completion`` greedily (``--temp 0``, 8 tokens) with a
    ``k_type``/``v_type`` cache of ``context + 256`` cells. Returns
    ``{"k", "v", "trials": [{"context", "depth", "expected", "answer",
    "found", "prompt_tokens"}], "accuracy"}``."""
    v_type = v_type or k_type
    bin_dir, model, corpus = _paths(bin_dir, model, corpus)
    _need(model, "integrations/llama.cpp/fetch-model.sh")
    _need(corpus, "integrations/llama.cpp/fetch-corpus.sh")
    text = Path(corpus).read_text(encoding="utf-8", errors="replace")
    sentences = [s.strip() + "." for s in re.split(r"(?<=[.!?])\s+|\n+", text)
                 if len(s.strip()) > 20]
    sentences = [s[:-1] if s.endswith("..") else s for s in sentences]
    rnd = random.Random(seed)
    trials = []
    with tempfile.TemporaryDirectory(prefix="tqc-needle-") as tmp:
        for ci, ctx in enumerate(contexts):
            for di, depth in enumerate(depths):
                city = _NEEDLE_CITIES[(ci * len(depths) + di)
                                      % len(_NEEDLE_CITIES)]
                number = str(rnd.randrange(1000, 10000))
                fact = f"The secret number of {city} is {number}."
                budget = int(ctx * chars_per_token) - 200
                start = rnd.randrange(len(sentences))
                hay, size, i = [], 0, start
                while size < budget:
                    s = sentences[i % len(sentences)]
                    hay.append(s)
                    size += len(s) + 1
                    i += 1
                pos = int(round(depth * len(hay)))
                hay.insert(pos, fact)
                prompt = (" ".join(hay) + f"\n\nWhat is the secret number of "
                          f"{city}? The secret number of {city} is")
                pfile = Path(tmp) / "prompt.txt"
                pfile.write_text(prompt, encoding="utf-8")
                out, log = _run([bin_dir / "llama-completion", "-m", model,
                                 "-f", pfile, "-n", "8", "--temp", "0",
                                 "-c", str(ctx + 256), "-t", str(threads),
                                 "-ctk", k_type, "-ctv", v_type, "-no-cnv",
                                 "--no-display-prompt", "-b", "512"], env,
                                split=True)
                m = re.search(r"prompt eval time\s*=.*?/\s*(\d+) tokens", log)
                answer = " ".join(out.split())
                trials.append({"context": ctx, "depth": depth,
                               "expected": number, "answer": answer,
                               "found": number in answer,
                               "prompt_tokens": int(m.group(1)) if m else None})
    found = sum(t["found"] for t in trials)
    return {"k": k_type, "v": v_type, "trials": trials,
            "accuracy": found / len(trials) if trials else float("nan")}


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def _csv(s: str) -> list[str]:
    return [p for p in s.split(",") if p]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m tqc.quality [rows] ...`` (per-format metrics on rows),
    ``... perplexity``, ``... kl``, ``... needle`` (drivers of the patched
    llama.cpp); ``--help`` on each. Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmds = ("rows", "perplexity", "kl", "needle")
    cmd = argv.pop(0) if argv and argv[0] in cmds else "rows"
    ap = argparse.ArgumentParser(
        prog=f"python -m tqc.quality {cmd}",
        description={"rows": "Per-format MSE, cosine, inner-product bias and "
                             "error, attention error on synthetic or .npy "
                             "rows, beside the TurboQuant paper's bounds.",
                     "perplexity": "llama-perplexity with a tqc cache.",
                     "kl": "KL divergence against an f16 cache.",
                     "needle": "Needle in a haystack."}[cmd],
        epilog="subcommands: rows (default), perplexity, kl, needle")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    if cmd == "rows":
        ap.add_argument("--formats", type=_csv, default=None,
                        help="comma-separated formats (default: all)")
        ap.add_argument("--sources", type=_csv, default=None,
                        help=f"synthetic sources ({','.join(SOURCES)}; "
                             "default: all, none with --rows)")
        ap.add_argument("--rows", nargs="+", default=[], metavar="NPY",
                        help=".npy files of rows [..., head_dim]")
        ap.add_argument("--head-dim", type=int, default=128)
        ap.add_argument("--num-rows", type=int, default=2048,
                        help="synthetic rows; at most this many from a file")
        ap.add_argument("--queries", type=int, default=64)
        ap.add_argument("--context", type=int, default=256)
        ap.add_argument("--logit-std", type=float, default=2.0)
        ap.add_argument("--seed", type=int, default=0)
        ap.add_argument("--plot", metavar="DIR",
                        help="write PNGs of each metric vs bits per value")
        a = ap.parse_args(argv)
        if a.plot:
            try:
                _require_matplotlib()
            except RuntimeError as e:
                print(f"python -m tqc.quality: error: --plot: {e}",
                      file=sys.stderr)
                return 2
        sources = a.sources if a.sources is not None else (
            [] if a.rows else list(SOURCES))
        try:
            report = evaluate(a.formats, list(sources) + a.rows,
                              head_dim=a.head_dim, rows=a.num_rows,
                              queries=a.queries, context=a.context,
                              logit_std=a.logit_std, seed=a.seed)
        except (ValueError, OSError) as e:
            print(f"python -m tqc.quality: error: {e}", file=sys.stderr)
            return 2
        print(table(report))
        if a.plot:
            for p in plot(report, a.plot):
                print(f"wrote {p}")
        result: Any = report
    else:
        ap.add_argument("-ctk", "--k-type", default="f16")
        ap.add_argument("-ctv", "--v-type", default=None)
        ap.add_argument("--threads", type=int, default=2)
        ap.add_argument("--model")
        ap.add_argument("--corpus")
        ap.add_argument("--bin-dir", help="llama.cpp binaries "
                        "(default build/llama.cpp/bin)")
        if cmd in ("perplexity", "kl"):
            ap.add_argument("--ctx", type=int, default=512)
            ap.add_argument("--chunks", type=int, default=4)
        if cmd == "kl":
            ap.add_argument("--base", help="f16 logits file (reused)")
        if cmd == "needle":
            ap.add_argument("--contexts", type=lambda s: [int(x) for x in _csv(s)],
                            default=[4096, 8192, 16384, 32768])
            ap.add_argument("--depths", type=lambda s: [float(x) for x in _csv(s)],
                            default=[0.1, 0.5, 0.9])
            ap.add_argument("--seed", type=int, default=0)
        a = ap.parse_args(argv)
        common = dict(threads=a.threads, model=a.model, corpus=a.corpus,
                      bin_dir=a.bin_dir)
        try:
            if cmd == "perplexity":
                result = perplexity(a.k_type, a.v_type, ctx=a.ctx,
                                    chunks=a.chunks, **common)
                print(f"K {result['k']} V {result['v']}: PPL "
                      f"{result['ppl']:.4f} ± {result['stderr']:.4f} "
                      f"({a.chunks} chunks of {a.ctx})")
            elif cmd == "kl":
                result = kl_divergence(a.k_type, a.v_type, ctx=a.ctx,
                                       chunks=a.chunks, base=a.base, **common)
                print(f"K {result['k']} V {result['v']}: PPL {result['ppl']} "
                      f"(f16 {result['ppl_f16']}), mean KLD {result['kld']} "
                      f"± {result['kld_stderr']}, same top-1 "
                      f"{result['top1']}%")
            else:
                result = needle(a.k_type, a.v_type, contexts=a.contexts,
                                depths=a.depths, seed=a.seed, **common)
                print("| context | depth | prompt tokens | expected | answer | found |")
                print("| --- | --- | --- | --- | --- | --- |")
                for t in result["trials"]:
                    print(f"| {t['context']} | {t['depth']} | "
                          f"{t['prompt_tokens']} | {t['expected']} | "
                          f"{t['answer'][:40]} | {'yes' if t['found'] else 'no'} |")
                print(f"K {result['k']} V {result['v']}: accuracy "
                      f"{result['accuracy']:.2f}")
        except (FileNotFoundError, RuntimeError) as e:
            print(f"python -m tqc.quality {cmd}: error: {e}", file=sys.stderr)
            return 2
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
