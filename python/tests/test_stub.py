"""The checked-in type stub of the native module is nanobind's stubgen
output for the module as built (refresh: python -m nanobind.stubgen -m
tqc._tqc -o python/tqc/_tqc.pyi)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tqc

PINNED = "3.1.0"  # python/requirements.txt, pyproject.toml
STUB = Path(__file__).resolve().parents[1] / "tqc" / "_tqc.pyi"


def test_stub_is_up_to_date(tmp_path):
    nanobind = pytest.importorskip("nanobind", reason="nanobind is not "
                                   "installed in this environment")
    if nanobind.__version__ != PINNED:
        pytest.skip(f"stubgen output depends on nanobind's version: "
                    f"{nanobind.__version__} here, the stub is {PINNED}'s")
    out = tmp_path / "_tqc.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m",
                    "tqc._tqc", "-o", str(out)], check=True)
    assert out.read_text() == STUB.read_text(), (
        "python/tqc/_tqc.pyi is stale: regenerate it with python -m "
        "nanobind.stubgen -m tqc._tqc -o python/tqc/_tqc.pyi")


def test_public_api_is_annotated():
    import inspect
    for name in tqc.__all__:
        obj = getattr(tqc, name)
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            assert sig.return_annotation is not inspect.Signature.empty, name
            assert obj.__doc__, name
        elif inspect.isclass(obj) and not issubclass(obj, BaseException):
            assert obj.__doc__, name
