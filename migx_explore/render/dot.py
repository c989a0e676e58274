"""DOT text from a DisplayGraph, and SVG / PNG / DOT output through the `graphviz` package.

Layout stability: nodes are declared in display order (module order, ghosts next to where they
were) under their stable names, with `ordering=out`, params pinned to the top rank and @return to
the bottom, so dot makes the same choices for the unchanged part of a graph from pass to pass.

SVG: every node, edge and cluster carries an `id` and `class` attributes (`migx_node
cat_<category> st_<status> op_<op> iid_<stable id>`) so notebooks and browser tests can find
them; `render_svg` strips the XML prolog so the string can be inlined into HTML as DOM elements.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass

from migx_explore.compiler.errors import MigxError

from . import style as S
from .model import DisplayEdge, DisplayGraph, DisplayNode

# Above this many nodes dot's defaults (spline routing, many crossing-minimisation passes) cost
# seconds; these settings trade a few crossings for a layout in well under a second.
FAST_OVER = 150
FAST_ATTRS = {
    "splines": "line",  # straight edges: spline routing is a large share of layout time
    "nslimit": "2",
    "nslimit1": "2",  # bound network-simplex iterations (ranking, x positions)
    "mclimit": "0.3",  # fewer mincross iterations
    "remincross": "false",
    "searchsize": "10",
}
INSTALL_HINT = (
    "install Graphviz's `dot` program: `apt install graphviz` (Debian/Ubuntu), "
    "`conda install graphviz` (conda) or `brew install graphviz` (macOS); "
    "the `graphviz` Python package alone does not include it"
)


class RenderError(MigxError):
    """Graphviz could not lay out or render a graph."""


class GraphvizNotFoundError(RenderError):
    """The `dot` executable is missing."""


@dataclass(frozen=True)
class DotOptions:
    rankdir: str = "TB"
    fast: bool | None = None  # None: fast settings above FAST_OVER nodes
    edge_labels: bool = False  # label data edges with the value's shape
    id_prefix: str = ""  # SVG ids must be unique in a page holding several graphs
    rank_hints: bool = True
    ordering: bool = True  # ordering=out
    # Replaced-by links: "free" (constraint=false, no effect on layout), "weak" (a rank
    # constraint of weight 0) or "off". See RETRIES for why anything but "free" exists.
    provenance: str = "free"
    dpi: int | None = None
    # The explorer's graph view opens a collapsed fused node on double-click and closes a cluster
    # on a click on its label: mark both (⊞ / ⊟) so the controls can be found.
    cluster_controls: bool = False


# Graphviz 2.43 has layout bugs ("lost edge", "cannot find NORMAL edge", even a segfault with
# splines=line) when constraint=false edges meet clusters and ordering=out; seen on the backend
# fuse_ops diffs of the built-in resnet_block and transformer models. A failed layout is retried
# with the triggers removed one by one rather than leaving the user without a picture.
RETRIES = (
    {"ordering": False},
    {"ordering": False, "provenance": "weak"},
    {"ordering": False, "provenance": "off", "fast": False},
)


def dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(d: dict[str, str]) -> str:
    return "[" + " ".join(f"{k}={dot_quote(v)}" for k, v in d.items() if v != "") + "]"


def _css(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def node_classes(n: DisplayNode) -> str:
    parts = ["migx_node", f"cat_{n.category}", f"kind_{n.kind}", f"op_{_css(n.op)}"]
    if n.status:
        parts.append(f"st_{n.status}")
    if n.instr_id is not None:
        parts.append(f"iid_{n.instr_id}")
    return " ".join(parts)


def _node_attrs(n: DisplayNode, opts: DotOptions) -> dict[str, str]:
    cs = S.CATEGORY_STYLE.get(n.category, S.CATEGORY_STYLE[S.OTHER])
    label = f"⊞ {n.label}" if opts.cluster_controls and n.kind == "fused" else n.label
    a = {"label": label, "id": opts.id_prefix + n.name, "class": node_classes(n)}
    style, fill, border, font, pen = cs.style, cs.fill, cs.border, cs.fontcolor, ""
    if n.status in S.STATUS_STYLE:
        ss = S.STATUS_STYLE[n.status]
        fill, font, pen = ss.fill, ss.fontcolor, ss.penwidth
        border = ss.border if n.status != S.UNCHANGED else cs.border
        if ss.extra_style:
            style = ",".join(x for x in style.split(",") if x not in ("bold", "dotted")) + "," + ss.extra_style
    if n.category in (S.SUMMARY,):
        fill = ""
    if cs.shape != "box":
        a["shape"] = cs.shape
    if style != "rounded,filled":
        a["style"] = style
    a["fillcolor"] = fill
    a["color"] = border
    if font != "#1a1a1a":
        a["fontcolor"] = font
    if cs.fontsize != "10":
        a["fontsize"] = cs.fontsize
    if pen and pen != "1":
        a["penwidth"] = pen
    if n.tooltip:
        a["tooltip"] = n.tooltip + (
            " (double-click: show the fused ops)" if opts.cluster_controls and n.kind == "fused" else ""
        )
    return a


def edge_attrs(e: DisplayEdge, k: int, opts: DotOptions) -> dict[str, str]:
    a = {"id": f"{opts.id_prefix}e{k}", "class": f"migx_edge kind_{e.kind}" + (f" st_{e.status}" if e.status else "")}
    if e.kind == "replaced":
        # A provenance link, not data flow: it must not pull the layout around.
        a.update(
            style="dashed", color=S.EDGE_COLOUR["replaced"], arrowhead="vee", penwidth="1.5", tooltip="replaced by"
        )
        a.update(constraint="false") if opts.provenance == "free" else a.update(weight="0")
        return a
    colour = S.EDGE_COLOUR.get("summary" if e.kind == "summary" else e.status, S.EDGE_COLOUR[None])
    a["color"] = colour
    if e.status == S.REMOVED:
        a["style"] = "dashed"
    elif e.kind == "summary":
        a["style"] = "dotted"
    elif e.status == S.ADDED:
        a["penwidth"] = "1.5"
    label = e.label or (e.shape if opts.edge_labels else "")
    dtype = e.shape.split(" ", 1)[0] if e.kind == "data" and e.shape else ""
    typed = S.DTYPE_EDGE_COLOUR.get(dtype)
    if typed is not None:  # low-precision or integer data: colour and name the type
        if e.status in (None, S.UNCHANGED):
            a["color"] = typed
        label = label or dtype
    if label:
        a["label"] = label
        a["fontsize"] = "8"
        a["fontcolor"] = typed or "#636363"
    return a


def to_dot(graph: DisplayGraph, options: DotOptions | None = None, **kw) -> str:
    """DOT source for a display graph. Keyword arguments override fields of DotOptions."""
    opts = _options(options, kw)
    fast = opts.fast if opts.fast is not None else len(graph.nodes) > FAST_OVER
    gattrs = {
        "rankdir": opts.rankdir,
        "ordering": "out" if opts.ordering else "",
        "newrank": "true",
        "fontname": "Helvetica",
        "fontsize": "11",
        "nodesep": "0.2",
        "ranksep": "0.3",
        "bgcolor": "white",
        "id": opts.id_prefix + "graph",
        "class": "migx_graph",
    }
    if graph.title:
        gattrs.update(label=graph.title, labelloc="t")
    if fast:
        gattrs.update(FAST_ATTRS)
    if opts.dpi:
        gattrs["dpi"] = str(opts.dpi)
    out = [
        "digraph " + dot_quote(graph.title or "migx") + " {",
        "graph " + _attrs(gattrs) + ";",
        'node [shape="box" style="rounded,filled" fontname="Helvetica" fontsize="10" height="0.3" margin="0.08,0.03"];',
        'edge [arrowsize="0.6" fontname="Helvetica"];',
    ]
    _emit_items(graph, opts, out)
    if opts.rank_hints:
        _emit_rank_hints(graph, out)
    for k, e in enumerate(graph.edges):
        if e.kind == "replaced" and opts.provenance == "off":
            continue
        out.append(f"{dot_quote(e.src)} -> {dot_quote(e.dst)} {_attrs(edge_attrs(e, k, opts))};")
    out.append("}")
    return "\n".join(out) + "\n"


def _emit_items(graph: DisplayGraph, opts: DotOptions, out: list[str]) -> None:
    # Clusters must be one contiguous block in DOT; each is opened where its first node comes,
    # so declaration order (which dot uses for initial placement) stays the display order.
    children: dict[str, list] = {"": []}
    seen: set[str] = set()
    for n in graph.nodes:
        parent = ""
        for g in n.group:
            if g not in seen:
                seen.add(g)
                children[parent].append(("group", g))
                children[g] = []
            parent = g
        children[parent].append(("node", n))

    def emit(key: str, indent: str) -> None:
        for kind, item in children[key]:
            if kind == "node":
                out.append(f"{indent}{dot_quote(item.name)} {_attrs(_node_attrs(item, opts))};")
                continue
            grp = graph.groups.get(item)
            out.append(f"{indent}subgraph {dot_quote(item)} {{")
            if grp is not None:
                cs = S.CATEGORY_STYLE.get(grp.category, S.CATEGORY_STYLE[S.OTHER])
                border = S.STATUS_STYLE[grp.status].border if grp.status in S.STATUS_STYLE else cs.border
                style = "rounded,dashed" if grp.status == S.REMOVED else "rounded"
                cls = f"migx_cluster cat_{grp.category}" + (f" st_{grp.status}" if grp.status else "")
                label = grp.label
                if grp.owner is not None:
                    cls += f" owner_{grp.owner}"
                    label = f"⊟ {label}" if opts.cluster_controls else label
                attrs = {
                    "label": label,
                    "id": opts.id_prefix + item,
                    "class": cls,
                    "style": style,
                    "color": border,
                    "fontsize": "9",
                    "fontcolor": "#525252",
                    "labeljust": "l",
                }
                out.append(f"{indent}  graph {_attrs(attrs)};")
            emit(item, indent + "  ")
            out.append(f"{indent}}}")

    emit("", "")


def _emit_rank_hints(graph: DisplayGraph, out: list[str]) -> None:
    top = [n.name for n in graph.nodes if not n.group and n.category == S.PARAM]
    bottom = [n.name for n in graph.nodes if not n.group and n.category == S.RETURN]
    # Many params (a lowered program's buffers) pinned to one rank make very long edges.
    if 0 < len(top) <= 16:
        out.append("{rank=min; " + " ".join(dot_quote(n) for n in top) + ";}")
    if bottom:
        out.append("{rank=max; " + " ".join(dot_quote(n) for n in bottom) + ";}")


# ---- rendering -----------------------------------------------------------------------------------
class InlineSvg(str):
    """An SVG document as a string that notebooks display inline (as DOM elements, not an <img>),
    so nodes can be found by id and class."""

    def _repr_html_(self) -> str:
        return str(self)


def pipe(dot: str, fmt: str) -> bytes:
    """Run dot on DOT source; a missing executable or a dot failure becomes a RenderError."""
    import graphviz  # lazy: the display model and DOT text need no graphviz

    try:
        return graphviz.pipe("dot", fmt, dot.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound as e:
        raise GraphvizNotFoundError(
            f"cannot render {fmt}: the Graphviz `dot` executable was not found on PATH; {INSTALL_HINT}"
        ) from e
    except graphviz.CalledProcessError as e:
        err = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise RenderError(f"graphviz dot failed to render {fmt}: {' | '.join(err[-3:]) or e}") from e


def _options(options: DotOptions | None, kw: dict) -> DotOptions:
    opts = options or DotOptions()
    return dataclasses.replace(opts, **kw) if kw else opts


def _render(graph: DisplayGraph | str, opts: DotOptions, fmt: str) -> bytes:
    if isinstance(graph, str):
        return pipe(graph, fmt)
    try:
        return pipe(to_dot(graph, opts), fmt)
    except GraphvizNotFoundError:
        raise
    except RenderError as first:
        for retry in RETRIES:
            try:
                return pipe(to_dot(graph, dataclasses.replace(opts, **retry)), fmt)
            except RenderError:
                continue
        raise first from None


def render_svg(graph: DisplayGraph | str, options: DotOptions | None = None, **kw) -> InlineSvg:
    """SVG markup, without the XML prolog and doctype, ready to inline into HTML."""
    svg = _render(graph, _options(options, kw), "svg").decode("utf-8")
    start = svg.find("<svg")
    return InlineSvg(svg[start:] if start >= 0 else svg)


def render_png(graph: DisplayGraph | str, options: DotOptions | None = None, *, dpi: int = 96, **kw) -> bytes:
    return _render(graph, _options(options, {"dpi": dpi, **kw}), "png")


def write_graph(graph: DisplayGraph | str, path: str, options: DotOptions | None = None, **kw) -> str:
    """Write .svg, .png or .dot (.gv) according to the file extension; returns the path."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext in ("dot", "gv"):
        data = (graph if isinstance(graph, str) else to_dot(graph, _options(options, kw))).encode("utf-8")
    elif ext == "svg":
        data = render_svg(graph, options, **kw).encode("utf-8")
    elif ext == "png":
        data = render_png(graph, options, **kw)
    else:
        raise RenderError(f"cannot write {path!r}: unknown format {ext!r}; use .svg, .png or .dot")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path
