"""Error paths: every bad argument is a TypeError or ValueError naming the
argument, what was expected and what was given; runtime statuses are
tqc.TQError with tq_last_error()'s message; closed runtimes refuse work."""

from __future__ import annotations

import numpy as np
import pytest

import tqc
from conftest import GROUP, rows

KV_HEADS = 2
Q_HEADS = KV_HEADS * GROUP


@pytest.fixture(scope="module")
def runtime(libraries):
    with tqc.Runtime(libraries["plain"], threads=1) as rt:
        yield rt


@pytest.fixture
def cache(runtime, rng):
    c = tqc.KVCache(runtime, "turbo3_0", head_dim=64, num_kv_heads=KV_HEADS,
                    page_size=16, num_pages=4)
    c.append(rows(rng, 10, KV_HEADS, 64), rows(rng, 10, KV_HEADS, 64))
    return c


def test_wrong_dtype(runtime, cache, rng):
    q = rows(rng, 1, Q_HEADS, 64).astype(np.float64)
    with pytest.raises(TypeError, match=r"^q: expected dtype float32, got "
                                        r"float64$"):
        runtime.attention(q, cache)
    with pytest.raises(TypeError, match=r"^k: expected dtype float32, got "
                                        r"float16$"):
        cache.append(np.zeros((1, KV_HEADS, 64), np.float16),
                      np.zeros((1, KV_HEADS, 64), np.float32))
    with pytest.raises(TypeError, match=r"^data: expected dtype uint8, got "
                                        r"int8$"):
        tqc.decode(np.zeros((2, 50), np.int8), "turbo3_0", 128)


def test_wrong_shape(runtime, cache, rng):
    with pytest.raises(ValueError, match=r"^q: expected shape \(\*, \*, 64\), "
                                         r"got \(1, 4, 32\)$"):
        runtime.attention(rows(rng, 1, Q_HEADS, 32), cache)
    with pytest.raises(ValueError, match=r"^v: expected shape \(3, 2, 64\), "
                                         r"got \(2, 2, 64\)$"):
        cache.append(rows(rng, 3, KV_HEADS, 64), rows(rng, 2, KV_HEADS, 64))
    with pytest.raises(ValueError, match=r"^k: expected shape \(\*, 2, 64\), "
                                         r"got \(3, 1, 64\)$"):
        cache.append(rows(rng, 3, 1, 64), rows(rng, 3, 1, 64))
    with pytest.raises(ValueError, match="num_q_heads .3. must be a positive "
                                         "multiple of the cache's "
                                         "num_kv_heads .2."):
        runtime.attention(rows(rng, 1, 3, 64), cache)
    with pytest.raises(ValueError, match=r"^data: expected shape \(\*, 50\), "
                                         r"got \(2, 49\)$"):
        tqc.decode(np.zeros((2, 49), np.uint8), "turbo3_0", 128)
    with pytest.raises(ValueError, match=r"^out: expected shape \(1, 4, 64\)"):
        runtime.attention(rows(rng, 1, Q_HEADS, 64), cache,
                          out=np.zeros((1, 4, 32), np.float32))


def test_non_contiguous_strides(runtime, cache, rng):
    wide = rows(rng, 1, Q_HEADS, 128)
    with pytest.raises(ValueError, match=r"^q: expected a C-contiguous array "
                                         r"\(strides in elements \(256, 64, "
                                         r"1\)\), got strides \(512, 128, "
                                         r"2\)"):
        runtime.attention(wide[:, :, ::2], cache)
    k = rows(rng, 2, 64, KV_HEADS).transpose(0, 2, 1)
    with pytest.raises(ValueError, match=r"^k: expected a C-contiguous"):
        cache.append(k, np.ascontiguousarray(k))
    with pytest.raises(ValueError, match=r"^rows: expected a C-contiguous"):
        tqc.encode(rows(rng, 64, 4).T, "q8_0")


def test_not_an_array(runtime, cache):
    with pytest.raises(TypeError, match=r"^q: expected an array .*got list$"):
        runtime.attention([[[0.0] * 64] * Q_HEADS], cache)
    with pytest.raises(TypeError, match="cache: expected a tqc.KVCache"):
        runtime.attention(np.zeros((1, Q_HEADS, 64), np.float32), "cache")


def test_read_only_out(runtime, cache, rng):
    out = np.zeros((1, Q_HEADS, 64), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match=r"^out: expected a writable array, "
                                         r"got a read-only ndarray"):
        runtime.attention(rows(rng, 1, Q_HEADS, 64), cache, out=out)


def test_bad_options(runtime, cache, rng):
    q = rows(rng, 2, Q_HEADS, 64)
    with pytest.raises(ValueError, match=r"^q_indptr: expected 2 offsets"):
        runtime.attention(q, cache, q_indptr=[0, 1, 2])
    with pytest.raises(ValueError, match="need tq_attention_v1"):
        runtime.attention(q, cache, mask=np.zeros((2, 16), np.float32))
    with pytest.raises(ValueError, match=r"^start: expected a token index in "
                                         r"\[0, 10\]"):
        cache.append(rows(rng, 1, KV_HEADS, 64), rows(rng, 1, KV_HEADS, 64),
                     start=11)
    with pytest.raises(ValueError, match=r"^seq: expected a sequence in "
                                         r"\[0, 1\), got 1$"):
        cache.append(rows(rng, 1, KV_HEADS, 64), rows(rng, 1, KV_HEADS, 64),
                     seq=1)
    with pytest.raises(ValueError, match="causal queries but holds only"):
        runtime.attention(rows(rng, 11, Q_HEADS, 64), cache, causal=True)
    with pytest.raises(ValueError, match="softcap"):
        runtime.attention(q, cache, softcap=float("inf"))
    with pytest.raises(ValueError, match="k_format: .*"):
        tqc.KVCache(runtime, "turbo9_0", head_dim=64, num_kv_heads=2,
                    num_pages=1)
    with pytest.raises(ValueError, match="rows: row 1: "):
        bad = np.zeros((2, 64), np.float32)
        bad[1, 5] = np.nan
        tqc.encode(bad, "turbo3_0")
    assert cache.lengths == [10]


def test_thread_counts(libraries):
    # A negative count is the binding's to refuse; one above the runtime's
    # limit is the runtime's, with its message.
    lib = libraries["plain"]
    with pytest.raises(ValueError, match=r"^threads: expected a count >= 0"):
        tqc.Runtime(lib, threads=-1)
    with pytest.raises(tqc.TQError, match="num_threads 4097 is above the "
                                          "limit of 4096") as e:
        tqc.Runtime(lib, threads=4097)
    assert e.value.status == "TQ_STATUS_INVALID_ARGUMENT"


def test_runtime_statuses_carry_last_error(runtime, rng, tmp_path):
    # A library the loader cannot open: the path and dlopen's message.
    with pytest.raises(tqc.TQError) as e:
        tqc.Runtime(tmp_path / "missing.so")
    assert e.value.status == "TQ_STATUS_UNAVAILABLE"
    assert "missing.so" in str(e.value) and "cannot open" in str(e.value)

    # A format pair the library lacks: the kernel looked for, every time.
    cache = tqc.KVCache(runtime, "turbo4_0", head_dim=64,
                        num_kv_heads=KV_HEADS, page_size=16, num_pages=2)
    for _ in range(2):
        with pytest.raises(tqc.TQError) as e:
            cache.append(rows(rng, 1, KV_HEADS, 64),
                         rows(rng, 1, KV_HEADS, 64))
        assert e.value.status == "TQ_STATUS_NOT_FOUND"
        assert e.value.code == 3
        assert "tq_append_turbo4_0_d64" in str(e.value)
        assert isinstance(e.value, RuntimeError)
    assert cache.lengths == [0] and cache.free_pages == 2
    with pytest.raises(tqc.TQError, match="tq_decode_turbo4_0_turbo4_0_d64_g2"):
        runtime.attention(rows(rng, 1, Q_HEADS, 64), cache)


def test_use_after_close(libraries, rng):
    rt = tqc.Runtime(libraries["plain"], threads=1)
    cache = tqc.KVCache(rt, "turbo3_0", head_dim=64, num_kv_heads=KV_HEADS,
                        page_size=16, num_pages=2)
    cache.append(rows(rng, 3, KV_HEADS, 64), rows(rng, 3, KV_HEADS, 64))
    rt.close()
    assert rt.closed
    rt.close()  # idempotent
    with pytest.raises(ValueError, match="the runtime is closed"):
        rt.attention(rows(rng, 1, Q_HEADS, 64), cache)
    with pytest.raises(ValueError, match="the runtime is closed"):
        cache.append(rows(rng, 1, KV_HEADS, 64), rows(rng, 1, KV_HEADS, 64))
    assert cache.lengths == [3]
    with tqc.Runtime(libraries["plain"]) as rt2:
        assert not rt2.closed
    assert rt2.closed
