"""tqc's native bindings (use the tqc package, not this module)."""

from collections.abc import Mapping, Sequence

import numpy
from numpy.typing import NDArray

from tqc import CompileError as CompileError, TQError as TQError


ABI_VERSION: int = 1

def formats() -> list:
    """Every format name lib/Quant knows, with a one-line summary."""

def format_info(name: str, head_dim: int) -> dict:
    """
    Row bytes, bits per value, padded dim, block length and whether the format rotates, for rows of head_dim values.
    """

def encode(rows: object, format: str) -> NDArray[numpy.uint8]:
    """
    Encodes float32 rows [..., head_dim] into [..., row_bytes] uint8 with lib/Quant's encoder (the bytes the runtime's append kernels write).
    """

def decode(data: object, format: str, head_dim: int, rotated: bool = False) -> NDArray[numpy.float32]:
    """
    Decodes [..., row_bytes] uint8 rows of `format` back to float32 [..., head_dim] (rotated=True: the rotated domain, [..., padded_dim], no inverse rotation).
    """

def reference_attention(q: object, k: object, v: object, k_format: str | None = None, v_format: str | None = None, head_dim: int = 0, v_head_dim: int = 0, scale: float = 0.0, causal: bool = False, window: int = 0, softcap: float = 0.0, mask: object | None = None, slopes: object | None = None, sinks: object | None = None) -> NDArray[numpy.float64]:
    """lib/Quant's reference attention in double precision."""

def kernel_name(spec: tuple[str, str, str, int, int, int, bool, int, float, bool]) -> str:
    """The symbol name of a kernel spec tuple."""

def compile_library(specs: Sequence[tuple[str, str, str, int, int, int, bool, int, float, bool]], output_dir: str, target: str, cpu: str, decode_tile: int, prefill_tile: int, splits: int, lookup: str, naive: bool, library_name: str, progress: object | None = None, max_unrolled_chunks: int = 48, centroid_permute: str = '', kernel_knobs: Mapping[str, Mapping[str, str]] = {}, tuning_db: str = '', tuning_context: int = 0, inputs: Sequence[tuple[str, str]] = [], gpu_device: str = '', jobs: int = 0) -> list[str]:
    """
    Compiles kernel spec tuples into a library directory with tq-aot's driver (writeKernelLibrary / writeGpuKernelLibrary); returns the tuning database's report (one line per attention kernel).
    """

VERSION: str = '0.1.0'

def kernel_knobs(spec: tuple[str, str, str, int, int, int, bool, int, float, bool], cpu: str = 'host', target: str = 'cpu') -> list:
    """
    The knobs of a kernel spec tuple on a CPU (mlir::tq::kernelKnobs) or a GPU chip (mlir::tq::gpuKernelKnobs).
    """

def tuning_target(cpu: str = 'host', target: str = 'cpu', device: str = '') -> dict:
    """
    The tuning database key of a CPU target, or of a GPU chip on a device: triple, cpu, features, features_hash.
    """

def context_bucket(tokens: int) -> int:
    """The context-length bucket of a context: the power of two >= it."""

def lookup_tuning_record(database: str, version: str, cpu: str, spec: str, context: int = 0, target: str = 'cpu', device: str = '') -> object:
    """
    tq-aot --tuning-db's lookup: the best correct record (id, context, seconds, knobs) or None.
    """

class Runtime:
    """A loaded kernel library and its thread pool (tq_runtime_create)."""

    def __init__(self, library_path: str, threads: int = 0) -> None: ...

    def close(self) -> None:
        """Destroys the runtime (tq_runtime_destroy); later calls raise."""

    @property
    def closed(self) -> bool: ...

    @property
    def library_path(self) -> str: ...

    def attention(self, cache: KVCache, q: object, q_indptr: object | None = None, out: object | None = None, causal: bool = False, window: int = 0, softcap: float = 0.0, scale: float = 0.0, mask: object | None = None, slopes: object | None = None, sinks: object | None = None, engine: bool = False) -> object:
        """
        Attention of every sequence's queries over the cache (tq_attention, or tq_attention_v1 when engine=True).
        """

class KVCache:
    """
    A paged or contiguous KV cache: pools, page table and sequence lengths (tq_kv_cache_v0).
    """

    def __init__(self, k_format: str, v_format: str, head_dim: int, num_kv_heads: int, layout: str, page_size: int, num_pages: int, num_seqs: int, k_pages: object | None = None, v_pages: object | None = None, head_major: bool = False) -> None: ...

    def append(self, runtime: Runtime, k: object, v: object, seq: int, start: int | None = None) -> None: ...

    def truncate(self, seq: int, length: int) -> None: ...

    def rows(self, seq: int) -> tuple[NDArray[numpy.uint8], NDArray[numpy.uint8]]: ...

    def pages(self, seq: int) -> list[int]: ...

    @property
    def lengths(self) -> list[int]: ...

    @property
    def free_pages(self) -> int: ...

    @property
    def k_pages(self) -> object: ...

    @property
    def v_pages(self) -> object: ...

    @property
    def k_format(self) -> str: ...

    @property
    def v_format(self) -> str: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def num_kv_heads(self) -> int: ...

    @property
    def page_size(self) -> int: ...

    @property
    def num_pages(self) -> int: ...

    @property
    def num_seqs(self) -> int: ...

    @property
    def k_row_bytes(self) -> int: ...

    @property
    def v_row_bytes(self) -> int: ...

    @property
    def layout(self) -> str: ...

    @property
    def head_major(self) -> bool: ...

class GpuRuntime:
    """tq_gpu_runtime over a GPU kernel library."""

    def __init__(self, library_dir: str, backend: str, device: int = 0, splits: int = 0, driver: str = '') -> None: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...

    @property
    def device_name(self) -> str: ...

    @property
    def library_dir(self) -> str: ...

    def flush(self, bytes: int) -> None: ...

    def attention(self, cache: GpuKVCache, q: object, q_indptr: object | None, out: object | None, causal: bool, window: int, softcap: float, scale: float) -> object: ...

class GpuKVCache:
    """Device copies of a KVCache's pools."""

    def __init__(self, runtime: GpuRuntime, cache: KVCache) -> None: ...

    def sync(self) -> None: ...
