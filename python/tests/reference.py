"""Attention in numpy (float64), written from the definition independently
of lib/Quant's reference: the tests compare the runtime with both."""

from __future__ import annotations

import numpy as np


def attention(q, k, v, *, scale=0.0, causal=False, window=0, softcap=0.0,
              mask=None, slopes=None, sinks=None):
    """q [m, hq, d], k [n, hkv, d], v [n, hkv, dv] -> [m, hq, dv].

    Query i sits at position n - m + i. The logit of token t is
    scale * q.k, soft-capped (softcap * tanh(x / softcap)), plus
    slope[h] * mask[i, t]; causal hides t > position, a window hides
    position - t >= window; sinks[h] is one more logit with a zero value
    row; a query that sees nothing gets zeros."""
    q = np.asarray(q, np.float64)
    k = np.asarray(k, np.float64)
    v = np.asarray(v, np.float64)
    m, hq, d = q.shape
    n, hkv, dv = v.shape
    group = hq // hkv
    scale = scale or 1.0 / np.sqrt(d)
    out = np.zeros((m, hq, dv))
    pos = n - m + np.arange(m)
    t = np.arange(n)
    hidden = np.zeros((m, n), bool)
    if causal:
        hidden |= t[None, :] > pos[:, None]
    if window:
        hidden |= (pos[:, None] - t[None, :]) >= window
    for h in range(hq):
        kv = h // group
        x = scale * q[:, h, :] @ k[:, kv, :].T  # [m, n]
        if softcap:
            x = softcap * np.tanh(x / softcap)
        if mask is not None:
            x = x + (1.0 if slopes is None else float(slopes[h])) * \
                np.asarray(mask, np.float64)[:, :n]
        x = np.where(hidden, -np.inf, x)
        sink = -np.inf if sinks is None else float(sinks[h])
        top = np.maximum(x.max(axis=1, initial=-np.inf), sink)
        for i in range(m):
            if top[i] == -np.inf:
                continue  # sees nothing: zeros
            w = np.exp(x[i] - top[i])
            den = w.sum() + np.exp(sink - top[i])
            out[i, h] = (w @ v[:, kv, :]) / den
    return out
