"""Shared test setup. GPU tests are marked `gpu` and skip with the reason the GPU stack gives."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_kernel_cache(tmp_path_factory):
    """Every test session compiles into its own kernel cache folder: results never depend on
    binaries an earlier run (or another checkout) left in ~/.cache/migx-explore."""
    old = os.environ.get("MIGX_EXPLORE_CACHE_DIR")
    os.environ["MIGX_EXPLORE_CACHE_DIR"] = str(tmp_path_factory.mktemp("migx-kernel-cache"))
    yield
    if old is None:
        os.environ.pop("MIGX_EXPLORE_CACHE_DIR", None)
    else:
        os.environ["MIGX_EXPLORE_CACHE_DIR"] = old


@pytest.fixture(scope="session", autouse=True)
def _private_key_folder(tmp_path_factory):
    """Signing keys (migx_explore/keys.py) live in a folder of the test session's own, empty at
    the start: no test signs with, or trusts, the keys of the user running the tests."""
    old = os.environ.get("MIGX_EXPLORE_KEY_DIR")
    os.environ["MIGX_EXPLORE_KEY_DIR"] = str(tmp_path_factory.mktemp("migx-keys") / "keys")
    yield
    if old is None:
        os.environ.pop("MIGX_EXPLORE_KEY_DIR", None)
    else:
        os.environ["MIGX_EXPLORE_KEY_DIR"] = old


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
