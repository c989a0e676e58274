"""The notebook explorer (ipywidgets). Importing this package does not import ipywidgets; the
widget modules load on first use, so `import migx_explore` works without notebook libraries.

    import migx_explore
    ex = migx_explore.explore("yolo")      # or an .onnx path, a ModelProto, a Session
"""

from __future__ import annotations

from typing import Any


def explore(model: Any = None, **kwargs: Any) -> Any:
    """Open the explorer widget (see widgets.explorer.explore)."""
    from .explorer import explore as _explore

    return _explore(model, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "Explorer":
        from .explorer import Explorer

        return Explorer
    raise AttributeError(name)


__all__ = ["Explorer", "explore"]
