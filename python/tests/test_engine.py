"""Runtime.attention over ggml kernel packs (tq_attention_v1): additive
masks (float32 and float16), ALiBi slopes, attention sinks, soft-caps, and
causal / sliding-window masking turned into the mask, against lib/Quant's
reference and the numpy one."""

from __future__ import annotations

import numpy as np
import pytest

import tqc
from conftest import GROUP, PAIRS, rows
from reference import attention as numpy_attention

KV_HEADS = 2
Q_HEADS = KV_HEADS * GROUP
LENGTHS = [23, 9]


def filled(rt, pair, layout, rng):
    if layout == "paged":
        cache = tqc.KVCache(rt, pair[0], pair[1], head_dim=64,
                            num_kv_heads=KV_HEADS, page_size=8, num_pages=8,
                            num_seqs=2)
    else:
        cache = tqc.KVCache(rt, pair[0], pair[1], head_dim=64,
                            num_kv_heads=KV_HEADS, layout="contiguous",
                            capacity=32, num_seqs=2)
    for s, n in enumerate(LENGTHS):
        cache.append(rows(rng, n, KV_HEADS, 64), rows(rng, n, KV_HEADS, 64),
                     seq=s)
    return cache


def check(out, cache, q, indptr, pair, **options):
    """out against both references, sequence by sequence; the mask's rows
    are q's rows."""
    mask = options.pop("mask", None)
    for s, n in enumerate(cache.lengths):
        kb, vb = cache.rows(s)
        qs = q[indptr[s]:indptr[s + 1]]
        ms = None if mask is None else np.ascontiguousarray(
            np.asarray(mask, np.float32)[indptr[s]:indptr[s + 1], :n])
        ref = tqc.reference_attention(qs, kb, vb, k_format=pair[0],
                                      v_format=pair[1], mask=ms, **options)
        mine = numpy_attention(qs, tqc.decode(kb, pair[0], 64),
                               tqc.decode(vb, pair[1], 64), mask=ms,
                               **options)
        np.testing.assert_allclose(ref, mine, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(out[indptr[s]:indptr[s + 1]], ref,
                                   rtol=1e-3, atol=3e-4)


@pytest.fixture(scope="module")
def engine(libraries):
    with tqc.Runtime(libraries["ggml"], threads=2) as rt:
        assert rt.engine
        yield rt


@pytest.mark.parametrize("layout", ["paged", "contiguous"])
@pytest.mark.parametrize("pair", PAIRS[:2], ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("per_seq", [[1, 1], [5, 3]], ids=["decode",
                                                          "prefill"])
def test_mask_slopes_sinks(engine, rng, pair, layout, per_seq):
    cache = filled(engine, pair, layout, rng)
    indptr = np.concatenate([[0], np.cumsum(per_seq)]).astype(np.int32)
    q = rows(rng, int(indptr[-1]), Q_HEADS, 64)
    stride = 40
    mask = rng.uniform(-2, 0, (q.shape[0], stride)).astype(np.float32)
    mask[rng.uniform(size=mask.shape) < 0.3] = -np.inf
    mask = np.asarray(mask.astype(np.float16), np.float32)  # f16-exact
    slopes = rng.uniform(0.25, 1.0, Q_HEADS).astype(np.float32)
    sinks = rng.uniform(-1, 1, Q_HEADS).astype(np.float32)
    out = engine.attention(q, cache, q_indptr=indptr, mask=mask,
                           slopes=slopes, sinks=sinks)
    check(out, cache, q, indptr, pair, mask=mask, slopes=slopes, sinks=sinks)
    # The same mask as float16 bits gives the same result.
    out16 = engine.attention(q, cache, q_indptr=indptr,
                             mask=mask.astype(np.float16), slopes=slopes,
                             sinks=sinks)
    np.testing.assert_array_equal(out, out16)


@pytest.mark.parametrize("layout", ["paged", "contiguous"])
def test_causal_and_window_become_the_mask(engine, rng, layout):
    pair = PAIRS[0]
    cache = filled(engine, pair, layout, rng)
    indptr = np.array([0, 6, 7], np.int32)
    q = rows(rng, 7, Q_HEADS, 64)
    out = engine.attention(q, cache, q_indptr=indptr, causal=True)
    check(out, cache, q, indptr, pair, causal=True)
    out = engine.attention(q, cache, q_indptr=indptr, causal=True, window=4)
    check(out, cache, q, indptr, pair, causal=True, window=4)
    # Combined with the caller's mask (hiding the first token of each row).
    mask = np.zeros((7, 23), np.float32)
    mask[:, 0] = -np.inf
    out = engine.attention(q, cache, q_indptr=indptr, causal=True, mask=mask)
    check(out, cache, q, indptr, pair, causal=True, mask=mask)


def test_hidden_rows_get_zeros(engine, rng):
    cache = filled(engine, PAIRS[0], "paged", rng)
    q = rows(rng, 2, Q_HEADS, 64)
    mask = np.zeros((2, 23), np.float32)
    mask[0] = -np.inf
    out = engine.attention(q, cache, mask=mask)
    np.testing.assert_array_equal(out[0], 0.0)
    assert np.abs(out[1]).max() > 0


def test_softcap_pack(libraries, rng):
    with tqc.Runtime(libraries["ggml_softcap"], threads=2) as rt:
        pair = ("turbo3_0", "turbo3_0")
        cache = filled(rt, pair, "paged", rng)
        indptr = np.array([0, 4, 5], np.int32)
        q = rows(rng, 5, Q_HEADS, 64) * 4  # logits large enough to cap
        out = rt.attention(q, cache, q_indptr=indptr, softcap=30.0)
        check(out, cache, q, indptr, pair, softcap=30.0)
        # The pack has no uncapped kernels.
        with pytest.raises(tqc.TQError, match="TQ_STATUS_NOT_FOUND.*"
                           "tq_ggml_prefill_turbo3_0_turbo3_0_d64_g2"):
            rt.attention(q, cache, q_indptr=indptr)


def test_engine_argument_errors(engine, rng):
    cache = filled(engine, PAIRS[0], "paged", rng)
    q = rows(rng, 2, Q_HEADS, 64)
    with pytest.raises(ValueError, match=r"^mask: expected shape \(2, >= 23\)"):
        engine.attention(q, cache, mask=np.zeros((2, 22), np.float32))
    with pytest.raises(TypeError, match=r"^mask: expected dtype float16 or "
                                        r"float32, got float64"):
        engine.attention(q, cache, mask=np.zeros((2, 23)))
    with pytest.raises(ValueError, match=r"^slopes: expected shape \(4,\), "
                                         r"got \(2,\)"):
        engine.attention(q, cache, mask=np.zeros((2, 23), np.float32),
                         slopes=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="slopes: ALiBi slopes multiply the "
                                         "mask"):
        engine.attention(q, cache, slopes=np.ones(4, np.float32))
