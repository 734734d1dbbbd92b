"""tqc: compile and run TurboQuant compressed-KV-cache attention kernels.

The package binds tqc's C++ compiler driver (the functions ``tq-aot``
calls), the C runtime ``libtq_runtime`` and ``lib/Quant`` (the reference
encoders, decoders and attention) with nanobind; nothing runs in a
subprocess. Arrays go in and out as numpy arrays, or as any object with
``__dlpack__`` (torch tensors on the CPU, without copies).

    >>> import numpy as np, tqc
    >>> lib = tqc.compile(kind=("append", "decode"), k_format="turbo3_0",
    ...                   head_dim=128, gqa=4)
    >>> rt = tqc.Runtime(lib)
    >>> cache = tqc.KVCache(rt, k_format="turbo3_0", head_dim=128,
    ...                     num_kv_heads=8, page_size=16, num_pages=64)
    >>> cache.append(k, v)                 # [tokens, 8, 128] float32 each
    >>> out = rt.attention(q, cache)       # q: [1, 32, 128] float32

See docs/python.md in the tqc repository.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _tqc
from ._tqc import CompileError, TQError

__all__ = [
    "ABI_VERSION",
    "CompileError",
    "GpuKVCache",
    "GpuRuntime",
    "Kernel",
    "KernelLibrary",
    "KVCache",
    "KernelSpec",
    "Knob",
    "Runtime",
    "TQError",
    "compile",
    "decode",
    "encode",
    "format_info",
    "formats",
    "knobs",
    "reference_attention",
    "autotune",
]

__version__ = "0.1.0"

#: The runtime ABI version of the bundled libtq_runtime.
ABI_VERSION: int = _tqc.ABI_VERSION

ArrayLike = Any  # numpy.ndarray, torch.Tensor, anything with __dlpack__
Strs = Union[str, Sequence[str]]
Ints = Union[int, Sequence[int]]

_KINDS = ("append", "decode", "prefill", "dequantize")
_GGML_NATIVE = ("f16", "q8_0")  # ggml encodes and decodes these itself


# --------------------------------------------------------------------------
# Formats and lib/Quant
# --------------------------------------------------------------------------


def formats() -> list[Tuple[str, str]]:
    """Every format name tqc knows, with a one-line summary, in display
    order (``tq-quant formats``)."""
    return list(_tqc.formats())


def format_info(name: str, head_dim: int) -> dict:
    """What a format makes of rows of ``head_dim`` values: ``row_bytes``,
    ``bits_per_value``, ``padded_dim``, ``block_len``, ``bytes_per_block``,
    ``has_rotation``. Raises ValueError for an unknown format or a head dim
    it cannot take."""
    return dict(_tqc.format_info(name, head_dim))


def encode(rows: ArrayLike, format: str) -> np.ndarray:
    """Encodes float32 rows ``[..., head_dim]`` (C-contiguous) with
    lib/Quant's encoder and returns ``[..., row_bytes]`` uint8: exactly the
    bytes the runtime's append kernels write. Non-finite values raise
    ValueError naming the row."""
    return _tqc.encode(rows, format)


def decode(data: ArrayLike, format: str, head_dim: int, *,
           rotated: bool = False) -> np.ndarray:
    """Decodes ``[..., row_bytes]`` uint8 rows of ``format`` back to float32
    ``[..., head_dim]`` in the original domain; ``rotated=True`` gives the
    rotated domain the indices live in (``[..., padded_dim]``, no inverse
    rotation)."""
    return _tqc.decode(data, format, head_dim, rotated)


def reference_attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, *,
                        k_format: Optional[str] = None,
                        v_format: Optional[str] = None,
                        v_head_dim: int = 0, scale: float = 0.0,
                        causal: bool = False, window: int = 0,
                        softcap: float = 0.0,
                        mask: Optional[ArrayLike] = None,
                        slopes: Optional[ArrayLike] = None,
                        sinks: Optional[ArrayLike] = None) -> np.ndarray:
    """lib/Quant's reference attention, in double precision.

    ``q`` is ``[queries, q_heads, head_dim]`` float32. Without formats,
    ``k``/``v`` are float32 ``[keys, kv_heads, head_dim]`` and the result is
    exact attention; with ``k_format``/``v_format`` they are encoded rows
    ``[keys, kv_heads, row_bytes]`` (uint8), decoded first (what the kernels
    should compute). Queries are the last ``queries`` positions (causal,
    window); ``mask`` is float32 ``[queries, keys]`` added to the logits
    (times ``slopes[h]`` when given); ``sinks[h]`` is one more logit with a
    zero value row. Returns float64 ``[queries, q_heads, v_head_dim]``."""
    return _tqc.reference_attention(
        q, k, v, k_format, v_format, 0, v_head_dim, scale, causal, window,
        softcap, mask, slopes, sinks)


# --------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """One entry of a library's kernels.json."""

    name: str
    kind: str
    k_format: str
    head_dim: int
    v_format: Optional[str] = None
    group: Optional[int] = None
    causal: bool = False
    window: int = 0
    softcap: float = 0.0
    info: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class KernelLibrary:
    """A kernel library directory written by :func:`compile` (or by
    ``tq-aot``): ``kernels.json``, ``tq_kernels.h`` and the machine code.

    ``path`` is the shared library the runtime loads (CPU targets);
    ``abi`` is ``"runtime"`` (tq_attention's kernels) or ``"ggml"`` (a ggml
    kernel pack, which :meth:`Runtime.attention` drives through
    tq_attention_v1 with masks, ALiBi slopes and sinks)."""

    directory: Path
    metadata: dict = field(repr=False)
    kernels: Tuple[Kernel, ...] = field(repr=False)
    #: With ``compile(tuning_db=...)``: one line per attention kernel, the
    #: tuning record it was built with or why it got the defaults.
    tuning_report: Tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def load(cls, directory: Union[str, os.PathLike]) -> "KernelLibrary":
        """Reads a library directory's kernels.json."""
        directory = Path(directory)
        with open(directory / "kernels.json") as f:
            metadata = json.load(f)
        kernels = []
        for k in metadata.get("kernels", []):
            kernels.append(Kernel(
                name=k["name"], kind=k.get("kind", ""),
                k_format=k.get("k_format", ""), head_dim=k.get("head_dim", 0),
                v_format=k.get("v_format"), group=k.get("group"),
                causal=bool(k.get("causal", False)),
                window=int(k.get("window", 0)),
                softcap=float(k.get("softcap", 0.0)), info=k))
        return cls(directory, metadata, tuple(kernels))

    @property
    def target(self) -> str:
        """``cpu``, ``nvptx`` or ``amdgcn``."""
        return self.metadata.get("target", "cpu")

    @property
    def path(self) -> Path:
        """The shared library the CPU runtime loads."""
        if self.target != "cpu":
            raise ValueError(f"a {self.target} library has no CPU shared "
                             "library (load it with tqc.GpuRuntime)")
        return self.directory / self.metadata.get("library",
                                                  "libtqkernels.so")

    @property
    def abi(self) -> str:
        """``ggml`` when the library holds ggml attention kernels, else
        ``runtime``."""
        return ("ggml" if any(k.kind.startswith("ggml_")
                              for k in self.kernels) else "runtime")

    def names(self) -> list[str]:
        """The kernels' symbol names."""
        return [k.name for k in self.kernels]

    def __contains__(self, name: str) -> bool:
        return any(k.name == name for k in self.kernels)


def _list(value, what: str) -> list:
    if isinstance(value, (str, int)):
        return [value]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what}: expected a value or a sequence of values, "
                        f"got {type(value).__name__}") from None
    if not items:
        raise ValueError(f"{what}: the list is empty")
    return items


def _formats(value, what: str) -> list[str]:
    names = [n for n, _ in _tqc.formats()]
    items = _list(value, what)
    if items == ["all"]:
        return names
    for f in items:
        if not isinstance(f, str):
            raise TypeError(f"{what}: expected format names, got "
                            f"{type(f).__name__}")
        if f not in names:
            raise ValueError(f"{what}: unknown format '{f}' (known: "
                             f"{', '.join(names)})")
    return items


def _ints(value, what: str) -> list[int]:
    items = _list(value, what)
    for i in items:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{what}: expected integers, got "
                            f"{type(i).__name__}")
        if i <= 0:
            raise ValueError(f"{what}: expected positive integers, got {i}")
    return [int(i) for i in items]


def _specs(kind, k_format, v_format, head_dim, gqa, pairs, causal, window,
           softcap, abi, v_head_dim=0, centred_k=False) -> list[tuple]:
    """The kernel specs tq-aot builds for the same options (the Cartesian
    product of kinds, head dims, K/V formats and groups; tq-aot.cpp)."""
    if pairs is not None:
        if v_format is not None or k_format is not None:
            raise ValueError("pairs replaces k_format and v_format; give one "
                             "or the other")
        pair_list = []
        for p in _list(pairs, "pairs"):
            if (not isinstance(p, (tuple, list)) or len(p) != 2):
                raise TypeError(f"pairs: expected (k_format, v_format) "
                                f"pairs, got {p!r}")
            pair_list.append((p[0], p[1]))
        ks = _formats(list(dict.fromkeys(k for k, _ in pair_list)), "pairs")
        vs = _formats(list(dict.fromkeys(v for _, v in pair_list)), "pairs")
        wanted = set(pair_list)
    else:
        if k_format is None:
            raise ValueError("k_format: give the K format(s) (or pairs)")
        ks = _formats(k_format, "k_format")
        vs = _formats(v_format, "v_format") if v_format is not None else []
        wanted = None
    dims = _ints(head_dim, "head_dim")
    groups = _ints(gqa, "gqa")
    if abi not in ("runtime", "ggml"):
        raise ValueError(f"abi: expected 'runtime' or 'ggml', got '{abi}'")
    if (not isinstance(v_head_dim, (int, np.integer))
            or isinstance(v_head_dim, bool) or v_head_dim < 0):
        raise TypeError(f"v_head_dim: expected an integer >= 0, got "
                        f"{v_head_dim!r}")
    v_head_dim = int(v_head_dim)
    if v_head_dim and abi != "ggml":
        raise ValueError("v_head_dim is for abi='ggml' packs (the runtime's "
                         "cache descriptor has one head dim)")
    if centred_k and abi != "ggml":
        raise ValueError("centred_k is for abi='ggml' packs")

    specs, seen = [], set()

    def add(kind_, k, v, d, g=1, c=False, w=0, sc=0.0, centred=False, dv=0):
        spec = (kind_, k, v, d, dv, g, c, w, float(sc), centred)
        name = _tqc.kernel_name(spec)
        if name not in seen:
            seen.add(name)
            specs.append(spec)

    if abi == "ggml":
        if kind is not None:
            raise ValueError("kind does not apply to abi='ggml': a pack holds "
                             "every kernel ggml and tq_attention_v1 call")
        if causal or window:
            raise ValueError("abi='ggml' kernels read causal and window "
                             "masking from the mask (Runtime.attention builds "
                             "it from causal=/window=); compile without them")
        # tq-aot's pack: row encoders and decoders of every format ggml
        # does not encode itself; plus encoders of f16/q8_0, which ggml
        # does not need but the runtime's tq_append (KVCache.append) does.
        for row_kind in ("append", "dequantize"):
            for d in dims:
                for is_v, fs in ((False, ks), (True, vs)):
                    for f in fs:
                        if f in _GGML_NATIVE and row_kind != "append":
                            continue
                        # V rows are encoded at V's head dim.
                        add(row_kind, f, "", v_head_dim if is_v and v_head_dim
                            else d)
                        if is_v or f in _GGML_NATIVE:
                            continue
                        if centred_k:
                            add(row_kind, f, "", d, centred=True)
                        if not vs and v_head_dim:
                            add(row_kind, f, "", v_head_dim)  # V in K's format
        kinds = ["ggml_decode", "ggml_prefill"]
    else:
        kinds = _list(kind if kind is not None
                      else ("append", "decode", "prefill"), "kind")
        for k in kinds:
            if k not in _KINDS:
                raise ValueError(f"kind: expected one of {', '.join(_KINDS)}, "
                                 f"got '{k}'")
    for kind_ in kinds:
        for d in dims:
            for k in ks:
                if kind_ in ("append", "dequantize"):
                    add(kind_, k, "", d)
                    for v in vs:
                        add(kind_, v, "", d)
                    continue
                for g in groups:
                    for v in (vs or [k]):
                        if wanted is not None and (k, v) not in wanted:
                            continue
                        add(kind_, k, v, d, g, causal, window, softcap,
                            dv=v_head_dim if v_head_dim != d else 0)
    return specs


def compile(kind: Optional[Strs] = None, k_format: Optional[Strs] = None,
            v_format: Optional[Strs] = None, head_dim: Ints = 128,
            gqa: Ints = 1, *, pairs: Optional[Iterable[Tuple[str, str]]] = None,
            causal: bool = False, window: int = 0, softcap: float = 0.0,
            tile_size: int = 0, splits: int = 4, lookup: str = "tile",
            max_unrolled_chunks: int = 48,
            centroid_permute: Optional[str] = None,
            knobs: Optional[dict] = None,
            tuning_db: Union[str, os.PathLike, None] = None,
            tuning_context: int = 0, gpu_device: Optional[str] = None,
            cpu: str = "host", target: str = "cpu", abi: str = "runtime",
            v_head_dim: int = 0, centred_k: bool = False,
            inputs: Optional[Iterable[Union[str, os.PathLike]]] = None,
            naive: bool = False,
            output_dir: Union[str, os.PathLike, None] = None,
            progress: Optional[Callable[[int, int, str], None]] = None,
            jobs: int = 0) -> KernelLibrary:
    """Compiles a kernel library with the driver ``tq-aot`` uses.

    Every combination of ``kind`` (``append``, ``decode``, ``prefill``,
    ``dequantize``; default: append, decode and prefill, what a
    :class:`KVCache` and :meth:`Runtime.attention` need), ``k_format`` x
    ``v_format`` (default: each K format with itself; ``"all"``: every
    format; or ``pairs=[(k, v), ...]``), ``head_dim`` and ``gqa`` (query
    heads per KV head) becomes one kernel; append kernels are made for
    every K and V format. ``causal``, ``window`` and ``softcap`` are
    compiled into the attention kernels (the runtime looks them up by
    name). ``tile_size`` (0: 512 for decode, 64 for prefill kernels, 128
    for prefill kernels with AMX tiles), ``splits`` (split-KV chunks of decode kernels) and ``lookup`` (``tile``,
    ``select``, ``lut``) are the lowering's knobs; ``cpu`` an LLVM CPU name,
    optionally with ISA features added (``x86-64-v3+avxvnni``; ``host``:
    this machine with all its features). ``abi="ggml"`` builds a
    ggml kernel pack (row encoders/decoders and ggml attention kernels),
    which :meth:`Runtime.attention` runs with masks, ALiBi and sinks;
    ``target="nvptx"``/``"amdgcn"`` (``cpu`` then names the chip) writes a
    GPU library. For ``abi="ggml"``, ``v_head_dim`` gives V a head dim of
    its own (DeepSeek MLA: ``head_dim=576, v_head_dim=512``; V rows are
    encoded at it) and ``centred_k`` adds centred K row encoders and
    decoders (``tq-aot --v-head-dim``, ``--centred-k``). ``inputs``:
    MLIR files whose public ``func.func`` each become a kernel of the
    library, through the same pipeline (``tq-aot --input``; CPU only;
    with or without specs; listed with kind ``ir``). ``output_dir``
    defaults to a new temporary directory (``tqc-kernels-*``), left in
    place (removed when the compile fails).
    ``progress(i, n, name)`` is called before each kernel (``i`` counts
    the kernels started; with several jobs from the compiling threads,
    one call at a time). ``jobs``: kernels compiled at once, each on a
    thread of its own (0: one per hardware thread; ``tq-aot --jobs``);
    the library is the same whatever the count.

    ``max_unrolled_chunks`` (rows of more vector chunks are visited by
    decode periods) and ``centroid_permute`` (``none``, ``avx2``,
    ``avx512``; default: the widest the CPU has) are knobs too.
    ``knobs`` (``{"tile_size": 128, "splits": 2, ...}``, see :func:`knobs`)
    sets knobs of every attention kernel, checked against each kernel's
    own (a knob a kernel lacks raises ValueError); ``{kernel name:
    {knob: value}}`` sets them for the kernels named only (a name the
    library does not build raises ValueError). ``tuning_db`` builds
    each attention kernel with its best record in a tuning database
    (:mod:`tqc.tuning`; at ``tuning_context``'s bucket, or the largest
    recorded when 0), as ``tq-aot --tuning-db``; the library's
    ``tuning_report`` says which record each kernel used. GPU targets have
    the knob ``block_warps`` (:func:`knobs`); their records are per device,
    so ``tuning_db`` with a GPU target needs ``gpu_device``
    (:attr:`GpuRuntime.device_name`, ``tq-aot --gpu-device``).

    Raises :class:`CompileError` with the compiler's message (the kernel
    and its diagnostics), ValueError/TypeError for malformed options.
    Releases the GIL while compiling."""
    if not isinstance(window, (int, np.integer)) or isinstance(window, bool):
        raise TypeError(f"window: expected an integer, got "
                        f"{type(window).__name__}")
    if not isinstance(jobs, (int, np.integer)) or isinstance(jobs, bool):
        raise TypeError(f"jobs: expected an integer, got "
                        f"{type(jobs).__name__}")
    if jobs < 0:
        raise ValueError(f"jobs must be >= 0 (0: one per hardware thread), "
                         f"got {jobs}")
    ir = []
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    for path in _list(inputs, "inputs") if inputs is not None else []:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"inputs: expected paths of MLIR files, got "
                            f"{type(path).__name__}")
        ir.append((os.fspath(path), Path(path).read_text()))
    if ir and k_format is None and pairs is None:
        specs = []  # the IR alone
    else:
        specs = _specs(kind, k_format, v_format, head_dim, gqa, pairs,
                       causal, int(window), softcap, abi, v_head_dim,
                       centred_k)
    temporary = output_dir is None
    if temporary:
        output_dir = tempfile.mkdtemp(prefix="tqc-kernels-")
    output_dir = os.fspath(output_dir)
    name = "libtq_ggml_kernels.so" if abi == "ggml" else "libtqkernels.so"
    kernel_knobs = {}
    if knobs:
        items = dict(knobs)
        per_kernel = [isinstance(v, dict) for v in items.values()]
        if all(per_kernel):
            # {kernel name: {knob: value}}: those kernels only.
            kernel_knobs = {str(n): {str(k): str(v) for k, v in kv.items()}
                            for n, kv in items.items()}
        elif any(per_kernel):
            raise ValueError("knobs: either {knob: value} for every "
                             "attention kernel or {kernel name: {knob: "
                             "value}}, not both")
        else:
            values = {str(k): str(v) for k, v in items.items()}
            kernel_knobs = {_tqc.kernel_name(sp): values for sp in specs
                            if sp[0] not in ("append", "dequantize")}
    try:
        report = _tqc.compile_library(
            specs, output_dir, target, cpu, tile_size, tile_size, splits,
            lookup, naive, name, progress, max_unrolled_chunks,
            centroid_permute or "", kernel_knobs,
            os.fspath(tuning_db) if tuning_db is not None else "",
            tuning_context, ir, gpu_device or "", int(jobs))
    except BaseException:
        if temporary:  # a directory the caller never saw
            shutil.rmtree(output_dir, ignore_errors=True)
        raise
    library = KernelLibrary.load(output_dir)
    return dataclasses.replace(library, tuning_report=tuple(report))


@dataclass(frozen=True)
class KernelSpec:
    """One attention kernel, as :func:`compile` would build it: ``kind``
    ``decode``, ``prefill``, ``ggml_decode`` or ``ggml_prefill``; ``v_format``
    defaults to ``k_format``; ``gqa`` query heads per KV head."""

    kind: str
    k_format: str
    v_format: Optional[str] = None
    head_dim: int = 128
    gqa: int = 1
    causal: bool = False
    window: int = 0
    softcap: float = 0.0

    def as_tuple(self) -> tuple:
        """The native module's spec tuple."""
        return (self.kind, self.k_format, self.v_format or self.k_format,
                int(self.head_dim), 0, int(self.gqa), bool(self.causal),
                int(self.window), float(self.softcap), False)

    @property
    def name(self) -> str:
        """The kernel's symbol name (the tuning database's ``spec``)."""
        return _tqc.kernel_name(self.as_tuple())


@dataclass(frozen=True)
class Knob:
    """A knob of a kernel spec (:func:`knobs`): its ``values`` worth trying
    (the default first), what the compiler accepts (``legal``), and the
    ``knob=value`` it only matters with (``only_with``, else empty)."""

    name: str
    values: Tuple[str, ...]
    default: str
    legal: str
    description: str
    only_with: str = ""


def knobs(spec: KernelSpec, cpu: str = "host", *,
          target: str = "cpu") -> list[Knob]:
    """The knobs the compiler has for ``spec`` on ``cpu`` (an LLVM CPU name
    or ``host``), from ``mlir::tq::kernelKnobs``: ``tile_size``, ``splits``
    (decode kernels), ``lookup``, ``max_unrolled_chunks`` (rows long enough
    to loop over decode periods), ``centroid_permute`` (CPUs with several
    register permutes, formats with a codebook). For ``target``
    ``nvptx``/``amdgcn`` (``cpu`` then names the chip, ``host``: the
    first) the GPU kernels' ``block_warps`` (warps per block). Values are
    strings, as the tuning database spells them."""
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"spec: expected a tqc.KernelSpec, got "
                        f"{type(spec).__name__}")
    return [Knob(name=k["name"], values=tuple(k["values"]),
                 default=k["default"], legal=k["legal"],
                 description=k["description"], only_with=k["only_with"])
            for k in _tqc.kernel_knobs(spec.as_tuple(), cpu, target)]


# --------------------------------------------------------------------------
# Runtime
# --------------------------------------------------------------------------


class Runtime:
    """A kernel library loaded by the C runtime, with its thread pool
    (``tq_runtime_create``).

    ``library`` is a :class:`KernelLibrary`, its directory, or the path of
    its shared library; ``threads`` 0 means one per online CPU (at most
    4096, the runtime's limit: more raises :class:`TQError`,
    ``TQ_STATUS_INVALID_ARGUMENT``; a negative count raises ValueError).
    Use it as a context manager or call :meth:`close`; a closed runtime
    raises ValueError. Creating one for a library that cannot be loaded
    raises :class:`TQError` (``TQ_STATUS_UNAVAILABLE``, with the loader's
    message)."""

    def __init__(self, library: Union[KernelLibrary, str, os.PathLike], *,
                 threads: int = 0):
        if (not isinstance(threads, int) or isinstance(threads, bool)
                or threads < 0):
            raise ValueError(
                f"threads: expected a count >= 0 (0: one per online CPU), "
                f"got {threads!r}")
        if isinstance(library, KernelLibrary):
            lib = library
        else:
            p = Path(library)
            lib = KernelLibrary.load(p) if p.is_dir() else None
            if lib is None and (p.parent / "kernels.json").exists():
                lib = KernelLibrary.load(p.parent)
            if lib is None:
                self._native = _tqc.Runtime(os.fspath(p), threads)
                self.library: Optional[KernelLibrary] = None
                return
        self.library = lib
        self._native = _tqc.Runtime(os.fspath(lib.path), threads)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._native.closed

    @property
    def library_path(self) -> str:
        """The shared library the runtime loaded."""
        return self._native.library_path

    @property
    def engine(self) -> bool:
        """Whether attention runs tq_attention_v1 (a ggml kernel pack)."""
        return self.library is not None and self.library.abi == "ggml"

    def close(self) -> None:
        """Destroys the runtime; idempotent."""
        self._native.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def attention(self, q: ArrayLike, cache: "KVCache", *,
                  q_indptr: Optional[Union[Sequence[int], ArrayLike]] = None,
                  out: Optional[ArrayLike] = None, causal: bool = False,
                  window: int = 0, softcap: float = 0.0, scale: float = 0.0,
                  mask: Optional[ArrayLike] = None,
                  slopes: Optional[ArrayLike] = None,
                  sinks: Optional[ArrayLike] = None) -> ArrayLike:
        """Attention of every sequence's queries over ``cache``.

        ``q`` is float32 ``[rows, num_q_heads, head_dim]`` (C-contiguous);
        sequence ``s`` owns rows ``q_indptr[s] .. q_indptr[s+1]`` (default:
        all rows for a one-sequence cache, else one row per sequence). A
        sequence with one row runs the decode kernel, with more the prefill
        kernel; queries are its last positions. ``scale`` 0 means
        1/sqrt(head_dim). Writes ``out`` (float32, q's shape) when given and
        returns it, else returns a new numpy array.

        With a plain library (``abi="runtime"``) this is ``tq_attention``:
        ``causal``/``window``/``softcap`` select kernels compiled with them.
        With a ggml pack it is ``tq_attention_v1``: ``mask`` (float16 or
        float32 ``[rows, >= longest sequence]``, added to the logits),
        ``slopes`` (ALiBi, ``[num_q_heads]``, multiplying the mask),
        ``sinks`` (``[num_q_heads]`` extra logits), ``softcap`` (compiled
        into the pack); ``causal``/``window`` are turned into the mask.
        A row that sees nothing gets zeros.

        Raises :class:`TQError` (status and tq_last_error()) when the
        runtime refuses the call, e.g. ``TQ_STATUS_NOT_FOUND`` naming the
        kernel the library lacks; TypeError/ValueError for bad arrays. The
        GIL is released while the kernels run."""
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache: expected a tqc.KVCache, got "
                            f"{type(cache).__name__}")
        return self._native.attention(
            cache._native, q, q_indptr, out, causal, window, softcap, scale,
            mask, slopes, sinks, self.engine)


class KVCache:
    """A KV cache in tqc formats that a :class:`Runtime` appends to and
    attends over (``tq_kv_cache_v0``).

    Pools are uint8 ``[num_pages, page_size, num_kv_heads, row_bytes]`` for
    K and for V (``k_pages``/``v_pages``: numpy arrays the cache owns, or
    writable arrays you lend, e.g. torch uint8 tensors, used in place).
    ``layout="paged"``: sequences take ``page_size``-token pages from a
    shared pool of ``num_pages`` as they grow (a CSR page table, vLLM
    style). ``layout="contiguous"``: sequence ``s`` owns page ``s`` of
    ``capacity`` tokens (llama.cpp style). ``head_major=True`` orders each
    page by kv head, pools ``[num_pages, num_kv_heads, page_size,
    row_bytes]`` (``TQ_LAYOUT_HEAD_MAJOR``): a head's rows are consecutive
    bytes, which decode reads faster when there are several kv heads
    (docs/runtime.md); CPU runtimes only. ``v_format`` defaults to
    ``k_format``."""

    def __init__(self, runtime: Runtime, k_format: str,
                 v_format: Optional[str] = None, *, head_dim: int,
                 num_kv_heads: int, layout: str = "paged",
                 page_size: int = 16, num_pages: Optional[int] = None,
                 capacity: Optional[int] = None, num_seqs: int = 1,
                 k_pages: Optional[ArrayLike] = None,
                 v_pages: Optional[ArrayLike] = None,
                 head_major: bool = False):
        if not isinstance(runtime, Runtime):
            raise TypeError(f"runtime: expected a tqc.Runtime, got "
                            f"{type(runtime).__name__}")
        if layout == "paged":
            if capacity is not None:
                raise ValueError("capacity: a paged cache has page_size and "
                                 "num_pages (capacity is for "
                                 "layout='contiguous')")
            if num_pages is None:
                raise ValueError("num_pages: a paged cache needs the pool's "
                                 "page count")
            size = page_size
        elif layout == "contiguous":
            if capacity is None:
                raise ValueError("capacity: a contiguous cache needs each "
                                 "sequence's capacity in tokens")
            size = capacity
            num_pages = num_pages or 0
        else:
            raise ValueError(f"layout: expected 'paged' or 'contiguous', got "
                             f"'{layout}'")
        self.runtime = runtime
        self._native = _tqc.KVCache(
            k_format, v_format or k_format, head_dim, num_kv_heads, layout,
            size, num_pages, num_seqs, k_pages, v_pages, bool(head_major))

    def append(self, k: ArrayLike, v: ArrayLike, *, seq: int = 0,
               start: Optional[int] = None) -> None:
        """Encodes float32 K and V rows ``[n, num_kv_heads, head_dim]`` into
        tokens ``start .. start + n - 1`` of sequence ``seq`` with the
        library's append kernels (``tq_append``); ``start`` defaults to the
        sequence's length (append at the end) and may be at most that
        (rewriting tokens). A paged sequence takes pages from the free
        pool as it grows; ValueError when the pool or the capacity is
        exhausted. Nothing changes when it fails."""
        self._native.append(self.runtime._native, k, v, seq, start)

    def truncate(self, seq: int, length: int) -> None:
        """Keeps the first ``length`` tokens of ``seq`` (its later pages go
        back to the free pool)."""
        self._native.truncate(seq, length)

    def rows(self, seq: int) -> Tuple[np.ndarray, np.ndarray]:
        """Copies of the encoded K and V rows of ``seq``:
        ``[len, num_kv_heads, row_bytes]`` uint8 each."""
        return self._native.rows(seq)

    def pages(self, seq: int) -> list[int]:
        """The pages ``seq`` owns, in order."""
        return list(self._native.pages(seq))

    @property
    def lengths(self) -> list[int]:
        """Tokens per sequence."""
        return list(self._native.lengths)

    @property
    def free_pages(self) -> int:
        """Pages of the pool no sequence holds (paged layout)."""
        return self._native.free_pages

    @property
    def k_pages(self) -> ArrayLike:
        """The K pool (the array passed in, or the cache's numpy array)."""
        return self._native.k_pages

    @property
    def v_pages(self) -> ArrayLike:
        """The V pool."""
        return self._native.v_pages

    @property
    def k_format(self) -> str:
        """The K rows' format."""
        return self._native.k_format

    @property
    def v_format(self) -> str:
        """The V rows' format."""
        return self._native.v_format

    @property
    def head_dim(self) -> int:
        """Values per K/V row."""
        return self._native.head_dim

    @property
    def num_kv_heads(self) -> int:
        """KV heads per token."""
        return self._native.num_kv_heads

    @property
    def page_size(self) -> int:
        """Tokens per page (contiguous: the capacity)."""
        return self._native.page_size

    @property
    def num_pages(self) -> int:
        """Pages in each pool."""
        return self._native.num_pages

    @property
    def num_seqs(self) -> int:
        """Sequences the cache holds."""
        return self._native.num_seqs

    @property
    def k_row_bytes(self) -> int:
        """Bytes of one encoded K row."""
        return self._native.k_row_bytes

    @property
    def v_row_bytes(self) -> int:
        """Bytes of one encoded V row."""
        return self._native.v_row_bytes

    @property
    def layout(self) -> str:
        """``paged`` or ``contiguous``."""
        return self._native.layout

    @property
    def head_major(self) -> bool:
        """True where pages are ordered by kv head (pools ``[num_pages,
        num_kv_heads, page_size, row_bytes]``)."""
        return self._native.head_major

    def __repr__(self) -> str:
        return (f"KVCache({self.k_format}/{self.v_format}, "
                f"head_dim={self.head_dim}, kv_heads={self.num_kv_heads}, "
                f"{self.layout}{', head-major' if self.head_major else ''}, "
                f"lengths={self.lengths})")


# --------------------------------------------------------------------------
# GPU runtime
# --------------------------------------------------------------------------


class GpuRuntime:
    """A GPU kernel library (``compile(target="nvptx"/"amdgcn")``) loaded
    by the C runtime's GPU backend (``tq_gpu_runtime_create``), which loads
    the vendor's driver with dlopen.

    ``backend`` is ``cuda`` or ``hip`` (default: the library's target's);
    ``device`` the device ordinal; ``splits`` the split-KV chunks of every
    call (0: chosen per call from the device's size); ``driver`` a driver
    library path (default: ``libcuda.so.1`` / ``libamdhip64.so``). Where no
    driver or device is present, creating one raises :class:`TQError` with
    ``status == "TQ_STATUS_UNAVAILABLE"`` and the cause. Use it as a
    context manager or call :meth:`close`.

    Attention runs over a :class:`GpuKVCache`, the device copy of a
    :class:`KVCache` (:meth:`upload`); q and the output are host arrays,
    copied each call."""

    def __init__(self, library: Union[KernelLibrary, str, os.PathLike], *,
                 backend: Optional[str] = None, device: int = 0,
                 splits: int = 0, driver: Optional[str] = None):
        lib = (library if isinstance(library, KernelLibrary)
               else KernelLibrary.load(library))
        if lib.target == "cpu":
            raise ValueError("library: a CPU library (load it with "
                             "tqc.Runtime); GpuRuntime takes nvptx or "
                             "amdgcn libraries")
        if backend is None:
            backend = "cuda" if lib.target == "nvptx" else "hip"
        self.library = lib
        self._native = _tqc.GpuRuntime(os.fspath(lib.directory), backend,
                                       device, splits, driver or "")

    @property
    def device_name(self) -> str:
        """The device's name as its driver reports it (the ``device`` of a
        GPU tuning key, :func:`tqc.tuning.target_key`)."""
        return self._native.device_name

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._native.closed

    def close(self) -> None:
        """Destroys the runtime; idempotent. Device caches made on it
        become unusable."""
        self._native.close()

    def __enter__(self) -> "GpuRuntime":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def upload(self, cache: "KVCache") -> "GpuKVCache":
        """A device copy of ``cache``'s K and V pools."""
        return GpuKVCache(self, cache)

    def flush(self, mib: int) -> None:
        """Writes ``mib`` MiB to device memory, evicting the L2 cache (the
        autotuner's flush before a timed call)."""
        self._native.flush(int(mib) << 20)

    def attention(self, q: ArrayLike, cache: "GpuKVCache", *,
                  q_indptr: Optional[Union[Sequence[int], ArrayLike]] = None,
                  out: Optional[ArrayLike] = None, causal: bool = False,
                  window: int = 0, softcap: float = 0.0,
                  scale: float = 0.0) -> ArrayLike:
        """``tq_gpu_attention`` over ``cache``: the arguments, checks and
        result of :meth:`Runtime.attention` for a plain library (no masks,
        slopes or sinks); q is uploaded and the output downloaded."""
        if not isinstance(cache, GpuKVCache):
            raise TypeError(f"cache: expected a tqc.GpuKVCache "
                            f"(GpuRuntime.upload), got "
                            f"{type(cache).__name__}")
        return self._native.attention(cache._native, q, q_indptr, out,
                                      causal, window, softcap, scale)


class GpuKVCache:
    """Device copies of a :class:`KVCache`'s pools for a
    :class:`GpuRuntime`; the page table stays the host cache's (uploaded
    by each call). After appending to the host cache, :meth:`sync`."""

    def __init__(self, runtime: GpuRuntime, cache: "KVCache"):
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache: expected a tqc.KVCache, got "
                            f"{type(cache).__name__}")
        if cache.head_major:
            raise ValueError("cache: a head-major cache is a CPU runtime "
                             "layout; the GPU kernels read [page, slot, kv "
                             "head] pools (make it with head_major=False)")
        if not isinstance(runtime, GpuRuntime):
            raise TypeError(f"runtime: expected a tqc.GpuRuntime, got "
                            f"{type(runtime).__name__}")
        self.runtime = runtime
        self.host = cache
        self._native = _tqc.GpuKVCache(runtime._native, cache._native)

    def sync(self) -> None:
        """Copies the host cache's pools to the device again."""
        self._native.sync()


from .autotune import autotune  # noqa: E402  (uses the names above)
