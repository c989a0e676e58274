"""Shared fixtures for the GPU target's tests.

`fake` is a fresh recording backend (CI); `device` is the real backend selected like the
product selects it (tests using it are marked `gpu` and skip without one). Kernel binaries go
to a per-session cache folder (tests/conftest.py), never to ~/.cache.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def fake():
    from migx_explore.gpu.runtime.fake import FakeBackend

    return FakeBackend()


@pytest.fixture(scope="session")
def device():
    from migx_explore.gpu.runtime import get_backend

    return get_backend()
