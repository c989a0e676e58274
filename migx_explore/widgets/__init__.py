"""The notebook explorer (ipywidgets). Importing this package does not import ipywidgets; the
widget modules load on first use, so `import migx_explore` works without notebook libraries.

    import migx_explore
    ex = migx_explore.explore("yolo")      # or an .onnx path, a ModelProto, a Session

Modules: `queries` and `content` (pure: rows, stats, SVG/HTML strings), `timing_view` (GPU
results as tables and a figure), and the thin widget layers `tree`, `views`, `picker`,
`gpu_panel`, glued by `explorer`.

Stable CSS classes (for browser tests and styling): .migx-explorer (root); picker .migx-model-select
.migx-model-path .migx-model-upload .migx-input-dims .migx-mode .migx-numeric .migx-load; tree
.migx-filter .migx-hide-unchanged .migx-tree .migx-tree-row (+ .migx-changed / -noop / -disabled /
-failed / -pending / -not-run, .migx-current) .migx-pass-checkbox .migx-pipeline-checkbox
.migx-pass-goto and .migx-path-<pass path with non-word characters as '-'>; stepper .migx-first
.migx-prev .migx-next .migx-last .migx-slider .migx-keys .migx-nested .migx-position; views
.migx-view-select .migx-diff-graph .migx-before-after-graph .migx-focus-graph .migx-focus-hops
.migx-focus-centre .migx-text-diff .migx-metrics .migx-stats .migx-warnings; GPU .migx-gpu
.migx-gpu-status .migx-time .migx-gpu-progress .migx-timing-table .migx-timing-plot; waterfall
.migx-waterfall .migx-waterfall-by .migx-waterfall-gpu .migx-waterfall-run .migx-waterfall-table-box
.migx-waterfall-plot; errors .migx-error-box .migx-error; progress .migx-progress.
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
