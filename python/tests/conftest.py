"""Kernel libraries the tests share, compiled once per session (two at a
time: tqc.compile releases the GIL) into pytest's temporary directory."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

import tqc

# K/V format pairs, head dims and the GQA group the runtime tests cover.
PAIRS = [("turbo3_0", "turbo3_0"), ("q8_0", "polar4"), ("tq3_0", "tq3_0")]
HEAD_DIMS = [64, 128]
GROUP = 2

LIBRARIES = {
    # tq_attention (v0): decode and prefill of every pair at both head dims.
    "plain": dict(kind=("append", "decode", "prefill"), pairs=PAIRS,
                  head_dim=HEAD_DIMS, gqa=GROUP),
    # Kernels with causal masking and a soft-cap compiled in.
    "causal": dict(kind=("append", "decode", "prefill"),
                   k_format="turbo3_0", head_dim=64, gqa=GROUP, causal=True,
                   softcap=30.0),
    # ggml packs for tq_attention_v1 (masks, ALiBi, sinks), with and
    # without a soft-cap.
    "ggml": dict(abi="ggml", pairs=PAIRS[:2], head_dim=64, gqa=GROUP),
    "ggml_softcap": dict(abi="ggml", k_format="turbo3_0", head_dim=64,
                         gqa=GROUP, softcap=30.0),
}


@pytest.fixture(scope="session")
def libraries(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernels")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(tqc.compile, output_dir=root / name,
                                     **options)
                   for name, options in LIBRARIES.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def rows(rng, *shape):
    """Gaussian float32 rows with a few outlier channels, like real K."""
    x = rng.standard_normal(shape).astype(np.float32)
    x[..., :3] *= 4.0
    return np.ascontiguousarray(x)
