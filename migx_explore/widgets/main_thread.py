"""Widget writes from worker threads, made on the kernel's main thread.

The explorer's background trace, numeric check and drawing thread produce results off the main
thread. Writing widgets from there races the kernel's own handling of browser messages (a step,
a click): two threads sending state for the same widgets can leave the browser on the older value,
and locks taken in different orders on the two threads can deadlock. So results are posted to the
event loop the kernel runs cells on and applied there, between messages, in the order posted.

Outside a kernel (scripts, tests) a post runs the call at once, on the worker thread, as before;
the explorer's locks cover that case. A loop running on the main thread there is someone else's
(Playwright's sync API keeps one registered while a browser is open) and would never run our calls,
so only an IPython kernel's loop is used.
"""

from __future__ import annotations

import asyncio
import collections
import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def _in_kernel() -> bool:
    """Whether this process is an IPython kernel (IPython's shell there has a `kernel`)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def _kernel_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running the current cell, when called on the main thread inside one."""
    if threading.current_thread() is not threading.main_thread() or not _in_kernel():
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class MainThreadCalls:
    """A queue of calls from worker threads, drained on the main thread's event loop (or run at
    once where there is none). `on_error` receives what a call raised (None: it propagates)."""

    def __init__(self, on_error: Callable[[BaseException], Any] | None = None):
        self._loop = _kernel_loop()  # made where the explorer is made: inside a cell, in a kernel
        self._queue: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._on_error = on_error

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            self._call(fn, args)
            return
        if threading.current_thread() is threading.main_thread():
            self.drain()  # what worker threads posted earlier goes first
            self._call(fn, args)
            return
        self._queue.append((fn, args))
        try:
            loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop closed between the check and the call: the kernel is going
            self._queue.clear()

    def drain(self) -> None:
        """Run the calls posted so far (on the main thread)."""
        while True:
            try:
                fn, args = self._queue.popleft()
            except IndexError:
                return
            self._call(fn, args)

    def wait_until(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Block until `done()` holds and nothing is queued, running queued calls meanwhile when on
        the main thread (a cell that waits would otherwise hold them until it ends). False on
        timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        on_main = threading.current_thread() is threading.main_thread()
        while True:
            if on_main:
                self.drain()
            if done() and not self._queue:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _call(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - on the loop it would only reach asyncio's log
            if self._on_error is None:
                raise
            self._on_error(e)


__all__ = ["MainThreadCalls"]
