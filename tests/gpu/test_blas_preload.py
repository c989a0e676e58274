"""cuBLAS loads on a thread while the passes run (CublasPart.preload, started when a compile binds
its target): the first handle then waits for that load instead of doing it, and a load that
failed on the thread is done again, and reported, by the first handle."""

from __future__ import annotations

import threading
import time

import pytest

cuda = pytest.importorskip("migx_explore.gpu.runtime.cuda", reason="cuda-bindings is not installed")


class _Library:
    loads: list[str] = []

    def __init__(self):
        time.sleep(0.05)
        _Library.loads.append(threading.current_thread().name)

    def create(self, stream, workspace, workspace_bytes):
        return ("handle", stream)


def test_the_first_handle_uses_the_library_loaded_in_the_background(monkeypatch):
    _Library.loads = []
    monkeypatch.setattr(cuda, "Cublas", _Library)
    part = cuda.CublasPart.__new__(cuda.CublasPart)
    cuda.CublasPart.__init__(part, backend=None)
    part.preload()
    part.preload()  # once
    assert part.create("s", 0, 0) == ("handle", "s")
    assert _Library.loads == ["migx-cublas-load"]


def test_a_failed_background_load_is_retried_by_the_first_handle(monkeypatch):
    calls = []

    def flaky():
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            raise OSError("libcublasLt.so.13: cannot open shared object file")
        return _Library()

    monkeypatch.setattr(cuda, "Cublas", flaky)
    part = cuda.CublasPart.__new__(cuda.CublasPart)
    cuda.CublasPart.__init__(part, backend=None)
    part.preload()
    part.create("s", 0, 0)
    assert calls == ["migx-cublas-load", threading.current_thread().name]
