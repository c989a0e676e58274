"""The graph view widget: graphviz SVG (graphviz still does the layout) shown through the vendored
svg-pan-zoom library in a small anywidget, so a 400-node drawing is navigable in a laptop pane.

What the front end (js/graph_view.js) adds: zoom (wheel, +/-), pan (drag), Fit, centre on the
nodes the pass changed on every new drawing (and a note when some are off-screen), search by
name, op or instruction id (Enter steps through the hits), a minimap with the change regions
marked, a pinned node (click one;
it stays marked while stepping), and two panels with synced pan/zoom (`svg_right`) for
comparisons; double-click a collapsed fused node (⊞) to draw its submodule as a cluster, click a
cluster's ⊟ label to collapse it, or expand / collapse all from the toolbar. No network: the
library ships inside the package (widgets/js, with its licence).

The traits are the whole interface, so a test can build the widget and check them without a
browser; `view_state`, `search_hits`, `pinned` and `cluster_request` come back from the front end.
They live on a plain ipywidgets box and the anywidget inside it only draws (hosted.py says why: an
anywidget model bound late drops every later message, and a drawing with it).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .hosted import host_base

JS_DIR = Path(__file__).resolve().parent / "js"

CSS = """
.migx-gv { display: flex; flex-direction: column; gap: 4px; width: 100%; }
.migx-gv-bar { display: flex; flex-wrap: wrap; align-items: center; gap: 4px; font-size: 12px; }
.migx-gv-btn { padding: 1px 8px; height: 24px; border: 1px solid #bbb; background: #f7f7f7; border-radius: 3px;
  cursor: pointer; white-space: nowrap; }
.migx-gv-btn:hover { background: #e8e8e8; }
.migx-gv-search { width: 16em; height: 22px; font-size: 12px; }
.migx-gv-hits { color: #555; min-width: 4em; }
.migx-gv-note { color: #555; font-style: italic; }
.migx-gv-note.migx-gv-offscreen { color: #a05a00; font-weight: 600; font-style: normal; }
.migx-gv-panes { display: flex; gap: 6px; width: 100%; }
.migx-gv-panel { flex: 1 1 0; min-width: 0; display: flex; flex-direction: column; }
.migx-gv-title { font-weight: 600; font-size: 12px; padding: 1px 4px; background: #eef2f7; }
.migx-gv-canvas { position: relative; border: 1px solid #ddd; background: white; overflow: hidden; }
.migx-gv-canvas svg { cursor: grab; display: block; }
.migx-gv-minimap { position: absolute; right: 6px; bottom: 6px; width: 150px; height: 110px; background: #fff;
  border: 1px solid #999; opacity: 0.92; overflow: hidden; cursor: pointer; box-shadow: 0 1px 4px #0003; }
.migx-gv-minimap-img { width: 100%; height: 100%; object-fit: contain; pointer-events: none; }
.migx-gv-minimap-region { position: absolute; border: 1px solid #e6550d; background: #fd8d3c55; pointer-events: none; }
.migx-gv-minimap-region.migx-gv-minimap-current { border: 2px solid #7f2704; background: #e6550dbb; z-index: 1; }
.migx-gv-minimap-view { position: absolute; border: 2px solid #d62728; background: #d6272814; pointer-events: none; }
.migx-gv g.node.migx-gv-hit > path, .migx-gv g.node.migx-gv-hit > polygon, .migx-gv g.node.migx-gv-hit > ellipse,
.migx-gv g.node.migx-gv-hit a > path, .migx-gv g.node.migx-gv-hit a > polygon, .migx-gv g.node.migx-gv-hit a > ellipse
  { stroke: #1f77b4; stroke-width: 4px; }
.migx-gv g.node.migx-gv-hit-current a > path, .migx-gv g.node.migx-gv-hit-current a > polygon,
.migx-gv g.node.migx-gv-hit-current a > ellipse { stroke: #0b3d91; stroke-width: 7px; }
.migx-gv g.node.migx-gv-pinned a > path, .migx-gv g.node.migx-gv-pinned a > polygon,
.migx-gv g.node.migx-gv-pinned a > ellipse { stroke: #9400d3; stroke-width: 6px; stroke-dasharray: 6 3; }
"""


@functools.cache
def esm() -> str:
    """The front end as one ES module (without its export, which hosted.py adds): the vendored
    library, evaluated as the classic script it is (new Function runs it outside module strict
    mode and without an AMD `define`), then the view's panel and the view (one module scope)."""
    library = (JS_DIR / "svg-pan-zoom.min.js").read_text(encoding="utf-8")
    view = "\n".join((JS_DIR / name).read_text(encoding="utf-8") for name in ("graph_panel.js", "graph_view.js"))
    loader = (
        "if (!globalThis.svgPanZoom) { new Function('define', 'module', 'exports', "
        f"{json.dumps(library)})(undefined, undefined, undefined); }}\n"
        "const svgPanZoom = globalThis.svgPanZoom;\n"
    )
    return loader + view


@functools.cache
def _widget_class() -> type:
    import traitlets as t

    class GraphView(host_base()):
        svg = t.Unicode("").tag(sync=True)
        svg_right = t.Unicode("").tag(sync=True)  # non-empty: two panels (a comparison)
        titles = t.List(t.Unicode(), default_value=[]).tag(sync=True)
        height = t.Int(640, min=120).tag(sync=True)  # the most the pane takes (less on a short window)
        auto_centre = t.Bool(True).tag(sync=True)  # centre on the changed nodes of each new drawing
        sync = t.Bool(True).tag(sync=True)  # pan/zoom the two panels together
        pinned = t.Unicode("").tag(sync=True)  # node title ("i42") marked across drawings
        search = t.Unicode("").tag(sync=True)
        search_hits = t.Int(0).tag(sync=True)
        view_state = t.Dict().tag(sync=True)  # from the front end: zoom, changed, changed_in_view
        # Clusters: the front end asks to expand a fused node (double-click) or collapse a cluster
        # (click on its ⊟ label), {"owner": id, "expand": bool} or all of them, {"all": bool};
        # a scope group opens on a click and an open scope closes on its label, {"scope": its
        # graphviz name, "expand": bool}; a counter makes a repeat a change. `all_expanded` names
        # the toolbar toggle's state.
        cluster_request = t.Dict().tag(sync=True)
        all_expanded = t.Bool(False).tag(sync=True)
        focus = t.Unicode("").tag(sync=True)  # node title to centre the next drawing on, not the change
        # Commands travel as a trait (with a counter so a repeat is still a change), which the
        # front end also replays when it starts after the command was given.
        command = t.Dict().tag(sync=True)
        # Change regions marked on the minimap: instruction ids per region, and which is current
        # (-1: none); the front end reports the pane's size in px, [width, height].
        regions = t.List(t.List(t.Int()), default_value=[]).tag(sync=True)
        region_index = t.Int(-1).tag(sync=True)
        pane_size = t.List(t.Float(), default_value=[]).tag(sync=True)

        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            self.attach("GraphViewRenderer", esm(), CSS)

        def _command(self, **cmd: Any) -> None:
            self.command = {**cmd, "n": self.command.get("n", 0) + 1}

        def show(
            self,
            svg: str,
            right: str = "",
            titles: tuple[str, ...] = (),
            focus: str = "",
            regions: Any = None,
            region_index: int = -1,
        ) -> None:
            """Draw new markup (one trait round-trip: both panels and titles change together);
            `focus`: a node title ("i42") or cluster owner ("owner_42") to centre on instead of
            the change (after the user opened or closed that cluster); `regions`: the change
            regions to mark on the minimap (instruction ids each), `region_index` the current."""
            with self.hold_sync():
                self.regions = [list(ids) for ids in regions or ()]
                self.region_index = region_index
                self.titles = list(titles)
                self.svg_right = right
                self.focus = focus
                self.svg = svg

        def fit(self) -> None:
            self._command(cmd="fit")

        def centre_changes(self) -> None:
            self._command(cmd="centre")

        def find(self, query: str, next: bool = False) -> None:
            """Search nodes by name, op or instruction id ('42', '#42' or 'i42')."""
            self._command(cmd="find", query=query, next=next)

    return GraphView


def GraphView(**kwargs: Any) -> Any:  # noqa: N802 - a factory standing for the class (anywidget loads lazily)
    """A graph view widget (anywidget imported on first use)."""
    return _widget_class()(**kwargs)


__all__ = ["CSS", "GraphView", "esm"]
