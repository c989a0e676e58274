"""Lay a tall drawing out to the shape of the graph pane: long chains folded into columns.

Dot stacks a network's layers top to bottom, so the "whole change" drawing of a big pass (a
yolov8 fusion pass: ~1000 x 11500 points) is a strip 12 times taller than wide, and the pane
(about 840 x 500 px at 1280 x 800 in JupyterLab) fits it at labels well under a pixel tall. Read like a
newspaper instead: cut the drawing at rank boundaries into k bands and set the bands side by
side, each in a column of its own. k is picked on a first layout so the result's aspect ratio
is closest to the pane's (which maximises the label size at fit-to-pane); each column starts at
the top, and the edges between columns are drawn afterwards as thin dashed lines (left to dot,
they would reorder the columns). Drawings whose shape already suits the pane are rendered as they are.

    svg = render_to_pane(graph, DotOptions(), pane=(840, 500))
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass

from . import style as S
from .dot import DotOptions, InlineSvg, RenderError, dot_quote, edge_attrs, pipe, render_svg, to_dot
from .model import DisplayGraph, DisplayGroup

# The graph pane in px at 1280 x 800 in JupyterLab's default layout with the file browser open
# (tests/browser/test_pane_layout_browser.py); the explorer sends its own once it is shown.
DEFAULT_PANE = (840.0, 500.0)
MAX_COLUMNS = 8
COLUMN_GAP = 0.5  # inches between columns (dot's cluster margins plus nodesep)
# Fold only when it makes labels at fit at least 1.5x larger: a slightly tall drawing reads better
# as one piece than cut in two.
MIN_GAIN = 1.5
FOLD_PREFIX = "cluster_fold_"

_NODE = re.compile(r'^node ("(?:[^"\\]|\\.)*"|\S+) (\S+) (\S+) (\S+) (\S+)', re.M)


@dataclass(frozen=True)
class Placed:
    """A node of a dot layout, in inches: centre x, depth from the top, width, height."""

    x: float
    top: float
    w: float
    h: float


@dataclass(frozen=True)
class Fold:
    """How a drawing is cut: `band[node]` is its column (0 = left); `columns` how many."""

    columns: int
    band: dict[str, int]
    scale: float  # fit-to-pane scale of the estimated folded drawing (px per inch over 72)
    unfolded_scale: float

    @property
    def gain(self) -> float:
        return self.scale / self.unfolded_scale if self.unfolded_scale else 1.0


def layout_positions(graph: DisplayGraph, opts: DotOptions) -> dict[str, Placed]:
    """Node positions of dot's layout of `graph` (`-Tplain`; y measured down from the top)."""
    text = pipe(to_dot(graph, opts), "plain").decode("utf-8", "replace")
    raw = {}
    for m in _NODE.finditer(text):
        name = m.group(1)
        if name.startswith('"'):
            name = name[1:-1].replace('\\"', '"')
        raw[name] = tuple(float(v) for v in m.group(2, 3, 4, 5))
    if not raw:
        return {}
    y_top = max(y + h / 2 for _x, y, _w, h in raw.values())
    return {k: Placed(x, y_top - y, w, h) for k, (x, y, w, h) in raw.items()}


def _extent(placed: list[Placed]) -> tuple[float, float]:
    if not placed:
        return 0.0, 0.0
    w = max(p.x + p.w / 2 for p in placed) - min(p.x - p.w / 2 for p in placed)
    h = max(p.top + p.h / 2 for p in placed) - min(p.top - p.h / 2 for p in placed)
    return w, h


def _fit(w: float, h: float, pane: tuple[float, float]) -> float:
    return min(pane[0] / w, pane[1] / h) if w > 0 and h > 0 else 0.0


def choose_fold(
    positions: Mapping[str, Placed],
    pane: tuple[float, float] = DEFAULT_PANE,
    max_columns: int = MAX_COLUMNS,
    min_columns: int = 2,
) -> Fold:
    """The number of columns (from min_columns to max_columns; 1 when none beats the drawing as
    it is) whose estimated drawing fits the pane at the largest scale, and each node's column:
    bands of equal height, cut between ranks (nodes of one rank share a depth, so a rank is
    never split)."""
    if pane[0] <= 0 or pane[1] <= 0:
        raise ValueError(f"pane size must be positive, not {pane[0]} x {pane[1]}")
    nodes = list(positions.items())
    w1, h1 = _extent([p for _n, p in nodes])
    base = _fit(w1, h1, pane)
    best = Fold(1, {n: 0 for n, _p in nodes}, base, base)
    if not nodes or h1 <= 0:
        return best
    top0 = min(p.top for _n, p in nodes)
    for k in range(max(2, min_columns), max_columns + 1):
        band = {n: min(k - 1, int((p.top - top0) / (h1 / k))) for n, p in nodes}
        cols = [[p for n, p in nodes if band[n] == b] for b in range(k)]
        if any(not c for c in cols):
            break  # fewer ranks than columns: more columns only add empty ones
        sizes = [_extent(c) for c in cols]
        w = sum(s[0] for s in sizes) + COLUMN_GAP * (k - 1)
        h = max(s[1] for s in sizes)
        scale = _fit(w, h, pane)
        if scale > best.scale:
            best = Fold(k, band, scale, base)
    return best


def fold_graph(graph: DisplayGraph, fold: Fold) -> tuple[DisplayGraph, list[int]]:
    """`graph` with each node inside its column's cluster (groups split per column, so no box
    spans two columns), without the edges between columns; returns it and the indexes (into
    graph.edges) of the edges left out, drawn afterwards as non-constraining edges."""
    k = fold.columns
    groups: dict[str, DisplayGroup] = {}
    for b in range(k):
        label = f"part {b + 1} of {k}" + (" (continues in the next column)" if b < k - 1 else "")
        groups[f"{FOLD_PREFIX}{b}"] = DisplayGroup(f"{FOLD_PREFIX}{b}", label, (), S.OTHER, module="main")

    def column_name(g: str, b: int) -> str:
        return g if b == 0 else f"{g}__col{b}"

    nodes = []
    for n in graph.nodes:
        b = fold.band.get(n.name, 0)
        path = tuple(column_name(g, b) for g in n.group)
        for g, named in zip(n.group, path):
            if named not in groups and g in graph.groups:
                grp = graph.groups[g]
                groups[named] = dataclasses.replace(
                    grp, name=named, parent=(f"{FOLD_PREFIX}{b}",) + tuple(column_name(p, b) for p in grp.parent)
                )
        nodes.append(dataclasses.replace(n, group=(f"{FOLD_PREFIX}{b}",) + path))
    kept, crossing = [], []
    for i, e in enumerate(graph.edges):
        if fold.band.get(e.src, 0) == fold.band.get(e.dst, 0):
            kept.append(e)
        else:
            crossing.append(i)
    return DisplayGraph(nodes, kept, groups, graph.title), crossing


def folded_dot(graph: DisplayGraph, fold: Fold, opts: DotOptions) -> tuple[str, list[int]]:
    """DOT for the folded drawing without the edges between columns (returned as indexes into
    graph.edges, for `draw_crossing_edges`). Any edge between columns, even one that does not
    rank its ends, makes dot's crossing minimisation put the columns in reverse order."""
    folded, crossing = fold_graph(graph, fold)
    lines = to_dot(folded, opts).rstrip().rstrip("}").rstrip().split("\n")
    # An invisible node at the top of each column, chained by invisible edges within one rank,
    # keeps the columns in reading order (part 1 on the left). Naming a subgraph again in DOT
    # adds to it.
    anchors = [f"{FOLD_PREFIX}anchor_{b}" for b in range(fold.columns)]
    for b, a in enumerate(anchors):
        lines.append(
            f'subgraph {dot_quote(FOLD_PREFIX + str(b))} {{ {dot_quote(a)} [style="invis" shape="point" '
            f'width="0" height="0" label="" class="migx_fold_anchor"]; }}'
        )
    lines.append("{rank=min; " + " ".join(dot_quote(a) + ";" for a in anchors) + "}")
    lines.append(" -> ".join(dot_quote(a) for a in anchors) + ' [style="invis"];')
    lines.append("}")
    return "\n".join(lines) + "\n", crossing


_SVG_NODE = re.compile(r'<g id="[^"]*" class="node[^"]*">\s*<title>([^<]*)</title>(.*?)</g>', re.S)
_SHAPE = re.compile(r'(?:points|d)="([^"]*)"')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def node_boxes(svg: str) -> dict[str, tuple[float, float, float, float]]:
    """Each node's box in the SVG's drawing coordinates: (left, top, right, bottom)."""
    boxes = {}
    for m in _SVG_NODE.finditer(svg):
        v = [float(t) for shape in _SHAPE.findall(m.group(2)) for t in _NUMBER.findall(shape)]
        if len(v) >= 2:
            xs, ys = v[0::2], v[1::2]
            boxes[html.unescape(m.group(1))] = (min(xs), min(ys), max(xs), max(ys))
    return boxes


def draw_crossing_edges(svg: str, graph: DisplayGraph, crossing: list[int], opts: DotOptions) -> str:
    """`svg` with the edges between columns drawn as thin straight dashed lines (from the bottom of
    the source to the top of the target), in the same classes as dot's edges."""
    boxes = node_boxes(svg)
    parts = []
    for k, i in enumerate(crossing):
        e = graph.edges[i]
        if e.src not in boxes or e.dst not in boxes:
            continue
        a = edge_attrs(e, len(graph.edges) + k, opts)
        (l1, _t1, r1, b1), (l2, t2, r2, _b2) = boxes[e.src], boxes[e.dst]
        x1, x2 = (l1 + r1) / 2, (l2 + r2) / 2
        title = html.escape(f"{e.src}->{e.dst}")
        parts.append(
            f'<g id="{html.escape(a["id"])}" class="edge {html.escape(a["class"])} migx_fold_edge">'
            f'<title>{title}</title><path fill="none" stroke="{html.escape(a["color"])}" '
            f'stroke-width="0.7" stroke-dasharray="5,3" d="M{x1:.1f},{b1:.1f} L{x2:.1f},{t2:.1f}"/></g>'
        )
    end = svg.rfind("</g>")  # the graph's own group: its transform places the nodes
    return svg[:end] + "\n".join(parts) + svg[end:] if parts and end >= 0 else svg


def render_to_pane(
    graph: DisplayGraph, opts: DotOptions | None = None, pane: tuple[float, float] = DEFAULT_PANE
) -> InlineSvg:
    """SVG of `graph` laid out to the pane's shape: folded into columns when that makes
    labels at fit-to-pane at least MIN_GAIN times larger, else as dot draws it."""
    opts = opts or DotOptions()
    if len(graph.nodes) < 8:  # nothing tall enough to fold; skip the extra layout
        return render_svg(graph, opts)
    try:
        positions = layout_positions(graph, opts)
        fold = choose_fold(positions, pane)
    except RenderError:
        return render_svg(graph, opts)  # its retries handle what broke the plain layout
    if fold.columns == 1 or fold.gain < MIN_GAIN:
        return render_svg(graph, opts)
    svg = _render_folded(graph, fold, opts)
    if svg is None:
        return render_svg(graph, opts)
    # The estimate sees each column as wide as its nodes were in the strip; re-laid out alone, a
    # column comes out narrower and taller, so a drawing still clearly taller than the pane
    # gets one more column when that reads larger.
    w, h = _view_box(svg)
    if w and h and w / h < pane[0] / pane[1] / 1.3 and fold.columns < MAX_COLUMNS:
        more = choose_fold(positions, pane, min_columns=fold.columns + 1)
        wider = _render_folded(graph, more, opts) if more.columns > fold.columns else None
        if wider is not None and _fit(*_view_box(wider), pane) > _fit(w, h, pane):
            return wider
    return svg


def _render_folded(graph: DisplayGraph, fold: Fold, opts: DotOptions) -> InlineSvg | None:
    for attempt in (opts, dataclasses.replace(opts, ordering=False)):
        try:
            dot, crossing = folded_dot(graph, fold, attempt)
            svg = _COLUMN_CLASS.sub(r'\1 class="cluster migx_fold_column"', render_svg(dot))
            return InlineSvg(draw_crossing_edges(svg, graph, crossing, attempt))
        except RenderError:
            continue
    return None


# A column is a layout box, not one of the model's clusters (which the view opens and closes and
# tests count): its own class instead of migx_cluster.
_COLUMN_CLASS = re.compile(r'(<g id="[^"]*' + FOLD_PREFIX + r'\d+") class="cluster[^"]*"')
_VIEW_BOX = re.compile(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"')


def _view_box(svg: str) -> tuple[float, float]:
    m = _VIEW_BOX.search(svg)
    return (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)


__all__ = [
    "DEFAULT_PANE",
    "FOLD_PREFIX",
    "Fold",
    "MAX_COLUMNS",
    "MIN_GAIN",
    "Placed",
    "choose_fold",
    "draw_crossing_edges",
    "fold_graph",
    "folded_dot",
    "layout_positions",
    "node_boxes",
    "render_to_pane",
]
