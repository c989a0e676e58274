"""The background jobs' results are applied on the kernel's main thread (widgets/main_thread.py).
A kernel runs cells inside an asyncio loop on its main thread; these tests run the explorer the
same way (asyncio.run), so a write from a worker thread would show up as a wrong thread name."""

from __future__ import annotations

import asyncio
import threading

from ir_samples import CHAIN

from migx_explore.session import Session
from migx_explore.widgets.main_thread import MainThreadCalls


def _in_a_cell(body):
    """Run `body()` as a kernel runs a cell: synchronously, inside the main thread's loop, then
    let the loop run what was posted until it is idle."""

    async def cell():
        out = body()
        for _ in range(50):
            await asyncio.sleep(0.01)
        return out

    return asyncio.run(cell())


def test_posts_from_a_worker_run_on_the_main_thread_in_order():
    def body():
        calls, ran = MainThreadCalls(), []

        def record(k: int) -> None:
            ran.append((k, threading.current_thread().name))

        worker = threading.Thread(target=lambda: [calls.post(record, k) for k in range(5)])
        worker.start()
        worker.join()
        assert ran == []  # queued while the cell runs
        return ran

    assert _in_a_cell(body) == [(k, "MainThread") for k in range(5)]


def test_a_waiting_cell_runs_the_queued_calls_itself():
    def body():
        calls, where = MainThreadCalls(), []
        t = threading.Thread(target=lambda: calls.post(lambda: where.append(threading.current_thread().name)))
        t.start()
        assert calls.wait_until(lambda: not t.is_alive(), 10)
        return where

    assert _in_a_cell(body) == ["MainThread"]


def test_an_error_in_a_posted_call_goes_to_the_handler():
    seen: list = []

    def body():
        calls = MainThreadCalls(seen.append)
        t = threading.Thread(target=lambda: calls.post(lambda: 1 / 0))
        t.start()
        t.join()

    _in_a_cell(body)
    assert len(seen) == 1 and isinstance(seen[0], ZeroDivisionError)


def test_without_a_loop_a_post_runs_at_once_on_the_callers_thread():
    calls, where = MainThreadCalls(), []
    t = threading.Thread(target=lambda: calls.post(lambda: where.append(threading.current_thread().name)), name="w")
    t.start()
    t.join()
    assert where == ["w"]


def test_the_explorer_writes_its_widgets_on_the_main_thread_in_a_kernel():
    """The background trace's tree, stepper and progress writes, and the numeric check's, happen on
    the kernel's main thread; `wait()` in the cell returns with them applied."""
    from migx_explore.widgets.explorer import Explorer

    threads: set[str] = set()

    def body():
        ex = Explorer()
        for name in ("_trace_progress", "_trace_done", "_numeric_result"):
            fn = getattr(ex, name)

            def spy(*a, _fn=fn):
                threads.add(threading.current_thread().name)
                return _fn(*a)

            setattr(ex, name, spy)
        ex.set_session(Session.from_text(CHAIN, include_backend=False))
        assert not ex.session.trace_complete  # the rest is traced in the background
        assert ex.wait(120)
        assert ex.session.trace_complete
        assert "pass records" in ex.progress.label.value, ex.progress.label.value
        assert "✓" in ex.numeric_progress.value or "beyond tolerance" in ex.numeric_progress.value
        return ex

    _in_a_cell(body)
    assert threads == {"MainThread"}


def test_a_failing_background_trace_says_so_in_the_progress_line():
    from migx_explore.widgets.explorer import Explorer

    ex = Explorer(Session.from_text(CHAIN, include_backend=False, numeric=False))
    ex._trace_failed(RuntimeError("boom"))
    assert "background trace stopped" in ex.progress.label.value
    assert "tracing" not in ex.progress.label.value.split(";")[-1]
