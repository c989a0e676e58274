"""Graphviz rendering of the IR: display model, diff views, scale controls, DOT/SVG/PNG output.

    from migx_explore.render import program_graph, diff_graph, render_svg
    svg = render_svg(program_graph(snapshot))             # inline-able SVG string
    svg = render_svg(diff_graph(rec.before, rec.after))   # what one pass changed
    text_diff(rec.before, rec.after)                      # the same, as an id-aligned text diff

Layers: `model` (snapshot -> DisplayGraph of plain dataclasses), `diff` (two snapshots -> one
merged or two side-by-side graphs), `scale` (focus / chains / budget on any DisplayGraph), `dot`
(DisplayGraph -> DOT text -> graphviz). Only `dot`'s rendering functions import `graphviz`, and
only when called, so this package imports without it (and without any notebook library).
"""

from __future__ import annotations

from collections.abc import Collection

from .diff import DEFAULT_BUDGET, compare_panels, diff_graph, merge_graphs, side_by_side
from .dot import (
    DotOptions,
    GraphvizNotFoundError,
    InlineSvg,
    RenderError,
    render_png,
    render_svg,
    to_dot,
    write_graph,
)
from .model import (
    Clusters,
    DisplayEdge,
    DisplayGraph,
    DisplayGroup,
    DisplayNode,
    Expand,
    Source,
    build_graph,
    node_name,
)
from .scale import apply_budget, collapse_chains, scale_graph, summarize
from .textdiff import text_diff
from .tracefiles import pass_file_name, render_trace


def program_graph(
    source: Source,
    module: str = "main",
    *,
    expand: Expand = "auto",
    chains: bool = False,
    min_chain: int = 4,
    budget: int | None = DEFAULT_BUDGET,
    focus: Collection[int] = (),
    hops: int = 2,
    show_ids: bool = False,
    literals: bool = True,
    title: str = "",
) -> DisplayGraph:
    """The display graph of one snapshot, with the scale controls applied.

    focus: instruction ids to centre on (keeping `hops` around them); chains: collapse linear
    runs; budget: at most about this many nodes (None: no cap)."""
    g = build_graph(source, module, expand=expand, show_ids=show_ids, literals=literals, title=title)
    seeds = {node_name(i) for i in focus}
    return scale_graph(g, seeds=seeds, hops=hops if seeds else None, chains=chains, min_chain=min_chain, budget=budget)


__all__ = [
    "Clusters",
    "DEFAULT_BUDGET",
    "DisplayEdge",
    "compare_panels",
    "DisplayGraph",
    "DisplayGroup",
    "DisplayNode",
    "DotOptions",
    "GraphvizNotFoundError",
    "InlineSvg",
    "RenderError",
    "apply_budget",
    "build_graph",
    "collapse_chains",
    "diff_graph",
    "merge_graphs",
    "node_name",
    "pass_file_name",
    "program_graph",
    "render_png",
    "render_svg",
    "render_trace",
    "scale_graph",
    "side_by_side",
    "summarize",
    "text_diff",
    "to_dot",
    "write_graph",
]
