"""tqc.Runtime and tqc.KVCache against lib/Quant's reference and a numpy
reference: format pairs, head dims, paged and contiguous layouts, decode
and prefill, ragged batches; bytes appended equal lib/Quant's encoder."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tqc
from conftest import GROUP, HEAD_DIMS, PAIRS, rows
from reference import attention as numpy_attention

KV_HEADS = 2
Q_HEADS = KV_HEADS * GROUP
LENGTHS = [17, 40, 5]


def make_cache(runtime, pair, head_dim, layout, num_seqs=len(LENGTHS),
               head_major=False):
    if layout == "paged":
        return tqc.KVCache(runtime, pair[0], pair[1], head_dim=head_dim,
                           num_kv_heads=KV_HEADS, page_size=16, num_pages=8,
                           num_seqs=num_seqs, head_major=head_major)
    return tqc.KVCache(runtime, pair[0], pair[1], head_dim=head_dim,
                       num_kv_heads=KV_HEADS, layout="contiguous",
                       capacity=48, num_seqs=num_seqs, head_major=head_major)


def fill(cache, rng, lengths=LENGTHS):
    """Appends each sequence's rows in two calls; returns the float rows."""
    ks, vs = [], []
    for s, n in enumerate(lengths):
        k = rows(rng, n, KV_HEADS, cache.head_dim)
        v = rows(rng, n, KV_HEADS, cache.head_dim)
        half = n // 2
        cache.append(k[:half], v[:half], seq=s)
        cache.append(k[half:], v[half:], seq=s)
        ks.append(k)
        vs.append(v)
    return ks, vs


@pytest.fixture(scope="module")
def runtime(libraries):
    with tqc.Runtime(libraries["plain"], threads=2) as rt:
        yield rt


@pytest.mark.parametrize("mode", ["decode", "prefill"])
@pytest.mark.parametrize("layout", ["paged", "contiguous"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_attention_matches_references(runtime, rng, pair, head_dim, layout,
                                      mode):
    cache = make_cache(runtime, pair, head_dim, layout)
    ks, vs = fill(cache, rng)
    assert cache.lengths == LENGTHS
    # decode: one query per sequence; prefill: several (one sequence with
    # a single row runs the decode kernel in the same call).
    per_seq = [1, 1, 1] if mode == "decode" else [4, 7, 1]
    indptr = np.concatenate([[0], np.cumsum(per_seq)]).astype(np.int32)
    q = rows(rng, int(indptr[-1]), Q_HEADS, head_dim)
    out = runtime.attention(q, cache, q_indptr=indptr)
    assert out.shape == q.shape and out.dtype == np.float32

    for s in range(len(LENGTHS)):
        kb, vb = cache.rows(s)
        # The append kernels wrote lib/Quant's bytes.
        np.testing.assert_array_equal(kb, tqc.encode(ks[s], pair[0]))
        np.testing.assert_array_equal(vb, tqc.encode(vs[s], pair[1]))
        qs = q[indptr[s]:indptr[s + 1]]
        ref = tqc.reference_attention(qs, kb, vb, k_format=pair[0],
                                      v_format=pair[1])
        mine = numpy_attention(qs, tqc.decode(kb, pair[0], head_dim),
                               tqc.decode(vb, pair[1], head_dim))
        np.testing.assert_allclose(ref, mine, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(out[indptr[s]:indptr[s + 1]], ref,
                                   rtol=1e-3, atol=2e-4)
        # Compression costs accuracy, but not all of it.
        exact = tqc.reference_attention(qs, ks[s], vs[s])
        assert np.linalg.norm(ref - exact) < 0.5 * np.linalg.norm(exact)


def test_paged_and_contiguous_agree_bit_for_bit(runtime):
    outs, encoded = [], []
    for layout in ("paged", "contiguous"):
        for head_major in (False, True):
            rng = np.random.default_rng(7)
            cache = make_cache(runtime, PAIRS[0], 64, layout,
                               head_major=head_major)
            assert cache.head_major == head_major
            fill(cache, rng)
            q = rows(rng, 3, Q_HEADS, 64)
            outs.append(runtime.attention(q, cache))
            encoded.append(cache.rows(1))
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    for kb, vb in encoded[1:]:
        np.testing.assert_array_equal(kb, encoded[0][0])
        np.testing.assert_array_equal(vb, encoded[0][1])


def test_head_major_pools_hold_each_heads_rows_together(runtime, rng):
    row_bytes = tqc.format_info("turbo3_0", 64)["row_bytes"]
    cache = tqc.KVCache(runtime, "turbo3_0", head_dim=64,
                        num_kv_heads=KV_HEADS, page_size=16, num_pages=4,
                        head_major=True)
    assert cache.k_pages.shape == (4, KV_HEADS, 16, row_bytes)
    assert "head-major" in repr(cache)
    k, v = rows(rng, 5, KV_HEADS, 64), rows(rng, 5, KV_HEADS, 64)
    cache.append(k, v)
    page = cache.pages(0)[0]
    encoded = tqc.encode(k, "turbo3_0")  # [5, KV_HEADS, row_bytes]
    for h in range(KV_HEADS):
        np.testing.assert_array_equal(cache.k_pages[page, h, :5],
                                      encoded[:, h])
    # A lent pool must have the head-major shape.
    with pytest.raises(ValueError, match="k_pages"):
        tqc.KVCache(runtime, "turbo3_0", head_dim=64, num_kv_heads=KV_HEADS,
                    page_size=16, num_pages=4, head_major=True,
                    k_pages=np.zeros((4, 16, KV_HEADS, row_bytes), np.uint8))


def test_causal_and_softcap_kernels(libraries, rng):
    with tqc.Runtime(libraries["causal"], threads=2) as rt:
        cache = make_cache(rt, ("turbo3_0", "turbo3_0"), 64, "paged",
                           num_seqs=1)
        k = rows(rng, 30, KV_HEADS, 64)
        v = rows(rng, 30, KV_HEADS, 64)
        cache.append(k, v)
        q = rows(rng, 6, Q_HEADS, 64)
        out = rt.attention(q, cache, causal=True, softcap=30.0)
        kb, vb = cache.rows(0)
        ref = tqc.reference_attention(q, kb, vb, k_format="turbo3_0",
                                      v_format="turbo3_0", causal=True,
                                      softcap=30.0)
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=2e-4)
        # Without the flags the runtime looks for kernels this library
        # does not have.
        with pytest.raises(tqc.TQError) as e:
            rt.attention(q, cache)
        assert e.value.status == "TQ_STATUS_NOT_FOUND"
        assert "tq_prefill_turbo3_0_turbo3_0_d64_g2" in str(e.value)


def test_scale_and_out(runtime, rng):
    cache = make_cache(runtime, PAIRS[1], 64, "paged", num_seqs=1)
    k, v = rows(rng, 20, KV_HEADS, 64), rows(rng, 20, KV_HEADS, 64)
    cache.append(k, v)
    q = rows(rng, 1, Q_HEADS, 64)
    out = np.full_like(q, np.nan)
    got = runtime.attention(q, cache, scale=0.05, out=out)
    assert got is out
    kb, vb = cache.rows(0)
    ref = tqc.reference_attention(q, kb, vb, k_format="q8_0",
                                  v_format="polar4", scale=0.05)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=2e-4)


def test_append_rewrites_and_truncate_frees_pages(runtime, rng):
    cache = make_cache(runtime, PAIRS[0], 64, "paged", num_seqs=2)
    k, v = rows(rng, 33, KV_HEADS, 64), rows(rng, 33, KV_HEADS, 64)
    cache.append(k, v, seq=1)
    assert cache.lengths == [0, 33]
    assert len(cache.pages(1)) == 3 and cache.free_pages == 5
    k2, v2 = rows(rng, 4, KV_HEADS, 64), rows(rng, 4, KV_HEADS, 64)
    cache.append(k2, v2, seq=1, start=10)  # rewrite tokens 10..13
    assert cache.lengths == [0, 33]
    kb, _ = cache.rows(1)
    k[10:14] = k2
    np.testing.assert_array_equal(kb, tqc.encode(k, "turbo3_0"))
    cache.truncate(1, 16)
    assert cache.lengths == [0, 16] and cache.free_pages == 7
    # An empty sequence attends to nothing: zeros.
    q = rows(rng, 2, Q_HEADS, 64)
    out = runtime.attention(q, cache)
    np.testing.assert_array_equal(out[0], 0.0)
    assert np.abs(out[1]).max() > 0


def test_full_cache_changes_nothing(runtime, rng):
    cache = make_cache(runtime, PAIRS[0], 64, "paged", num_seqs=2)
    cache.append(rows(rng, 100, KV_HEADS, 64), rows(rng, 100, KV_HEADS, 64),
                 seq=0)
    with pytest.raises(ValueError, match="pages are free"):
        cache.append(rows(rng, 40, KV_HEADS, 64),
                     rows(rng, 40, KV_HEADS, 64), seq=1)
    assert cache.lengths == [100, 0] and cache.free_pages == 1
    contiguous = make_cache(runtime, PAIRS[0], 64, "contiguous", num_seqs=1)
    with pytest.raises(ValueError, match="capacity of 48"):
        contiguous.append(rows(rng, 49, KV_HEADS, 64),
                          rows(rng, 49, KV_HEADS, 64))
    assert contiguous.lengths == [0]


def test_lent_pools_are_written_in_place(runtime, rng):
    row_bytes = tqc.format_info("turbo3_0", 64)["row_bytes"]
    kp = np.zeros((4, 16, KV_HEADS, row_bytes), np.uint8)
    vp = np.zeros_like(kp)
    cache = tqc.KVCache(runtime, "turbo3_0", head_dim=64,
                        num_kv_heads=KV_HEADS, page_size=16, num_pages=4,
                        k_pages=kp, v_pages=vp)
    assert cache.k_pages is kp and cache.v_pages is vp
    k, v = rows(rng, 5, KV_HEADS, 64), rows(rng, 5, KV_HEADS, 64)
    cache.append(k, v)
    page = cache.pages(0)[0]
    np.testing.assert_array_equal(kp[page, :5], tqc.encode(k, "turbo3_0"))
    np.testing.assert_array_equal(vp[page, :5], tqc.encode(v, "turbo3_0"))


def test_threads_share_a_runtime(runtime):
    """Kernel calls release the GIL; calls from several threads on one
    runtime give the serial results."""
    rng = np.random.default_rng(3)
    caches, queries = [], []
    for _ in range(4):
        c = make_cache(runtime, PAIRS[0], 64, "paged", num_seqs=1)
        c.append(rows(rng, 30, KV_HEADS, 64), rows(rng, 30, KV_HEADS, 64))
        caches.append(c)
        queries.append(rows(rng, 5, Q_HEADS, 64))
    serial = [runtime.attention(q, c) for q, c in zip(queries, caches)]
    results = [None] * 4

    def work(i):
        for _ in range(20):
            results[i] = runtime.attention(queries[i], caches[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(serial, results):
        np.testing.assert_array_equal(a, b)
