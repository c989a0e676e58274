"""migx-explore: an interactive pass explorer for an ML graph compiler modelled on AMD MIGraphX.

`migx_explore.compiler` is the target-independent compiler, `migx_explore.gpu` the GPU target.
Notebook and GPU libraries load lazily: importing this package needs only numpy and onnx.
"""

from __future__ import annotations

__version__ = "0.1.0"


def explore(model=None, **kwargs):
    """Open the explorer widget on an ONNX path, a ModelProto, or a built-in model name (None: an
    empty explorer with the model picker)."""
    from .widgets import explore as _explore

    return _explore(model, **kwargs)


def __getattr__(name: str):
    # Lazy access to the heavier layers without importing them at package import.
    if name in ("compiler", "gpu", "models", "session", "render"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(name)
