"""Traces in Google Model Explorer (`ai-edge-model-explorer`, the `[model-explorer]` extra): every
pass a graph, layers from the model's scopes, kernel times and numeric error as overlays, each
pass's before/after in its compare view (docs/model_explorer.md).

    from migx_explore.model_explorer import export_trace, open_in_model_explorer
    export_trace(session, "out/yolo")                  # plain files; Model Explorer not needed
    open_in_model_explorer(session, compare=True)      # the current pass, before | after

`export` writes the folder (`graphs` builds the graphs, `overlays` the node data), `launch` starts
Model Explorer's server on 127.0.0.1, `adapter` is the Model Explorer extension (its entry module is
migx_explore/main.py: `model-explorer FILE --extensions=migx_explore`).
"""

from __future__ import annotations

from typing import Any

from .export import Export, check_export_folder, export_trace, load_manifest


def open_in_model_explorer(*args: Any, **kw: Any) -> Any:
    """Start Model Explorer on loopback with a pass (see launch.open_in_model_explorer)."""
    from .launch import open_in_model_explorer as _open

    return _open(*args, **kw)


__all__ = ["Export", "check_export_folder", "export_trace", "load_manifest", "open_in_model_explorer"]
