"""Drawing off the kernel's main thread: graphviz layout of a big change can take seconds, and
while the kernel waits for it no click is answered.

`DrawThread.submit(make, done)` runs `make()` on one worker thread and hands its markup to
`done(markup, error)` on the kernel's main thread (main_thread.py: widgets are written where the
kernel handles the browser's messages); a newer submit supersedes older ones (one not started is
skipped, the result of one running is dropped), so only the latest click is drawn. A busy note
shows while anything is pending.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .main_thread import MainThreadCalls


class DrawThread:
    def __init__(self, busy: Any, calls: MainThreadCalls | None = None):
        self.busy = busy  # a widget with a layout: shown while a drawing is pending
        self.calls = calls or MainThreadCalls()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="migx-draw")
        self._ticket = 0
        self._lock = threading.RLock()  # a `done` that draws again re-enters it on the same thread
        self._pending: Future | None = None

    @property
    def lock(self) -> threading.RLock:
        """Held while a result is put on screen (hold it to write the same widgets)."""
        return self._lock

    def submit(self, make: Callable[[], str], done: Callable[[str, BaseException | None], None]) -> None:
        with self._lock:
            self._ticket += 1
            ticket = self._ticket
        self.busy.layout.display = None

        def work() -> None:
            if ticket != self._ticket:
                return  # superseded before it started
            try:
                markup, err = make(), None
            except Exception as e:  # noqa: BLE001 - handed to `done`, which shows it
                markup, err = "", e
            self.calls.post(put, markup, err)

        def put(markup: str, err: BaseException | None) -> None:
            with self._lock:
                if ticket != self._ticket:
                    return  # a newer drawing was asked for while this one was made or queued
                try:
                    done(markup, err)
                finally:
                    self.busy.layout.display = "none"

        self._pending = self._pool.submit(work)

    def cancel(self) -> None:
        """Drop whatever is pending (a new model, a step that draws in line)."""
        with self._lock:
            self._ticket += 1
        self.busy.layout.display = "none"

    def wait(self, timeout: float | None = 60) -> None:
        """Wait for the latest drawing (tests, scripts)."""
        pending = self._pending
        if pending is not None:
            self.calls.wait_until(pending.done, timeout)


__all__ = ["DrawThread"]
