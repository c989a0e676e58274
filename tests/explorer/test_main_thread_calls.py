"""The background jobs' results are applied on the kernel's main thread (widgets/main_thread.py).
A kernel runs cells inside an asyncio loop on its main thread. These tests stand a recording loop
in for the kernel's (a real one cannot be started here: a browser test's Playwright keeps its own
loop registered on this thread), then run what was posted to it, as the kernel does once a cell
ends, and check on which thread each widget write happened."""

from __future__ import annotations

import threading

import pytest
from ir_samples import CHAIN

from migx_explore.session import Session
from migx_explore.widgets import main_thread
from migx_explore.widgets.main_thread import MainThreadCalls


class KernelLoop:
    """What MainThreadCalls uses of the kernel's loop: calls queued from any thread, run later on
    the main thread by `run_pending` (the kernel's loop between two messages)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: list = []

    def call_soon_threadsafe(self, fn, *args) -> None:
        with self._lock:
            self._ready.append((fn, args))

    def is_closed(self) -> bool:
        return False

    def run_pending(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for fn, args in ready:
            fn(*args)


@pytest.fixture
def kernel_loop(monkeypatch) -> KernelLoop:
    loop = KernelLoop()
    monkeypatch.setattr(main_thread, "_kernel_loop", lambda: loop)
    return loop


def test_posts_from_a_worker_run_on_the_main_thread_in_order(kernel_loop):
    calls, ran = MainThreadCalls(), []

    def record(k: int) -> None:
        ran.append((k, threading.current_thread().name))

    worker = threading.Thread(target=lambda: [calls.post(record, k) for k in range(5)])
    worker.start()
    worker.join()
    assert ran == []  # queued while the cell runs
    kernel_loop.run_pending()
    assert ran == [(k, "MainThread") for k in range(5)]


def test_a_waiting_cell_runs_the_queued_calls_itself(kernel_loop):
    calls, where = MainThreadCalls(), []
    t = threading.Thread(target=lambda: calls.post(lambda: where.append(threading.current_thread().name)))
    t.start()
    assert calls.wait_until(lambda: not t.is_alive(), 10)
    assert where == ["MainThread"]


def test_an_error_in_a_posted_call_goes_to_the_handler(kernel_loop):
    seen: list = []
    calls = MainThreadCalls(seen.append)
    t = threading.Thread(target=lambda: calls.post(lambda: 1 / 0))
    t.start()
    t.join()
    kernel_loop.run_pending()
    assert len(seen) == 1 and isinstance(seen[0], ZeroDivisionError)


def test_without_a_kernel_a_post_runs_at_once_on_the_callers_thread():
    calls, where = MainThreadCalls(), []
    t = threading.Thread(target=lambda: calls.post(lambda: where.append(threading.current_thread().name)), name="w")
    t.start()
    t.join()
    assert where == ["w"]


def test_a_loop_that_is_not_a_kernels_is_not_used(monkeypatch):
    """A loop running on the main thread outside a kernel (Playwright's, an app's) would never run
    the explorer's calls: only an IPython kernel's counts."""
    import asyncio

    monkeypatch.setattr(asyncio, "get_running_loop", lambda: KernelLoop())
    monkeypatch.setattr(main_thread, "_in_kernel", lambda: False)
    assert main_thread._kernel_loop() is None
    monkeypatch.setattr(main_thread, "_in_kernel", lambda: True)
    assert isinstance(main_thread._kernel_loop(), KernelLoop)


def test_the_explorer_writes_its_widgets_on_the_main_thread_in_a_kernel(kernel_loop, monkeypatch):
    """The background trace's tree, stepper and progress writes, and the numeric check's, happen on
    the kernel's main thread; `wait()` in the cell returns with them applied."""
    from migx_explore.widgets import background
    from migx_explore.widgets.explorer import Explorer

    # Hold the background trace until the cell has looked: the pipelines of this small program
    # can otherwise finish on the job's thread before `set_session` returns.
    gate, real_run = threading.Event(), background.TraceFiller._run

    def held(self, *a):
        gate.wait(60)
        return real_run(self, *a)

    monkeypatch.setattr(background.TraceFiller, "_run", held)

    threads: set[str] = set()
    ex = Explorer()
    for name in ("_trace_progress", "_trace_done", "_numeric_result"):
        fn = getattr(ex, name)

        def spy(*a, _fn=fn):
            threads.add(threading.current_thread().name)
            return _fn(*a)

        setattr(ex, name, spy)
    ex.set_session(Session.from_text(CHAIN, include_backend=False))
    assert not ex.session.trace_complete  # the rest is traced in the background
    gate.set()
    assert ex.wait(120)
    assert ex.session.trace_complete
    assert "pass records" in ex.progress.label.value, ex.progress.label.value
    assert "✓" in ex.numeric_progress.value or "beyond tolerance" in ex.numeric_progress.value
    kernel_loop.run_pending()  # what is left for the loop finds nothing more to do
    assert threads == {"MainThread"}


def test_a_failing_background_trace_says_so_in_the_progress_line():
    from migx_explore.widgets.explorer import Explorer

    ex = Explorer(Session.from_text(CHAIN, include_backend=False, numeric=False))
    ex._trace_failed(RuntimeError("boom"))
    assert "background trace stopped" in ex.progress.label.value
    assert "tracing" not in ex.progress.label.value.split(";")[-1]
