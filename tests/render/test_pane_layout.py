"""The whole-change drawing laid out to the graph pane's shape (render.pane_layout): a tall strip
is folded into columns whose aspect ratio is near the pane's, with every node still drawn, the
columns in reading order and the edges between columns kept."""

from __future__ import annotations

import re

import pytest

from migx_explore.render import style as S
from migx_explore.render.dot import DotOptions, render_svg
from migx_explore.render.model import DisplayEdge, DisplayGraph, DisplayGroup, DisplayNode
from migx_explore.render.pane_layout import (
    DEFAULT_PANE,
    FOLD_PREFIX,
    Placed,
    choose_fold,
    fold_graph,
    layout_positions,
    render_to_pane,
)

pytest.importorskip("graphviz")
PANE_ASPECT = DEFAULT_PANE[0] / DEFAULT_PANE[1]


def _chain(n: int, fused_every: int = 0) -> DisplayGraph:
    """A chain of n nodes, every third one changed; with fused_every=k, runs of k nodes sit in a
    cluster (so some clusters straddle a column cut)."""
    nodes, groups = [], {}
    for k in range(n):
        group = ()
        if fused_every:
            g = f"cluster_f{k // fused_every}"
            groups.setdefault(g, DisplayGroup(g, f"fused {k // fused_every}", (), S.POINTWISE))
            group = (g,)
        status = S.ADDED if k % 3 == 0 else S.UNCHANGED
        nodes.append(DisplayNode(f"i{k}", f"op number {k}", "add", S.POINTWISE, group, instr_id=k, status=status))
    edges = [DisplayEdge(f"i{k}", f"i{k + 1}") for k in range(n - 1)]
    edges.append(DisplayEdge("i0", f"i{n - 1}"))  # a skip connection from the top to the bottom
    return DisplayGraph(nodes, edges, groups)


def _view_box(svg: str) -> tuple[float, float]:
    m = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', svg)
    assert m, svg[:200]
    return float(m.group(1)), float(m.group(2))


def _titles(svg: str) -> set[str]:
    return set(re.findall(r'<g id="[^"]*" class="node migx_node[^"]*">\s*<title>([^<]+)</title>', svg))


def test_a_tall_layout_is_cut_into_columns_near_the_pane_aspect():
    tall = {f"n{k}": Placed(x=1.0, top=0.5 * k, w=1.2, h=0.3) for k in range(120)}  # 1.2 x 60 inches
    fold = choose_fold(tall, DEFAULT_PANE)
    assert fold.columns > 3 and fold.gain > 3
    cols = [[n for n, b in fold.band.items() if b == c] for c in range(fold.columns)]
    assert all(cols) and sorted(n for c in cols for n in c) == sorted(tall)
    # bands are contiguous in depth: every node of column c lies above every node of column c+1
    for a, b in zip(cols, cols[1:]):
        assert max(tall[n].top for n in a) < min(tall[n].top for n in b)


def test_a_layout_already_wider_than_tall_is_not_folded():
    wide = {f"n{r}_{c}": Placed(x=1.3 * c, top=0.5 * r, w=1.2, h=0.3) for r in range(6) for c in range(12)}
    assert choose_fold(wide, DEFAULT_PANE).columns == 1
    with pytest.raises(ValueError, match="pane size"):
        choose_fold(wide, (0, 500))


def test_folding_keeps_every_node_and_splits_clusters_per_column():
    g = _chain(60, fused_every=7)
    fold = choose_fold(layout_positions(g, DotOptions()), DEFAULT_PANE)
    assert fold.columns > 1
    folded, crossing = fold_graph(g, fold)
    assert [n.name for n in folded.nodes] == [n.name for n in g.nodes]
    assert all(n.group[0] == f"{FOLD_PREFIX}{fold.band[n.name]}" for n in folded.nodes)
    for n in folded.nodes:  # a node's clusters are those of its own column
        assert all(folded.groups[x].parent[0] == n.group[0] for x in n.group[1:])
    assert len(folded.edges) + len(crossing) == len(g.edges)
    assert all(fold.band[g.edges[i].src] != fold.band[g.edges[i].dst] for i in crossing)


def test_the_folded_drawing_has_the_pane_shape_every_node_and_columns_in_order():
    g = _chain(80, fused_every=5)
    plain = render_svg(g, DotOptions())
    svg = render_to_pane(g, DotOptions(), DEFAULT_PANE)
    w0, h0 = _view_box(plain)
    w, h = _view_box(svg)
    assert w0 / h0 < PANE_ASPECT / 4  # the plain drawing is a strip
    assert PANE_ASPECT / 2 <= w / h <= PANE_ASPECT * 2
    assert min(DEFAULT_PANE[0] / w, DEFAULT_PANE[1] / h) > 2 * min(DEFAULT_PANE[0] / w0, DEFAULT_PANE[1] / h0)
    assert _titles(svg) == _titles(plain) == {f"i{k}" for k in range(80)}
    assert svg.count("st_added") == plain.count("st_added")
    # the columns are layout boxes, not clusters of the model: only the fused groups are migx_cluster
    assert svg.count('class="cluster migx_fold_column"') == len(re.findall(r">part \d+ of", svg)) > 1
    assert not re.search(r'id="[^"]*cluster_fold_\d+" class="[^"]*migx_cluster', svg)
    fused = {grp for n in g.nodes for grp in n.group}
    assert svg.count('class="cluster migx_cluster') >= len(fused)  # each fused group, split where cut
    # the columns' labels read left to right: part 1, part 2, ...
    parts = [(float(x), int(p)) for x, p in re.findall(r'<text[^>]*x="([-\d.]+)"[^>]*>part (\d+) of', svg)]
    order = [p for _x, p in sorted(parts)]
    assert len(order) > 1 and order == sorted(order)
    # the edges between columns are drawn, as dashed lines: the chain's cuts and the skip edge
    cross = re.findall(r'class="edge [^"]*migx_fold_edge"><title>([^<]*)</title>', svg)
    assert "i0-&gt;i79" in cross and len(cross) == len(order)  # one cut between consecutive columns, plus the skip


def test_a_small_or_squat_drawing_is_rendered_as_dot_draws_it():
    small = _chain(5)
    assert render_to_pane(small, DotOptions()) == render_svg(small, DotOptions())
