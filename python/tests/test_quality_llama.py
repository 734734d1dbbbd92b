"""tqc.quality's drivers of the patched llama.cpp (perplexity, KL
divergence, needle in a haystack) on their smallest settings. They need the
integration (integrations/llama.cpp/build.sh), the model and the corpus
under TQC_BUILD_DIR (run-ctest.sh sets it); without them each test skips,
naming what is missing."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from tqc import quality


def _setup():
    if os.environ.get("TQC_SKIP_LLAMA") == "1":
        pytest.skip("TQC_SKIP_LLAMA=1: the llama.cpp integration is not built")
    bin_dir, model, corpus = quality._paths(None, None, None)
    for f, why in ((bin_dir / "llama-perplexity", "integrations/llama.cpp/build.sh"),
                   (bin_dir / "llama-completion", "integrations/llama.cpp/build.sh"),
                   (model, "integrations/llama.cpp/fetch-model.sh"),
                   (corpus, "integrations/llama.cpp/fetch-corpus.sh")):
        if not Path(f).exists():
            pytest.skip(f"{f} is missing (run {why}; TQC_BUILD_DIR="
                        f"{os.environ.get('TQC_BUILD_DIR', 'unset')})")


@pytest.fixture(autouse=True)
def llama():
    _setup()


def test_perplexity():
    f16 = quality.perplexity("f16", ctx=128, chunks=2)
    t3 = quality.perplexity("turbo3_0", "turbo3_0", ctx=128, chunks=2)
    for r in (f16, t3):
        assert math.isfinite(r["ppl"]) and 2 < r["ppl"] < 500, r
        assert len(r["chunks"]) == 2 and r["chunks"][-1] == pytest.approx(
            r["ppl"], rel=1e-3)
    # A 3-bit cache is measurably worse than f16 on this model.
    assert t3["ppl"] > f16["ppl"]


def test_kl_divergence(tmp_path):
    base = tmp_path / "f16.kld"
    same = quality.kl_divergence("f16", "f16", ctx=128, chunks=2, base=base)
    assert base.exists()
    assert same["kld"] < 1e-3 and same["top1"] > 99.0, same
    t3 = quality.kl_divergence("turbo3_0", ctx=128, chunks=2, base=base)
    assert t3["kld"] > 10 * max(same["kld"], 1e-4), t3
    assert 0 < t3["top1"] < 100 and t3["ppl_f16"] == pytest.approx(
        same["ppl_f16"])


def test_needle(tmp_path, capsys):
    out = tmp_path / "needle.json"
    assert quality.main(["needle", "--contexts", "1024", "--depths", "0.5",
                         "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    (t,) = rep["trials"]
    assert 700 < t["prompt_tokens"] <= 1024, t
    # The f16 model finds a needle at 1K tokens.
    assert t["found"] and t["expected"] in t["answer"], t
    assert "accuracy 1.00" in capsys.readouterr().out


def test_missing_binary_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="llama-perplexity is missing"):
        quality.perplexity("f16", ctx=128, chunks=1, bin_dir=tmp_path)
