"""The tuning database (tqc.tuning): round trip, key discipline, merge,
and tq-aot's lookup (lib/Target, through tqc.compile(tuning_db=...))."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

import tqc
from tqc import tuning

SPEC = tqc.KernelSpec("decode", "turbo3_0", head_dim=64, gqa=2)
PREFILL = tqc.KernelSpec("prefill", "turbo3_0", head_dim=64, gqa=2)


def other_target(**changes):
    key = dict(tuning.target_key())
    key.update(changes)
    return key


def test_version_and_target_key():
    assert tqc._tqc.VERSION == tqc.__version__
    key = tuning.target_key()
    assert key["tqc_version"] == tqc.__version__
    assert key["triple"].startswith("x86_64")
    assert len(key["features_hash"]) == 16
    assert key["cpu"] != "host"
    named = tuning.target_key("x86-64-v3")
    assert named["cpu"] == "x86-64-v3" and named["features"] == ""
    assert named["features_hash"] != key["features_hash"]
    with pytest.raises(ValueError, match="unknown CPU"):
        tuning.target_key("no-such-cpu")


def test_context_buckets_and_canonical_knobs():
    assert [tuning.context_bucket(n) for n in (1, 2, 3, 1000, 1024, 1025)] \
        == [1, 2, 4, 1024, 1024, 2048]
    assert tuning.canonical_knobs({"tile_size": "128", "lookup": "tile",
                                   "splits": 2}) \
        == '{"lookup":"tile","splits":2,"tile_size":128}'


def test_round_trip(tmp_path):
    path = tmp_path / "t.db"
    with tuning.TuningDB(path) as db:
        assert db.record(SPEC, 1000, {"tile_size": 128}, "ok", 2e-3,
                         rounds=5)
        assert db.record(SPEC, 1000, {"tile_size": 64}, "ok", 1e-3, rounds=5)
        assert db.record(SPEC, 1000, {"tile_size": 32}, "wrong", 1e-4)
        assert db.record(SPEC, 1000, {"tile_size": 16}, "compile_error",
                         0.0, detail="boom")
        assert db.record(SPEC, 5000, {"tile_size": 512}, "ok", 5e-3)
        # The same key again is not a new measurement.
        assert not db.record(SPEC, 1024, {"tile_size": "128"}, "ok", 9.0)
    with tuning.TuningDB(path) as db:  # reopened
        recs = db.records(SPEC)
        assert len(recs) == 5
        bad = [r for r in recs if r.status == "compile_error"][0]
        assert math.isinf(bad.seconds) and bad.detail == "boom"
        assert [r for r in recs if r.status == "wrong"][0].seconds == math.inf
        best = db.best(SPEC, 1000)
        assert best.knobs == {"tile_size": 64} and best.context == 1024
        assert best.measured_context == 1000
        assert db.best(SPEC).knobs == {"tile_size": 512}  # largest bucket
        assert db.best(SPEC, 100000) is None
        assert db.best(PREFILL) is None
        assert db.lookup(SPEC, 1024, {"tile_size": 128}).seconds == 2e-3
        assert db.missing(SPEC, [1000, 5000], [{"tile_size": 128}]) == \
            [({"tile_size": 128}, 5000)]
    with pytest.raises(ValueError, match="status"):
        tuning.TuningDB(path).record(SPEC, 1, {}, "fast", 1.0)
    with pytest.raises(ValueError, match="positive finite"):
        tuning.TuningDB(path).record(SPEC, 1, {}, "ok", math.inf)


def test_key_discipline(tmp_path):
    """Records of another version, CPU, feature set or triple are never
    returned for this target, however fast."""
    db = tuning.TuningDB(tmp_path / "k.db")
    db.record(SPEC, 4096, {"tile_size": 256}, "ok", 3e-3)
    for changes in ({"tqc_version": "0.0.1"}, {"cpu": "other"},
                    {"features_hash": "0" * 16}, {"triple": "aarch64"}):
        db.record(SPEC, 4096, {"tile_size": 64}, "ok", 1e-6,
                  target=other_target(**changes))
    assert db.best(SPEC, 4096).knobs == {"tile_size": 256}
    assert len(db.records(SPEC)) == 1
    assert len(db.records(SPEC, all_targets=True)) == 5
    assert len(db.targets()) == 5
    # Another target asks for its own.
    cpu = other_target(cpu="other")
    assert db.best(SPEC, 4096, target=cpu).seconds == 1e-6


def test_merge(tmp_path):
    a = tuning.TuningDB(tmp_path / "a.db")
    b = tuning.TuningDB(tmp_path / "b.db")
    a.record(SPEC, 4096, {"tile_size": 256}, "ok", 3e-3)
    a.record(SPEC, 4096, {"tile_size": 128}, "ok", 4e-3)
    # b: the same key (kept as a's), one new key, and another machine's.
    b.record(SPEC, 4096, {"tile_size": 128}, "ok", 1e-3)
    b.record(SPEC, 4096, {"tile_size": 64}, "ok", 2e-3)
    b.record(SPEC, 4096, {"tile_size": 32}, "ok", 1e-6,
             target=other_target(cpu="elsewhere", features_hash="f" * 16))
    b.close()
    assert a.merge(tmp_path / "b.db") == (2, 1)
    assert a.merge(tmp_path / "b.db") == (0, 3)  # idempotent
    mine = {json.dumps(r.knobs): r.seconds for r in a.records(SPEC)}
    assert mine == {'{"tile_size": 256}': 3e-3, '{"tile_size": 128}': 4e-3,
                    '{"tile_size": 64}': 2e-3}
    assert a.best(SPEC, 4096).knobs == {"tile_size": 64}
    elsewhere = other_target(cpu="elsewhere", features_hash="f" * 16)
    assert a.best(SPEC, 4096, target=elsewhere).knobs == {"tile_size": 32}
    with pytest.raises(sqlite3.DatabaseError):
        (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
        a.merge(tmp_path / "junk.db")


def test_knobs_from_the_compiler():
    names = [k.name for k in tqc.knobs(SPEC)]
    assert names[:3] == ["tile_size", "splits", "lookup"]
    tile = tqc.knobs(SPEC)[0]
    assert tile.default == "512" and tile.values[0] == "512"
    prefill = {k.name: k for k in tqc.knobs(PREFILL)}
    assert "splits" not in prefill and prefill["tile_size"].default == "64"
    # No codebook: no lut, no permute.
    q8 = {k.name: k for k in tqc.knobs(tqc.KernelSpec("decode", "q8_0",
                                                      head_dim=64))}
    assert q8["lookup"].values == ("tile", "select")
    assert "centroid_permute" not in q8
    # Rows long enough to loop by decode periods (tqprod3 d256: 16 value
    # chunks and 16 of signs) have max_unrolled_chunks; short ones do not.
    long = {k.name: k for k in tqc.knobs(tqc.KernelSpec(
        "decode", "tqprod3", head_dim=256))}
    assert long["max_unrolled_chunks"].values == ("48", "0")
    assert long["max_unrolled_chunks"].only_with == "lookup=tile"
    assert "max_unrolled_chunks" not in prefill
    # A named CPU's permutes: x86-64-v3 has AVX2, baseline x86-64 none.
    v3 = {k.name: k for k in tqc.knobs(SPEC, "x86-64-v3")}
    assert v3["centroid_permute"].values == ("avx2", "none")
    assert "centroid_permute" not in {k.name for k in tqc.knobs(SPEC,
                                                                 "x86-64")}
    assert tqc.knobs(tqc.KernelSpec("append", "turbo3_0", head_dim=64)) == []
    # The int8 score's lanes on a CPU with AVX512-VBMI: tq3_0's short
    # blocks default to block lanes and offer tokens and shifts too (shifts
    # first on Zen 4); turbo3_0 offers
    # tokens and shifts (blocks would build the same kernel as tokens),
    # shifts first on AMD's Zen 4, where vpmultishiftqb shares the dots'
    # pipes; polar4 (one plane) keeps tokens first there; without VBMI
    # rows.
    def lanes(fmt, cpu):
        return {k.name: k for k in tqc.knobs(
            tqc.KernelSpec("decode", fmt, head_dim=128, gqa=4),
            cpu)}["score_lanes"]
    tq3 = lanes("tq3_0", "icelake-server")
    assert (tq3.default, tq3.values) == ("blocks",
                                         ("blocks", "tokens", "shifts"))
    tq3zen = lanes("tq3_0", "znver4")
    assert (tq3zen.default, tq3zen.values) == (
        "shifts", ("shifts", "tokens", "blocks"))
    assert tq3.legal == "rows, tokens, blocks, shifts"
    turbo = lanes("turbo3_0", "icelake-server")
    assert (turbo.default, turbo.values) == ("tokens", ("tokens", "shifts"))
    zen4 = lanes("turbo3_0", "znver4")
    assert (zen4.default, zen4.values) == ("shifts", ("shifts", "tokens"))
    polar = lanes("polar4", "znver4")
    assert (polar.default, polar.values) == ("tokens", ("tokens", "shifts"))
    assert lanes("tq3_0", "x86-64-v3").values == ("rows",)
    # Where the next tile's rows are prefetched: L2 first on AMD's Zen
    # with AVX-512, L1 first elsewhere; both offered on AVX-512 CPUs,
    # decode and prefill.
    def prefetch(cpu, spec=SPEC):
        return {k.name: k for k in tqc.knobs(spec, cpu)}["prefetch"]
    zen4 = prefetch("znver4")
    assert (zen4.default, zen4.values) == ("l2", ("l2", "l1"))
    assert zen4.legal == "l1, l2" and zen4.only_with == "lookup=tile"
    icx = prefetch("icelake-server")
    assert (icx.default, icx.values) == ("l1", ("l1", "l2"))
    zen3 = prefetch("znver3")  # no AVX-512
    assert (zen3.default, zen3.values) == ("l1", ("l1",))
    assert prefetch("znver4", PREFILL).default == "l2"


def test_compile_with_knobs_and_tuning_db(tmp_path):
    lib = tqc.compile(kind=("decode", "prefill"), k_format="turbo3_0",
                      head_dim=64, gqa=2, cpu="x86-64-v3",
                      knobs={"tile_size": 32, "lookup": "select"},
                      output_dir=tmp_path / "k")
    got = {k.kind: k.info["knobs"] for k in lib.kernels}
    assert got["decode"]["tile_size"] == "32"
    assert got["prefill"]["lookup"] == "select"
    assert got["decode"]["centroid_permute"] == "avx2"
    with pytest.raises(ValueError, match="no knob 'splits'"):
        tqc.compile(kind="prefill", k_format="turbo3_0", head_dim=64,
                    knobs={"splits": 2}, output_dir=tmp_path / "bad")
    # Per kernel: the decode kernel's splits, the prefill kernel untouched.
    decode = tqc.KernelSpec("decode", "turbo3_0", head_dim=64, gqa=2).name
    lib = tqc.compile(kind=("decode", "prefill"), k_format="turbo3_0",
                      head_dim=64, gqa=2, cpu="x86-64-v3",
                      knobs={decode: {"splits": 2}},
                      output_dir=tmp_path / "per-kernel")
    got = {k.kind: k.info["knobs"] for k in lib.kernels}
    assert got["decode"]["splits"] == "2"
    assert got["prefill"]["tile_size"] == "64"  # its default
    with pytest.raises(ValueError, match="no kernel 'tq_decode_polar4"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    knobs={"tq_decode_polar4_polar4_d64_g1": {"splits": 2}},
                    output_dir=tmp_path / "bad-name")
    with pytest.raises(ValueError, match="not both"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    knobs={decode: {"splits": 2}, "tile_size": 64},
                    output_dir=tmp_path / "bad-mix")
    with pytest.raises(ValueError, match="takes integer >= 1"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    knobs={"tile_size": 0}, output_dir=tmp_path / "bad2")
    with pytest.raises(tqc.CompileError, match="not available on this CPU"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    cpu="x86-64-v3", centroid_permute="avx512",
                    output_dir=tmp_path / "bad3")

    # The database: this CPU's best at the largest bucket, another
    # version's faster record ignored.
    key = tuning.target_key("x86-64-v3")
    db = tuning.TuningDB(tmp_path / "t.db")
    db.record(SPEC, 2000, {"splits": 2, "tile_size": 128}, "ok", 2e-3,
              target=key)
    db.record(SPEC, 2000, {"splits": 1, "tile_size": 64}, "ok", 1e-3,
              target=key)
    db.record(SPEC, 2000, {"splits": 8, "tile_size": 16}, "ok", 1e-9,
              target=dict(key, tqc_version="9.9"))
    db.record(SPEC, 2000, {"splits": 16, "tile_size": 32}, "wrong", 0,
              target=key)
    best_id = db.best(SPEC, target=key).id
    db.close()
    native = tqc._tqc.lookup_tuning_record(str(tmp_path / "t.db"),
                                           tqc.__version__, "x86-64-v3",
                                           SPEC.name)
    assert native["id"] == best_id and native["knobs"] == {
        "splits": "1", "tile_size": "64"}
    lib = tqc.compile(kind=("decode", "prefill", "append"),
                      k_format="turbo3_0", head_dim=64, gqa=2,
                      cpu="x86-64-v3", tuning_db=tmp_path / "t.db",
                      output_dir=tmp_path / "tuned")
    decode = next(k for k in lib.kernels if k.kind == "decode")
    assert decode.info["knobs"]["tile_size"] == "64"
    assert decode.info["knobs"]["splits"] == "1"
    assert len(lib.tuning_report) == 2
    assert f"record {best_id} (context 2048" in lib.tuning_report[0]
    assert "no record" in lib.tuning_report[1]  # the prefill kernel
    # Another bucket: defaults, said so.
    lib = tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64, gqa=2,
                      cpu="x86-64-v3", tuning_db=tmp_path / "t.db",
                      tuning_context=100, output_dir=tmp_path / "other")
    assert lib.kernels[0].info["knobs"]["tile_size"] == "512"
    assert "context bucket 128: defaults" in lib.tuning_report[0]


def test_score_dot_knob_takes_the_cpus_default_lanes(tmp_path):
    # The int8 score asked for by a knob (as tq-bench's variants and the
    # autotuner ask) gets the lanes tqc.knobs names as the default, the
    # same as a library built with score_dot=i8: shifts for keys with a
    # 2-bit plane under a 1-bit one on AMD's Zen 4, blocks for tq3_0's
    # short blocks on Intel, tokens for one plane. (It got tokens for all
    # of them: tq3_0 11-13% slower on Zen 4.)
    def lanes(fmt, cpu, knobs):
        lib = tqc.compile(kind="decode", k_format=fmt, head_dim=128, gqa=4,
                          cpu=cpu, knobs=knobs,
                          output_dir=tmp_path / f"{fmt}-{cpu}-{len(knobs)}")
        return lib.kernels[0].info["knobs"]["score_lanes"]
    i8 = {"score_dot": "i8"}
    assert lanes("turbo3_0", "znver4", i8) == "shifts"
    assert lanes("tq3_0", "znver4", i8) == "shifts"
    assert lanes("polar4", "znver4", i8) == "tokens"
    assert lanes("tq3_0", "icelake-server", i8) == "blocks"
    # A lanes knob of its own is kept.
    assert lanes("tq3_0", "znver4",
                 {"score_dot": "i8", "score_lanes": "tokens"}) == "tokens"
