"""Arrays through DLPack: torch tensors (when torch is installed) and any
object with __dlpack__, used in place."""

from __future__ import annotations

import numpy as np
import pytest

import tqc
from conftest import GROUP, rows

KV_HEADS = 2
Q_HEADS = KV_HEADS * GROUP


class DLPackOnly:
    """Exposes a numpy array through __dlpack__ alone (no buffer protocol,
    no __array__), as a foreign framework's tensor would."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_objects_without_copies(libraries, rng):
    with tqc.Runtime(libraries["plain"], threads=1) as rt:
        cache = tqc.KVCache(rt, "turbo3_0", head_dim=64,
                            num_kv_heads=KV_HEADS, page_size=16, num_pages=2)
        k, v = rows(rng, 7, KV_HEADS, 64), rows(rng, 7, KV_HEADS, 64)
        cache.append(DLPackOnly(k), DLPackOnly(v))
        q = rows(rng, 1, Q_HEADS, 64)
        out = np.zeros_like(q)
        wrapped = DLPackOnly(out)
        assert rt.attention(DLPackOnly(q), cache, out=wrapped) is wrapped
        np.testing.assert_array_equal(out, rt.attention(q, cache))
        assert np.abs(out).max() > 0
        b = tqc.encode(DLPackOnly(k), "turbo3_0")
        np.testing.assert_array_equal(b, cache.rows(0)[0])


def test_torch_round_trip(libraries, rng):
    torch = pytest.importorskip(
        "torch", reason="torch is not installed in this environment (CI does "
        "not install it); the DLPack path is covered by "
        "test_dlpack_objects_without_copies")
    with tqc.Runtime(libraries["plain"], threads=1) as rt:
        row_bytes = tqc.format_info("q8_0", 64)["row_bytes"]
        kp = torch.zeros((2, 16, KV_HEADS, row_bytes), dtype=torch.uint8)
        vp = torch.zeros((2, 16, KV_HEADS,
                          tqc.format_info("polar4", 64)["row_bytes"]),
                         dtype=torch.uint8)
        cache = tqc.KVCache(rt, "q8_0", "polar4", head_dim=64,
                            num_kv_heads=KV_HEADS, page_size=16, num_pages=2,
                            k_pages=kp, v_pages=vp)
        assert cache.k_pages is kp
        k = torch.from_numpy(rows(rng, 9, KV_HEADS, 64))
        v = torch.from_numpy(rows(rng, 9, KV_HEADS, 64))
        cache.append(k, v)
        page = cache.pages(0)[0]
        np.testing.assert_array_equal(kp[page, :9].numpy(),
                                      tqc.encode(k.numpy(), "q8_0"))
        q = torch.from_numpy(rows(rng, 1, Q_HEADS, 64))
        out = torch.empty_like(q)
        pointer = out.data_ptr()
        assert rt.attention(q, cache, out=out) is out
        assert out.data_ptr() == pointer
        np.testing.assert_array_equal(out.numpy(),
                                      rt.attention(q.numpy(), cache))
        # Pools the cache owns come back to torch without a copy.
        own = tqc.KVCache(rt, "q8_0", "polar4", head_dim=64,
                          num_kv_heads=KV_HEADS, page_size=16, num_pages=2)
        t = torch.from_dlpack(own.k_pages)
        assert t.data_ptr() == own.k_pages.ctypes.data
        with pytest.raises(TypeError, match="q: expected dtype float32, got "
                                            "float64"):
            rt.attention(q.double(), cache)
        with pytest.raises(ValueError, match="q: expected a C-contiguous"):
            rt.attention(torch.from_numpy(rows(rng, 1, 64, Q_HEADS))
                         .transpose(1, 2), cache)
