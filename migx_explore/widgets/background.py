"""The explorer's two background jobs: finishing the trace and the deferred numeric check. Each
runs in one daemon thread at a time; `cancel` (a new load or a toggle) bumps a generation that the
thread checks between passes, so a cancelled job stops before its next pass and reports nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..session import Session


class BackgroundJob:
    """One restartable thread with a cancel generation (shared by the two jobs below)."""

    thread_name = "migx-job"

    def __init__(self, on_error: Callable[[BaseException], Any]):
        self._on_error = on_error
        self._generation = 0
        self._thread: threading.Thread | None = None

    def _start(self, *args: Any) -> None:
        self._thread = threading.Thread(
            target=self._guarded, args=(self._generation, *args), daemon=True, name=self.thread_name
        )
        self._thread.start()

    def _guarded(self, gen: int, *args: Any) -> None:
        try:
            self._run(gen, *args)
        except Exception as e:  # noqa: BLE001 - a thread's error would otherwise vanish
            self._on_error(e)

    def _run(self, gen: int, *args: Any) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        self._generation += 1

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class NumericFiller(BackgroundJob):
    """Runs the deferred per-pass numeric check, one pass at a time, reporting each result."""

    thread_name = "migx-numeric"

    def __init__(self, on_result: Callable[..., Any], on_error: Callable[[BaseException], Any]):
        super().__init__(on_error)
        self._on_result = on_result

    def restart(self, session: Session, on_start: Callable[[int], Any] | None = None) -> int:
        """Check the session's unchecked passes (listed now, on the caller's thread); `on_start(n)`
        runs before the thread starts. Returns how many there are."""
        self.cancel()
        todo = session.traces.unchecked(session.trace)
        if on_start is not None:
            on_start(len(todo))
        if todo:
            self._start(session, todo)
        return len(todo)

    def _run(self, gen: int, session: Session, todo: list) -> None:
        for k, rec in enumerate(todo):
            if gen != self._generation:
                return
            session.traces.check_numeric(rec)
            if gen != self._generation:
                return
            self._on_result(session, rec, k + 1, len(todo))


class TraceFiller(BackgroundJob):
    """Finishes a session's trace one top-level pass at a time (each under the trace cache's lock,
    so a step the user asks for meanwhile runs in between), calling `on_progress()` at most every
    `every` seconds and `on_done()` at the end."""

    thread_name = "migx-trace"

    def __init__(
        self,
        on_progress: Callable[[Session], Any],
        on_done: Callable[[Session], Any],
        on_error: Callable[[BaseException], Any],
        every: float = 1.0,
    ):
        super().__init__(on_error)
        self._on_progress, self._on_done = on_progress, on_done
        self.every = every

    def restart(self, session: Session) -> None:
        self.cancel()
        self._start(session)

    def _run(self, gen: int, session: Session) -> None:
        last = time.perf_counter()
        while gen == self._generation and not session.trace_complete:
            n = len(session.trace_so_far.records)
            session.traces.extend(session.config, lambda t, n=n: len(t.records) > n)
            if gen == self._generation and time.perf_counter() - last >= self.every:
                self._on_progress(session)
                last = time.perf_counter()
        if gen == self._generation:
            self._on_done(session)
