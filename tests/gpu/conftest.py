"""Shared fixtures for the GPU target's tests.

`fake` is a fresh recording backend (CI); `device` is the real backend selected like the
product selects it (tests using it are marked `gpu` and skip without one). Kernel binaries go
to a per-session cache folder, never to ~/.cache.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _kernel_cache_dir(tmp_path_factory):
    old = os.environ.get("MIGX_EXPLORE_CACHE_DIR")
    os.environ["MIGX_EXPLORE_CACHE_DIR"] = str(tmp_path_factory.mktemp("migx-kernels"))
    yield
    if old is None:
        os.environ.pop("MIGX_EXPLORE_CACHE_DIR", None)
    else:
        os.environ["MIGX_EXPLORE_CACHE_DIR"] = old


@pytest.fixture
def fake():
    from migx_explore.gpu.runtime.fake import FakeBackend

    return FakeBackend()


@pytest.fixture(scope="session")
def device():
    from migx_explore.gpu.runtime import get_backend

    return get_backend()
