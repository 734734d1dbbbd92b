"""tqc.quality: the per-format metrics against values known independently
(the TurboQuant paper's Lloyd-Max distortions and 2/pi bias, exact codecs),
the bounds' bookkeeping, the command line, plots and .npy rows."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

import tqc
from tqc import quality


def test_paper_bounds_families():
    b = quality.paper_bounds("polar3")
    assert b["family"] == "TurboQuant_mse" and b["bits"] == 3
    assert b["mse_bound"] == pytest.approx(math.sqrt(3) * math.pi / 2 / 64)
    assert b["mse_lower"] == pytest.approx(1 / 64) and b["ip_bound"] is None
    assert quality.paper_bounds("turbo4_0")["bits"] == 4
    assert quality.paper_bounds("haar4")["family"] == "TurboQuant_mse"
    p = quality.paper_bounds("tqprod2")
    assert p["family"] == "TurboQuant_prod" and p["unbiased"]
    assert p["ip_bound"] == pytest.approx(math.sqrt(3) * math.pi ** 2 / 16)
    assert p["mse_bound"] is None
    for f in ("tq3_0", "tq3_0_legacy", "q8_0", "f16"):
        n = quality.paper_bounds(f)
        assert n["family"] is None and n["mse_bound"] is None
        assert "no paper bound" in n["note"]
    # Every format tqc knows gets an answer.
    for name, _ in tqc.formats():
        quality.paper_bounds(name)


def test_synthetic_rows():
    s = quality.synthetic_rows("sphere", 100, 64, seed=3)
    assert s.dtype == np.float32 and s.shape == (100, 64)
    assert np.allclose(np.linalg.norm(s, axis=1), 1, atol=1e-5)
    o = quality.synthetic_rows("outliers", 400, 128)
    assert np.std(o[:, 101]) > 20 * np.std(o[:, 0])
    with pytest.raises(ValueError, match="unknown source"):
        quality.synthetic_rows("uniform", 1, 8)


# The sphere-design Lloyd-Max distortions d*MSE at d = 128 (docs/
# quant-library.md; the paper: 0.36, 0.117, 0.03, 0.009).
LLOYD_MAX_128 = {1: 0.3609, 2: 0.1160, 3: 0.03397, 4: 0.009315}


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_polar_mse_is_lloyd_max_and_within_the_bound(bits):
    x = quality.synthetic_rows("sphere", 1024, 128, seed=5)
    r = quality.measure(x, f"polar{bits}")
    assert r["mse"] == pytest.approx(LLOYD_MAX_128[bits], rel=0.06)
    assert r["mse"] <= quality.paper_bounds(f"polar{bits}")["mse_bound"]
    assert r["mse"] >= quality.paper_bounds(f"polar{bits}")["mse_lower"]
    assert r["bits_per_value"] == pytest.approx(bits + 16 / 128)


def test_inner_product_bias_mse_vs_prod():
    x = quality.synthetic_rows("sphere", 1024, 128, seed=6)
    # An MSE quantiser at b = 1 shrinks inner products by 2/pi (paper).
    p1 = quality.measure(x, "polar1")
    assert p1["ip_slope"] == pytest.approx(2 / math.pi - 1, abs=0.02)
    # TurboQuant_prod is unbiased, and within Theorem 2's bound.
    for b in (2, 3, 4):
        r = quality.measure(x, f"tqprod{b}", queries=128)
        assert abs(r["ip_slope"]) < 0.02, r
        assert abs(r["ip_bias"]) < 5 * r["ip_bias_stderr"] + 1e-3
        assert r["ip_distortion"] <= quality.paper_bounds(f"tqprod{b}")["ip_bound"]
        assert r["ip_distortion"] >= 4.0 ** -b


def test_measure_against_an_independent_computation():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((300, 64)).astype(np.float32)
    x[7] = 0                                   # a zero row is left out
    r = quality.measure(x, "turbo3_0", queries=16, context=100, seed=2)
    xh = tqc.decode(tqc.encode(x, "turbo3_0"), "turbo3_0", 64).astype(float)
    keep = np.arange(300) != 7
    ref = np.mean([np.sum((xh[i] - x[i]) ** 2) / np.sum(x[i].astype(float) ** 2)
                   for i in np.flatnonzero(keep)])
    assert r["mse"] == pytest.approx(ref, rel=1e-9)
    cos = np.mean([xh[i] @ x[i] / np.linalg.norm(xh[i]) / np.linalg.norm(x[i])
                   for i in np.flatnonzero(keep)])
    assert r["cosine"] == pytest.approx(cos, rel=1e-6)
    # Attention error of context 1: softmax of one key is 1, o = v = k.
    one = quality.measure(x[:50], "turbo3_0", context=1)
    kk = x[:50].astype(float)
    ref1 = math.sqrt(np.sum((xh[:50] - kk) ** 2) / np.sum(kk ** 2))
    assert one["attn_rel_error"] == pytest.approx(ref1, rel=1e-9)


def test_exact_formats_are_near_exact():
    x = quality.synthetic_rows("gaussian", 512, 128)
    f = quality.measure(x, "f16")
    assert f["mse"] < 1e-6 and f["cosine"] > 0.999999
    q = quality.measure(x, "q8_0")
    assert 1e-6 < q["mse"] < 1e-4 and q["attn_rel_error"] < 0.05
    t = quality.measure(x, "turbo2_0")
    assert t["attn_rel_error"] > 10 * q["attn_rel_error"]


def test_evaluate_and_table():
    rep = quality.evaluate(["polar2", "tqprod3", "q8_0"], ["sphere"],
                           head_dim=64, rows=256)
    assert [r["format"] for r in rep["results"]] == ["polar2", "tqprod3", "q8_0"]
    text = quality.table(rep)
    lines = {l.split("|")[2].strip(): l for l in text.splitlines()
             if l.startswith("| sphere")}
    assert "—" in lines["q8_0"] and "—" not in lines["polar2"]
    assert "Thm 1" in text and "Thm 2" in text
    with pytest.raises(ValueError, match="unknown format"):
        quality.evaluate(["polar9"], ["sphere"])


def test_npy_rows_and_cli(tmp_path, capsys):
    rng = np.random.default_rng(4)
    kv = rng.standard_normal((40, 2, 64)).astype(np.float32)   # [t, h, d]
    path = tmp_path / "K_L0.npy"
    np.save(path, kv)
    rows = quality.load_rows(path)
    assert rows.shape == (80, 64) and np.array_equal(rows[1], kv[0, 1])
    assert quality.load_rows(path, max_rows=10).shape == (10, 64)
    bad = tmp_path / "bad.npy"
    kv[3, 1, 5] = np.nan
    np.save(bad, kv)
    with pytest.raises(ValueError, match="row 7 holds a non-finite"):
        quality.load_rows(bad)
    out = tmp_path / "q.json"
    assert quality.main(["--rows", str(path), "--formats", "polar3,f16",
                         "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| K_L0.npy | polar3 |" in printed
    rep = json.loads(out.read_text())
    assert {r["head_dim"] for r in rep["results"]} == {64}
    assert rep["results"][0]["bounds"]["family"] == "TurboQuant_mse"
    assert quality.main(["--rows", str(bad)]) == 2
    assert "non-finite" in capsys.readouterr().err


def test_plot(tmp_path, capsys, monkeypatch):
    rep = quality.evaluate(["polar2", "q8_0"], ["sphere", "outliers"],
                           head_dim=128, rows=256)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        matplotlib = None
    if matplotlib is not None:
        paths = quality.plot(rep, tmp_path / "png")
        assert len(paths) == len(quality._PLOTS)
        for p in paths:
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Without matplotlib: a clear message, and the CLI fails before work.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(RuntimeError, match="needs matplotlib"):
        quality.plot(rep, tmp_path / "none")
    assert quality.main(["--formats", "f16", "--plot", str(tmp_path)]) == 2
    assert "needs matplotlib" in capsys.readouterr().err
    if matplotlib is None:
        pytest.skip("matplotlib is not installed: only the error path ran")
