"""The autotuner: compile a kernel spec's variants, check them against the
reference, time them round-robin with flushed caches (as tq-bench does) and
record every measurement in a tuning database (:mod:`tqc.tuning`).

    >>> spec = tqc.KernelSpec("decode", "turbo3_0", head_dim=128, gqa=4)
    >>> result = tqc.autotune(spec, contexts=[4096, 16384], db="tuning.db")
    >>> result.best[16384].knobs
"""

from __future__ import annotations

import concurrent.futures
import glob
import itertools
import json
import math
import os
import shutil
import statistics as stats
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence, Union

import numpy as np

from . import tuning as _tuning

__all__ = ["autotune", "TuneResult", "variants"]


@dataclass
class TuneResult:
    """What :func:`autotune` found: per context, the ``best`` correct
    record and the ``default`` configuration's record (None where it was
    not measured or failed); ``records``: every record of the spec's
    variants, measured now or before."""

    spec: object
    contexts: tuple
    best: dict = field(default_factory=dict)
    default: dict = field(default_factory=dict)
    records: list = field(default_factory=list)
    measured: int = 0
    compiled: int = 0
    #: Why nothing was tuned (a GPU target without a device), else empty.
    skipped: str = ""

    def speedup(self, context: int) -> Optional[float]:
        """The default's time over the best's at ``context``."""
        b, d = self.best.get(context), self.default.get(context)
        if b is None or d is None or not d.ok:
            return None
        return d.seconds / b.seconds


def _default_knobs(knob_list) -> dict:
    return {k.name: k.default for k in knob_list}


def _normalise(variant: dict, knob_list) -> dict:
    """A knob that only matters with another knob's value (``only_with``)
    takes its default elsewhere, so equivalent variants share one key."""
    out = dict(variant)
    for k in knob_list:
        if k.only_with:
            name, value = k.only_with.split("=", 1)
            if out.get(name) != value:
                out[k.name] = k.default
    return out


def variants(spec, knobs: Optional[dict] = None, *, cpu: str = "host",
             strategy: str = "grid", target: str = "cpu") -> list[dict]:
    """The variants of ``spec`` the tuner compiles: every combination of
    the knobs' values (``strategy="grid"``), or the default and each knob's
    values with the others at their defaults (``"axes"``). ``knobs`` maps
    knob names to the values to try instead of the compiler's list (a knob
    left out keeps its list; ``[value]`` pins it). Knobs the compiler does
    not have for the spec raise ValueError. ``target``/``cpu``: as for
    :func:`tqc.knobs` (a GPU target's chip in ``cpu``)."""
    from . import knobs as compiler_knobs
    knob_list = compiler_knobs(spec, cpu, target=target)
    names = [k.name for k in knob_list]
    choices = {k.name: list(k.values) for k in knob_list}
    for name, values in (knobs or {}).items():
        if name not in choices:
            raise ValueError(f"knobs: {spec.name} has no knob '{name}' (its "
                             f"knobs: {', '.join(names) or 'none'})")
        if isinstance(values, (str, int)):
            values = [values]
        choices[name] = [str(v) for v in values]
        if not choices[name]:
            raise ValueError(f"knobs: no values for '{name}'")
    default = _default_knobs(knob_list)
    out, seen = [], set()

    def add(v):
        v = _normalise(v, knob_list)
        key = _tuning.canonical_knobs(v)
        if key not in seen:
            seen.add(key)
            out.append(v)

    if strategy == "grid":
        for combo in itertools.product(*(choices[n] for n in names)):
            add(dict(zip(names, combo)))
    elif strategy == "axes":
        # The default first (when its values are among the choices).
        if all(default[n] in choices[n] for n in names):
            add(default)
        for n in names:
            for value in choices[n]:
                base = {m: (default[m] if default[m] in choices[m]
                            else choices[m][0]) for m in names}
                base[n] = value
                add(base)
    else:
        raise ValueError(f"strategy: expected 'grid' or 'axes', got "
                         f"'{strategy}'")
    return out


def _spread(record) -> str:
    """", spread 1.07x" for a record with its rounds' spread, else ""."""
    spread = record.spread
    return f", spread {spread:.2f}x" if spread is not None else ""


def _describe(knobs: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(knobs.items())) or "defaults"


class _GpuFlusher:
    """Writes ``mib`` MiB to device memory before each timed GPU call."""

    def __init__(self, runtime, mib: int):
        self.runtime, self.mib = runtime, mib

    def __call__(self) -> None:
        if self.mib > 0:
            self.runtime.flush(self.mib)

    def close(self) -> None:
        pass


def last_level_cache_bytes() -> int:
    """The largest data or unified cache Linux reports for CPU 0 (sysfs),
    in bytes; 0 where it says nothing (tq-bench's lastLevelCacheBytes)."""
    largest = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in sorted(glob.glob(os.path.join(base, "index[0-9]*"))):
        try:
            with open(os.path.join(index, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(index, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        digits = text.rstrip("KMG")
        if kind == "Instruction" or not digits.isdigit():
            continue
        shift = {"K": 10, "M": 20, "G": 30}.get(text[-1], 0)
        largest = max(largest, int(digits) << shift)
    return largest


def auto_flush_mib() -> int:
    """``flush_mib="auto"`` on the CPU: twice the last-level cache,
    rounded up to MiB, at least 64 (tq-bench's ``--flush-mib=auto``)."""
    return max(64, -(-2 * last_level_cache_bytes() // (1 << 20)))


class _Flusher:
    """Reads a buffer larger than the last-level cache before each timed
    call (tq-bench's flush), split over ``threads`` threads."""

    def __init__(self, mib: int, threads: int):
        self.parts = []
        if mib > 0:
            buf = np.ones(mib * (1 << 20) // 8, dtype=np.float64)
            self.parts = np.array_split(buf, max(1, threads))
        self.pool = (concurrent.futures.ThreadPoolExecutor(len(self.parts))
                     if len(self.parts) > 1 else None)
        self.sink = 0.0

    def __call__(self) -> None:
        if self.pool:
            self.sink += sum(self.pool.map(np.sum, self.parts))
        elif self.parts:
            self.sink += float(np.sum(self.parts[0]))

    def close(self) -> None:
        if self.pool:
            self.pool.shutdown()


def autotune(spec, contexts: Union[int, Sequence[int]] = (4096,), *,
             db: Union[str, os.PathLike, "_tuning.TuningDB", None] = None,
             knobs: Optional[dict] = None, strategy: str = "axes",
             rounds: int = 5, statistic: str = "best",
             confirm_rounds: Optional[int] = None, num_kv_heads: int = 8,
             head_major: bool = False, prefill_rows: int = 16, flush_mib: Union[int, str] = "auto",
             threads: int = 0,
             jobs: int = 0, cpu: str = "host", target: str = "cpu",
             device: int = 0, tolerance: float = 2e-3,
             seed: int = 0, progress: Union[bool, Callable[[str], None]] = True,
             compile_fn: Optional[Callable] = None,
             wrap_attention: Optional[Callable] = None,
             gpu_runtime_fn: Optional[Callable] = None,
             work_dir: Union[str, os.PathLike, None] = None) -> TuneResult:
    """Tunes the knobs of one attention kernel ``spec`` (a
    :class:`tqc.KernelSpec`) at the ``contexts`` (tokens in the cache).

    1. The variants (:func:`variants` with ``knobs`` and ``strategy``:
       ``axes`` — each knob's values with the others at their defaults —
       or ``grid``, every combination) that the database lacks a record of
       at some context are compiled, ``jobs`` at a time (0: one per two
       CPUs). A failed compile is recorded as ``compile_error`` (infinitely
       slow).
    2. Per context, one cache of ``num_kv_heads`` heads holding random rows
       (K with outlier channels) is filled (pools head-major with
       ``head_major``, as the runtime that will run the kernels has them:
       the best knobs differ between the layouts, docs/perf/cpu.md), and lib/Quant's reference
       attention (:func:`tqc.reference_attention` over the cached bytes)
       computed; every variant's output is compared with it first (max
       error over ``tolerance`` x max(1, max |reference|): ``wrong``,
       infinitely slow; a run-time failure: ``error``).
    3. The correct variants are timed round-robin for ``rounds`` rounds
       (each round calls every variant once, starting one later than the
       round before), reading ``flush_mib`` MiB before every call so the
       KV comes from memory (``"auto"``: :func:`auto_flush_mib` on the
       CPU, 64 on a GPU); ``statistic`` ``best`` or ``median`` of the
       rounds is recorded, with the rounds' spread (slowest / fastest,
       :attr:`Record.spread`) in its detail.
    4. Where the fastest of them is not the default (and the default was
       timed in the same rounds), the two are timed against each other for
       ``confirm_rounds`` more interleaved rounds (default: ``rounds``; 0
       skips it) and both are recorded over all their rounds. The fastest
       of many noisy timings is biased low; this gives the default as many
       chances (docs/perf/autotune.md: first-pass wins of 1.2-1.6x were
       1.0-1.08x head to head).

    ``target`` ``nvptx`` or ``amdgcn`` tunes GPU kernels (``cpu`` names
    the chip, ``host``: the target's first) through :class:`tqc.GpuRuntime`
    on device ``device``: their knob is ``block_warps``; the caches are
    filled on the CPU and copied to the device, every call writes
    ``flush_mib`` MiB to device memory before it (evicting L2), and records
    are keyed by the chip and the device's name. The default variant is
    compiled first; where no driver or device answers, nothing is tuned
    and the result's ``skipped`` says why (also said through
    ``progress``). GPU specs are ``decode`` and ``prefill``.

    Decode kernels get one query row, prefill kernels ``prefill_rows`` (the
    last positions). ``ggml_decode`` / ``ggml_prefill`` specs are compiled
    as ggml packs (``abi="ggml"``: the pair's row, decode and prefill
    kernels, the variant's knobs on the spec's kernel) and timed through
    ``tq_attention_v1``, prefill under a causal mask as llama.cpp calls
    them; their records carry the ggml kernels' names, which
    ``tq-aot --abi=ggml --tuning-db`` applies.

    ``db`` is a path or an open :class:`TuningDB` (default: an in-memory
    one); measurements already recorded for the target are reused, not
    repeated. ``progress``: True prints to stderr,
    a callable receives the lines. ``compile_fn(knobs, output_dir)`` and
    ``wrap_attention(knobs, call)`` (returning the callable that computes
    ``call(out)``) are hooks for tests: a variant that does not compile, or
    computes something wrong. ``gpu_runtime_fn(library)`` replaces
    :class:`tqc.GpuRuntime` (tests without a GPU: an object with
    ``device_name``, ``upload``, ``attention``, ``flush`` and ``close``)."""
    from . import KVCache, Runtime, TQError, CompileError, compile as compile_
    from . import GpuRuntime, reference_attention

    if target not in ("cpu", "nvptx", "amdgcn"):
        raise ValueError(f"target: expected cpu, nvptx or amdgcn, got "
                         f"'{target}'")
    gpu = target != "cpu"
    if gpu and head_major:
        raise ValueError("head_major: the GPU kernels read token-major "
                         "pools (a head-major cache is a CPU runtime "
                         "layout)")
    if gpu and spec.kind not in ("decode", "prefill"):
        raise ValueError(f"spec.kind: GPU libraries hold decode and prefill "
                         f"kernels (ggml packs are CPU code), got "
                         f"'{spec.kind}'")
    if isinstance(contexts, int):
        contexts = [contexts]
    contexts = [int(c) for c in contexts]
    if not contexts or any(c <= 0 for c in contexts):
        raise ValueError("contexts: expected positive token counts")
    if statistic not in ("best", "median"):
        raise ValueError(f"statistic: expected 'best' or 'median', got "
                         f"'{statistic}'")
    if rounds <= 0:
        raise ValueError("rounds must be positive")
    if not 0 < tolerance < math.inf:
        raise ValueError(f"tolerance must be positive and finite, got "
                         f"{tolerance}")
    if confirm_rounds is None:
        confirm_rounds = rounds
    if confirm_rounds < 0:
        raise ValueError("confirm_rounds must be >= 0")
    if flush_mib == "auto":
        flush_mib = 64 if target != "cpu" else auto_flush_mib()
    elif (isinstance(flush_mib, bool) or not isinstance(flush_mib, int)
          or flush_mib < 0):
        raise ValueError(f"flush_mib: expected a count of MiB (>= 0) or "
                         f"'auto', got {flush_mib!r}")
    decode = spec.kind in ("decode", "ggml_decode")
    ggml = spec.kind in ("ggml_decode", "ggml_prefill")
    if spec.kind not in ("decode", "prefill", "ggml_decode", "ggml_prefill"):
        raise ValueError(f"spec.kind: autotune times decode and prefill "
                         f"kernels (tq_attention) and ggml_decode and "
                         f"ggml_prefill kernels (tq_attention_v1), got "
                         f"'{spec.kind}'")
    if ggml and (spec.causal or spec.window):
        raise ValueError("spec: ggml kernels take causal and window masks "
                         "at run time, not compiled in; tune the spec "
                         "without them")
    # ggml prefill kernels are timed under a causal mask, as llama.cpp
    # calls them.
    causal = spec.causal or spec.kind == "ggml_prefill"
    say = (progress if callable(progress) else
           (lambda line: print(line, file=sys.stderr, flush=True))
           if progress else (lambda line: None))
    own_db = not isinstance(db, _tuning.TuningDB)
    database = _tuning.TuningDB(":memory:" if db is None else db) \
        if own_db else db
    target_name = target
    work = tempfile.mkdtemp(prefix="tqc-tune-", dir=work_dir)
    runtimes, flusher = [], None
    try:
        from . import knobs as compiler_knobs
        knob_list = compiler_knobs(spec, cpu, target=target_name)
        default = _normalise(_default_knobs(knob_list), knob_list)
        todo = variants(spec, knobs, cpu=cpu, strategy=strategy,
                        target=target_name)

        # Libraries compiled before the variants' stage, by canonical knobs
        # (a GPU target's default, compiled first to open the device).
        prebuilt = {}

        def build(i, v):
            if _tuning.canonical_knobs(v) in prebuilt:
                return prebuilt[_tuning.canonical_knobs(v)]
            out_dir = os.path.join(work, f"v{i}")
            if compile_fn is not None:
                return compile_fn(dict(v), out_dir)
            if ggml:  # a pack: the pair's row, decode and prefill kernels
                return compile_(k_format=spec.k_format,
                                v_format=spec.v_format,
                                head_dim=spec.head_dim, gqa=spec.gqa,
                                softcap=spec.softcap,
                                knobs={spec.name: v}, cpu=cpu,
                                abi="ggml", output_dir=out_dir)
            return compile_(kind=(spec.kind,), k_format=spec.k_format,
                            v_format=spec.v_format, head_dim=spec.head_dim,
                            gqa=spec.gqa, causal=spec.causal,
                            window=spec.window, softcap=spec.softcap,
                            knobs=v, cpu=cpu, target=target_name,
                            output_dir=out_dir)

        open_gpu = gpu_runtime_fn or (
            lambda lib: GpuRuntime(lib, device=device))
        probe = None
        if gpu:
            # The device's name is part of the key: the default variant,
            # compiled first, opens the device (or says there is none).
            probe_lib = build("probe", default)
            prebuilt[_tuning.canonical_knobs(default)] = probe_lib
            try:
                probe = open_gpu(probe_lib)
            except TQError as e:
                if e.status != "TQ_STATUS_UNAVAILABLE":
                    raise
                why = (f"target {target_name}: no device to time on "
                       f"({e})")
                say(f"tune {spec.name}: SKIPPED: {why}")
                return TuneResult(spec=spec, contexts=tuple(contexts),
                                  skipped=why)
            runtimes.append(probe)
            target = _tuning.target_key(cpu, target=target_name,
                                        device=probe.device_name)
            say(f"tune {spec.name}: {target_name} {target['cpu']} on "
                f"'{probe.device_name}'")
        else:
            target = _tuning.target_key(cpu)
        if _tuning.canonical_knobs(default) not in {
                _tuning.canonical_knobs(v) for v in todo}:
            todo.insert(0, default)  # the baseline is always measured
        result = TuneResult(spec=spec, contexts=tuple(contexts))
        missing = database.missing(spec, contexts, todo, target=target)
        needed = []
        for v in todo:
            if any(m is v for m, _ in missing):
                needed.append(v)
        say(f"tune {spec.name}: {len(todo)} variant(s), "
            f"{len(todo) - len(needed)} recorded already; "
            f"contexts {', '.join(map(str, contexts))}")
        common = dict(detail=json.dumps(dict(
            kv_heads=num_kv_heads,
            prefill_rows=0 if decode else prefill_rows)),
            statistic=statistic, rounds=rounds, target=target)

        # 1. Compile what is missing.
        libraries = {}
        if needed:
            workers = jobs or max(1, (os.cpu_count() or 2) // 2)
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                futures = {pool.submit(build, i, v): i
                           for i, v in enumerate(needed)}
                for n, f in enumerate(concurrent.futures.as_completed(futures)):
                    i = futures[f]
                    v = needed[i]
                    try:
                        libraries[i] = f.result()
                        say(f"[{n + 1}/{len(needed)}] compiled {_describe(v)}")
                    except (CompileError, ValueError) as e:
                        first = str(e).splitlines()[0] if str(e) else type(e).__name__
                        say(f"[{n + 1}/{len(needed)}] compile failed "
                            f"{_describe(v)}: {first}")
                        for c in contexts:
                            database.record(spec, c, v, "compile_error",
                                            math.inf, **{**common,
                                                         "detail": first})
            result.compiled = len(libraries)
            # Append kernels fill the caches (not tuned; on the CPU, whose
            # encoders write the bytes the GPU's do).
            fill = compile_(kind=("append",), k_format=spec.k_format,
                            v_format=spec.v_format, head_dim=spec.head_dim,
                            cpu="host" if gpu else cpu,
                            output_dir=os.path.join(work, "fill"))
            fill_rt = Runtime(fill, threads=threads)
            runtimes.append(fill_rt)
            flusher = (_GpuFlusher(probe, flush_mib) if gpu else
                       _Flusher(flush_mib, threads or (os.cpu_count() or 1)))

        rng = np.random.default_rng(seed)
        q_heads = num_kv_heads * spec.gqa
        for context in contexts:
            pending = [(i, needed[i]) for i in sorted(libraries)
                       if database.lookup(spec, context, needed[i],
                                          target=target) is None]
            if not pending:
                continue
            say(f"context {context}: checking {len(pending)} variant(s)")
            cache = KVCache(fill_rt, spec.k_format, spec.v_format or
                            spec.k_format, head_dim=spec.head_dim,
                            num_kv_heads=num_kv_heads, layout="contiguous",
                            capacity=context, head_major=head_major)
            k = rng.standard_normal((context, num_kv_heads, spec.head_dim),
                                    dtype=np.float32)
            k[..., :3] *= 4.0
            v_rows = rng.standard_normal(
                (context, num_kv_heads, spec.head_dim), dtype=np.float32)
            cache.append(np.ascontiguousarray(k), v_rows)
            rows = 1 if decode else min(prefill_rows, context)
            q = rng.standard_normal((rows, q_heads, spec.head_dim),
                                    dtype=np.float32)
            kb, vb = cache.rows(0)
            ref = reference_attention(
                q, kb, vb, k_format=spec.k_format,
                v_format=spec.v_format or spec.k_format, causal=causal,
                window=spec.window, softcap=spec.softcap)
            limit = tolerance * max(1.0, float(np.max(np.abs(ref))))
            calls = []
            for i, v in pending:
                try:
                    rt = (open_gpu(libraries[i]) if gpu else
                          Runtime(libraries[i], threads=threads))
                    runtimes.append(rt)
                    # A GPU variant attends over its device copy.
                    over = rt.upload(cache) if gpu else cache
                except TQError as e:
                    say(f"  {_describe(v)}: cannot load: {e}")
                    database.record(spec, context, v, "error", math.inf,
                                    **{**common, "detail": str(e)})
                    continue
                out = np.empty_like(q)

                def call(out=out, rt=rt, over=over):
                    rt.attention(q, over, out=out, causal=causal,
                                 window=spec.window, softcap=spec.softcap)
                    return out
                if wrap_attention is not None:
                    call = wrap_attention(dict(v), call)
                try:
                    got = call()
                except (TQError, ValueError) as e:
                    say(f"  {_describe(v)}: failed: {e}")
                    database.record(spec, context, v, "error", math.inf,
                                    **{**common, "detail": str(e)})
                    continue
                err = float(np.max(np.abs(np.asarray(got, np.float64) - ref)))
                if not err <= limit:
                    say(f"  {_describe(v)}: WRONG (max error {err:.3g} > "
                        f"{limit:.3g}); not timed")
                    database.record(spec, context, v, "wrong", math.inf,
                                    **{**common,
                                       "detail": f"max error {err:.6g}"})
                    continue
                calls.append((v, call))
            # 2. Round-robin timing with flushed caches.
            samples = [[] for _ in calls]
            for r in range(rounds):
                for j in range(len(calls)):
                    at = (j + r) % len(calls)
                    flusher()
                    t0 = time.perf_counter()
                    calls[at][1]()
                    samples[at].append(time.perf_counter() - t0)
                say(f"context {context}: round {r + 1}/{rounds}")
            # 3. The winner against the default, head to head.
            def value(s):
                return min(s) if statistic == "best" else stats.median(s)
            canon = [_tuning.canonical_knobs(v) for v, _ in calls]
            base = _tuning.canonical_knobs(default)
            if confirm_rounds and calls and base in canon:
                win = min(range(len(calls)), key=lambda j: value(samples[j]))
                dflt = canon.index(base)
                if win != dflt:
                    say(f"context {context}: confirming "
                        f"{_describe(calls[win][0])} against the default")
                    for r in range(confirm_rounds):
                        for at in ((win, dflt) if r % 2 == 0 else
                                   (dflt, win)):
                            flusher()
                            t0 = time.perf_counter()
                            calls[at][1]()
                            samples[at].append(time.perf_counter() - t0)
            for (v, _), s in zip(calls, samples):
                # The rounds' spread (slowest / fastest) beside the time.
                detail = {**json.loads(common["detail"]),
                          "spread": round(max(s) / min(s), 4),
                          "samples": len(s)}
                database.record(spec, context, v, "ok", value(s),
                                **{**common, "detail": json.dumps(detail)})
                result.measured += 1
            del cache

        # 4. What the database says now.
        keys = {_tuning.canonical_knobs(v) for v in todo}
        for context in contexts:
            recs = [r for r in database.records(spec, context=context,
                                                target=target)
                    if _tuning.canonical_knobs(r.knobs) in keys]
            result.records.extend(recs)
            good = [r for r in recs if r.ok]
            result.best[context] = (min(good, key=lambda r: (r.seconds, r.id))
                                    if good else None)
            result.default[context] = database.lookup(spec, context, default,
                                                      target=target)
            b, d = result.best[context], result.default[context]
            if b is not None:
                ratio = result.speedup(context)
                say(f"context {context}: best {_describe(b.knobs)}: "
                    f"{b.seconds * 1e3:.4f} ms{_spread(b)}" +
                    (f" (default {d.seconds * 1e3:.4f} ms{_spread(d)}, "
                     f"{ratio:.2f}x)" if ratio else ""))
        return result
    finally:
        for rt in runtimes:
            rt.close()
        if flusher is not None:
            flusher.close()
        if own_db:
            database.close()
        shutil.rmtree(work, ignore_errors=True)
