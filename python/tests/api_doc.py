"""Writes docs/python-api.md, the reference of the tqc package's public API,
from the installed package's signatures and docstrings:

    python python/tests/api_doc.py > docs/python-api.md

test_api_doc.py fails while the committed file differs."""

from __future__ import annotations

import inspect
import textwrap

import tqc


def _doc(obj) -> str:
    return textwrap.dedent(inspect.getdoc(obj) or "").strip()


def _format(sig: inspect.Signature, drop_first: bool = False) -> str:
    """A signature with its string annotations unquoted."""
    params = list(sig.parameters.values())[1 if drop_first else 0:]
    parts, star = [], False
    for p in params:
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind == p.VAR_POSITIONAL:
            star = True
        text = ("*" if p.kind == p.VAR_POSITIONAL else
                "**" if p.kind == p.VAR_KEYWORD else "") + p.name
        if p.annotation is not p.empty:
            text += f": {p.annotation}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    ret = ""
    if sig.return_annotation is not sig.empty:
        ret = f" -> {sig.return_annotation}".replace("'", "").replace('"', "")
    return f"({', '.join(parts)}){ret}"


def _signature(name: str, obj, drop_first: bool = False) -> str:
    try:
        return f"{name}{_format(inspect.signature(obj), drop_first)}"
    except (TypeError, ValueError):
        return name


def render() -> str:
    out = ["# tqc Python API reference", "",
           "Generated from the package's signatures and docstrings by "
           "`python/tests/api_doc.py` (see [python.md](python.md) for the "
           "tour); do not edit.", ""]
    import tqc.quality
    import tqc.tuning
    for module, prefix in ((tqc, "tqc"), (tqc.tuning, "tqc.tuning"),
                           (tqc.quality, "tqc.quality")):
        if module is not tqc:
            out += [f"# `{prefix}`", "", _doc(module), ""]
        out += _render_module(module, prefix)
    text = "\n".join(out)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip() + "\n"


def _render_module(module, prefix: str) -> list:
    out = []
    for name in sorted(module.__all__, key=lambda n: (not inspect.isclass(
            getattr(module, n)), n.lower())):
        obj = getattr(module, name)
        if inspect.isclass(obj):
            out += [f"## class `{prefix}.{name}`", ""]
            if issubclass(obj, BaseException):
                out += [f"Exception, a subclass of `{obj.__bases__[0].__name__}`.",
                        "", _doc(obj), ""]
                continue
            init = obj.__dict__.get("__init__")
            if init is not None:
                sig = _format(inspect.signature(init), drop_first=True)
                out += ["```python", f"{prefix}.{name}{sig.split(' -> ')[0]}",
                        "```", ""]
            out += [_doc(obj), ""]
            for member, value in obj.__dict__.items():
                if member.startswith("_"):
                    continue
                if isinstance(value, property):
                    doc = _doc(value.fget)
                    out += ["", f"- `{name}.{member}` (property)"
                            + (f": {' '.join(doc.split())}" if doc else "")]
                elif isinstance(value, classmethod):
                    out += ["", f"### `{name}."
                            f"{_signature(member, value.__func__, True)}`",
                            "", _doc(value.__func__)]
                elif inspect.isfunction(value):
                    out += ["", f"### `{name}."
                            f"{_signature(member, value, True)}`",
                            "", _doc(value)]
            out += [""]
        elif callable(obj):
            out += [f"## `{prefix}.{_signature(name, obj)}`", "", _doc(obj),
                    ""]
        else:
            out += [f"## `{prefix}.{name}`", "", f"`{obj!r}`", ""]
    return out


if __name__ == "__main__":
    print(render(), end="")
