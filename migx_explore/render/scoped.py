"""A display graph grouped by the model's own scopes, cut to one change region.

`region_view` takes a merged diff graph (render.diff), the scope of each instruction and the ids
of one change region, and returns the drawing the explorer opens a pass on:
- every node sits in nested clusters named by its scope parts (`model.8` > `m.0` > `cv1`), as
  Model Explorer groups a graph by layer namespace;
- changed nodes outside the region keep a pale "elsewhere" colour (context, not the focus);
- each "… N more" summary stands for a collapsed group: it names the scope its members share
  and carries the change badge (+added −removed ~changed) of what it hides, coloured by change.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping

from migx_explore.compiler.snapshot import SnapshotDiff

from ..scopes import common_scope
from . import style as S
from .model import DisplayGraph, DisplayGroup, DisplayNode
from .scale import reconnect

SCOPE_GROUP_PREFIX = "cluster_scope_"
GROUP_NODE_PREFIX = "scope_"  # a collapsed scope group drawn as one node
MAX_SCOPE_DEPTH = 4  # deeper scopes are drawn at this depth (a few boxes say enough)


def _with(obj, **changes):
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__, **changes)
    return new


def node_scope_of(n: DisplayNode, scopes: Mapping[int, str]) -> str:
    if n.instr_id is not None and n.instr_id in scopes:
        return scopes[n.instr_id]
    members = [scopes[m] for m in n.members if m in scopes]
    return common_scope(members) if members else ""


def badge(ids: Collection[int], d: SnapshotDiff) -> tuple[int, int, int]:
    """(+added, −removed, ~changed) among `ids`."""
    ids = set(ids)
    return len(ids & d.added), len(ids & d.removed), len(ids & d.changed)


def region_view(
    graph: DisplayGraph, scopes: Mapping[int, str], d: SnapshotDiff, region: Collection[int] = ()
) -> DisplayGraph:
    """`graph` grouped by scope, with changes outside `region` toned down and summaries labelled
    with their scope and change badge (see the module docstring)."""
    region = set(region)
    nodes, groups = [], dict(graph.groups)
    for n in graph.nodes:
        ids = {n.instr_id} if n.instr_id is not None else set(n.members)
        if region and n.status in (S.ADDED, S.REMOVED, S.CHANGED) and not (ids & region) and n.kind != "summary":
            n = _with(n, status=S.ELSEWHERE)
        if n.kind == "summary" and n.members and n.name.startswith("more_"):  # not a module's own node
            n = _summary(n, scopes, d)
        if n.name.startswith(GROUP_NODE_PREFIX):  # a collapsed group: drawn in its parent's box
            scope = n.attrs.get("box", "")
        else:
            scope = node_scope_of(n, scopes)
        path = _scope_groups(scope, groups)
        if path:
            n = _with(n, group=path + tuple(n.group))
            for g in n.group[len(path) :]:  # a fused cluster inside a scope: re-parent it
                grp = groups.get(g)
                if grp is not None and not grp.parent[: len(path)] == path:
                    groups[g] = _with(grp, parent=path + tuple(grp.parent))
        nodes.append(n)
    return DisplayGraph(nodes, graph.edges, groups, graph.title)


def collapse_scopes(
    graph: DisplayGraph,
    scopes: Mapping[int, str],
    d: SnapshotDiff,
    region: Collection[int],
    hops: int = 1,
    opened: Collection[str] = (),
) -> DisplayGraph:
    """Model Explorer's collapsed layers: keep the region and `hops` of context around it; every
    other node goes into one node per scope group beside the region's path (the siblings of each
    scope that holds the region, e.g. `layer.3` next to `layer.0` when the region is in
    `layer.0/attention`), labelled with its op count and change badge. A scope in `opened` (the
    user clicked its group) is drawn as its child groups, and its own instructions as nodes."""
    from .scale import distances

    ids = set(region)
    seeds = {n.name for n in graph.nodes if (n.instr_id in ids) or ids & set(n.members)}
    keep = set(distances(graph, seeds, hops)) if seeds else set()
    # clusters of fused ops are kept whole (their insides are further than `hops` from the owner)
    kept_groups = {g for n in graph.nodes if n.name in keep for g in n.group}
    keep |= {n.name for n in graph.nodes if set(n.group) & kept_groups}
    anchor = [p for p in common_scope(scopes[i] for i in ids if scopes.get(i)).split("/") if p]
    nodes: list[DisplayNode] = []
    rep: dict[str, str] = {}
    members: dict[str, tuple[str, list[DisplayNode]]] = {}
    for n in graph.nodes:
        if n.name in keep:
            nodes.append(n)
            continue
        key = _group_key(node_scope_of(n, scopes), anchor, opened)
        if key is None:  # in an opened scope, not in a group below it: drawn as itself
            nodes.append(n)
            continue
        name = GROUP_NODE_PREFIX + scope_id(key or "")
        if name not in members:
            members[name] = (key, [])
            nodes.append(DisplayNode(name, "", "scope", S.SUMMARY, kind="summary"))  # filled below
        members[name][1].append(n)
        rep[n.name] = name
    kept_scopes = {node_scope_of(n, scopes) for n in nodes if n.name not in members}
    for k, n in enumerate(nodes):
        if n.name in members:
            key = members[n.name][0]
            rest = any(s == key or s.startswith(key + "/") for s in kept_scopes)
            nodes[k] = _group_node(n.name, key, members[n.name][1], d, rest)
    return reconnect(graph, nodes, rep)


def _group_key(scope: str, anchor: list[str], opened: Collection[str] = ()) -> str | None:
    """The group a node of `scope` is folded into: one level below what it shares with the
    region's scope, or below the deepest opened scope holding it; None when the node sits
    directly in an opened scope (it is drawn)."""
    parts = [p for p in scope.split("/") if p]
    k = 0
    while k < min(len(parts), len(anchor)) and parts[k] == anchor[k]:
        k += 1
    while k < len(parts) and "/".join(parts[: k + 1]) in opened:
        k += 1
    if k >= len(parts) and parts and "/".join(parts) in opened:
        return None
    return "/".join(parts[: k + 1])


def _group_node(name: str, scope: str, run: list[DisplayNode], d: SnapshotDiff, rest: bool) -> DisplayNode:
    """One collapsed scope group; `rest`: the group also holds drawn nodes (the region's own
    scope), so this node is "the rest of" it and sits inside its box."""
    ids = [m for n in run for m in (n.members or ((n.instr_id,) if n.instr_id is not None else ()))]
    a, r, c = badge(ids, d)
    label = (f"… rest of /{scope}" if rest else f"/{scope}") if scope else "(top level)"
    lines = [label, f"{len(ids)} ops" + (f"  +{a} −{r} ~{c}" if a or r or c else "")]
    ops = [n.op for n in run if n.kind != "summary" and n.category not in (S.LITERAL, S.PARAM)]
    if ops:  # what is inside, so the view's search finds a collapsed group by op name
        lines.append(S.count_summary(ops))
    attrs = {"scope": scope, "box": scope if rest else scope.rpartition("/")[0]}
    return DisplayNode(
        name,
        "\n".join(lines),
        "scope",
        S.SUMMARY,
        (),
        attrs,
        None,
        run[0].module,
        "",
        S.ELSEWHERE if (a or r or c) else None,
        "summary",
        tuple(ids),
        f"/{scope}: {len(ids)} instructions, collapsed (+{a} −{r} ~{c}); click to open it",
    )


def _scope_groups(scope: str, groups: dict[str, DisplayGroup]) -> tuple[str, ...]:
    parts = [p for p in scope.split("/") if p][:MAX_SCOPE_DEPTH]
    path: list[str] = []
    for k, part in enumerate(parts):
        name = SCOPE_GROUP_PREFIX + scope_id("/".join(parts[: k + 1]))
        if name not in groups:
            groups[name] = DisplayGroup(name, part, tuple(path), S.OTHER, module="main")
        path.append(name)
    return tuple(path)


def safe_part(part: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in part)


ROOT_ID = "_root"  # the group of what lies in no scope: no scope's id starts with "_"


def scope_id(scope: str) -> str:
    """The graphviz-safe id of a scope path, shared by no other scope: its parts joined by "_"
    when they are letters and digits only (so "_" can only have been "/"), else the same with a
    short hash of the path after it ("model.2" and "model_2" would otherwise be one group)."""
    parts = [p for p in scope.split("/") if p]
    if not parts:
        return ROOT_ID
    readable = "_".join(safe_part(p) for p in parts)
    if all(p.isalnum() for p in parts):
        return readable
    return f"{readable}_{hashlib.blake2s('/'.join(parts).encode(), digest_size=3).hexdigest()}"


def _summary(n: DisplayNode, scopes: Mapping[int, str], d: SnapshotDiff) -> DisplayNode:
    scope = node_scope_of(n, scopes)
    a, r, c = badge(n.members, d)
    where = f"/{scope}" if scope else "elsewhere"
    lines = [f"{len(n.members)} ops in {where}"]
    if a or r or c:
        lines.append(f"+{a} −{r} ~{c}")
    rest = n.label.split("\n", 1)[1] if "\n" in n.label else ""
    if rest:
        lines.append(rest)
    status = S.ELSEWHERE if (a or r or c) else n.status
    return _with(
        n,
        label="\n".join(lines),
        status=status,
        tooltip=f"{len(n.members)} instructions of {where} not drawn (+{a} −{r} ~{c})",
    )


_CHANGED_NODE = re.compile(
    r'<g id="[^"]*" class="node migx_node[^"]*\bst_(?:added|removed|changed)\b[^"]*">(.*?)</g>', re.S
)
_SHAPE = re.compile(r'(?:points|d)="([^"]*)"')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def changed_box(svg: str) -> tuple[float, float]:
    """Width and height (drawing units) of the box around the changed nodes of a rendered SVG
    (what the explorer's view zooms to); (0, 0) when none is drawn."""
    xs: list[float] = []
    ys: list[float] = []
    for m in _CHANGED_NODE.finditer(svg):
        for shape in _SHAPE.findall(m.group(1)):
            v = [float(t) for t in _NUMBER.findall(shape)]
            xs += v[0::2]
            ys += v[1::2]
    return (max(xs) - min(xs), max(ys) - min(ys)) if xs and ys else (0.0, 0.0)


__all__ = [
    "GROUP_NODE_PREFIX",
    "MAX_SCOPE_DEPTH",
    "ROOT_ID",
    "SCOPE_GROUP_PREFIX",
    "badge",
    "changed_box",
    "collapse_scopes",
    "region_view",
    "scope_id",
]
