"""Runtime backends, chosen lazily: nothing GPU-related is imported until one is asked for.

Selection: $MIGX_GPU_BACKEND (cuda | hip | fake) when set; otherwise a HIP device through
hip-python, then a CUDA device through cuda-bindings. `unavailable_reason()` says in one line
why no backend can be used and what to install.
"""

from __future__ import annotations

import os
import re
import threading

from .base import Backend, GpuError

__all__ = ["Backend", "GpuError", "available_backends", "get_backend", "reset_backends", "unavailable_reason"]

BACKENDS = ("cuda", "hip", "fake")
INSTALL = {"cuda": "pip install 'migx-explore[cuda]'", "hip": "pip install 'migx-explore[hip]'"}
_CACHE: dict[str, Backend] = {}
_FAILED: dict[str, str] = {}
_LOCK = threading.Lock()


def _create(name: str) -> Backend:
    if name == "cuda":
        from .cuda import CudaBackend

        return CudaBackend()
    if name == "hip":
        from .hip import HipBackend

        return HipBackend()
    if name == "fake":
        from .fake import FakeBackend

        return FakeBackend()
    raise GpuError(f"unknown GPU backend {name!r}; choose one of {', '.join(BACKENDS)}")


def _try(name: str) -> Backend | None:
    with _LOCK:
        if name in _CACHE:
            return _CACHE[name]
        if name in _FAILED:
            return None
        try:
            be = _create(name)
        except ImportError as e:
            _FAILED[name] = f"{name}: Python bindings not installed ({e.name or e}); {INSTALL.get(name, '')}"
            return None
        except Exception as e:  # noqa: BLE001 - no driver, no device, library missing: all say "not usable"
            _FAILED[name] = f"{name}: {type(e).__name__}: {_plain(str(e).splitlines()[0] if str(e) else '')}"
            return None
        _CACHE[name] = be
        return be


def _plain(text: str) -> str:
    """Loader messages from the bindings carry Python bytes reprs (`'b'libamdhip64.so''`); show the
    names themselves."""
    return re.sub(r"'?b'([^']*)''?", r"'\1'", text)


def _requested() -> str | None:
    name = os.environ.get("MIGX_GPU_BACKEND", "").strip().lower()
    return name or None


def get_backend(name: str | None = None) -> Backend:
    """The backend `name` (or the env override, or the first usable of hip, cuda)."""
    name = name or _requested()
    if name is not None:
        if name not in BACKENDS:
            raise GpuError(f"MIGX_GPU_BACKEND={name!r} is not one of {', '.join(BACKENDS)}")
        be = _try(name)
        if be is None:
            raise GpuError(f"GPU backend {name} unavailable: {_FAILED[name]}")
        return be
    for cand in ("hip", "cuda"):
        be = _try(cand)
        if be is not None:
            return be
    raise GpuError(f"no GPU backend: {unavailable_reason()}")


def unavailable_reason() -> str | None:
    """None when a real (or explicitly requested) backend works; else why not and what to install."""
    name = _requested()
    if name is not None:
        if name not in BACKENDS:
            return f"MIGX_GPU_BACKEND={name!r} is not one of {', '.join(BACKENDS)}"
        return None if _try(name) is not None else _FAILED[name]
    if _try("hip") is not None or _try("cuda") is not None:
        return None
    return (
        "no usable GPU stack (" + "; ".join(_FAILED[n] for n in ("cuda", "hip")) + "). NVIDIA: "
        f"{INSTALL['cuda']} plus a driver and libcublas/libnvrtc (nvidia-cublas, nvidia-cuda-nvrtc); "
        f"AMD: {INSTALL['hip']} plus ROCm"
    )


def available_backends() -> list[str]:
    return [n for n in ("hip", "cuda") if _try(n) is not None]


def reset_backends() -> None:
    """Forget cached backends and failures (tests switching MIGX_GPU_BACKEND)."""
    with _LOCK:
        _CACHE.clear()
        _FAILED.clear()
