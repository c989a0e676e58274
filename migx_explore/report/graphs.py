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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..render import DotOptions, diff_graph, render_svg, text_diff
from ..render.model import AUTO_EXPAND_MAX, DisplayGraph
from ..render.scale import changed_names

if TYPE_CHECKING:  # pragma: no cover
    from ..compiler.passes import PassRecord, Trace

# Graphviz writes a comment per node and edge and indents every element; neither is needed to draw.
_COMMENT = re.compile(r"<!--.*?-->\s*", re.S)
_INDENT = re.compile(r">\s+<")


def compact_svg(svg: str) -> str:
    return _INDENT.sub("><", _COMMENT.sub("", svg))


# A region is shown at reading zoom; a connected change bigger than this (a fusion pass touches
# the whole model) is stepped through in program-order pieces of this size.
REGION_MAX_NODES = 12


def regions(graph: DisplayGraph, max_nodes: int = REGION_MAX_NODES) -> list[dict[str, Any]]:
    """The changed nodes as connected regions (data and replaced-by edges between changed nodes),
    in program order, big ones cut into pieces of at most `max_nodes`, each with a short label:
    where to look, one readable place at a time."""
    changed = changed_names(graph)
    parent = {n: n for n in changed}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in graph.edges:
        if e.src in changed and e.dst in changed:
            parent[find(e.src)] = find(e.dst)
    by_root: dict[str, list[Any]] = {}
    for n in graph.nodes:  # graph order is program order
        if n.name in changed:
            by_root.setdefault(find(n.name), []).append(n)
    pieces = [nodes[k:k + max_nodes] for nodes in by_root.values() for k in range(0, len(nodes), max_nodes)]
    out = []
    for nodes in pieces:
        status = {s: sum(1 for n in nodes if n.status == s) for s in ("added", "removed", "changed")}
        ops = list(dict.fromkeys(n.op for n in nodes))
        label = ", ".join(f"{k} {v}" for k, v in status.items() if v) + ": " + ", ".join(ops[:4])
        out.append({"nodes": [n.name for n in nodes], "label": label + (" …" if len(ops) > 4 else "")})
    return out


def pass_graph(before: Any, after: Any, rec: PassRecord) -> dict[str, Any]:
    """Collapsed and expanded drawings of one pass's merged diff, with their change regions."""
    opts = DotOptions(cluster_controls=True)
    title = f"{rec.path}: {rec.diff.summary() if rec.diff else ''}"
    total = max(before.total_instructions(), after.total_instructions())
    # The explorer's "auto": small programs open every cluster, big ones start collapsed.
    out: dict[str, Any] = {"default": "expanded" if total <= AUTO_EXPAND_MAX else "collapsed"}
    for key, expand in (("collapsed", False), ("expanded", True)):
        g = diff_graph(before, after, rec.diff, expand=expand, title=title)
        if key == "expanded" and not g.groups:
            out["default"] = "collapsed"
            break  # nothing to open: the collapsed drawing is the whole story
        out[key] = {"svg": compact_svg(str(render_svg(g, opts))), "regions": regions(g), "nodes": len(g.nodes)}
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


def pass_blobs(trace: Trace, *, rewrites: dict[int, list[Any]] | None = None, graphs: bool = True,
               changed_only: bool = True,
               progress: Callable[[int, int, str], None] | None = None,
               on_error: Callable[[PassRecord, Exception], None] | None = None) -> dict[int, str]:
    """Record index -> packed {text, graph, rewrite_ids} for every pass that changed the IR;
    rewrite_ids[row][instance] lists the ids of one instance of that rewrite row."""
    todo = [r for r in trace.records if r.after is not None and (r.changed or not changed_only)]
    blobs = {}
    for k, rec in enumerate(todo):
        if progress:
            progress(k, len(todo), rec.path)
        before, after = trace.snapshots(rec)
        payload: dict[str, Any] = {"text": text_diff(before, after), "rewrite_ids": [
            [list(inst.ids) for inst in row.instances[:MAX_INSTANCES]] for row in (rewrites or {}).get(rec.index, [])]}
        if graphs:
            try:
                payload["graph"] = pass_graph(before, after, rec)
            except Exception as e:  # noqa: BLE001 - one undrawable pass must not lose the whole report
                payload["graph_error"] = f"{type(e).__name__}: {e}"
                if on_error:
                    on_error(rec, e)
        blobs[rec.index] = pack(payload)
    if progress:
        progress(len(todo), len(todo), "drawn")
    return blobs


__all__ = ["compact_svg", "pack", "pass_blobs", "pass_graph", "regions", "unpack"]
