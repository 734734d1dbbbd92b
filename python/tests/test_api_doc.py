"""docs/python-api.md is api_doc.py's output for the package as built."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import api_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_api_doc_is_up_to_date():
    if not DOC.exists():
        pytest.fail(f"{DOC} is missing: python python/tests/api_doc.py > "
                    "docs/python-api.md")
    if sys.version_info[:2] != (3, 11):
        pytest.skip("docs/python-api.md is rendered by Python 3.11's "
                    "inspect; this is "
                    f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert api_doc.render() == DOC.read_text(), (
        "docs/python-api.md is stale: python python/tests/api_doc.py > "
        "docs/python-api.md")
