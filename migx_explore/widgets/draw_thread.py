"""Drawing off the kernel's main thread: graphviz layout of a big change can take seconds, and
while the kernel waits for it no click is answered.

`DrawThread.submit(make, done)` runs `make()` on one worker thread and hands its markup to
`done(markup, error)`; a newer submit supersedes older ones (one not started is skipped, the
result of one running is dropped), so only the latest click is drawn. A busy note shows while
anything is pending.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class DrawThread:
    def __init__(self, busy: Any):
        self.busy = busy  # a widget with a layout: shown while a drawing is pending
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="migx-draw")
        self._ticket = 0
        self._lock = threading.Lock()
        self._pending: Future | None = None

    @property
    def lock(self) -> threading.Lock:
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
            with self._lock:
                if ticket != self._ticket:
                    return
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
        if self._pending is not None:
            self._pending.result(timeout)


__all__ = ["DrawThread"]
