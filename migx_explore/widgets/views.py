"""The view panes: merged diff graph, before | after, focus, compare (any two passes, two synced
panels and a side-by-side text diff), text diff, IR metrics, plus the legend and the recipe.

The graph views share one GraphView (pan/zoom, centre on the change, search, minimap, pinned
node); only the selected view is drawn (graphviz is the slow part of a step) and the next pass
is prefetched in the background. Stats and warnings live in the explorer's side column."""

from __future__ import annotations

import html
from typing import Any

from .. import pass_changes
from ..instances import InstanceView, scope_badges
from ..render.model import Clusters
from ..render.pane_layout import DEFAULT_PANE
from ..scopes import auto_opened
from ..session import Session
from . import content, queries
from ._common import ErrorBox, widgets
from .compare_view import CompareMixin
from .dom_tools import ClickableSvg
from .draw_thread import DrawThread
from .graph_view import GraphView
from .main_thread import MainThreadCalls
from .rewrites_view import RegionBar, RewritesPanel, region_of
from .scope_tree import ScopeTree, scope_named

# The views a step may switch between by itself: the rewrite summary for a pass whose change
# cannot be read as one region, the region's drawing otherwise. Any other view the user picked
# stays picked.
AUTO_VIEWS = ("rewrites", "diff")
REGION_VIEWS = ("diff", "side_by_side")  # drawn one change region at a time
ASYNC_VIEWS = ("diff", "side_by_side")  # laid out on the drawing thread (a whole change can take seconds)

VIEW_CLASSES = {
    "rewrites": "migx-rewrites-view",
    "diff": "migx-diff-graph",
    "side_by_side": "migx-before-after-graph",
    "focus": "migx-focus-graph",
    "compare": "migx-compare-graph",
    "text": "migx-text-diff",
    "metrics": "migx-metrics",
}


def _has_instance_in(v: InstanceView, row: int, scope: str) -> bool:
    return any(s == scope or s.startswith(scope + "/") for s in v.places(row).scopes)


def _in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (where a click must not wait for graphviz)."""
    import sys

    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    return getattr(shell, "kernel", None) is not None


class Views(CompareMixin):
    """Widget: `widget` holds the view selector, the view's controls, the graph view and the text
    panes; `stats` and `warnings` are placed by the explorer."""

    def __init__(
        self,
        errors: ErrorBox,
        initial: str = "diff",
        on_pick: Any = None,
        graph_height: int = 640,
        calls: MainThreadCalls | None = None,
    ):
        W = widgets()
        self.errors = errors
        self.cache = content.SvgCache()
        self.select = W.ToggleButtons(
            options=[(content.VIEW_LABELS[k], k) for k in VIEW_CLASSES],
            value=initial,
            style={"button_width": "auto"},
            _dom_classes=["migx-view-select"],
        )
        self.graph = GraphView(height=graph_height)
        self.graph.add_class("migx-graph-view")
        self.text = W.HTML("", _dom_classes=["migx-pane", VIEW_CLASSES["text"]])
        self.metrics = ClickableSvg()
        self.metrics.add_class("migx-pane")
        self.metrics.add_class(VIEW_CLASSES["metrics"])
        self.compare_text = W.HTML("", _dom_classes=["migx-pane", "migx-compare-text"])
        self.legend = W.HTML(content.legend_html(), _dom_classes=["migx-legend-box"])
        self.hops = W.IntSlider(
            2,
            min=0,
            max=6,
            description="hops",
            continuous_update=False,
            layout=W.Layout(width="16em"),
            _dom_classes=["migx-focus-hops"],
        )
        self.centre = W.Text(
            "",
            placeholder="instruction ids, e.g. 12, 15 (empty: the changed nodes)",
            description="centre",
            continuous_update=False,
            layout=W.Layout(width="24em"),
            _dom_classes=["migx-focus-centre"],
        )
        self.focus_controls = W.HBox([self.hops, self.centre], _dom_classes=["migx-focus-controls"])
        self.compare_a = W.Dropdown(
            options=[],
            description="A",
            layout=W.Layout(width="22em"),
            style={"description_width": "1.5em"},
            _dom_classes=["migx-compare-a"],
        )
        self.compare_b = W.Dropdown(
            options=[],
            description="B",
            layout=W.Layout(width="22em"),
            style={"description_width": "1.5em"},
            _dom_classes=["migx-compare-b"],
        )
        self.compare_mode = W.Dropdown(
            options=[("two passes", "passes"), ("this pass on vs off", "config")],
            value="passes",
            description="compare",
            layout=W.Layout(width="17.5em"),
            style={"description_width": "4.5em"},
            _dom_classes=["migx-compare-mode"],
        )
        self.compare_at = W.Dropdown(
            options=[("final program", "final"), ("after this pass", "here")],
            value="final",
            description="at",
            layout=W.Layout(width="13em"),
            style={"description_width": "1.5em"},
            _dom_classes=["migx-compare-at"],
        )
        self.compare_note = W.HTML("", _dom_classes=["migx-compare-note"])
        self.compare_controls = W.HBox(
            [self.compare_mode, self.compare_a, self.compare_b, self.compare_at, self.compare_note],
            _dom_classes=["migx-compare-controls"],
            layout=W.Layout(flex_flow="row wrap"),
        )
        self.stats = W.HTML("", _dom_classes=["migx-stats"])
        self.warnings = W.HTML("", _dom_classes=["migx-warnings"])
        self.scope_tree = ScopeTree(errors, self.scope_clicked)
        self.rewrites = RewritesPanel(errors, self._show_instance, self._instance_moved)
        self.busy = W.HTML("<i>drawing…</i>", _dom_classes=["migx-busy"], layout=W.Layout(display="none"))
        self.region_bar = RegionBar(errors, lambda _k: self._quiet or self._show_selected())
        self.widget = W.VBox(
            [
                self.select,
                self.region_bar.widget,
                self.focus_controls,
                self.compare_controls,
                self.rewrites.widget,
                self.busy,
                self.graph,
                self.legend,
                self.compare_text,
                self.text,
                self.metrics,
            ],
            _dom_classes=["migx-views"],
            layout=W.Layout(width="100%"),
        )
        self._session: Session | None = None
        self._rec: Any = None  # the PassRecord the panes are for
        self._drawn: dict[str, tuple] = {}  # view -> (record, options) it shows
        self._markup: dict[str, str] = {}  # view -> the markup drawn last (tests and notebooks read it)
        self._on_pick = on_pick  # called with a record index (metrics chart clicks)
        # Which fused nodes are drawn as clusters: one choice for the whole model, keyed by owner
        # instruction id (stable across passes), so an opened cluster stays open while stepping.
        self.clusters = Clusters()
        self._focus_next = ""  # what the next drawing centres on instead of the change
        # Scopes the user opened in the scope tree: one choice for the model, kept while stepping.
        self.open_scopes: set[str] = set()
        self._config_titles: tuple[str, str] | None = None  # the panels' labels in "on vs off" mode
        # The region bar steps through the pass's regions, or in Compare through those between
        # A and B; each list keeps its own position.
        self._pass_regions: list = []
        self._bar_source: list = []  # the list the bar holds now
        self._pass_index = 0
        self.graph.observe(errors.guard(self._pane_resized, "graph pane size"), "pane_size")
        self.graph.observe(errors.guard(self._cluster_requested, "expand / collapse"), "cluster_request")
        self.select.observe(errors.guard(self._view_picked, "view"), "value")
        # Steps pick Rewrites or Diff per pass until the user picks Diff themself (then the graph
        # stays); picking Rewrites gives the choice back to the steps.
        self._auto_view = True
        self._quiet = False
        for w in (self.hops, self.centre, self.compare_a, self.compare_b, self.compare_mode, self.compare_at):
            w.observe(errors.guard(lambda _c: self._quiet or self._show_selected(), "view options"), "value")
        self.metrics.observe(errors.guard(self._metrics_clicked, "metrics chart"), "clicks")
        # Drawings are laid out on a worker thread in a kernel (a click is answered at once and a
        # newer one supersedes an older drawing); scripts and tests draw in line.
        self.async_draw = _in_kernel()
        self.drawer = DrawThread(self.busy, calls)  # the explorer's queue: drawings in order with its updates
        self._set_visibility()

    # ---- updating -----------------------------------------------------------------------------------
    def update(self, session: Session) -> None:
        """Redraw for the session's current pass: stats and warnings always, the selected view."""
        self._session = session
        self._rec = session.current
        self._focus_next = ""  # a step centres on the change, not on a cluster opened before it
        self._pick_region_or_summary(session)
        self.refresh_stats()
        self.warnings.value = queries.warnings_html(session.config.warnings())
        self._fill_compare_choices(session)
        self._default_compare(session)
        shown = self.graph.svg
        self._show_selected()
        if self.graph.svg == shown and self.select.value in content.PASS_GRAPH_VIEWS:
            # every step centres on the change, also one that lands on the drawing already shown
            self.graph.centre_changes()

    def _pick_region_or_summary(self, session: Session) -> None:
        """A new pass opens on its first change region, or on its rewrite summary when that
        region cannot be read in one pane (regions.first_view, then the drawing's size)."""
        rec = session.current
        regions = pass_changes.regions(session) if rec.changed else []
        self.region_bar.set(regions, 0)
        self._pass_regions = self._bar_source = regions
        rows = pass_changes.rewrites(session) if rec.changed else []
        view = None
        sb, sa = pass_changes.scopes(session)
        scopes = {**sb, **sa}
        if rows:
            before, after = session.snapshots()
            view = InstanceView(rows, before, after, scopes)
        self.rewrites.show(rec.path, rows, regions, view)
        self._tree_scopes = list(dict.fromkeys(sa.values()))
        self._tree_badges = scope_badges(rows, scopes)
        self._show_tree()
        if self.select.value in AUTO_VIEWS and self._auto_view:
            want = "rewrites" if rec.changed and not self._region_reads(session, regions) else "diff"
            if self.select.value != want:
                self._quiet = True  # update() draws once, below
                try:
                    self.select.value = want
                finally:
                    self._quiet = False

    def _region_reads(self, session: Session, regions: list) -> bool:
        """Whether the first region's drawing reads at reading scale: the cheap test on the
        region, then the drawing itself (cached: the Diff view shows this very drawing)."""
        from ..regions import drawing_fits, first_view
        from ..render.scoped import changed_box

        if first_view(regions) != "region" or self.region_bar.current is None:
            return first_view(regions) == "region"
        try:
            svg = content.current_graph(session, "diff", self.cache, **self._graph_opts("diff"))
        except Exception:  # noqa: BLE001 - e.g. no `dot`: the Diff view's own drawing reports it
            return True
        return drawing_fits(*changed_box(svg))

    def _view_picked(self, change: dict) -> None:
        if self._quiet:
            return
        if not self._programmatic and change["new"] in AUTO_VIEWS:
            self._auto_view = change["new"] == "rewrites"
        self._show_selected()

    _programmatic = False

    def _show_tree(self) -> None:
        opened = self.open_scopes | auto_opened(self._tree_scopes)
        self.scope_tree.show(self._tree_scopes, opened, self._tree_badges, self._rec.path if self._rec else "")

    def scope_clicked(self, scope: str) -> None:
        """A scope tree click: open or close the scope (in the tree and the scope overview); in
        the Rewrites view also show an instance inside it."""
        if scope in self.open_scopes:
            self.open_scopes.discard(scope)
        elif any(s.startswith(scope + "/") for s in self._tree_scopes):
            self.open_scopes.add(scope)
        self._show_tree()
        v = self.rewrites.view
        if self.select.value == "rewrites" and v is not None:
            inside = v.scope() == scope or v.scope().startswith(scope + "/")
            if not inside and not _has_instance_in(v, v.row, scope):
                k = next((r for r in range(len(v.rows)) if _has_instance_in(v, r, scope)), None)
                if k is not None:
                    v.pick(k, 0)
            if not inside:
                v.jump(scope)
            self.rewrites.refresh()
            self._show_selected()
        elif self.select.value == "diff":
            if self.region_bar.current is not None:
                self._show_instance(())  # the overview is where scopes open
            else:
                self._show_selected()

    _tree_scopes: list = []
    _tree_badges: dict = {}

    def _instance_moved(self) -> None:
        """The instance bar moved: draw the instance in the Rewrites view."""
        if self.select.value != "rewrites":
            self._programmatic = True
            try:
                self.select.value = "rewrites"  # draws
            finally:
                self._programmatic = False
        else:
            self._show_selected()

    def _show_instance(self, ids) -> None:
        """Draw the region holding these instruction ids (none: the whole change)."""
        regions = self.region_bar.regions
        self.region_bar.set(regions, region_of(regions, ids) if ids else 0)
        self._quiet = True
        try:
            self.region_bar.whole.value = not ids
        finally:
            self._quiet = False
        self.region_bar._label()
        if self.select.value not in REGION_VIEWS:
            self._programmatic = True  # the summary's own link: the steps keep choosing
            try:
                self.select.value = "diff"  # draws
            finally:
                self._programmatic = False
        else:
            self._show_selected()

    # ---- clusters -----------------------------------------------------------------------------------
    def _instructions(self) -> int:
        """The size "auto" clusters are decided on: the bigger side of what the view shows."""
        s = self._session
        if self.select.value == "compare":
            a, b = self._compared()
        else:
            a, b = s.before(), s.after()
        return max(a.total_instructions(), b.total_instructions())

    def set_cluster(self, owner: int, expanded: bool) -> None:
        """Draw the fused instruction `owner` as a cluster of its ops (expanded) or as one node, in
        every pass from now on (until a new model is loaded), and redraw centred on it."""
        if self._session is None:
            return
        self.clusters = self.clusters.with_owner(int(owner), expanded, self._instructions())
        self._focus_next = f"owner_{owner}" if expanded else f"i{owner}"
        self._show_selected()

    def set_all_clusters(self, expanded: bool) -> None:
        """Expand every fused node into a cluster, or collapse them all."""
        self.clusters = Clusters(bool(expanded))
        self._show_selected()

    def reset_clusters(self) -> None:
        """Back to the default (clusters on small programs only, no scope opened): a new model was
        loaded."""
        self.clusters = Clusters()
        self.open_scopes = set()

    def _cluster_requested(self, change: dict) -> None:
        req = change["new"] or {}
        if "all" in req:
            self.set_all_clusters(bool(req["all"]))
        elif "owner" in req:
            self.set_cluster(int(req["owner"]), bool(req.get("expand", True)))
        elif "scope" in req:  # a click on a collapsed scope group (or an open scope's label)
            self.set_scope(str(req["scope"]), bool(req.get("expand", True)))

    def set_scope(self, drawn: str, expanded: bool) -> None:
        """Open a scope group of the drawing (by its graphviz name) into its child groups and
        ops, or close it and what is open inside it; one choice for the model, kept while
        stepping (the scope tree shows it too). The redraw centres on that scope."""
        scope = scope_named(drawn, self._tree_scopes)
        if scope is None or self._session is None:
            return
        if expanded:
            self.open_scopes.add(scope)
        else:
            self.open_scopes -= {s for s in self.open_scopes if s == scope or s.startswith(scope + "/")}
        safe = drawn.split("scope_", 1)[1]
        self._focus_next = ("cluster_scope_" if expanded else "scope_") + safe
        self._show_tree()
        self._show_selected()

    def refresh_stats(self) -> None:
        if self._session is not None:
            self.stats.value = queries.stats_html(queries.stat_rows(pass_changes.stats(self._session)))

    def _set_visibility(self) -> None:
        view = self.select.value
        shown = {
            self.focus_controls: view == "focus",
            self.compare_controls: view == "compare",
            self.rewrites.widget: view == "rewrites",
            self.region_bar.widget: view in REGION_VIEWS + ("compare",) and bool(self.region_bar.regions),
            self.graph: view in content.GRAPH_VIEWS or (view == "rewrites" and self.rewrites.view is not None),
            self.legend: view in content.GRAPH_VIEWS,
            self.compare_text: view == "compare",
            self.text: view == "text",
            self.metrics: view == "metrics",
        }
        config = self.compare_mode.value == "config"
        shown.update({self.compare_a: not config, self.compare_b: not config, self.compare_at: config})
        for w, on in shown.items():
            w.layout.display = None if on else "none"
        self.compare_note.value = (
            "<i>without this pass vs with it (your toggles stay as they are); pan/zoom move both</i>"
            if config
            else "<i>the IR after each pass; pan/zoom move both</i>"
        )
        classes = [c for c in self.graph._dom_classes if c not in VIEW_CLASSES.values()]
        drawn = view in content.GRAPH_VIEWS or view == "rewrites"
        self.graph._dom_classes = tuple(classes + [VIEW_CLASSES[view]] if drawn else classes)

    def _centre_ids(self) -> tuple[int, ...]:
        text = self.centre.value.replace(",", " ").split()
        try:
            return tuple(int(t.lstrip("@i#")) for t in text)
        except ValueError:
            raise ValueError(f"centre: write instruction ids such as '12, 15', not {self.centre.value!r}") from None

    def _options(self, view: str) -> tuple:
        if view == "focus":
            return (self.hops.value, self._centre_ids(), self.clusters)
        if view == "compare" and self.compare_mode.value == "config":
            return ("config", self.compare_at.value, self.clusters, self._region())
        if view == "compare":
            return (self.compare_a.value, self.compare_b.value, self.clusters, self._region())
        if view in REGION_VIEWS:
            whole = view == "diff" and self._region() is None  # only that drawing is laid out to the pane
            return (self.clusters, self._region(), self._pane() if whole else None, tuple(sorted(self.open_scopes)))
        if view == "rewrites":
            v = self.rewrites.view
            return (v.row, v.index, self._pane()) if v is not None else ()
        return (self.clusters,) if view in content.GRAPH_VIEWS else ()

    def _region(self) -> int | None:
        return self.region_bar.current

    def _pane(self) -> tuple[float, float]:
        """The graph pane's size as the front end reports it, to 50 px (DEFAULT_PANE before it
        has): the whole-change drawing is laid out to its shape."""
        size = list(self.graph.pane_size or ())
        if len(size) != 2 or min(size) <= 0:
            return DEFAULT_PANE
        return (max(50.0, round(size[0] / 50) * 50.0), max(50.0, round(size[1] / 50) * 50.0))

    def _pane_resized(self, _change: dict) -> None:
        if self.select.value == "rewrites" or (self.select.value == "diff" and self.region_bar.current is None):
            self._show_selected()  # a new key only when the rounded size changed

    def _use_regions(self, regions: list) -> None:
        """Put `regions` in the region bar (the pass's come back at the region they were left on)."""
        if regions is self._bar_source:
            return
        if self._bar_source is self._pass_regions:
            self._pass_index = self.region_bar.index
        self.region_bar.set(regions, self._pass_index if regions is self._pass_regions else 0)
        self._bar_source = regions
        self._set_visibility()

    def _draw(self, view: str) -> bool:
        """Draw `view` for the current pass unless it shows it already; False if drawing failed.

        Views remember the record object they show (not its index or id: a re-trace makes new
        records, and a freed record's id can come back for a new one)."""
        if not self._in_thread:
            self.drawer.cancel()  # a drawing in line supersedes any pending one
        extra = self._options(view)
        drawn = self._drawn.get(view)
        if drawn is not None and drawn[0] is self._rec and drawn[1] == extra:
            if view in content.GRAPH_VIEWS and self.graph.svg != self._markup.get(view):
                self._put(view)
            return True
        self._drawn[view] = (self._rec, extra)
        try:
            self._markup[view] = self.render(view)
        except Exception as e:  # noqa: BLE001 - e.g. no graphviz `dot`: the pane and error box say so
            self._markup[view] = f'<div class="migx-render-error">Cannot draw this view: {html.escape(str(e))}</div>'
            self._markup.pop(view + ":right", None)
            self._put(view)
            self.errors.show(e, f"draw {content.VIEW_LABELS[view]}")
            return False
        self._put(view)
        return True

    _in_thread = False

    def _draw_later(self, view: str) -> None:
        """`_draw` on the drawing thread (DrawThread: a busy note meanwhile, the latest wins)."""
        extra = self._options(view)
        drawn = self._drawn.get(view)
        if drawn is not None and drawn[0] is self._rec and drawn[1] == extra:
            self._draw(view)
            return
        rec = self._rec

        def done(markup: str, err: BaseException | None) -> None:
            if err is not None:
                markup = f'<div class="migx-render-error">Cannot draw this view: {html.escape(str(err))}</div>'
                self.errors.show(err, f"draw {content.VIEW_LABELS[view]}")
            self._drawn[view] = (rec, extra)
            self._markup[view] = markup
            if self.select.value == view and self._rec is rec:
                self._put(view)

        self.drawer.submit(self._maker(view), done)

    def wait(self, timeout: float | None = 60) -> None:
        """Wait for the drawing thread's latest job (tests, scripts)."""
        self.drawer.wait(timeout)

    def _maker(self, view: str) -> Any:
        """A function that draws `view` as it is chosen now (it reads no widget state later)."""
        s = self._session
        if view == "rewrites":
            v = self.rewrites.view
            inst = v.current if v is not None else None
            if inst is None:
                return lambda: ""
            before, after, d = content.record_snapshots(s, s.position)
            pane = self._pane()
            return lambda: content.instance_svg(before, after, d, inst, pane)
        if view in content.PASS_GRAPH_VIEWS:
            before, after, key, make = content.graph_job(s, s.position, view, self._graph_opts(view))
            return lambda: self.cache.get(before, after, key, make)
        return lambda: self.render(view)

    def _put(self, view: str) -> None:
        markup = self._markup[view]
        if view == "rewrites":
            self.graph.show(markup)
        elif view in content.GRAPH_VIEWS:
            right = self._markup.get(view + ":right", "") if view == "compare" else ""
            titles = self._compare_titles() if view == "compare" else ()
            if self._session is not None:
                self.graph.all_expanded = bool(self.clusters.resolved(self._instructions()).default)
            focus, self._focus_next = self._focus_next, ""
            bar = self.region_bar
            marked = [r.ids for r in bar.regions] if view in REGION_VIEWS + ("compare",) else []
            self.graph.show(markup, right, titles, focus, marked, bar.index if marked else -1)
        elif view == "text":
            self.text.value = markup
        elif view == "metrics":
            self.metrics.svg = markup

    def _show_selected(self) -> None:
        self._set_visibility()
        if self._session is None:
            return
        view = self.select.value
        if view != "compare":
            self._use_regions(self._pass_regions)
        if (view == "rewrites" and self.rewrites.view is not None) or view in ASYNC_VIEWS:
            if self.async_draw:
                self._draw_later(view)
            else:
                self._draw(view)
            if view in content.PASS_GRAPH_VIEWS:
                content.prefetch_next(self._session, view, self.cache, **self._graph_opts(view))
            return
        if self._draw(view) and view in content.PASS_GRAPH_VIEWS:
            content.prefetch_next(self._session, view, self.cache, **self._graph_opts(view))

    def _graph_opts(self, view: str) -> dict[str, Any]:
        opts: dict[str, Any] = {"expand": self.clusters}
        if view in REGION_VIEWS:
            opts["region"] = self._region()
        if view == "diff" and opts.get("region") is None:
            opts["pane"] = self._pane()
        if view == "diff":
            opts["scopes_open"] = tuple(sorted(self.open_scopes))
        if view == "focus":
            opts.update(hops=self.hops.value, centre=self._centre_ids())
        return opts

    def render(self, view: str) -> str:
        """The markup of one view for the current pass (public so notebooks can embed a view)."""
        s = self._session
        if view == "compare":
            return self._render_compare()
        if view in content.GRAPH_VIEWS:
            return content.current_graph(s, view, self.cache, **self._graph_opts(view))
        if view == "text":
            return content.text_diff_html(pass_changes.text_diff(s))
        if view == "metrics":
            return content.metrics_svg(queries.metrics_series(s), s.current.index)
        if view == "rewrites":  # the panel's rows are set on each step (update); this draws the instance
            return self._maker(view)() if self.rewrites.view is not None else self.rewrites.heading.value
        raise ValueError(f"unknown view {view!r}")

    def drawn(self, view: str = "diff") -> str:
        """What a view shows for the current pass (drawing it if it is stale)."""
        self._draw(view)
        return self._markup[view]

    svg = drawn  # the older name

    def _metrics_clicked(self, _change: dict) -> None:
        if self._on_pick is not None and self.metrics.clicked >= 0:
            self._on_pick(self.metrics.clicked)
