"""Generated kernel sources and their compiled binaries.

compile_ops registers each generated source under its content key (the key an IR
`gpu::code_object` carries) and, when a GPU target is bound (compile_target binds one),
compiles the new ones in parallel (on worker processes for a large batch: runtime/rtc_pool.py says
why). Binaries are cached in memory and on disk under
`$MIGX_EXPLORE_CACHE_DIR` (default ~/.cache/migx-explore/kernels), keyed by (source, header,
arch, compiler version, flags), so a warm recompile skips compilation entirely.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from migx_explore.compiler import tmpfiles
from migx_explore.compiler.errors import MigxError

from . import cache_trust
from .codegen.common import KernelSource
from .runtime import rtc_pool
from .runtime.base import GpuError

HEADER_NAME = "migx.hpp"
_HEADER_PATH = Path(__file__).parent / "kernels" / HEADER_NAME


class KernelCompiler(Protocol):
    """What a runtime backend offers for compilation (hiprtc, nvrtc, or the fake)."""

    arch: str

    def compiler_id(self) -> str: ...

    def compile_flags(self) -> list[str]: ...

    def compile_source(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> bytes: ...


class CompileError(MigxError):
    pass


_SOURCES: dict[str, KernelSource] = {}
_BINARIES: dict[str, bytes] = {}
_LOCK = threading.Lock()
_TARGET: contextvars.ContextVar[Any] = contextvars.ContextVar("migx_gpu_target", default=None)
# Binaries that travelled with one saved program, by binary key: visible only while that program
# compiles (shipped_binaries), never added to the process-wide or disk caches.
_SHIPPED: contextvars.ContextVar[dict[str, bytes] | None] = contextvars.ContextVar("migx_shipped", default=None)
_ENTRY_MAGIC = b"MIGXKBIN2\n"  # disk entry: magic, HMAC-SHA256(secret; binary key + data) hex, newline, data
_WARNED: set[str] = set()
_CLEANED: set[Path] = set()


def register(ks: KernelSource) -> str:
    with _LOCK:
        _SOURCES.setdefault(ks.key, ks)
    return ks.key


def source_for(key: str) -> KernelSource:
    try:
        return _SOURCES[key]
    except KeyError:
        raise CompileError(f"kernel {key} is not in this process's kernel store; run compile_ops again") from None


def header_text() -> str:
    return _HEADER_PATH.read_text()


def cache_root() -> Path:
    """The user's cache root: its `kernels` folder and the per-user HMAC secret live here."""
    root = os.environ.get("MIGX_EXPLORE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "migx-explore")
    return Path(root)


def cache_dir() -> Path:
    return cache_root() / "kernels"


def disk_cache_refusal(folder: Path) -> str | None:
    """Why `folder` must not be used as a kernel cache (None if it may): a binary read from it runs
    on the GPU, so a folder another user can write to (or that another user owns), a symlink, or one
    under a folder another user controls is refused."""
    return cache_trust.folder_refusal(folder)


def _warn_once(what: str, why: str) -> None:
    if what not in _WARNED:
        _WARNED.add(what)
        warnings.warn(f"{what} not used: {why}", stacklevel=4)


def _disk_folder() -> tuple[Path, bytes] | None:
    """(the disk cache folder, the HMAC secret), or None (with one warning) when either is refused."""
    folder = cache_dir()
    why = disk_cache_refusal(folder)
    if why is None:
        secret, why = cache_trust.user_secret(cache_root())
        if secret is not None:
            return folder, secret
    _warn_once(f"kernel cache {str(folder)!r}", why or "unknown")
    return None


def _entry_mac(secret: bytes, bk: str, data: bytes) -> bytes:
    """Keyed with the user's secret: without it nobody can write an entry that validates."""
    return hmac.new(secret, bk.encode() + b"\0" + data, hashlib.sha256).hexdigest().encode()


def _read_entry(disk: tuple[Path, bytes] | None, bk: str) -> bytes | None:
    """A disk entry's binary if the file is the user's own and its HMAC checks out (else None: the
    entry is recompiled and rewritten)."""
    if disk is None:
        return None
    folder, secret = disk
    path = folder / f"{bk}.bin"
    raw, why = cache_trust.read_own_file(path)
    if raw is None:
        if why is not None:
            _warn_once(f"kernel cache entry {str(path)!r}", why)
        return None
    head = len(_ENTRY_MAGIC) + 64
    if not raw.startswith(_ENTRY_MAGIC) or raw[head : head + 1] != b"\n":
        return None
    data = raw[head + 1 :]
    return data if hmac.compare_digest(raw[len(_ENTRY_MAGIC) : head], _entry_mac(secret, bk, data)) else None


@contextlib.contextmanager
def shipped_binaries(binaries: dict[str, bytes]) -> Iterator[None]:
    """Let compile_many use `binaries` (binary key -> bytes, from one saved program) while this
    context is open; they never enter the process-wide or disk caches."""
    token = _SHIPPED.set(dict(binaries))
    try:
        yield
    finally:
        _SHIPPED.reset(token)


@contextlib.contextmanager
def bound_target(backend: Any) -> Iterator[None]:
    """Make compile_ops compile for `backend` while passes run (compile_target uses this)."""
    token = _TARGET.set(backend)
    rtc_pool.prestart(getattr(getattr(backend, "kernels", None), "worker_spec", None))
    preload = getattr(getattr(backend, "blas", None), "preload", None)
    if preload is not None:  # finalize makes the first BLAS handle: load the library meanwhile
        preload()
    try:
        yield
    finally:
        _TARGET.reset(token)


def current_target() -> Any:
    return _TARGET.get()


@dataclass
class CompileStats:
    compiled: int = 0
    from_memory: int = 0
    from_disk: int = 0
    seconds: float = 0.0


last_stats = CompileStats()


def binary_key(ks: KernelSource, compiler: KernelCompiler, flags: list[str]) -> str:
    h = hashlib.sha256()
    for part in (ks.name, ks.source, header_text(), compiler.arch, compiler.compiler_id(), " ".join(flags)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def compile_many(
    compiler: KernelCompiler,
    kernels: Iterable[KernelSource],
    *,
    workers: int | None = None,
    use_disk: bool = True,
    on_compiled: Callable[[int, int, str], None] | None = None,
) -> dict[str, bytes]:
    """Binaries for `kernels` (by KernelSource.key): memory cache, then disk, then compile the
    rest side by side (worker processes for a batch, else threads). `on_compiled(done, total,
    name)` follows the compiles as they finish (a progress bar's callback)."""
    global last_stats
    t0 = time.perf_counter()
    stats = CompileStats()
    flags = compiler.compile_flags()
    headers = {HEADER_NAME: header_text()}
    out: dict[str, bytes] = {}
    todo: list[tuple[KernelSource, str]] = []
    disk = _disk_folder() if use_disk else None
    shipped = _SHIPPED.get() or {}
    for ks in {k.key: k for k in kernels}.values():
        bk = binary_key(ks, compiler, flags)
        if bk in _BINARIES:
            out[ks.key] = _BINARIES[bk]
            stats.from_memory += 1
            # Write through: a binary another cache folder (or an earlier, since-cleared folder)
            # produced must still land in this one, or a warm start from this folder recompiles it.
            if disk is not None and not (disk[0] / f"{bk}.bin").is_file():
                _write_entry(disk, bk, out[ks.key])
            continue
        if bk in shipped:  # for this program only: not remembered beyond it
            out[ks.key] = shipped[bk]
            stats.from_memory += 1
            continue
        data = _read_entry(disk, bk)
        if data is not None:
            _BINARIES[bk] = out[ks.key] = data
            stats.from_disk += 1
            continue
        todo.append((ks, bk))

    procs = rtc_pool.pool_for(getattr(compiler, "worker_spec", None), len(todo)) if workers is None else None

    def build(item: tuple[KernelSource, str]) -> tuple[str, str, bytes]:
        ks, bk = item
        return ks.key, bk, _compile_one(compiler, procs, ks, headers, flags)

    if todo:
        n = workers or (procs.size if procs is not None else min(32, os.cpu_count() or 4, len(todo)))
        with ThreadPoolExecutor(max_workers=max(1, n)) as pool:
            for key, bk, data in pool.map(build, todo):
                _BINARIES[bk] = out[key] = data
                stats.compiled += 1
                if on_compiled is not None:
                    on_compiled(stats.compiled, len(todo), key)
                if disk is not None:
                    _write_entry(disk, bk, data)
    stats.seconds = time.perf_counter() - t0
    last_stats = stats
    return out


def _compile_one(
    compiler: KernelCompiler, pool: rtc_pool.CompilePool | None, ks: KernelSource, headers: dict, flags: list[str]
) -> bytes:
    """One kernel's binary: on a worker process when there is a pool, else (or when the worker
    died) in this process."""
    if pool is not None:
        try:
            ok, out = pool.compile(ks.name, ks.source, headers, flags)
        except rtc_pool.WorkerDied:
            pass
        else:
            if ok:
                return out
            raise GpuError(out)
    return compiler.compile_source(ks.name, ks.source, headers, flags)


def _write_entry(disk: tuple[Path, bytes], bk: str, data: bytes) -> None:
    """A disk entry: magic, the HMAC _read_entry checks, then the binary (mode 0600)."""
    folder, secret = disk
    _write_atomic(folder / f"{bk}.bin", _ENTRY_MAGIC + _entry_mac(secret, bk, data) + b"\n" + data)


def _write_atomic(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.parent.is_symlink():
            return
        if path.parent not in _CLEANED:  # once per folder and process: interrupted writes' leftovers
            _CLEANED.add(path.parent)
            tmpfiles.clean_stale_temporaries(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=tmpfiles.prefix(), suffix=".tmp")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:  # a read-only cache folder only costs the next run a recompile
        pass


def kernel_keys(program: Any) -> list[str]:
    """Kernel-store keys a lowered program launches: generated kernels, the in-place epilogue
    kernels that follow BLAS GEMMs and the generated GEMMs that stand in for BLAS calls."""
    keys: dict[str, None] = {}
    for m in program.modules.values():
        for ins in m:
            if ins.name.startswith("gpu::"):
                for attr in ("key", "epilogue_key", "kernel_key"):
                    if ins.op.get(attr):
                        keys[ins.op[attr]] = None
    return list(keys)


def cached_binary(bk: str) -> bytes | None:
    """A compiled binary by binary key, from memory or the disk cache (None if never built)."""
    if bk in _BINARIES:
        return _BINARIES[bk]
    return _read_entry(_disk_folder(), bk)


def clear_memory_cache() -> None:
    """Forget binaries held in memory (tests use it to measure the disk cache)."""
    _BINARIES.clear()
