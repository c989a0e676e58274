"""Shared test setup. GPU tests are marked `gpu` and skip with the reason the GPU stack gives."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if i.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = _gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"no GPU stack: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


def _gpu_unavailable_reason() -> str | None:
    try:
        from migx_explore.gpu.runtime import unavailable_reason
    except ImportError as e:  # the GPU layer itself failed to import
        return f"migx_explore.gpu.runtime not importable ({e})"
    return unavailable_reason()
