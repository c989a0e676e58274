"""The view panes: merged diff graph, before | after, focus, text diff, IR metrics, plus the stats
table and the ordering-rule warnings.

Only the selected pane is drawn (graphviz is the slow part of a step); the others are marked
stale and drawn when selected. Graphs are ipywidgets.HTML holding the SVG markup, so the nodes
are DOM elements a user (or a browser test) can find and hover."""

from __future__ import annotations

import html
from typing import Any

from ..session import Session
from . import content, queries
from ._common import ErrorBox, widgets

VIEW_CLASSES = {"diff": "migx-diff-graph", "side_by_side": "migx-before-after-graph", "focus": "migx-focus-graph",
                "text": "migx-text-diff", "metrics": "migx-metrics"}


class Views:
    """Widget: `widget` holds the view selector, the panes, the stats and the warnings."""

    def __init__(self, errors: ErrorBox, initial: str = "diff"):
        W = widgets()
        self.errors = errors
        self.cache = content.SvgCache()
        self.select = W.ToggleButtons(options=[(content.VIEW_LABELS[k], k) for k in VIEW_CLASSES], value=initial,
                                      style={"button_width": "auto"}, _dom_classes=["migx-view-select"])
        self.panes = {k: W.HTML("", _dom_classes=["migx-pane", cls] + (["migx-graph"] if k in content.GRAPH_VIEWS
                                                                          else []))
                      for k, cls in VIEW_CLASSES.items()}
        self.hops = W.IntSlider(2, min=0, max=6, description="hops", continuous_update=False,
                                _dom_classes=["migx-focus-hops"])
        self.centre = W.Text("", placeholder="instruction ids, e.g. 12, 15 (empty: the changed nodes)",
                             description="centre", continuous_update=False, layout=W.Layout(width="26em"),
                             _dom_classes=["migx-focus-centre"])
        self.focus_controls = W.HBox([self.hops, self.centre], _dom_classes=["migx-focus-controls"])
        self.stats = W.HTML("", _dom_classes=["migx-stats"])
        self.warnings = W.HTML("", _dom_classes=["migx-warnings"])
        self.widget = W.VBox([self.select, self.focus_controls, *self.panes.values(),
                              W.HBox([self.stats, self.warnings], layout=W.Layout(grid_gap="24px"))],
                             _dom_classes=["migx-views"], layout=W.Layout(width="66%"))
        self._session: Session | None = None
        self._rec: Any = None  # the PassRecord the panes are for
        self._drawn: dict[str, tuple] = {}  # pane -> (record, focus options) it shows
        self.select.observe(errors.guard(lambda _c: self._show_selected(), "view"), "value")
        for w in (self.hops, self.centre):
            w.observe(errors.guard(lambda _c: self._show_selected(), "focus"), "value")
        self._set_visibility()

    def update(self, session: Session) -> None:
        """Redraw for the session's current pass: stats and warnings always, the selected pane."""
        self._session = session
        self._rec = session.current
        self.stats.value = queries.stats_html(queries.stat_rows(session.stats()))
        self.warnings.value = queries.warnings_html(session.warnings())
        self._show_selected()

    def _set_visibility(self) -> None:
        for k, pane in self.panes.items():
            pane.layout.display = None if k == self.select.value else "none"
        self.focus_controls.layout.display = None if self.select.value == "focus" else "none"

    def _centre_ids(self) -> tuple[int, ...]:
        text = self.centre.value.replace(",", " ").split()
        try:
            return tuple(int(t.lstrip("@i")) for t in text)
        except ValueError:
            raise ValueError(f"centre: write instruction ids such as '12, 15', not {self.centre.value!r}") from None

    def _draw(self, view: str) -> bool:
        """Draw `view` for the current pass unless it shows it already; False if drawing failed.

        Panes remember the record object they show (not its index or id: a re-trace makes new
        records, and a freed record's id can come back for a new one)."""
        extra = (self.hops.value, self._centre_ids()) if view == "focus" else ()
        drawn = self._drawn.get(view)
        if drawn is not None and drawn[0] is self._rec and drawn[1] == extra:
            return True
        self._drawn[view] = (self._rec, extra)
        try:
            self.panes[view].value = self.render(view)
        except Exception as e:  # noqa: BLE001 - e.g. no graphviz `dot`: the pane and error box say so
            self.panes[view].value = (f'<div class="migx-render-error">Cannot draw this view: '
                                      f'{html.escape(str(e))}</div>')
            self.errors.show(e, f"draw {content.VIEW_LABELS[view]}")
            return False
        return True

    def _show_selected(self) -> None:
        self._set_visibility()
        if self._session is None:
            return
        view = self.select.value
        if self._draw(view) and view in content.GRAPH_VIEWS:
            content.prefetch_next(self._session, view, self.cache, **self._graph_opts(view))

    def _graph_opts(self, view: str) -> dict[str, Any]:
        return {"hops": self.hops.value, "centre": self._centre_ids()} if view == "focus" else {}

    def render(self, view: str) -> str:
        """The markup of one pane for the current pass (public so notebooks can embed a pane)."""
        s = self._session
        if view in content.GRAPH_VIEWS:
            return content.current_graph(s, view, self.cache, **self._graph_opts(view))
        if view == "text":
            return content.text_diff_html(s.text_diff())
        if view == "metrics":
            return content.metrics_svg(queries.metrics_series(s), s.current.index)
        raise ValueError(f"unknown view {view!r}")

    def svg(self, view: str = "diff") -> str:
        """What a pane shows for the current pass (drawing it if it is stale)."""
        self._draw(view)
        return self.panes[view].value
