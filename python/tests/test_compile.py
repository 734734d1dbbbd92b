"""tqc.compile: the kernels tq-aot would build for the same options, the
library's kernels.json, and the compiler's errors as exceptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tqc


def test_library_lists_the_product_of_the_options(libraries):
    lib = libraries["plain"]
    assert lib.target == "cpu" and lib.abi == "runtime"
    assert lib.path.name == "libtqkernels.so" and lib.path.exists()
    names = set(lib.names())
    for d in (64, 128):
        for k, v in (("turbo3_0", "turbo3_0"), ("q8_0", "polar4"),
                     ("tq3_0", "tq3_0")):
            for kind in ("decode", "prefill"):
                assert f"tq_{kind}_{k}_{v}_d{d}_g2" in lib
        for f in ("turbo3_0", "q8_0", "polar4", "tq3_0"):
            assert f"tq_append_{f}_d{d}" in names
    # Only the listed pairs: no q8_0/q8_0 or turbo3_0/polar4.
    assert "tq_decode_q8_0_q8_0_d64_g2" not in lib
    assert "tq_decode_turbo3_0_polar4_d64_g2" not in lib
    assert len(names) == 2 * (3 * 2 + 4)
    with open(lib.directory / "kernels.json") as f:
        assert json.load(f)["kernels"][0]["name"] == lib.kernels[0].name
    decode = next(k for k in lib.kernels
                  if k.name == "tq_decode_q8_0_polar4_d128_g2")
    assert (decode.kind, decode.k_format, decode.v_format, decode.head_dim,
            decode.group) == ("decode", "q8_0", "polar4", 128, 2)


def test_causal_softcap_and_ggml_names(libraries):
    assert "tq_prefill_turbo3_0_turbo3_0_d64_g2_causal_sc3000" in \
        libraries["causal"]
    ggml = libraries["ggml"]
    assert ggml.abi == "ggml" and ggml.path.name == "libtq_ggml_kernels.so"
    for name in ("tq_ggml_decode_q8_0_polar4_d64_g2",
                 "tq_ggml_prefill_turbo3_0_turbo3_0_d64_g2",
                 "tq_append_q8_0_d64", "tq_dequantize_polar4_d64"):
        assert name in ggml
    assert "tq_dequantize_q8_0_d64" not in ggml  # ggml decodes q8_0 itself
    assert "tq_ggml_decode_turbo3_0_turbo3_0_d64_g2_sc3000" in \
        libraries["ggml_softcap"]


def test_compile_error_carries_the_diagnostic(tmp_path):
    with pytest.raises(tqc.CompileError,
                       match="tq_decode_turbo3_0_turbo3_0_d64_g1.*: "
                             ".*window must be non-negative, got -5"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    window=-5, output_dir=tmp_path / "w")
    with pytest.raises(tqc.CompileError, match="unknown CPU 'no-such-cpu'"):
        tqc.compile(kind="append", k_format="q8_0", head_dim=32,
                    cpu="no-such-cpu", output_dir=tmp_path / "c")
    with pytest.raises(tqc.CompileError,
                       match="unknown CPU feature 'avx99' in 'x86-64-v3\\+avx99'"):
        tqc.compile(kind="append", k_format="q8_0", head_dim=32,
                    cpu="x86-64-v3+avx99", output_dir=tmp_path / "f")
    assert issubclass(tqc.CompileError, RuntimeError)


def test_cpu_with_features(tmp_path):
    # A CPU name with ISA features added (tq-aot --chip=x86-64-v3+avxvnni):
    # AVX2 plus AVX-VNNI, whose integer dot knobs the kernel then has.
    spec = tqc.KernelSpec("decode", "polar4", "polar4", 64, 2)
    names = {k.name for k in tqc.knobs(spec, "x86-64-v3+avxvnni")}
    assert {"score_dot", "value_dot"} <= names
    assert "score_dot" not in {k.name for k in tqc.knobs(spec, "x86-64-v2")}
    lib = tqc.compile(kind="decode", k_format="polar4", head_dim=64, gqa=2,
                      cpu="x86-64-v3+avxvnni",
                      knobs={"score_dot": "i8", "value_dot": "i16"},
                      output_dir=tmp_path)
    assert lib.metadata["cpu"] == "x86-64-v3+avxvnni"
    (kernel,) = lib.metadata["kernels"]
    assert kernel["knobs"]["score_dot"] == "i8"
    assert kernel["knobs"]["value_dot"] == "i16"


def test_amx_knob(tmp_path):
    # Prefill kernels of a CPU with AMX-BF16 have the amx knob (tile
    # products; compiled only, never run here); decode kernels and CPUs
    # without AMX do not, and asking for it there is refused.
    prefill = tqc.KernelSpec("prefill", "turbo3_0", "turbo3_0", 128, 4)
    decode = tqc.KernelSpec("decode", "turbo3_0", "turbo3_0", 128, 4)
    (amx,) = [k for k in tqc.knobs(prefill, "sapphirerapids")
              if k.name == "amx"]
    assert amx.default == "off" and amx.values == ("off",)
    assert "amx" not in {k.name for k in tqc.knobs(decode, "sapphirerapids")}
    assert "amx" not in {k.name for k in tqc.knobs(prefill, "znver4")}
    lib = tqc.compile(kind="prefill", k_format="turbo3_0", head_dim=128,
                      gqa=4, cpu="sapphirerapids", knobs={"amx": "on"},
                      output_dir=tmp_path / "spr")
    (kernel,) = lib.metadata["kernels"]
    assert kernel["knobs"]["amx"] == "on"
    with pytest.raises((ValueError, tqc.CompileError), match="amx"):
        tqc.compile(kind="prefill", k_format="turbo3_0", head_dim=128,
                    gqa=4, cpu="znver4", knobs={"amx": "on"},
                    output_dir=tmp_path / "zn4")


def test_bad_options():
    with pytest.raises(ValueError, match="k_format: unknown format 'turbo5'"):
        tqc.compile(k_format="turbo5", head_dim=64)
    with pytest.raises(ValueError, match="kind: expected one of"):
        tqc.compile(kind="combine", k_format="q8_0", head_dim=64)
    with pytest.raises(ValueError, match="head_dim: expected positive"):
        tqc.compile(k_format="q8_0", head_dim=0)
    with pytest.raises(ValueError, match="lookup: expected tile, select or "
                                         "lut, got 'fast'"):
        tqc.compile(kind="append", k_format="q8_0", head_dim=32,
                    lookup="fast")
    with pytest.raises(ValueError, match="abi='ggml' kernels read causal"):
        tqc.compile(abi="ggml", k_format="q8_0", head_dim=32, causal=True)
    with pytest.raises(ValueError, match="pairs replaces"):
        tqc.compile(pairs=[("q8_0", "q8_0")], k_format="q8_0")
    with pytest.raises(ValueError, match="v_head_dim is for abi='ggml'"):
        tqc.compile(k_format="q8_0", head_dim=64, v_head_dim=32)
    with pytest.raises(ValueError, match="centred_k is for abi='ggml'"):
        tqc.compile(k_format="q8_0", head_dim=64, centred_k=True)
    with pytest.raises(TypeError, match="v_head_dim: expected an integer"):
        tqc.compile(abi="ggml", k_format="q8_0", head_dim=64, v_head_dim=-1)


def test_ggml_pack_v_head_dim_and_centred_k(tmp_path):
    """The options of tq-aot --abi=ggml --v-head-dim --centred-k: the same
    kernels, V rows encoded at V's head dim, centred K row kernels."""
    lib = tqc.compile(abi="ggml", pairs=[("turbo3_0", "turbo4_0")],
                      head_dim=128, v_head_dim=64, gqa=1, centred_k=True,
                      output_dir=tmp_path / "mla")
    names = set(lib.names())
    assert {"tq_append_turbo3_0_d128", "tq_append_turbo3_0_d128_centred",
            "tq_dequantize_turbo3_0_d128_centred",
            "tq_append_turbo4_0_d64", "tq_dequantize_turbo4_0_d64",
            "tq_ggml_decode_turbo3_0_turbo4_0_d128_dv64_g1",
            "tq_ggml_prefill_turbo3_0_turbo4_0_d128_dv64_g1"} <= names, names
    # V rows are never encoded at K's head dim, nor centred.
    assert "tq_append_turbo4_0_d128" not in names
    assert not any(n.startswith("tq_append_turbo4_0") and "centred" in n
                   for n in names)


def test_progress_and_output_dir(tmp_path):
    seen = []
    lib = tqc.compile(kind=("append", "dequantize"), k_format="q8_0",
                      v_format="turbo2_0", head_dim=32,
                      output_dir=tmp_path / "rows", jobs=1,
                      progress=lambda i, n, name: seen.append((i, n, name)))
    assert lib.directory == tmp_path / "rows"
    assert [s[2] for s in seen] == lib.names()
    assert seen[0][:2] == (0, 4) and len(seen) == 4
    assert (tmp_path / "rows" / "tq_kernels.h").exists()


def test_jobs(tmp_path):
    # Several jobs: every kernel reported once, the count of kernels
    # started in order, whichever thread calls; the library is byte for
    # byte the one of one job.
    seen = []
    args = dict(kind=("append", "decode"), k_format=("f16", "turbo3_0"),
                head_dim=32, gqa=(1, 2))
    one = tqc.compile(output_dir=tmp_path / "one", jobs=1, **args)
    two = tqc.compile(output_dir=tmp_path / "two", jobs=2,
                      progress=lambda i, n, name: seen.append((i, n, name)),
                      **args)
    assert sorted(s[2] for s in seen) == sorted(two.names())
    assert [s[:2] for s in seen] == [(i, 6) for i in range(6)]
    for name in ("libtqkernels.so", "kernels.json"):
        assert ((tmp_path / "one" / name).read_bytes()
                == (tmp_path / "two" / name).read_bytes()), name
    assert one.names() == two.names()
    with pytest.raises(ValueError, match="jobs must be >= 0"):
        tqc.compile(kind="append", k_format="f16", head_dim=16, jobs=-1)
    with pytest.raises(TypeError, match="jobs: expected an integer"):
        tqc.compile(kind="append", k_format="f16", head_dim=16, jobs=1.5)

    def fail(i, n, name):
        raise KeyError(name)

    with pytest.raises(KeyError, match="tq_append_q8_0_d32"):
        tqc.compile(kind="append", k_format="q8_0", head_dim=32,
                    output_dir=tmp_path / "fail", progress=fail)


def test_default_output_dir_is_temporary():
    lib = tqc.compile(kind="append", k_format="f16", head_dim=16)
    assert lib.directory.name.startswith("tqc-kernels-")
    assert lib.names() == ["tq_append_f16_d16"]


def test_gpu_library(tmp_path):
    lib = tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                      target="nvptx", cpu="sm_80", output_dir=tmp_path)
    assert lib.target == "nvptx"
    assert (tmp_path / "tq_kernels.ptx").exists()
    with pytest.raises(ValueError, match="load it with tqc.GpuRuntime"):
        lib.path


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_ir_inputs(tmp_path):
    """tq-aot --input: each public func.func of an MLIR file is a kernel
    of the library (kind "ir"), with or without specs."""
    lib = tqc.compile(inputs=EXAMPLES / "decode_turbo3_gqa4.mlir",
                      output_dir=tmp_path / "ir")
    assert [(k.name, k.kind) for k in lib.kernels] == [("decode", "ir")]
    assert lib.path.exists()
    both = tqc.compile(kind="append", k_format="q8_0", head_dim=32,
                       inputs=[EXAMPLES / "decode_turbo3_gqa4.mlir"],
                       output_dir=tmp_path / "both")
    assert sorted(both.names()) == ["decode", "tq_append_q8_0_d32"]
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f( {")
    with pytest.raises(tqc.CompileError, match="cannot parse '.*bad.mlir'"):
        tqc.compile(inputs=[bad], output_dir=tmp_path / "bad")
    with pytest.raises(TypeError, match="inputs: expected paths"):
        tqc.compile(inputs=[3])
    with pytest.raises(ValueError, match="IR files compile for target='cpu'"):
        tqc.compile(inputs=[EXAMPLES / "decode_turbo3_gqa4.mlir"],
                    target="nvptx", cpu="sm_80")
