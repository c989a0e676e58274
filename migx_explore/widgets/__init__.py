"""The notebook explorer (ipywidgets). Importing this package does not import ipywidgets; the
widget modules load on first use, so `import migx_explore` works without notebook libraries.

    import migx_explore
    ex = migx_explore.explore("yolo")      # or an .onnx path, a ModelProto, a Session

Modules: `queries` and `content` (pure: rows, stats, SVG/HTML strings), `timing_view` (GPU
results as tables and a figure), `graph_view` (the pan/zoom graph widget: an anywidget around the
vendored svg-pan-zoom in js/), `dom_tools` (clickable SVG, tree scrolling, chunked upload), `hosted`
(why those widgets keep their traits on a plain box and the anywidget only draws), and the thin
widget layers `tree`, `views`, `picker`, glued by `explorer`, and the panels: each a `panel.Panel`
in a module of its own (`recipe_panel`, `model_explorer_button`, `gpu_panel`, `waterfall_panel`,
`study_panel`), listed in `explorer.PANELS`; a panel's classes and CSS are in its module.

Stable CSS classes (for browser tests and styling): .migx-explorer (root, plus a per-instance
.migx-ex-<id>; inside: .migx-header .migx-progress-row .migx-body, .migx-side .migx-main);
picker .migx-model-select .migx-model-path .migx-model-upload (.migx-upload-input)
.migx-input-dims .migx-mode .migx-numeric .migx-load; tree .migx-filter .migx-hide-unchanged
.migx-tree .migx-tree-row (+ .migx-changed / -noop / -disabled / -failed / -pending / -not-run,
.migx-current) .migx-pass-checkbox .migx-pipeline-checkbox .migx-pass-goto and .migx-path-<pass
path with non-word characters as '-'>; stepper .migx-first .migx-prev .migx-next .migx-last
.migx-slider .migx-keys .migx-nested .migx-position; views .migx-view-select .migx-graph-view (+
.migx-diff-graph / -before-after-graph / -focus-graph / -compare-graph for the view shown; inside:
.migx-gv-fit .migx-gv-centre .migx-gv-zoom-in .migx-gv-zoom-out .migx-gv-search .migx-gv-hits
.migx-gv-note .migx-gv-panel .migx-gv-canvas .migx-gv-minimap, data-zoom and data-changed-in-view
on .migx-gv) .migx-focus-hops .migx-focus-centre .migx-compare-a .migx-compare-b .migx-compare-text
.migx-text-diff .migx-metrics .migx-legend .migx-stats .migx-warnings .migx-recipe-button
.migx-recipe (in .migx-recipe-menu) .migx-model-explorer (.migx-me-compare .migx-me-link); rewrites .migx-rewrites
.migx-rewrites-heading .migx-rewrites-graph .migx-rewrite-row (+ .migx-rewrite-<kind>, .migx-rewrite-selected)
.migx-instance-bar .migx-instance-prev .migx-instance-next .migx-instance-label .migx-instance-alike
.migx-instance-where .migx-instance-count .migx-instance-scopes .migx-busy; scope tree .migx-scope-tree
.migx-scope-row (+ .migx-scope-changed, .migx-scope-open, .migx-scope-depth-N); GPU .migx-gpu .migx-gpu-status
.migx-gpu-recorded .migx-time .migx-gpu-progress
.migx-timing-table .migx-timing-plot; waterfall .migx-waterfall .migx-waterfall-by
.migx-waterfall-gpu .migx-waterfall-run .migx-waterfall-table-box .migx-waterfall-plot; ordering study
.migx-study .migx-study-scope .migx-study-gpu .migx-study-run .migx-study-table-box .migx-study-plot; errors
.migx-error-box .migx-error; progress .migx-progress .migx-numeric-progress.
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
