"""Sweeps (waterfall, perf bisect, the ordering study) run their variants as tasks on Dask.

A variant is a configuration of the session's pipelines; a task rebuilds a session from a
`SessionSpec` (the model, compile options and the configuration the sweep started from), applies
the variant, and returns a small record: figures, never programs. Nothing mutable is shared:
each worker process traces its own session, cached per worker so the passes before the first
changed entry are not re-run for every variant (the session's prefix cache, decision 17).

Where the tasks run, in order of precedence:
- `cluster="tcp://host:8786"` or $MIGX_DASK_SCHEDULER: a Dask cluster the user runs;
- `gpus=N`: one worker per GPU (dask-cuda's LocalCUDACluster where installed, else one worker
  process per GPU with CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES set);
- otherwise a local cluster of processes sized to the machine (`workers=` overrides);
- without dask.distributed installed (the `[sweep]` extra), or with `workers=0`, in this process,
  one after another, with a note saying how to scale out.

A failed variant becomes a record with its `error`; Ctrl-C cancels the submitted tasks, closes a
cluster the sweep started, and re-raises.
"""

from __future__ import annotations

import os
import threading
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migx_explore.compiler.errors import MigxError

SCHEDULER_ENV = "MIGX_DASK_SCHEDULER"
SCALE_OUT_HINT = (
    "install the sweep extra (pip install 'migx-explore[sweep]') to run variants in parallel on a "
    f"local Dask cluster, or point --cluster / ${SCHEDULER_ENV} at a running scheduler"
)

Progress = Callable[[int, int, str], None]
TaskFn = Callable[[Any, Any], dict]  # (session, payload) -> record


@dataclass
class SessionSpec:
    """What a worker needs to rebuild the session a sweep started from (shipped once per worker)."""

    program: Any  # compiler.ir.Program: the unoptimized program
    name: str
    options: Any  # gpu.pipelines.CompileOptions
    include_backend: bool
    pipelines: list  # the configuration the sweep starts from (list of Pipeline)
    # NumericConfig (inputs and reference outputs) for variants that measure numeric error: shipped
    # once with the spec, not with every task; a dict payload finds it under "numeric"
    numeric: Any = None
    validate: bool = True
    # The session class (pickled by reference): workers build their session with it, so this module
    # need not import migx_explore.session (which imports the sweeps).
    factory: Any = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @classmethod
    def of(cls, session: Any, *, numeric: Any = None) -> SessionSpec:
        return cls(
            session.initial.to_program(),
            session.name,
            session.config.options,
            any(pl.name == "backend" for pl in session.config.catalog),
            [pl.copy() for pl in session.pipelines],
            numeric,
            session.traces.validate,
            type(session),
        )


@dataclass
class SweepRun:
    """The records of one sweep, in the order of the payloads, and where it ran."""

    records: list[dict]
    where: str
    note: str = ""


# ---- the worker side ----------------------------------------------------------------------------------
_SESSIONS: OrderedDict[str, Any] = OrderedDict()
_SESSIONS_LOCK = threading.Lock()
_KEEP_SESSIONS = 2  # a study over many models must not keep every model's trace alive
_task_locks: dict[str, threading.Lock] = {}


def _session_for(spec: SessionSpec) -> Any:
    with _SESSIONS_LOCK:
        s = _SESSIONS.get(spec.token)
        if s is None:
            s = spec.factory(
                spec.program,
                name=spec.name,
                options=spec.options,
                include_backend=spec.include_backend,
                numeric=False,
                validate=spec.validate,
            )
            _SESSIONS[spec.token] = s
            while len(_SESSIONS) > _KEEP_SESSIONS:
                _SESSIONS.popitem(last=False)
        _SESSIONS.move_to_end(spec.token)
        return s


def run_task(spec: SessionSpec, fn: TaskFn, payload: Any, label: str) -> dict:
    """One variant: the worker's session reset to the sweep's starting configuration, `fn` applied.
    Any error becomes the record's `error` (the sweep goes on)."""
    try:
        s = _session_for(spec)
        lock = _task_locks.setdefault(spec.token, threading.Lock())
        with lock:  # a worker with several threads must not interleave two variants on one session
            s.pipelines = [pl.copy() for pl in spec.pipelines]
            if spec.numeric is not None and isinstance(payload, dict) and "numeric" not in payload:
                payload = dict(payload, numeric=spec.numeric)
            rec = fn(s, payload)
    except Exception as e:  # noqa: BLE001 - a failed variant is a row, never the end of the sweep
        rec = {"error": _one_line(e)}
    rec.setdefault("label", label)
    rec.setdefault("error", "")
    return rec


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    head = text[0][:200] if text else ""
    if isinstance(e, MigxError):
        return head
    at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
    return f"{type(e).__name__}: {head}{at}"


# ---- the driver side ------------------------------------------------------------------------------------
def dask_available() -> bool:
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        return False
    return True


def default_workers(n_tasks: int) -> int:
    return max(1, min(os.cpu_count() or 1, n_tasks))


class Sweeper:
    """Where a sweep's tasks run. Use as a context manager (or call close()); one Sweeper can run
    several sweeps (a study across models) on the same cluster."""

    def __init__(self, *, cluster: str | None = None, workers: int | None = None, gpus: int | None = None):
        self.address = cluster or os.environ.get(SCHEDULER_ENV) or None
        self.workers = workers
        self.gpus = gpus
        self._client: Any = None
        self._cluster: Any = None
        self.where = ""
        self.note = ""
        if workers == 0 and not self.address:
            self.where, self.note = "serial (workers=0)", ""
        elif not dask_available():
            if self.address or gpus:
                raise MigxError(f"a Dask cluster was asked for but dask.distributed is not installed; {SCALE_OUT_HINT}")
            self.where, self.note = "serial", SCALE_OUT_HINT

    @property
    def started(self) -> bool:
        """Whether a Dask client is open (a cluster started or connected to, not yet closed)."""
        return self._client is not None

    @property
    def serial(self) -> bool:
        return self.where.startswith("serial")

    def start(self, n_tasks: int = 0) -> Any:
        """Start (or connect to) the cluster now rather than at the first sweep; returns the Dask
        client, None when the sweep runs serially. `n_tasks` bounds the local cluster's size."""
        return self._start(max(n_tasks, 2))

    def _start(self, n_tasks: int) -> Any:
        if self._client is not None or self.serial:
            return self._client
        from dask.distributed import Client

        if self.address:
            try:
                self._client = Client(self.address, timeout="10s")
            except OSError as e:
                raise MigxError(f"cannot reach the Dask scheduler at {self.address}: {e}") from None
            n = len(self._client.scheduler_info().get("workers", {}))
            self.where = f"Dask cluster {self.address} ({n} worker{'' if n == 1 else 's'})"
            return self._client
        if self.gpus:
            self._cluster = _gpu_cluster(self.gpus)
            self.where = f"local Dask cluster, one worker per GPU ({self.gpus})"
        else:
            from dask.distributed import LocalCluster

            n = self.workers or default_workers(n_tasks)
            # processes, one thread each: passes are pure Python (the GIL), and a process owns its session
            self._cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
            )
            self.where = f"local Dask cluster ({n} worker process{'' if n == 1 else 'es'})"
        self._client = Client(self._cluster)
        return self._client

    def map(
        self,
        spec: SessionSpec,
        fn: TaskFn,
        payloads: Sequence[Any],
        labels: Sequence[str],
        *,
        progress: Progress | None = None,
    ) -> list[dict]:
        """Run fn(session, payload) for every payload; records come back in payload order."""
        n = len(payloads)
        if n == 0:
            return []
        client = self._start(n) if n > 1 or self.address else None  # one task: no cluster to start
        if client is None:
            out = []
            try:
                for k, (p, lab) in enumerate(zip(payloads, labels)):
                    out.append(run_task(spec, fn, p, lab))
                    if progress:
                        progress(k + 1, n, lab)
            finally:
                with _SESSIONS_LOCK:  # in this process the sweep's session must not outlive the sweep
                    _SESSIONS.pop(spec.token, None)
                    _task_locks.pop(spec.token, None)
            return out
        from dask.distributed import as_completed

        spec_f = client.scatter(spec, broadcast=True, hash=False)
        futures = [
            client.submit(run_task, spec_f, fn, p, lab, pure=False, key=f"migx-{lab[:40]}-{uuid.uuid4().hex}")
            for p, lab in zip(payloads, labels)
        ]
        index = {f.key: k for k, f in enumerate(futures)}
        out: list[dict | None] = [None] * n
        try:
            for done, f in enumerate(as_completed(futures), 1):
                k = index[f.key]
                try:
                    out[k] = f.result()
                except Exception as e:  # noqa: BLE001 - a worker that died mid-task: still a row
                    out[k] = {"label": labels[k], "error": f"task failed on the cluster: {_one_line(e)}"}
                if progress:
                    progress(done, n, labels[k])
        except KeyboardInterrupt:
            client.cancel(futures, force=True)
            self.close()
            raise
        client.cancel(spec_f)
        return [r if r is not None else {"label": lab, "error": "no result"} for r, lab in zip(out, labels)]

    def close(self) -> None:
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def __enter__(self) -> Sweeper:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _gpu_cluster(gpus: int) -> Any:
    import warnings

    from .gpu_bridge import unavailable_reason

    why = unavailable_reason()
    if why:  # the workers start anyway (a remote GPU stack may differ), but say so once, here
        warnings.warn(
            f"--gpus {gpus}: this machine has no usable GPU ({why}); the {gpus} workers' GPU steps will fail",
            stacklevel=2,
        )
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        LocalCUDACluster = None
    if LocalCUDACluster is not None:
        return LocalCUDACluster(n_workers=gpus, threads_per_worker=1, dashboard_address=":0", silence_logs=40)
    # Without dask-cuda (the GPU machine may not have it): one nanny per GPU, each pinned to its device.
    from dask.distributed import Nanny, Scheduler, SpecCluster

    workers = {}
    for g in range(gpus):
        env = {"CUDA_VISIBLE_DEVICES": str(g), "HIP_VISIBLE_DEVICES": str(g)}
        workers[f"gpu{g}"] = {"cls": Nanny, "options": {"nthreads": 1, "env": env, "silence_logs": 40}}
    return SpecCluster(
        workers=workers, scheduler={"cls": Scheduler, "options": {"dashboard_address": ":0"}}, silence_logs=40
    )


def sweep(
    session: Any,
    fn: TaskFn,
    payloads: Sequence[Any],
    labels: Sequence[str],
    *,
    sweeper: Sweeper | None = None,
    numeric: Any = None,
    progress: Progress | None = None,
    cluster: str | None = None,
    workers: int | None = None,
    gpus: int | None = None,
) -> SweepRun:
    """Run the variants of a sweep over `session` (see the module docstring for where); `numeric`
    (a NumericConfig) travels once with the session's spec."""
    spec = SessionSpec.of(session, numeric=numeric)
    own = sweeper is None
    sw = sweeper or Sweeper(cluster=cluster, workers=workers, gpus=gpus)
    try:
        records = sw.map(spec, fn, payloads, labels, progress=progress)
        return SweepRun(records, sw.where, sw.note)
    finally:
        if own:
            sw.close()


def terminal_progress(desc: str) -> tuple[Progress, Callable[[], None]]:
    """A progress callback for the terminal (tqdm where installed) and the function that ends it."""
    import sys

    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar: Any = None

        def report(k: int, n: int, label: str) -> None:
            nonlocal bar
            if bar is None:
                bar = tqdm(total=n, desc=desc, file=sys.stderr, leave=False)
            bar.update(k - bar.n)
            bar.set_postfix_str(label[:40])

        return report, (lambda: bar.close() if bar is not None else None)
    return (lambda k, n, lab: print(f"\r[{k}/{n}] {lab:<60}", end="", file=sys.stderr), lambda: print(file=sys.stderr))


def counts(records: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(variants measured, variants failed)."""
    failed = sum(1 for r in records if r.get("error"))
    return len(records) - failed, failed


__all__ = [
    "SCALE_OUT_HINT",
    "SCHEDULER_ENV",
    "SessionSpec",
    "SweepRun",
    "Sweeper",
    "dask_available",
    "default_workers",
    "run_task",
    "sweep",
    "terminal_progress",
]
