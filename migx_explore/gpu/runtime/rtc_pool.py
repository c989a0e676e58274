"""Runtime compiles on worker processes (rtc_worker.py run as a script), for compile_many.

nvrtc compiles one program at a time per process whatever the thread count (rtc_worker says how
that was measured), so a cold compile of YOLOv10n's 130 kernels took 1.9-3.0 s on one core of a
16-core host. A pool of bare worker processes, started on the first compile that has enough
kernels to make it worth it and kept for the process's lifetime, compiles them side by side; the
caller's threads each hand one kernel at a time to an idle worker and wait on its pipe.

A worker that dies or answers nonsense is dropped and its kernel compiled in-process, so a broken
pool costs time, never a kernel. MIGX_COMPILE_WORKERS=0 turns the pool off; a number caps it.
"""

from __future__ import annotations

import atexit
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import rtc_worker

MIN_KERNELS = 8  # fewer than this compile in-process: starting workers (~0.1-0.2 s) would cost more
MAX_WORKERS = 16
_WORKER_SCRIPT = str(Path(rtc_worker.__file__).resolve())


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker imports and calls: the bindings module and the call names' parts."""

    module: str  # e.g. "cuda.bindings.nvrtc"
    prefix: str
    suffix: str
    binary: str
    buffer: str = "bytes"  # what the bindings write a result into: "bytes" (cuda-bindings) | "bytearray"


class WorkerDied(Exception):
    """The worker stopped answering (it exited, or its pipe broke)."""


class _Worker:
    def __init__(self, spec: WorkerSpec):
        self.proc = subprocess.Popen(
            [sys.executable, _WORKER_SCRIPT, spec.module, spec.prefix, spec.suffix, spec.binary, spec.buffer],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.ready = False

    def wait_ready(self) -> None:
        """Block until the worker said its bindings imported (WorkerDied if it never does)."""
        if not self.ready:
            try:
                if rtc_worker.receive(self.proc.stdout) != (True, b"ready"):
                    raise WorkerDied("the worker did not start")
            except (OSError, EOFError, ValueError) as e:
                raise WorkerDied(str(e)) from None
            self.ready = True

    def call(self, request: tuple) -> tuple[bool, Any]:
        self.wait_ready()
        try:
            rtc_worker.send(self.proc.stdin, request)
            reply = rtc_worker.receive(self.proc.stdout)
        except (OSError, EOFError, ValueError) as e:
            raise WorkerDied(str(e)) from None
        if not (isinstance(reply, tuple) and len(reply) == 2):
            raise WorkerDied("no answer")
        return reply

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


class CompilePool:
    """Idle workers in a queue; `compile` borrows one for one kernel."""

    def __init__(self, spec: WorkerSpec, size: int):
        self.spec, self.size = spec, size
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        for _ in range(size):
            self._add()

    def _add(self) -> None:
        try:
            w = _Worker(self.spec)
        except OSError:  # no process to be had: the caller compiles in-process
            return
        self._all.append(w)
        self._idle.put(w)

    @property
    def alive(self) -> int:
        return sum(1 for w in self._all if w.proc.poll() is None)

    def compile(self, name: str, source: str, headers: dict[str, str], flags: list[str]) -> tuple[bool, Any]:
        """(True, binary) or (False, the compiler's message); WorkerDied if no worker could answer."""
        w = self._borrow()
        try:
            reply = w.call((name, source, dict(headers), list(flags)))
        except WorkerDied:
            w.close()
            with self._lock:
                self._all.remove(w)
            raise
        self._idle.put(w)
        return reply

    def wait_ready(self) -> None:
        """Block until every worker started (a benchmark times start-up apart from compiles)."""
        for w in list(self._all):
            try:
                w.wait_ready()
            except WorkerDied:
                pass

    def _borrow(self) -> _Worker:
        """An idle worker; WorkerDied once none is left (each death removes one, so a caller
        waiting for an idle worker must not wait on a pool that has none)."""
        while True:
            with self._lock:
                if not self._all:
                    raise WorkerDied("no workers left")
            try:
                return self._idle.get(timeout=0.2)
            except queue.Empty:
                continue

    def close(self) -> None:
        for w in self._all:
            w.close()
        self._all.clear()


_POOLS: dict[WorkerSpec, CompilePool] = {}
_LOCK = threading.Lock()


def worker_count() -> int:
    """Workers a pool gets: MIGX_COMPILE_WORKERS if set, else the usable cores (at most 16)."""
    raw = os.environ.get("MIGX_COMPILE_WORKERS", "")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        wanted = int(raw) if raw else min(cores, MAX_WORKERS)
    except ValueError:
        wanted = min(cores, MAX_WORKERS)
    return max(0, wanted)


def pool_for(spec: WorkerSpec | None, kernels: int) -> CompilePool | None:
    """The shared pool for `spec` when `kernels` compiles are worth one (None: compile in-process)."""
    size = worker_count()
    if spec is None or kernels < MIN_KERNELS or size < 2:
        return None
    with _LOCK:
        pool = _POOLS.get(spec)
        if pool is None or pool.alive == 0:
            pool = _POOLS[spec] = CompilePool(spec, size)
        return pool


def prestart(spec: WorkerSpec | None) -> None:
    """Start `spec`'s pool now, without waiting for it: a compile calls this before its passes
    run, so the workers import their bindings and warm up while the passes take their ~1-2 s, and
    compile_ops finds them ready. Starts nothing where pool_for would not use a pool."""
    pool_for(spec, MIN_KERNELS)


@atexit.register
def close_pools() -> None:
    with _LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()
