"""What the view panes show, as strings: SVG of the graph views, the text diff as HTML, the IR
metrics chart, rule matches highlighted on a graph. Pure functions over a Session (no ipywidgets),
plus a small cache so stepping back and forth never re-runs graphviz for a pass already drawn."""

from __future__ import annotations

import dataclasses
import html
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from migx_explore.compiler.snapshot import ProgramSnapshot

from .. import pass_changes
from ..regions import first_view
from ..session import Session

PASS_GRAPH_VIEWS = ("diff", "side_by_side", "focus")  # drawn for one pass (its before and after)
GRAPH_VIEWS = PASS_GRAPH_VIEWS + ("compare",)  # every view the graph widget shows
VIEW_LABELS = {
    "rewrites": "Rewrites",
    "diff": "Diff",
    "side_by_side": "Before | After",
    "focus": "Focus",
    "compare": "Compare",
    "text": "Text diff",
    "metrics": "IR metrics",
}
REGION_HOPS = 1  # context drawn around a change region
# Scope clusters cost dot layout time; a drawing bigger than this (a whole-graph diff of a big
# pass) is drawn without them.
SCOPE_GROUPS_MAX_NODES = 250
OVERVIEW_OVER = 60  # a change (or region) touching more instructions is drawn as its scope overview


def graph_svg(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    view: str,
    *,
    diff: Any = None,
    hops: int = 2,
    centre: Collection[int] = (),
    chains: bool | None = None,
    prefix: str = "",
    expand: Any = "auto",
    region: Collection[int] = (),
    scopes: Mapping[int, str] | None = None,
    pane: tuple[float, float] | None = None,
    scopes_open: Collection[str] = (),
) -> str:
    """Inline SVG for one graph view of a pass.

    diff: the merged graph (changed region plus context when the graph is big); side_by_side:
    before and after as two panels of one layout; focus: the merged graph cut to `hops` around
    the changed nodes, or around the instruction ids in `centre` (hover a node: its title is
    i<id>), with unchanged chains collapsed. expand: which fused submodules are drawn as clusters
    (a render.Clusters choice; "auto": all of them on small programs).
    region: diff and side_by_side draw this change region (instruction ids) with one hop of
    context, the rest summarised; scopes: group the diff drawing by the model's scopes.
    pane: the graph pane's size in px; the whole-change diff (no region) is laid out to its
    shape (render.pane_layout: a tall drawing folded into columns). A diff (or region) touching
    more than OVERVIEW_OVER instructions is drawn as its scope overview, `scopes_open` opened."""
    from .. import render

    opts = render.DotOptions(id_prefix=prefix, cluster_controls=True)
    near = {"focus": REGION_HOPS, "focus_ids": tuple(region)} if region else {}
    changed = len(diff.added) + len(diff.removed) + len(diff.changed) if diff is not None else 0
    if view == "diff" and scopes is not None and (len(region) if region else changed) > OVERVIEW_OVER:
        # past the node budget: the scope overview (collapsed scopes with counts and badges)
        from migx_explore.compiler.snapshot import diff as snapshot_diff

        from ..render.overview import scope_overview
        from ..render.pane_layout import DEFAULT_PANE, render_to_pane

        d = diff if diff is not None else snapshot_diff(before, after)
        g = scope_overview(before, after, d, scopes, scopes_open, region=region or ())
        return str(render_to_pane(g, opts, pane or DEFAULT_PANE))
    if view == "diff" and region and scopes is not None:
        # the region with one hop of context; the rest of the model as collapsed scope groups
        from migx_explore.compiler.snapshot import diff as snapshot_diff

        from ..render.scoped import collapse_scopes, region_view

        d = diff if diff is not None else snapshot_diff(before, after)
        full = render.diff_graph(before, after, d, expand=expand, focus=None, chains=False, budget=None)
        g = collapse_scopes(full, scopes, d, region, REGION_HOPS, scopes_open)
        if len(g.nodes) <= SCOPE_GROUPS_MAX_NODES:
            g = region_view(g, scopes, d, region)
    elif view == "diff":
        g = render.diff_graph(before, after, diff, chains=chains, expand=expand, **near)
        if scopes is not None and len(g.nodes) <= SCOPE_GROUPS_MAX_NODES:
            from migx_explore.compiler.snapshot import diff as snapshot_diff

            from ..render.scoped import region_view

            g = region_view(g, scopes, diff if diff is not None else snapshot_diff(before, after), region)
    elif view == "side_by_side":
        g = render.side_by_side(before, after, diff, chains=chains, expand=expand, **near)
    elif view == "focus":
        # ids on the nodes: Focus is centred by instruction id, so the user needs to read them
        g = render.diff_graph(
            before,
            after,
            diff,
            focus=hops,
            focus_ids=tuple(centre) or None,
            chains=True if chains is None else chains,
            show_ids=True,
            expand=expand,
        )
    else:
        raise ValueError(f"unknown graph view {view!r}; one of {', '.join(PASS_GRAPH_VIEWS)}")
    if view == "diff" and not region and pane is not None:
        from ..render.pane_layout import render_to_pane

        return str(render_to_pane(g, opts, pane))
    return str(render.render_svg(g, opts))


def instance_svg(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    diff: Any,
    inst: Any,
    pane: tuple[float, float] | None = None,
    *,
    titles: tuple[str, str] = ("before: what the rewrite consumed", "after: what replaced it"),
    prefix: str = "in_",
) -> str:
    """One rewrite instance (rewrite_summary.RewriteInstance) drawn before | after with one hop of
    context, laid out to read at the largest scale in a pane of this size (render/instance.py)."""
    from migx_explore.compiler.snapshot import diff as snapshot_diff

    from ..render.instance import instance_graph, render_instance
    from ..render.pane_layout import DEFAULT_PANE

    d = diff if diff is not None else snapshot_diff(before, after)
    g = instance_graph(before, after, inst.before, inst.after, d, titles=titles)
    return render_instance(g, pane or DEFAULT_PANE, prefix=prefix)


def compare_svgs(
    a: ProgramSnapshot,
    b: ProgramSnapshot,
    labels: tuple[str, str],
    *,
    expand: Any = "auto",
    focus_ids: Collection[int] | None = None,
) -> tuple[str, str]:
    """Two SVGs, the IR at `a` and at `b`, coloured by what differs and cut to the same region (for
    the synced side-by-side Compare view); focus_ids: cut around these instructions (one change
    region) instead of around every change."""
    from .. import render

    left, right = render.compare_panels(a, b, labels=labels, expand=expand, focus_ids=focus_ids)
    return (
        str(render.render_svg(left, render.DotOptions(id_prefix="ca_", cluster_controls=True))),
        str(render.render_svg(right, render.DotOptions(id_prefix="cb_", cluster_controls=True))),
    )


def legend_html() -> str:
    """What the colours mean: diff status fills, then op-category borders (one line)."""
    from ..render import style as S

    items = [
        (S.STATUS_STYLE[k].fill, S.STATUS_STYLE[k].border, k) for k in (S.ADDED, S.REMOVED, S.CHANGED, S.UNCHANGED)
    ]
    cats = [
        (S.CATEGORY_STYLE[k].fill, S.CATEGORY_STYLE[k].border, k.replace("_", " "))
        for k in (S.CONV_GEMM, S.POINTWISE, S.REDUCE, S.DATA, S.GPU_KERNEL, S.ALLOCATION, S.LITERAL)
    ]
    chip = (
        '<span class="migx-legend-item"><span class="migx-legend-chip" style="background:{};border-color:{}">'
        "</span>{}</span>"
    )
    return (
        '<div class="migx-legend"><b>diff:</b> '
        + "".join(chip.format(*i) for i in items)
        + " <b>ops:</b> "
        + "".join(chip.format(*i) for i in cats)
        + ' <span class="migx-legend-item">dashed: removed; purple dashes: pinned node; ⊞ double-click: '
        "open a fused node; ⊟ click: close the cluster; ↳ name: a copy of a node with many users</span></div>"
    )


def side_by_side_text_html(left: str, right: str, labels: tuple[str, str], *, limit: int = 3000) -> str:
    """Two IR printouts side by side, lines that differ marked (the Compare view's text part)."""
    import difflib

    a, b = left.splitlines(), right.splitlines()
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            la = a[i1 + k] if i1 + k < i2 else ""
            lb = b[j1 + k] if j1 + k < j2 else ""
            cls = "" if tag == "equal" else f' class="migx-cmp-{tag}"'
            rows.append(f"<tr{cls}><td>{html.escape(la)}</td><td>{html.escape(lb)}</td></tr>")
            if len(rows) >= limit:
                break
    head = f"<tr><th>{html.escape(labels[0])}</th><th>{html.escape(labels[1])}</th></tr>"
    return f'<table class="migx-cmp-text">{head}{"".join(rows)}</table>'


def text_diff_html(text: str, *, limit: int = 4000) -> str:
    """The unified text diff with added/removed/hunk lines classed for colouring."""
    if not text:
        return '<div class="migx-text-diff-empty">No change: the IR after this pass is identical.</div>'
    lines = text.splitlines()
    more = len(lines) - limit
    out = []
    for line in lines[:limit]:
        cls = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "hunk"
            if line.startswith(("@@", "== "))  # "== ": alike submodules' folded hunks (render.textdiff)
            else ""
        )
        esc = html.escape(line) or " "
        # Classed lines are display:block (see the stylesheet), so only plain lines need "\n".
        out.append(f'<span class="{cls}">{esc}</span>' if cls else esc + "\n")
    tail = f"… {more} more lines (see pass_changes.text_diff(session))" if more > 0 else ""
    return "<pre>" + "".join(out) + html.escape(tail) + "</pre>"


def metrics_svg(
    series: Mapping[str, Sequence], current: int | None = None, *, width: int = 760, height: int = 300
) -> str:
    """A two-line chart of instructions and kernel launches after each top-level pass, the current
    pass marked, and the passes that moved a count labelled below the axis. Every pass has a
    clickable column (`data-index` = its record index; the explorer goes there on a click).
    Plain SVG: no matplotlib."""
    xs = list(series["index"])
    if not xs:
        return "<div>No passes traced.</div>"
    pad_l, pad_r, pad_t, pad_b = 48, 12, 18, 120
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    top = max(max(series["instructions"]), max(series["launches"]), 1)
    n = max(len(xs) - 1, 1)

    def x_of(k: int) -> float:
        return pad_l + w * k / n

    def pt(k: int, v: float) -> str:
        return f"{x_of(k):.1f},{pad_t + h * (1 - v / top):.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="migx-metrics-chart" width="{width}" '
        f'height="{height}" font-family="Helvetica" font-size="11">',
        f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="white" stroke="#ccc"/>',
        f'<text x="{pad_l - 6}" y="{pad_t + 4}" text-anchor="end">{top}</text>',
        f'<text x="{pad_l - 6}" y="{pad_t + h}" text-anchor="end">0</text>',
    ]
    col = w / n
    for k, (idx, path) in enumerate(zip(xs, series["path"])):
        moved = k > 0 and any(series[key][k] != series[key][k - 1] for key in ("instructions", "launches"))
        label = (
            f"{path}: {series['instructions'][k]} instructions, {series['launches'][k]} launches (click to go there)"
        )
        parts.append(
            f'<rect class="migx-metrics-hit" data-index="{idx}" x="{x_of(k) - col / 2:.1f}" y="{pad_t}" '
            f'width="{col:.1f}" height="{h}" fill="#000" fill-opacity="0" style="cursor:pointer">'
            f"<title>{html.escape(label)}</title></rect>"
        )
        if moved:  # name the passes that changed a count, under the axis
            x = x_of(k)
            parts.append(
                f'<text class="migx-metrics-label" data-index="{idx}" transform="translate({x:.1f},'
                f'{pad_t + h + 6}) rotate(60)" font-size="9" fill="#333" style="cursor:pointer">'
                f"{html.escape(path.split('.', 1)[-1][:28])}</text>"
            )
    for key, colour in (("instructions", "#1f77b4"), ("launches", "#d62728")):
        pts = " ".join(pt(k, v) for k, v in enumerate(series[key]))
        parts.append(
            f'<polyline class="migx-series-{key}" fill="none" stroke="{colour}" stroke-width="2" '
            f'points="{pts}" pointer-events="none"/>'
        )
    if current is not None and current in xs:
        k = xs.index(current)
        parts.append(
            f'<line class="migx-metrics-current" x1="{x_of(k):.1f}" x2="{x_of(k):.1f}" y1="{pad_t}" '
            f'y2="{pad_t + h}" stroke="#f0a000" stroke-width="2" pointer-events="none">'
            f"<title>{html.escape(series['path'][k])}</title></line>"
        )
    parts.append(
        f'<text x="{pad_l + 8}" y="{pad_t + 14}" fill="#1f77b4">instructions '
        f"{series['instructions'][0]} → {series['instructions'][-1]}</text>"
    )
    parts.append(
        f'<text x="{pad_l + 8}" y="{pad_t + 28}" fill="#d62728">kernel launches '
        f"{series['launches'][0]} → {series['launches'][-1]}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def highlight_svg(
    snap: ProgramSnapshot, matched: Collection[int], near: Mapping[int, str], *, module: str = "main", title: str = ""
) -> str:
    """The graph of `snap` with rule matches drawn as 'added' (green) and near misses as
    'changed' (amber) with the reason in the node's tooltip: a fusion prototype's view."""
    from .. import render
    from ..render import style as S

    g = render.program_graph(snap, module, budget=None, title=title)
    nodes = []
    for n in g.nodes:
        if n.instr_id in matched:
            n = dataclasses.replace(n, status=S.ADDED, tooltip=f"match: {n.tooltip or n.label}")
        elif n.instr_id in near:
            n = dataclasses.replace(n, status=S.CHANGED, tooltip=f"near miss: {near[n.instr_id]}")
        else:
            n = dataclasses.replace(n, status=S.UNCHANGED)
        nodes.append(n)
    return str(render.render_svg(dataclasses.replace(g, nodes=nodes)))


class SvgCache:
    """Rendered views keyed by the identity of the two snapshots plus the view options.

    Snapshots are shared between re-traces for unchanged pipeline prefixes, so identity is the
    right key; the cache holds the snapshots themselves, so an id can never be reused.

    `prefetch` draws a view in a background thread (graphviz runs as a subprocess, so the
    kernel stays responsive): the explorer prefetches the next and previous passes after each
    step, so a click on "next" or "back" usually finds its graph ready."""

    def __init__(self, size: int = 96, prefetch: bool = True):
        self.size = size
        self._items: list[tuple[Any, Any, tuple, str]] = []
        self._pending: list[tuple[Any, Any, tuple, Future]] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="migx-prefetch") if prefetch else None
        self.hits = self.misses = 0

    def _find(self, rows: list, before: Any, after: Any, key: tuple) -> int | None:
        for k, row in enumerate(rows):
            if row[0] is before and row[1] is after and row[2] == key:
                return k
        return None

    def _store(self, before: Any, after: Any, key: tuple, svg: str) -> None:
        with self._lock:
            if self._find(self._items, before, after, key) is None:
                self._items.append((before, after, key, svg))
                del self._items[: -self.size]

    def get(self, before: Any, after: Any, key: tuple, make: Callable[[], str]) -> str:
        with self._lock:
            k = self._find(self._items, before, after, key)
            if k is not None:
                self.hits += 1
                self._items.append(self._items.pop(k))
                return self._items[-1][3]
            k = self._find(self._pending, before, after, key)
            fut = self._pending.pop(k)[3] if k is not None else None
        if fut is not None:
            try:
                svg = fut.result()
                self.hits += 1
                return svg
            except Exception:  # noqa: BLE001 - drawn again below, so the error reaches the caller
                pass
        self.misses += 1
        svg = make()
        self._store(before, after, key, svg)
        return svg

    def prefetch(self, before: Any, after: Any, key: tuple, make: Callable[[], str]) -> None:
        if self._pool is None:
            return
        with self._lock:
            if (
                self._find(self._items, before, after, key) is not None
                or self._find(self._pending, before, after, key) is not None
            ):
                return
            self._pending = [p for p in self._pending if not p[3].done()][-4:]

            def fill() -> str:
                svg = make()
                self._store(before, after, key, svg)
                return svg

            self._pending.append((before, after, key, self._pool.submit(fill)))


def record_snapshots(session: Session, index: int) -> tuple[ProgramSnapshot, ProgramSnapshot, Any]:
    """(before, after, diff) of one trace record, as Session.before()/after()/diff() give them
    for the current one (a disabled or failed pass has no after: it left the IR as it was)."""
    before, after = session.snapshots(index)
    return before, after, session.trace_so_far.records[index].diff


def graph_job(session: Session, index: int, view: str, opts: dict[str, Any]) -> tuple[Any, Any, tuple, Callable]:
    before, after, diff = record_snapshots(session, index)
    opts = dict(opts)
    extra: dict[str, Any] = {}
    k = opts.pop("region", None)  # which change region to draw (None: the whole change)
    if k is not None and view in ("diff", "side_by_side"):
        regions = pass_changes.regions(session, index)
        if 0 <= k < len(regions):
            extra["region"] = regions[k].ids
    key = (
        view,
        tuple(sorted((k, tuple(v) if isinstance(v, (list, set, tuple)) else v) for k, v in opts.items())),
        extra.get("region", ()),
    )
    if view == "diff":  # scopes are a function of the record, so the key needs no more
        sb, sa = pass_changes.scopes(session, index)
        extra["scopes"] = {**sb, **sa}
    return before, after, key, lambda: graph_svg(before, after, view, diff=diff, prefix=f"{view[:2]}_", **opts, **extra)


def current_graph(session: Session, view: str, cache: SvgCache | None = None, **opts: Any) -> str:
    """The SVG of `view` for the session's current pass (through `cache` when given)."""
    before, after, key, make = graph_job(session, session.position, view, opts)
    return cache.get(before, after, key, make) if cache is not None else make()


def prefetch_next(session: Session, view: str, cache: SvgCache, **opts: Any) -> int | None:
    """Start drawing `view` for the pass a "next" click would show, then for the one "back" would
    (one drawing thread: next first); returns the next pass's record index when it is drawn. Only
    passes already traced are drawn: prefetching never runs passes, and a pass that opens on its
    rewrite summary has no drawing to prepare."""
    vis = session.cursor.visible(session.trace_so_far)
    later = [i for i in vis if i > session.position]
    earlier = [i for i in vis if i < session.position]
    drawn = []
    for i in later[:1] + earlier[-1:]:
        if (
            view == "diff"
            and opts.get("region") is not None
            and first_view(pass_changes.regions(session, i)) == "summary"
        ):
            continue
        cache.prefetch(*graph_job(session, i, view, opts))
        drawn.append(i)
    return later[0] if later and later[0] in drawn else None
