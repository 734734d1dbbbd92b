"""The tuning database: every measurement of the autotuner, in SQLite.

A measurement's key is (tqc version, target, kernel spec, context-length
bucket, knob values): the version is ``tqc._tqc.VERSION`` (tq-aot's), the
target the triple, CPU name and a hash of the CPU features
(:func:`target_key`), the spec the kernel's name, the bucket the power of
two >= the measured context (:func:`context_bucket`), the knobs canonical
JSON. Queries always name a target and a version, so databases of several
machines can be merged (:meth:`TuningDB.merge`) without one machine's
numbers choosing another's kernels. ``tq-aot --tuning-db`` and
``tqc.compile(tuning_db=...)`` read the same tables (lib/Target's
lookupTuningRecord); the schema is ``tuning.sql`` next to this file and
docs/autotune.md.

    >>> db = tqc.tuning.TuningDB("tuning.db")
    >>> db.best(spec, context=4096)          # a Record, or None
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Union

from . import _tqc

__all__ = ["Record", "TuningDB", "canonical_knobs", "context_bucket",
           "target_key", "SCHEMA_VERSION", "STATUSES"]

SCHEMA_VERSION = 1
#: ok: measured after its output matched the reference; wrong: its output
#: did not; compile_error: it did not compile; error: it failed when run.
STATUSES = ("ok", "wrong", "compile_error", "error")

_SCHEMA = Path(__file__).with_name("tuning.sql")
_COLUMNS = ("tqc_version", "triple", "cpu", "features_hash", "features",
            "spec", "kind", "k_format", "v_format", "head_dim", "grp",
            "context", "knobs", "status", "seconds", "statistic", "rounds",
            "measured_context", "detail", "host", "created")


def target_key(cpu: str = "host", *, target: str = "cpu",
               device: str = "") -> dict:
    """The key of CPU code for ``cpu`` (``host`` or an LLVM CPU name):
    ``tqc_version``, ``triple``, ``cpu`` (host resolved, e.g. ``znver4``),
    ``features`` (the host's enabled features, sorted; empty for a named
    CPU) and ``features_hash`` — what ``tq-aot --print-tuning-target``
    prints. For GPU code (``target`` ``nvptx`` or ``amdgcn``) ``cpu`` is
    the chip (``sm_90a``) and ``features`` the ``device`` the kernels ran
    on (:attr:`tqc.GpuRuntime.device_name`): one chip comes in parts of
    different sizes and clocks, whose records must not mix."""
    key = dict(_tqc.tuning_target(cpu, target, device))
    key["tqc_version"] = _tqc.VERSION
    return key


def context_bucket(tokens: int) -> int:
    """The bucket a context of ``tokens`` is recorded under: the smallest
    power of two >= it."""
    return int(_tqc.context_bucket(int(tokens)))


def canonical_knobs(knobs: dict) -> str:
    """Knob values as the database keys them: JSON with sorted keys, no
    spaces, integer values as numbers (``{"splits":2,"tile_size":128}``)."""
    out = {}
    for name, value in knobs.items():
        if isinstance(value, bool):
            raise TypeError(f"knob {name}: expected a string or an integer")
        if isinstance(value, int):
            out[str(name)] = value
        elif isinstance(value, str):
            out[str(name)] = (int(value) if value.lstrip("-").isdigit()
                              else value)
        else:
            raise TypeError(f"knob {name}: expected a string or an integer, "
                            f"got {type(value).__name__}")
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Record:
    """One row of the database."""

    id: int
    tqc_version: str
    triple: str
    cpu: str
    features_hash: str
    spec: str
    context: int
    knobs: dict
    status: str
    seconds: float
    statistic: str
    rounds: int
    measured_context: int
    detail: str

    @property
    def ok(self) -> bool:
        """Measured and correct."""
        return self.status == "ok"

    @property
    def spread(self) -> Optional[float]:
        """The slowest timed round over the fastest (an ok record the
        autotuner wrote), or None. A speed-up below the two records'
        spreads is within their noise."""
        try:
            value = json.loads(self.detail)["spread"]
        except (ValueError, KeyError, TypeError):
            return None
        return float(value) if isinstance(value, (int, float)) else None


def _spec_fields(spec) -> dict:
    t = spec.as_tuple()
    return dict(spec=spec.name, kind=t[0], k_format=t[1], v_format=t[2],
                head_dim=t[3], grp=t[5])


class TuningDB:
    """A tuning database file (created with the schema when missing).

    Every method that reads or writes records takes the target key
    (``target``, default: this host's, :func:`target_key`) and uses its
    version; records of other targets or versions are never returned."""

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        self._db = sqlite3.connect(self.path)
        self._db.executescript(_SCHEMA.read_text())
        version = self._db.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None or int(version[0]) != SCHEMA_VERSION:
            raise ValueError(f"{self.path}: tuning database schema version "
                             f"{version and version[0]}, expected "
                             f"{SCHEMA_VERSION}")
        self._host_key: Optional[dict] = None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "TuningDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _key(self, target: Optional[dict]) -> dict:
        if target is not None:
            return target
        if self._host_key is None:
            self._host_key = target_key("host")
        return self._host_key

    # -- writing ------------------------------------------------------------

    def record(self, spec, context: int, knobs: dict, status: str,
               seconds: float, *, statistic: str = "best", rounds: int = 0,
               detail: str = "", target: Optional[dict] = None,
               replace: bool = False) -> bool:
        """Records one measurement of ``spec`` (a :class:`tqc.KernelSpec`)
        at ``context`` tokens (kept under its bucket). ``seconds`` is +inf
        unless ``status`` is ``ok``. Returns False (and changes nothing)
        when the key is recorded already, unless ``replace``."""
        if status not in STATUSES:
            raise ValueError(f"status: expected one of {', '.join(STATUSES)}, "
                             f"got '{status}'")
        if status != "ok":
            seconds = math.inf
        elif not (seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f"seconds: an ok measurement needs a positive "
                             f"finite time, got {seconds}")
        key = self._key(target)
        row = dict(tqc_version=key["tqc_version"], triple=key["triple"],
                   cpu=key["cpu"], features_hash=key["features_hash"],
                   features=key.get("features", ""), **_spec_fields(spec),
                   context=context_bucket(context),
                   knobs=canonical_knobs(knobs), status=status,
                   seconds=float(seconds), statistic=statistic,
                   rounds=int(rounds), measured_context=int(context),
                   detail=detail, host=socket.gethostname(),
                   created=datetime.datetime.now(
                       datetime.timezone.utc).isoformat(timespec="seconds"))
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        cur = self._db.execute(
            f"{verb} INTO measurements ({', '.join(_COLUMNS)}) VALUES "
            f"({', '.join('?' for _ in _COLUMNS)})",
            [row[c] for c in _COLUMNS])
        self._db.commit()
        return cur.rowcount > 0

    def merge(self, other: Union[str, os.PathLike]) -> tuple[int, int]:
        """Copies every record of database ``other`` (another machine's)
        into this one, targets and versions as they are. A key recorded in
        both keeps this database's record. Returns (copied, kept)."""
        other = os.fspath(other)
        with TuningDB(other):  # checks the schema
            pass
        before = self._count()
        self._db.execute("ATTACH DATABASE ? AS other", (other,))
        try:
            total = self._db.execute(
                "SELECT COUNT(*) FROM other.measurements").fetchone()[0]
            cols = ", ".join(_COLUMNS)
            self._db.execute(
                f"INSERT OR IGNORE INTO measurements ({cols}) "
                f"SELECT {cols} FROM other.measurements ORDER BY id")
            self._db.commit()
        finally:
            self._db.execute("DETACH DATABASE other")
        copied = self._count() - before
        return copied, total - copied

    def _count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]

    # -- reading ------------------------------------------------------------

    def _where(self, key: dict, spec=None) -> tuple[str, list]:
        clause = ("tqc_version = ? AND triple = ? AND cpu = ? AND "
                  "features_hash = ?")
        args = [key["tqc_version"], key["triple"], key["cpu"],
                key["features_hash"]]
        if spec is not None:
            clause += " AND spec = ?"
            args.append(spec if isinstance(spec, str) else spec.name)
        return clause, args

    def records(self, spec=None, *, context: Optional[int] = None,
                target: Optional[dict] = None,
                all_targets: bool = False) -> list[Record]:
        """Records of ``spec`` (or every spec) for the target, optionally at
        ``context``'s bucket; ``all_targets`` lists every target and
        version."""
        if all_targets:
            clause, args = "1", []
            if spec is not None:
                clause += " AND spec = ?"
                args.append(spec if isinstance(spec, str) else spec.name)
        else:
            clause, args = self._where(self._key(target), spec)
        if context is not None:
            clause += " AND context = ?"
            args.append(context_bucket(context))
        rows = self._db.execute(
            "SELECT id, tqc_version, triple, cpu, features_hash, spec, "
            "context, knobs, status, seconds, statistic, rounds, "
            f"measured_context, detail FROM measurements WHERE {clause} "
            "ORDER BY id", args).fetchall()
        return [Record(id=r[0], tqc_version=r[1], triple=r[2], cpu=r[3],
                       features_hash=r[4], spec=r[5], context=r[6],
                       knobs=json.loads(r[7]), status=r[8], seconds=r[9],
                       statistic=r[10], rounds=r[11], measured_context=r[12],
                       detail=r[13]) for r in rows]

    def lookup(self, spec, context: int, knobs: dict, *,
               target: Optional[dict] = None) -> Optional[Record]:
        """The record of exactly this key, or None (not measured yet)."""
        clause, args = self._where(self._key(target), spec)
        row = self._db.execute(
            f"SELECT id FROM measurements WHERE {clause} AND context = ? "
            "AND knobs = ?",
            args + [context_bucket(context), canonical_knobs(knobs)]).fetchone()
        if row is None:
            return None
        return next(r for r in self.records(spec, target=target)
                    if r.id == row[0])

    def best(self, spec, context: Optional[int] = None, *,
             target: Optional[dict] = None) -> Optional[Record]:
        """The fastest ``ok`` record of ``spec`` at ``context``'s bucket
        (None: the largest bucket recorded for it), as tq-aot --tuning-db
        picks it; None when there is none."""
        candidates = [r for r in self.records(spec, target=target) if r.ok]
        if context is not None:
            bucket = context_bucket(context)
            candidates = [r for r in candidates if r.context == bucket]
        elif candidates:
            largest = max(r.context for r in candidates)
            candidates = [r for r in candidates if r.context == largest]
        if not candidates:
            return None
        return min(candidates, key=lambda r: (r.seconds, r.id))

    def targets(self) -> list[dict]:
        """Every (version, triple, cpu, features_hash) recorded."""
        rows = self._db.execute(
            "SELECT DISTINCT tqc_version, triple, cpu, features_hash FROM "
            "measurements ORDER BY 1, 2, 3, 4").fetchall()
        return [dict(tqc_version=r[0], triple=r[1], cpu=r[2],
                     features_hash=r[3]) for r in rows]

    def missing(self, spec, contexts: Iterable[int],
                variants: Iterable[dict], *,
                target: Optional[dict] = None) -> list[tuple[dict, int]]:
        """The (knobs, context) pairs of ``variants`` x ``contexts`` not
        recorded yet for the target: what re-tuning has to measure."""
        return [(v, c) for v in variants for c in contexts
                if self.lookup(spec, c, v, target=target) is None]
