"""tqc.encode / tqc.decode / tqc.format_info over lib/Quant."""

from __future__ import annotations

import numpy as np
import pytest

import tqc
from conftest import rows


def test_every_format_round_trips(rng):
    names = [n for n, _ in tqc.formats()]
    assert {"turbo3_0", "q8_0", "polar4", "tq3_0", "f16"} <= set(names)
    x = rows(rng, 3, 5, 128)
    for name in names:
        info = tqc.format_info(name, 128)
        b = tqc.encode(x, name)
        assert b.shape == (3, 5, info["row_bytes"]) and b.dtype == np.uint8
        y = tqc.decode(b, name, 128)
        assert y.shape == x.shape and y.dtype == np.float32
        rel = np.linalg.norm(y - x) / np.linalg.norm(x)
        assert rel < 0.8, name  # tqprod2: 1-bit polar + QJL, ~0.72
        assert info["bits_per_value"] == pytest.approx(
            info["row_bytes"] * 8 / 128)
        if info["has_rotation"]:
            r = tqc.decode(b, name, 128, rotated=True)
            assert r.shape == (3, 5, info["padded_dim"])
    # More bits, less error.
    err = {n: np.linalg.norm(tqc.decode(tqc.encode(x, n), n, 128) - x)
           for n in ("turbo2_0", "turbo3_0", "turbo4_0", "q8_0", "f16")}
    assert err["turbo2_0"] > err["turbo3_0"] > err["turbo4_0"] > err["q8_0"] \
        > err["f16"]


def test_known_values():
    # q8_0: a 32-value block of 0..31 -> fp16 scale 31/127 then int8s.
    x = np.arange(32, dtype=np.float32)[None]
    b = tqc.encode(x, "q8_0")
    assert b.shape == (1, 34)
    scale = np.frombuffer(b[0, :2].tobytes(), np.float16)[0]
    assert scale == np.float16(31 / 127)
    q = b[0, 2:].view(np.int8)
    # ggml quantises with the float32 scale (the fp16 one is stored),
    # rounding halves away from zero.
    inv = np.float32(1) / (np.float32(31) / np.float32(127))
    np.testing.assert_array_equal(q, np.floor(x[0] * inv + np.float32(0.5)))
    np.testing.assert_allclose(tqc.decode(b, "q8_0", 32), x, atol=0.13)


def test_format_errors():
    with pytest.raises(ValueError, match="^name: unknown format 'turbo7'"):
        tqc.format_info("turbo7", 128)
    with pytest.raises(ValueError, match="head_dim must be in"):
        tqc.format_info("q8_0", 0)
    with pytest.raises(ValueError, match="at least one dimension"):
        tqc.encode(np.float32(1.0), "q8_0")


def test_empty_batches():
    # No rows in, no rows out (numpy hands an empty array over with strides
    # (0, 0), which the contiguity check once refused).
    info = tqc.format_info("turbo3_0", 128)
    b = tqc.encode(np.zeros((0, 128), np.float32), "turbo3_0")
    assert b.shape == (0, info["row_bytes"]) and b.dtype == np.uint8
    y = tqc.decode(np.zeros((0, info["row_bytes"]), np.uint8), "turbo3_0", 128)
    assert y.shape == (0, 128) and y.dtype == np.float32


def test_reference_attention_exact(rng):
    q, k, v = rows(rng, 2, 4, 16), rows(rng, 9, 2, 16), rows(rng, 9, 2, 16)
    out = tqc.reference_attention(q, k, v, causal=True)
    assert out.dtype == np.float64 and out.shape == (2, 4, 16)
    from reference import attention
    np.testing.assert_allclose(out, attention(q, k, v, causal=True),
                               rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="give both"):
        tqc.reference_attention(q, k, v, k_format="q8_0")
