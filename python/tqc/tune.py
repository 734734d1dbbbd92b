"""python -m tqc.tune: tune kernel specs into a tuning database.

    python -m tqc.tune --db tuning.db --kind decode,prefill \\
        --k-format turbo3_0,q8_0 --head-dim 128 --gqa 4 \\
        --contexts 4096,16384 [--knob tile_size=128,256] [--strategy grid]

Every combination of the kinds, K formats (paired with --v-format, or each
with itself), head dims and groups is tuned with :func:`tqc.autotune`;
measurements already in the database are not repeated. ``--list-knobs``
prints the knobs of each spec and exits; ``--show`` prints the database's
best records for this machine and exits. Then ``tq-aot --tuning-db=DB``
(or ``tqc.compile(tuning_db=DB)``) builds each kernel with its best record.

``--target nvptx|amdgcn --cpu CHIP [--device N]`` tunes GPU kernels on a
GPU through the GPU runtime (records keyed by the chip and the device's
name, which is printed: ``tq-aot --gpu-device`` takes it); where no driver
or device is present each spec prints ``SKIPPED`` with the reason and the
command exits 0 having measured nothing.
"""

from __future__ import annotations

import argparse
import itertools
import sys

from . import KernelSpec, autotune, knobs
from .autotune import _spread
from . import tuning


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _flush_mib(text: str):
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a count of MiB (>= 0) or 'auto', got '{text}'")
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tqc.tune",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default="tqc-tuning.db",
                   help="tuning database (created if missing)")
    p.add_argument("--kind", default="decode", help="decode,prefill")
    p.add_argument("--k-format", default="turbo3_0")
    p.add_argument("--v-format", default=None)
    p.add_argument("--head-dim", default="128")
    p.add_argument("--gqa", default="4")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--contexts", default="4096")
    p.add_argument("--knob", action="append", default=[],
                   metavar="NAME=V1,V2", help="values to try for a knob")
    p.add_argument("--strategy", default="axes", choices=("axes", "grid"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--confirm-rounds", type=int, default=None,
                   help="rounds of the winner against the default, head to "
                        "head (default: --rounds; 0: none)")
    p.add_argument("--statistic", default="best", choices=("best", "median"))
    p.add_argument("--tolerance", type=float, default=2e-3,
                   help="a variant whose output is further than this x "
                        "max(1, max |reference|) from the reference is "
                        "recorded wrong, never timed (lossy knobs such as "
                        "score_dot=i8 may need more; docs/autotune.md)")
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-major", action="store_true",
                   help="time over head-major pools (TQ_LAYOUT_HEAD_MAJOR), "
                        "as a runtime with KVCache(head_major=True) has them")
    p.add_argument("--prefill-rows", type=int, default=16)
    p.add_argument("--flush-mib", type=_flush_mib, default="auto",
                   help="MiB read before every timed call (auto: twice the "
                        "last-level cache, at least 64; 64 on a GPU)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--jobs", type=int, default=0,
                   help="parallel compiles (0: one per two CPUs)")
    p.add_argument("--cpu", default="host",
                   help="LLVM CPU name, or a GPU target's chip")
    p.add_argument("--target", default="cpu", choices=("cpu", "nvptx",
                                                       "amdgcn"))
    p.add_argument("--device", type=int, default=0,
                   help="GPU targets: the device ordinal")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--list-knobs", action="store_true")
    p.add_argument("--show", action="store_true")
    a = p.parse_args(argv)
    if not 0 < a.tolerance < float("inf"):
        p.error(f"--tolerance must be positive and finite, got {a.tolerance}")

    knob_values = {}
    for item in a.knob:
        name, _, values = item.partition("=")
        if not values:
            p.error(f"--knob takes NAME=V1,V2, got '{item}'")
        knob_values[name] = _split(values)
    v_formats = _split(a.v_format) if a.v_format else [None]
    specs = [KernelSpec(kind, k, v, int(d), int(g), causal=a.causal)
             for kind, k, v, d, g in itertools.product(
                 _split(a.kind), _split(a.k_format), v_formats,
                 _split(a.head_dim), _split(a.gqa))]

    if a.list_knobs:
        for s in specs:
            print(s.name)
            for k in knobs(s, a.cpu, target=a.target):
                extra = f" (only with {k.only_with})" if k.only_with else ""
                print(f"  {k.name}: {', '.join(k.values)} [default "
                      f"{k.default}; legal: {k.legal}]{extra}")
        return 0
    if a.show:
        if a.target != "cpu":
            p.error("--show: GPU records are per device; list them with "
                    "tqc.tuning.TuningDB(...).records(all_targets=True)")
        with tuning.TuningDB(a.db) as db:
            key = tuning.target_key(a.cpu)
            for s in specs:
                for c in _split(a.contexts):
                    r = db.best(s, int(c), target=key)
                    print(f"{s.name} context {c}: " + (
                        f"record {r.id}: {r.seconds * 1e3:.4f} ms "
                        f"{tuning.canonical_knobs(r.knobs)}" if r else
                        "no record"))
        return 0

    contexts = [int(c) for c in _split(a.contexts)]
    with tuning.TuningDB(a.db) as db:
        for s in specs:
            r = autotune(s, contexts, db=db, knobs=knob_values,
                         strategy=a.strategy, rounds=a.rounds,
                         confirm_rounds=a.confirm_rounds,
                         statistic=a.statistic, tolerance=a.tolerance,
                         num_kv_heads=a.kv_heads, head_major=a.head_major,
                         prefill_rows=a.prefill_rows, flush_mib=a.flush_mib,
                         threads=a.threads, jobs=a.jobs, cpu=a.cpu,
                         target=a.target, device=a.device,
                         progress=not a.quiet)
            if r.skipped:
                print(f"{s.name}\tSKIPPED\t{r.skipped}")
                continue
            for c in contexts:
                b, d = r.best.get(c), r.default.get(c)
                ratio = r.speedup(c)
                print(f"{s.name}\tcontext {c}\t" + (
                    f"best {b.seconds * 1e3:.4f} ms{_spread(b)} "
                    f"{tuning.canonical_knobs(b.knobs)}" if b else
                    "no correct variant") +
                    (f"\tdefault {d.seconds * 1e3:.4f} ms{_spread(d)}"
                     f"\t{ratio:.2f}x" if ratio else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
