"""The autotuner: variants compiled, checked against the reference before
they are timed, failures recorded as infinitely slow, only what is missing
measured again. (Mechanics only: nothing here compares speeds.)"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

import tqc
from tqc import tuning
from tqc.autotune import variants

SPEC = tqc.KernelSpec("decode", "turbo3_0", head_dim=64, gqa=2)
KNOBS = {"tile_size": [512, 64], "splits": [4, 2], "lookup": ["tile"],
         "centroid_permute": ["avx2"], "score_rows": [4],
         "accumulators": [16]}
CPU = "x86-64-v3"


def test_variants():
    grid = variants(SPEC, KNOBS, cpu=CPU, strategy="grid")
    assert len(grid) == 4
    axes = variants(SPEC, KNOBS, cpu=CPU, strategy="axes")
    assert axes[0] == {"tile_size": "512", "splits": "4", "lookup": "tile",
                       "centroid_permute": "avx2", "score_rows": "4",
                       "accumulators": "16", "score_dot": "f32",
                       "score_lanes": "rows", "value_dot": "f32",
                       "pair_ahead": "off", "prefetch": "l1"}
    assert len(axes) == 3
    with pytest.raises(ValueError, match="no knob 'unroll'"):
        variants(SPEC, {"unroll": [1]}, cpu=CPU)
    # max_unrolled_chunks only matters with the tile lookup: one variant.
    long = tqc.KernelSpec("decode", "tqprod3", head_dim=256)
    vs = variants(long, {"tile_size": [512], "splits": [4],
                         "lookup": ["select"], "centroid_permute": ["avx2"]},
                  cpu=CPU, strategy="grid")
    assert len(vs) == 1 and vs[0]["max_unrolled_chunks"] == "48"


def test_wrong_and_failing_variants_are_never_chosen(tmp_path):
    compiled = []

    def compile_fn(knobs, out_dir):
        compiled.append(knobs)
        if knobs["splits"] == "2" and knobs["tile_size"] == "512":
            raise tqc.CompileError("injected: this variant does not compile")
        return tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                           gqa=2, cpu=CPU, knobs=knobs, output_dir=out_dir)

    def wrap(knobs, call):
        if knobs["tile_size"] == "64" and knobs["splits"] == "2":
            # Fast and wrong: returns zeros without running the kernel.
            def wrong():
                out = call.__defaults__[0]
                out[...] = 0.0
                return out
            return wrong
        return call

    lines = []
    db_path = tmp_path / "tune.db"
    result = tqc.autotune(SPEC, contexts=[300, 700], db=db_path, knobs=KNOBS,
                          strategy="grid", rounds=2, num_kv_heads=2,
                          flush_mib=1, threads=1, jobs=2, cpu=CPU,
                          compile_fn=compile_fn, wrap_attention=wrap,
                          # No head-to-head stage (its test is below): the
                          # sample counts must not depend on which won.
                          confirm_rounds=0, progress=lines.append)
    assert len(compiled) == 4
    key = tuning.target_key(CPU)
    with tuning.TuningDB(db_path) as db:
        recs = db.records(SPEC, target=key)
    assert len(recs) == 8  # 4 variants x 2 contexts
    by = {(r.knobs["tile_size"], r.knobs["splits"], r.context): r
          for r in recs}
    for ctx in (512, 1024):
        assert by[(512, 2, ctx)].status == "compile_error"
        assert math.isinf(by[(512, 2, ctx)].seconds)
        assert "injected" in by[(512, 2, ctx)].detail
        assert by[(64, 2, ctx)].status == "wrong"
        assert math.isinf(by[(64, 2, ctx)].seconds)
        assert by[(512, 4, ctx)].ok and by[(64, 4, ctx)].ok
        # Each time comes with its rounds' spread; failures have none.
        for ok in (by[(512, 4, ctx)], by[(64, 4, ctx)]):
            assert ok.spread is not None and ok.spread >= 1.0
            assert json.loads(ok.detail)["samples"] == 2
        assert by[(64, 2, ctx)].spread is None
        assert by[(512, 2, ctx)].spread is None
    for ctx in (300, 700):
        assert result.best[ctx].status == "ok"
        assert (result.best[ctx].knobs["tile_size"],
                result.best[ctx].knobs["splits"]) in ((512, 4), (64, 4))
        assert result.default[ctx].knobs["tile_size"] == 512
    assert result.measured == 4
    assert any("WRONG" in line for line in lines)
    assert any("best" in line and "spread" in line for line in lines)
    assert any("compile failed" in line for line in lines)

    # Re-tuning measures only what is missing: nothing here, one new
    # variant there.
    compiled.clear()
    again = tqc.autotune(SPEC, contexts=[300, 700], db=db_path, knobs=KNOBS,
                         strategy="grid", rounds=2, num_kv_heads=2,
                         flush_mib=1, threads=1, cpu=CPU,
                         compile_fn=compile_fn, progress=False)
    assert compiled == [] and again.measured == 0
    assert again.best[700].id == result.best[700].id
    more = dict(KNOBS, tile_size=[512, 64, 128])
    again = tqc.autotune(SPEC, contexts=[700], db=db_path, knobs=more,
                         strategy="grid", rounds=2, num_kv_heads=2,
                         flush_mib=1, threads=1, cpu=CPU,
                         compile_fn=compile_fn, progress=False)
    assert sorted(k["tile_size"] for k in compiled) == ["128", "128"]
    assert again.measured == 2

    # tq-aot's lookup agrees with the database's best.
    native = tqc._tqc.lookup_tuning_record(str(db_path), tqc.__version__,
                                           CPU, SPEC.name, 700)
    with tuning.TuningDB(db_path) as db:
        assert native["id"] == db.best(SPEC, 700, target=key).id


def test_tune_command(tmp_path, capsys):
    from tqc.tune import main
    assert main(["--list-knobs", "--k-format", "turbo3_0", "--head-dim",
                 "64", "--gqa", "2", "--cpu", CPU]) == 0
    out = capsys.readouterr().out
    assert "tq_decode_turbo3_0_turbo3_0_d64_g2" in out
    assert "tile_size: 512, 64" in out
    db = str(tmp_path / "cli.db")
    assert main(["--db", db, "--k-format", "turbo3_0", "--head-dim", "64",
                 "--gqa", "2", "--cpu", CPU, "--contexts", "200",
                 "--knob", "tile_size=64", "--knob", "splits=1",
                 "--knob", "lookup=tile", "--knob", "centroid_permute=avx2",
                 "--rounds", "1", "--kv-heads", "1", "--flush-mib", "1",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "context 200\tbest" in out and "spread" in out
    assert main(["--db", db, "--show", "--k-format", "turbo3_0",
                 "--head-dim", "64", "--gqa", "2", "--cpu", CPU,
                 "--contexts", "200"]) == 0
    assert "record" in capsys.readouterr().out


def test_head_major_pools(tmp_path, monkeypatch):
    # Two KV heads over head-major pools: the variant's output is checked
    # against the reference over the same bytes, so a misread pool would be
    # recorded wrong (infinitely slow), not timed.
    made = []

    class Spy(tqc.KVCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self.head_major)

    monkeypatch.setattr(tqc, "KVCache", Spy)
    r = tqc.autotune(
        SPEC, [200], db=str(tmp_path / "hm.db"), cpu=CPU, num_kv_heads=2,
        head_major=True, rounds=1, flush_mib=1, progress=False,
        knobs={"tile_size": [64], "splits": [1], "lookup": ["tile"],
               "centroid_permute": ["avx2"]})
    assert math.isfinite(r.best[200].seconds)
    assert made == [True]
    with pytest.raises(ValueError, match="head_major"):
        tqc.autotune(SPEC, [200], target="nvptx", head_major=True,
                              progress=False)


@pytest.mark.parametrize("kind", ["ggml_decode", "ggml_prefill"])
def test_ggml_kernels_are_tuned_through_the_engine_abi(tmp_path, kind):
    # ggml packs per variant, timed by tq_attention_v1 (prefill under a
    # causal mask), recorded under the ggml kernel's name, which tq-aot's
    # lookup finds.
    spec = tqc.KernelSpec(kind, "turbo3_0", head_dim=64, gqa=2)
    assert spec.name.startswith("tq_ggml_")
    knob_values = {"tile_size": [512, 64] if kind == "ggml_decode"
                   else [64, 32], "lookup": ["tile"],
                   "centroid_permute": ["avx2"], "score_rows": [4]}
    if kind == "ggml_decode":
        knob_values.update(splits=[4], accumulators=[16])
    db_path = tmp_path / "ggml.db"
    result = tqc.autotune(spec, contexts=[300], db=db_path,
                          knobs=knob_values, strategy="grid", rounds=2,
                          num_kv_heads=2, prefill_rows=4, flush_mib=1,
                          threads=1, jobs=2, cpu=CPU, progress=False)
    assert result.measured == 2
    assert result.best[300].ok and result.default[300].ok
    key = tuning.target_key(CPU)
    with tuning.TuningDB(db_path) as db:
        recs = db.records(spec, target=key)
        assert {r.spec for r in recs} == {spec.name}
        best = db.best(spec, 300, target=key)
    native = tqc._tqc.lookup_tuning_record(str(db_path), tqc.__version__,
                                           CPU, spec.name, 300)
    assert native["id"] == best.id
    with pytest.raises(ValueError, match="causal and window masks"):
        tqc.autotune(tqc.KernelSpec(kind, "turbo3_0", head_dim=64, gqa=2,
                                    causal=True), contexts=[300],
                     progress=False)


def test_tune_tolerance(tmp_path, capsys):
    from tqc.tune import main
    args = ["--db", str(tmp_path / "tol.db"), "--k-format", "turbo3_0",
            "--head-dim", "64", "--gqa", "2", "--cpu", CPU, "--contexts",
            "200", "--knob", "tile_size=64", "--knob", "splits=1",
            "--knob", "lookup=tile", "--knob", "centroid_permute=avx2",
            "--rounds", "1", "--kv-heads", "1", "--flush-mib", "1",
            "--quiet"]
    # Below f32 rounding: every variant, the default too, is wrong and
    # none is timed.
    assert main(args + ["--tolerance", "1e-12"]) == 0
    assert "no correct variant" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(args + ["--tolerance", "0"])
    assert "--tolerance must be positive" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tolerance must be positive"):
        tqc.autotune(SPEC, contexts=[200], tolerance=float("nan"),
                     progress=False)


@pytest.mark.parametrize("confirm", [0, 3])
def test_winner_is_confirmed_against_the_default(confirm):
    # The default is made slow, so the other variant wins the first pass;
    # with confirm rounds the two are timed again head to head.
    knobs = dict(KNOBS, tile_size=[512, 64], splits=[4])
    calls = {}

    def wrap(knobs, call):
        key = knobs["tile_size"]

        def counted():
            calls[key] = calls.get(key, 0) + 1
            if key == "512":
                time.sleep(0.002)
            return call()
        return counted

    lines = []
    tqc.autotune(SPEC, contexts=[300], knobs=knobs, strategy="grid",
                 rounds=2, confirm_rounds=confirm, num_kv_heads=2,
                 flush_mib=1, threads=1, jobs=2, cpu=CPU,
                 wrap_attention=wrap, progress=lines.append)
    # One checking call, 2 rounds, then `confirm` head-to-head calls each.
    assert calls == {"512": 3 + confirm, "64": 3 + confirm}
    assert any("confirming" in line for line in lines) == bool(confirm)
    with pytest.raises(ValueError, match="confirm_rounds"):
        tqc.autotune(SPEC, contexts=[300], knobs=knobs, confirm_rounds=-1,
                     cpu=CPU)


def test_flush_size():
    # "auto" reads twice the last-level cache the OS reports (at least 64
    # MiB), as tq-bench does; anything but a count or "auto" is refused
    # before anything is compiled.
    from tqc.autotune import auto_flush_mib, last_level_cache_bytes
    llc = last_level_cache_bytes()
    assert auto_flush_mib() >= max(64, 2 * llc / (1 << 20))
    for bad in (-1, "lots", 1.5, True):
        with pytest.raises(ValueError, match="flush_mib: expected a count"):
            tqc.autotune(SPEC, contexts=[200], flush_mib=bad, cpu=CPU,
                         progress=False)


def test_tune_command_flush_size(capsys):
    from tqc.tune import main
    with pytest.raises(SystemExit):
        main(["--db", "unused.db", "--flush-mib", "some"])
    assert "expected a count of MiB (>= 0) or 'auto', got 'some'" in \
        capsys.readouterr().err
