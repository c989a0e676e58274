"""The report's graph diffs: each changed pass drawn once with fused nodes collapsed and, where it
differs, once with them expanded into clusters (the page swaps the two on expand / collapse; it
has no kernel to redraw), with the change split into regions the page steps through; and the
packing that keeps a big model's report small: per pass, one deflate-compressed, base64 blob that
the browser inflates (DecompressionStream) only when that pass is opened."""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .. import pass_changes
from ..regions import Region, first_view
from ..render import DotOptions, diff_graph, render_svg, text_diff
from ..render.model import AUTO_EXPAND_MAX, DisplayGraph
from ..render.scoped import region_view

if TYPE_CHECKING:  # pragma: no cover
    from migx_explore.compiler.pass_infra import PassRecord

    from ..session import Session

# Graphviz writes a comment per node and edge, indents every element and titles every edge
# ("i12&#45;&gt;i13", shown as a tooltip that tells a reader nothing); none is needed to draw.
_COMMENT = re.compile(r"<!--.*?-->\s*", re.S)
_INDENT = re.compile(r">\s+<")
_EDGE_TITLE = re.compile(r'(<g id="[^"]*" class="edge[^"]*">)<title>[^<]*</title>')


def compact_svg(svg: str) -> str:
    return _EDGE_TITLE.sub(r"\1", _INDENT.sub("><", _COMMENT.sub("", svg)))


# Scope clusters cost dot layout time; past this many nodes a drawing goes without them (the
# explorer's Diff view draws the same way: widgets/content.py).
SCOPE_GROUPS_MAX_NODES = 250


# The explorer draws a region alone (LEGIBLE_NODES fit a pane there); the report has one drawing
# of the whole pass, where the same ids sit further apart, so a stop holds at most this many.
STOP_IDS = 12


def region_pieces(regions: list[Region], max_ids: int = STOP_IDS) -> list[dict[str, Any]]:
    """The pass's change regions (migx_explore.regions, the explorer's) to step through: a region
    too big to read in one view (lowering's whole program) is visited in program-order parts."""
    out = []
    for k, r in enumerate(regions):
        parts = [r.ids[j : j + max_ids] for j in range(0, len(r.ids), max_ids)]
        for j, ids in enumerate(parts):
            label = r.describe(k, len(regions)) + f" · {r.size} instruction{'s' if r.size != 1 else ''}"
            part = f" (part {j + 1} of {len(parts)})" if len(parts) > 1 else ""
            out.append({"ids": list(ids), "label": label + part})
    return out


def aliases(graph: DisplayGraph, wanted: set[int]) -> dict[str, str]:
    """Instruction id -> the node that shows it, for the `wanted` ids (those the page navigates
    to) not drawn as their own `i<id>` node: members of a collapsed fused node or of a "… N more"
    summary."""
    own = {n.instr_id for n in graph.nodes if n.instr_id is not None}
    out: dict[str, str] = {}
    for n in graph.nodes:
        for m in n.members:
            if m in wanted and m not in own:
                out.setdefault(str(m), n.name)
    return out


def pass_graph(
    before: Any,
    after: Any,
    rec: PassRecord,
    scopes: Mapping[int, str] | None = None,
    wanted: set[int] = frozenset(),
    both: bool = True,
    budget: int | None = None,
) -> dict[str, Any]:
    """Collapsed and expanded drawings of one pass's merged diff (both: else only the one shown
    first), grouped by the model's scopes where small enough, each with the map from instruction
    ids to the nodes that show them. budget: the drawing's node cap (None: diff_graph's, the
    explorer's)."""
    cap = {} if budget is None else {"budget": budget}
    opts = DotOptions(cluster_controls=True)
    title = f"{rec.path}: {rec.diff.summary() if rec.diff else ''}"
    total = max(before.total_instructions(), after.total_instructions())
    # The explorer's "auto": small programs open every cluster, big ones start collapsed.
    out: dict[str, Any] = {"default": "expanded" if total <= AUTO_EXPAND_MAX else "collapsed"}
    keys = ("collapsed", "expanded") if both else (out["default"],)
    for key in keys:
        # over the budget, the model's scope groups fold first (an unrolled LSTM: its steps)
        g = diff_graph(before, after, rec.diff, expand=key == "expanded", title=title, scopes=scopes, **cap)
        if key == "expanded" and not any(grp.owner is not None for grp in g.groups.values()):
            out["default"] = "collapsed"  # no fused module to open: the collapsed drawing is the whole story
            if "collapsed" in out:
                break
            key, g = "collapsed", diff_graph(before, after, rec.diff, expand=False, title=title, scopes=scopes, **cap)
        if scopes and len(g.nodes) <= SCOPE_GROUPS_MAX_NODES:
            g = region_view(g, scopes, rec.diff)
        out[key] = {"svg": compact_svg(str(render_svg(g, opts))), "alias": aliases(g, wanted), "nodes": len(g.nodes)}
    return out


def pack(payload: dict[str, Any]) -> str:
    """JSON, deflated (zlib stream: DecompressionStream('deflate')), base64."""
    raw = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def unpack(blob: str) -> dict[str, Any]:
    """The inverse of pack (tests, and anyone reading a report from Python)."""
    return json.loads(zlib.decompress(base64.b64decode(blob)).decode("utf-8"))


# Instances kept per rewrite row for stepping through in the graph (a row can have hundreds).
MAX_INSTANCES = 200
INSTANCE_ROWS = 12  # rows whose first instance the report draws (the explorer draws any on a click)


def instance_pieces(before: Any, after: Any, rec: PassRecord, rows: list[Any], scopes: dict[int, str]) -> list:
    """The first instance of each rewrite row drawn as the explorer's Rewrites view draws it, with
    its place: {svg, label ("instance 1 of 69 · /model.2/m.0 · all 69 alike"), where}."""
    from ..instances import InstanceView
    from ..widgets.content import instance_svg

    view = InstanceView(rows, before, after, scopes)
    out = []
    for k in range(min(len(rows), INSTANCE_ROWS)):
        view.pick(k, 0)
        places = view.places()
        alike = places.alike()
        svg = compact_svg(instance_svg(before, after, rec.diff, view.current, prefix=f"ri{k}_"))
        label = view.describe() + (f" · {alike}" if alike else "")
        out.append({"svg": svg, "label": label, "where": places.where()})
    return out


SCOPE_ROWS = 120  # scope tree rows a pass stores at most (top scopes first)


def scope_tree_rows(rows: list[Any], scopes: dict[int, str], after_scopes: Mapping[int, str]) -> list:
    """The explorer's scope tree of one pass, every level: [scope, depth, has children,
    instances in it, the scope's id in the drawings] per row (the page folds and unfolds it, and
    finds the row of a group clicked in a drawing by its id); [] for a model without scopes."""
    from ..instances import scope_badges
    from ..render.scoped import scope_id
    from ..scopes import tree_rows

    names = list(dict.fromkeys(s for s in after_scopes.values() if s))
    if not names:
        return []
    every = {"/".join(p.split("/")[: k + 1]) for p in names for k in range(len(p.split("/")))}
    badges = scope_badges(rows, scopes)
    return [[*r, scope_id(r[0])] for r in tree_rows(names, every, badges, SCOPE_ROWS)]


def pass_blobs(
    session: Session,
    *,
    rewrites: dict[int, list[Any]] | None = None,
    graphs: bool = True,
    changed_only: bool = True,
    budget: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    on_error: Callable[[PassRecord, Exception], None] | None = None,
    graph_budget: int | None = None,
    on_drawn: Callable[[PassRecord, str], None] | None = None,
) -> dict[int, str]:
    """Record index -> packed {text, graph, regions, rewrite_ids} for every pass that changed the
    IR; rewrite_ids[row][instance] lists the ids of one instance of that rewrite row. `budget`:
    the most bytes the blobs may take together (see fit_budget); `graph_budget`: each drawing's
    node cap (pass_graph); `on_drawn(rec, svg)` gets the drawing a pass opens on (trace --svg
    writes it as the pass's file rather than drawing the pass again)."""
    trace = session.trace
    payloads: dict[int, dict[str, Any]] = {}
    todo = [r for r in trace.records if r.after is not None and (r.changed or not changed_only)]
    for k, rec in enumerate(todo):
        if progress:
            progress(k, len(todo), rec.path)
        before, after = trace.snapshots(rec)
        payload: dict[str, Any] = {
            "text": text_diff(before, after),
            "rewrite_ids": [
                [list(inst.ids) for inst in row.instances[:MAX_INSTANCES]]
                for row in (rewrites or {}).get(rec.index, [])
            ],
        }
        if graphs:
            try:
                sb, sa = pass_changes.scopes(session, rec.index)
                rows = (rewrites or {}).get(rec.index, [])
                payload["instances"] = instance_pieces(before, after, rec, rows, {**sb, **sa})
                payload["scopes"] = scope_tree_rows(rows, {**sb, **sa}, sa)
                found = pass_changes.regions(session, rec.index)
                payload["regions"] = region_pieces(found)
                payload["first_view"] = first_view(found)
                wanted = {i for r in payload["regions"] for i in r["ids"]}
                wanted |= {i for row in payload["rewrite_ids"] for inst in row for i in inst}
                # a nested pass's change is mostly its parent's: one variant keeps the file small
                payload["graph"] = graph = pass_graph(
                    before, after, rec, {**sb, **sa}, wanted, both=rec.depth == 0, budget=graph_budget
                )
                if on_drawn:
                    on_drawn(rec, graph[graph["default"]]["svg"])
            except Exception as e:  # noqa: BLE001 - one undrawable pass must not lose the whole report
                payload["graph_error"] = f"{type(e).__name__}: {e}"
                if on_error:
                    on_error(rec, e)
        payloads[rec.index] = payload
    if progress:
        progress(len(todo), len(todo), "drawn")
    return fit_budget(payloads, budget)


def fit_budget(payloads: dict[int, dict[str, Any]], budget: int | None) -> dict[int, str]:
    """Pack every payload; past `budget` bytes, drop the second drawing (the variant a pass does
    not open on) of the biggest passes first until the blobs fit. The page then says that this
    pass has no other drawing stored; everything else stays."""
    blobs = {i: pack(p) for i, p in payloads.items()}
    total = sum(map(len, blobs.values()))
    if budget is None or total <= budget:
        return blobs
    for i in sorted(blobs, key=lambda i: -len(blobs[i])):
        g = payloads[i].get("graph") or {}
        other = "expanded" if g.get("default") == "collapsed" else "collapsed"
        if other not in g:
            continue
        del g[other]
        g["trimmed"] = other
        new = pack(payloads[i])
        total += len(new) - len(blobs[i])
        blobs[i] = new
        if total <= budget:
            break
    return blobs


__all__ = [
    "aliases",
    "compact_svg",
    "fit_budget",
    "pack",
    "pass_blobs",
    "pass_graph",
    "region_pieces",
    "scope_tree_rows",
    "unpack",
]
