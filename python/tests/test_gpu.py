"""GPU targets from Python: the GPU runtime's bindings and their error
paths, the block_warps knob, and the autotuner on GPU targets — skipped,
saying why, where no driver or device answers (this machine), and its
mechanics (records keyed by chip and device, wrong variants never chosen,
tq-aot's lookup) through a stand-in device that computes the reference on
the host. Kernel output on a real GPU is tested only where a CUDA device
is present (skipped otherwise, with the reason)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import tqc
from tqc import tuning

SPEC = tqc.KernelSpec("decode", "turbo3_0", head_dim=64, gqa=2)
CHIP = "sm_90a"


@pytest.fixture(scope="module")
def ptx_library(tmp_path_factory):
    return tqc.compile(kind=("append", "decode"), k_format="turbo3_0",
                       head_dim=64, gqa=2, target="nvptx", cpu=CHIP,
                       output_dir=tmp_path_factory.mktemp("ptx") / "lib")


def cuda_device(library):
    """A GpuRuntime on CUDA device 0, or None where none answers."""
    try:
        return tqc.GpuRuntime(library)
    except tqc.TQError as e:
        if e.status == "TQ_STATUS_UNAVAILABLE":
            return None
        raise


def test_gpu_knobs():
    (warps,) = tqc.knobs(SPEC, CHIP, target="nvptx")
    assert warps.name == "block_warps"
    assert warps.values == ("4", "2", "8") and warps.default == "4"
    assert warps.legal == "1, 2, 4, 8, 16, 32"
    (wave64,) = tqc.knobs(SPEC, "gfx942", target="amdgcn")
    assert wave64.legal == "1, 2, 4, 8, 16"  # 1024 threads a block at most
    assert tqc.knobs(tqc.KernelSpec("append", "turbo3_0", head_dim=64),
                     CHIP, target="nvptx") == []
    with pytest.raises(ValueError, match="unsupported chip 'sm_70'"):
        tqc.knobs(SPEC, "sm_70", target="nvptx")


def test_block_warps_set_the_block(tmp_path):
    lib = tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                      gqa=2, target="nvptx", cpu=CHIP,
                      knobs={"block_warps": 8}, output_dir=tmp_path / "w8")
    blocks = {k.name: k.info["block"] for k in lib.kernels}
    assert blocks == {SPEC.name: 256, SPEC.name + "_combine": 256}
    assert lib.kernels[0].info["knobs"] == {"block_warps": "8"}
    with pytest.raises(ValueError, match="knob block_warps takes 1, 2, 4, "
                       "8, 16, 32, got '3'"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    target="nvptx", cpu=CHIP, knobs={"block_warps": 3},
                    output_dir=tmp_path / "bad")
    with pytest.raises(ValueError, match="no knob 'tile_size'"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    target="nvptx", cpu=CHIP, knobs={"tile_size": 64},
                    output_dir=tmp_path / "bad2")


def test_gpu_runtime_error_paths(ptx_library, libraries):
    with pytest.raises(ValueError, match="a CPU library"):
        tqc.GpuRuntime(libraries["plain"])
    with pytest.raises(ValueError, match="backend: expected 'cuda' or "
                       "'hip', got 'metal'"):
        tqc.GpuRuntime(ptx_library, backend="metal")
    with pytest.raises(ValueError, match="splits: expected 0"):
        tqc.GpuRuntime(ptx_library, splits=65)
    with pytest.raises(ValueError, match="device: expected an ordinal"):
        tqc.GpuRuntime(ptx_library, device=-1)
    # A driver that is not there: unavailable, naming it.
    with pytest.raises(tqc.TQError, match="/nonexistent/libcuda.so") as e:
        tqc.GpuRuntime(ptx_library, driver="/nonexistent/libcuda.so")
    assert e.value.status == "TQ_STATUS_UNAVAILABLE"
    rt = tqc.Runtime(libraries["plain"])
    cache = tqc.KVCache(rt, "turbo3_0", head_dim=64, num_kv_heads=1,
                        num_pages=1)
    with pytest.raises(TypeError, match="expected a tqc.GpuRuntime"):
        tqc.GpuKVCache(rt, cache)
    # The GPU kernels read token-major pools: a head-major cache is refused
    # before anything is uploaded.
    head_major = tqc.KVCache(rt, "turbo3_0", head_dim=64, num_kv_heads=1,
                             num_pages=1, head_major=True)
    with pytest.raises(ValueError, match="head-major"):
        tqc.GpuKVCache(rt, head_major)


def test_gpu_runtime_matches_reference(ptx_library, libraries, rng):
    grt = cuda_device(ptx_library)
    if grt is None:
        pytest.skip("no CUDA driver or device here: GPU kernels are checked "
                    "by ptxas and the host emulation instead")
    with grt:
        assert grt.device_name
        rt = tqc.Runtime(libraries["plain"])
        cache = tqc.KVCache(rt, "turbo3_0", head_dim=64, num_kv_heads=2,
                            num_pages=32)
        k = rng.standard_normal((300, 2, 64), dtype=np.float32)
        v = rng.standard_normal((300, 2, 64), dtype=np.float32)
        cache.append(k, v)
        q = rng.standard_normal((1, 4, 64), dtype=np.float32)
        out = grt.attention(q, grt.upload(cache))
        kb, vb = cache.rows(0)
        ref = tqc.reference_attention(q, kb, vb, k_format="turbo3_0")
        np.testing.assert_allclose(out, ref, atol=2e-4)


def test_gpu_tuning_without_a_device_is_skipped_saying_why(capsys):
    lines = []
    result = tqc.autotune(SPEC, contexts=[200], target="nvptx", cpu=CHIP,
                          progress=lines.append)
    if not result.skipped:
        pytest.skip("a CUDA device answered: the no-device path is not "
                    "reachable here")
    assert "no device to time on" in result.skipped
    assert "TQ_STATUS_UNAVAILABLE" in result.skipped
    assert result.records == [] and result.measured == 0
    assert any("SKIPPED" in line for line in lines)
    from tqc.tune import main
    assert main(["--target", "nvptx", "--cpu", CHIP, "--k-format",
                 "turbo3_0", "--head-dim", "64", "--gqa", "2",
                 "--contexts", "200", "--quiet", "--db", ":memory:"]) == 0
    out = capsys.readouterr().out
    assert f"{SPEC.name}\tSKIPPED\ttarget nvptx: no device" in out


class StandInGpu:
    """A GpuRuntime stand-in: attention is lib/Quant's reference over the
    host cache's bytes, and takes longer unless the library was built with
    block_warps=2 (so the tuner has a known winner)."""

    device_name = "Stand-in GPU 80GB"
    flushes = 0

    def __init__(self, library):
        self.warps = library.kernels[0].info["knobs"]["block_warps"]
        self.closed = False

    def upload(self, cache):
        return cache

    def flush(self, mib):
        StandInGpu.flushes += 1

    def attention(self, q, cache, *, out, causal, window, softcap):
        kb, vb = cache.rows(0)
        out[...] = tqc.reference_attention(
            q, kb, vb, k_format=cache.k_format, v_format=cache.v_format,
            causal=causal, window=window, softcap=softcap)
        time.sleep(0.002 if self.warps == "2" else 0.01)
        return out

    def close(self):
        self.closed = True


def test_gpu_tuning_mechanics_through_a_stand_in_device(tmp_path):
    def wrong_at_one_warp(knobs, call):
        if knobs["block_warps"] != "1":
            return call
        return lambda: call() + 1.0

    db_path = tmp_path / "gpu.db"
    result = tqc.autotune(SPEC, contexts=[300], db=db_path, target="nvptx",
                          cpu=CHIP, knobs={"block_warps": [4, 2, 8, 1]},
                          rounds=2, num_kv_heads=2, flush_mib=1, jobs=2,
                          gpu_runtime_fn=StandInGpu,
                          wrap_attention=wrong_at_one_warp, progress=False)
    assert not result.skipped
    assert result.best[300].knobs == {"block_warps": 2}
    assert result.default[300].ok
    assert StandInGpu.flushes > 0
    key = tuning.target_key(CHIP, target="nvptx",
                            device=StandInGpu.device_name)
    assert key["triple"] == "nvptx64-nvidia-cuda" and key["cpu"] == CHIP
    with tuning.TuningDB(db_path) as db:
        recs = {json.dumps(r.knobs): r.status
                for r in db.records(SPEC, target=key)}
        # Nothing under the host CPU's key.
        assert db.records(SPEC) == []
    assert recs == {'{"block_warps": 4}': "ok", '{"block_warps": 2}': "ok",
                    '{"block_warps": 8}': "ok", '{"block_warps": 1}': "wrong"}
    # Re-tuning measures nothing new.
    again = tqc.autotune(SPEC, contexts=[300], db=db_path, target="nvptx",
                         cpu=CHIP, knobs={"block_warps": [4, 2, 8, 1]},
                         gpu_runtime_fn=StandInGpu, progress=False)
    assert again.measured == 0 and again.compiled == 0

    # tq-aot's lookup, through tqc.compile: this device's best record.
    lib = tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                      gqa=2, target="nvptx", cpu=CHIP, tuning_db=db_path,
                      gpu_device=StandInGpu.device_name,
                      output_dir=tmp_path / "tuned")
    assert "block_warps=2" in lib.tuning_report[0]
    assert lib.kernels[0].info["block"] == 64
    other = tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                        gqa=2, target="nvptx", cpu=CHIP, tuning_db=db_path,
                        gpu_device="Another GPU",
                        output_dir=tmp_path / "other")
    assert "no record" in other.tuning_report[0]
    assert other.kernels[0].info["block"] == 128
    with pytest.raises(ValueError, match="give gpu_device"):
        tqc.compile(kind="decode", k_format="turbo3_0", head_dim=64,
                    target="nvptx", cpu=CHIP, tuning_db=db_path,
                    output_dir=tmp_path / "nodevice")
    with pytest.raises(ValueError, match="GPU libraries hold decode and "
                       "prefill kernels"):
        tqc.autotune(tqc.KernelSpec("ggml_decode", "turbo3_0", head_dim=64),
                     target="nvptx", progress=False)
