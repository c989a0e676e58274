"""Fitting a drawing to a node budget by the model's scope hierarchy.

A pass that touches every step of an unrolled LSTM changes ~200 instructions all over a
5,000-instruction graph: cut to a budget in program order, that still drew ~1,100 nodes (the
changed ones, one summary between each two, and a copy of each shared weight beside every user).
Here the graph starts as one node per top-level scope and opens scope groups, those holding the
most changes first, while what would be drawn (group nodes, single nodes and the copies
`split_hubs` adds) stays within the budget: an unrolled LSTM shows its layers, directions, then
steps, each a node with its change badge, as far as the budget goes.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from migx_explore.compiler.snapshot import SnapshotDiff

from ..scopes import common_scope, split_scope
from . import style as S
from .model import DisplayGraph, DisplayNode
from .scale import CHANGED_STATUSES, HUB_FANOUT, hub_copies, reconnect
from .scoped import GROUP_NODE_PREFIX, badge, node_scope_of, scope_id

Key = tuple[str, ...]

# dot lays out this many nodes in well under a second even with edges across the whole drawing,
# so a drawing fitted to such a budget draws a shared input once (scale.split_hubs' copies beside
# each of 32 steps would take the room of the steps themselves).
LONG_EDGES_FINE = 150


def _unit_scopes(graph: DisplayGraph, scopes: Mapping[int, str]) -> dict[str, Key]:
    """Node name -> scope parts; the nodes of one fused cluster share their common scope (a
    cluster is drawn or folded whole)."""
    by_unit: dict[str, list[str]] = {}
    for n in graph.nodes:
        by_unit.setdefault(n.group[0] if n.group else n.name, []).append(node_scope_of(n, scopes))
    unit_scope = {u: split_scope(common_scope(s)) for u, s in by_unit.items()}
    return {n.name: unit_scope[n.group[0] if n.group else n.name] for n in graph.nodes}


def _drawn_as(parts: Key, opened: set[Key]) -> Key | None:
    """The closed scope group a node with scope `parts` folds into (None: drawn itself)."""
    for k in range(len(parts)):
        if parts[:k] in opened and parts[: k + 1] not in opened:
            return parts[: k + 1]
    return None


def fit_by_scopes(
    graph: DisplayGraph, scopes: Mapping[int, str], d: SnapshotDiff | None, budget: int, hubs: int | None = HUB_FANOUT
) -> DisplayGraph:
    """`graph` with scope groups folded into one node each, opened (most changes first) while
    everything drawn fits `budget`; unchanged when it fits already or has no scopes."""
    if len(graph.nodes) + (hub_copies(graph, hubs) if hubs else 0) <= budget:
        return graph
    node_scope = _unit_scopes(graph, scopes)
    if not any(node_scope.values()):
        return graph
    changed = {n.name for n in graph.nodes if n.status in CHANGED_STATUSES}
    # per scope prefix: its nodes, changed nodes, and its direct children (groups and nodes)
    size: dict[Key, int] = {}
    n_changed: dict[Key, int] = {}
    children: dict[Key, set[Key | str]] = {}
    for n in graph.nodes:
        parts = node_scope[n.name]
        for k in range(len(parts) + 1):
            key = parts[:k]
            size[key] = size.get(key, 0) + 1
            n_changed[key] = n_changed.get(key, 0) + (n.name in changed)
            children.setdefault(key, set()).add(parts[: k + 1] if k < len(parts) else n.name)
    opened: set[Key] = {()}
    drawn = len(children[()])
    heap = [(-n_changed[c], -size[c], c) for c in children[()] if isinstance(c, tuple)]
    heapq.heapify(heap)
    while heap:
        _, _, key = heapq.heappop(heap)
        grown = drawn - 1 + len(children[key])
        if grown > budget:
            continue  # too big to open; a smaller group may still fit
        opened.add(key)
        drawn = grown
        for c in children[key]:
            if isinstance(c, tuple):
                heapq.heappush(heap, (-n_changed[c], -size[c], c))
    out = _fold(graph, node_scope, opened, d)
    batch = 1
    while hubs and len(out.nodes) + hub_copies(out, hubs) > budget and len(opened) > 1:
        # the copies of shared inputs beside each user come on top: close the groups opened with
        # the fewest changes until they fit too, twice as many each round (a fold costs a pass
        # over the graph; one group a round made an unrolled LSTM's drawings fold ~15 times each)
        order = sorted((k for k in opened if k), key=lambda k: (n_changed[k], -len(k), size[k]))
        for last in order[:batch]:
            opened = {k for k in opened if k[: len(last)] != last}
        batch *= 2
        out = _fold(graph, node_scope, opened, d)
    return out


def _fold(graph: DisplayGraph, node_scope: Mapping[str, Key], opened: set[Key], d: SnapshotDiff | None) -> DisplayGraph:
    nodes: list[DisplayNode] = []
    rep: dict[str, str] = {}
    members: dict[Key, list[DisplayNode]] = {}
    slot: dict[Key, int] = {}
    for n in graph.nodes:
        key = _drawn_as(node_scope[n.name], opened)
        if key is None:
            nodes.append(n)
            continue
        if key not in members:
            members[key], slot[key] = [], len(nodes)
            nodes.append(n)  # placeholder, replaced below
        members[key].append(n)
        rep[n.name] = _group_name(key)
    for key, run in members.items():
        nodes[slot[key]] = _scope_node(key, run, d)
    return reconnect(graph, nodes, rep)


def _group_name(key: Key) -> str:
    return GROUP_NODE_PREFIX + scope_id("/".join(key))


def _scope_node(key: Key, run: list[DisplayNode], d: SnapshotDiff | None) -> DisplayNode:
    ids = tuple(m for n in run for m in (n.members or ((n.instr_id,) if n.instr_id is not None else ())))
    a, r, c = badge(ids, d) if d is not None else (0, 0, 0)
    n_changed = sum(1 for n in run if n.status in CHANGED_STATUSES)
    scope = "/".join(key)
    lines = [f"/{scope}", f"{len(ids)} ops" + (f"  +{a} −{r} ~{c}" if a or r or c else "")]
    ops = [n.op for n in run if n.kind != "summary" and n.category not in (S.LITERAL, S.PARAM)]
    if ops:  # what is inside, so a search finds a folded group by op name
        lines.append(S.count_summary(ops))
    attrs = {"scope": scope, "box": "/".join(key[:-1])}  # region_view draws it in its parent's box
    return DisplayNode(
        _group_name(key),
        "\n".join(lines),
        "scope",
        S.SUMMARY,
        (),
        attrs,
        None,
        run[0].module,
        "",
        S.CHANGED if (a or r or c or n_changed) else None,
        "summary",
        ids,
        f"/{scope}: {len(ids)} instructions, folded (+{a} −{r} ~{c})",
    )


__all__ = ["LONG_EDGES_FINE", "fit_by_scopes"]
