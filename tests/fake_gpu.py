"""MIGX_GPU_BACKEND=fake for a block of a test: the recording backend runs each kernel's
reference compute on the device buffers, so the GPU path runs where CI has no GPU. The variable
and the backend cache are put back afterwards, so later tests see the machine as it is."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def fake_gpu() -> Iterator[None]:
    from migx_explore.gpu.runtime import reset_backends

    old = os.environ.get("MIGX_GPU_BACKEND")
    os.environ["MIGX_GPU_BACKEND"] = "fake"
    reset_backends()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MIGX_GPU_BACKEND", None)
        else:
            os.environ["MIGX_GPU_BACKEND"] = old
        reset_backends()
