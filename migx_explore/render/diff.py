"""Diff views of two snapshots: one merged graph, or before and after side by side.

Both display graphs are built with the same options, so an instruction has the same node name in
each; merging is then a matter of names. Node status comes from the SnapshotDiff (added green,
removed red dashed ghosts, changed amber, unchanged grey); a ghost sits right after the node it
followed in the old program, and links with a dashed red edge to whatever replaced it (the new
instructions whose `origin` names it, i.e. `SnapshotDiff.replaced_by`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Literal

from migx_explore.compiler.snapshot import ProgramSnapshot, SnapshotDiff, diff

from . import style as S
from .fit import LONG_EDGES_FINE, fit_by_scopes
from .model import AUTO_EXPAND_MAX, Clusters, DisplayEdge, DisplayGraph, DisplayGroup, DisplayNode, Expand, build_graph
from .scale import HUB_FANOUT, apply_budget, changed_names, distances, scale_graph, split_hubs, summarize

# Past this many nodes a diff is drawn as the changed region plus context ("auto" focus), with
# unchanged chains collapsed; a budget caps what is left.
AUTO_FOCUS_OVER = 120
DEFAULT_HOPS = 2
DEFAULT_BUDGET = 400
MAX_REPLACED_LINKS = 2  # dashed replaced-by links drawn per removed node

Focus = int | None | Literal["auto"]


def _with(obj, **changes):
    # dataclasses.replace re-runs __init__ and is the slowest part of merging big graphs.
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__, **changes)
    return new


def node_status(n: DisplayNode, d: SnapshotDiff) -> str:
    own = n.instr_id
    if own in d.added:
        return S.ADDED
    if own in d.removed:
        return S.REMOVED
    if own in d.changed:
        return S.CHANGED
    # A collapsed fused node is unchanged itself when only its submodule's body changed.
    if any(m in d.added or m in d.removed or m in d.changed for m in n.members):
        return S.CHANGED
    return S.UNCHANGED


def merge_graphs(before: DisplayGraph, after: DisplayGraph, d: SnapshotDiff, title: str = "") -> DisplayGraph:
    """One graph holding `after` plus ghosts of what `before` had, every node and edge with a status."""
    after_names = {n.name for n in after.nodes}
    before_by_name = before.by_name()
    ghosts: dict[str | None, list[DisplayNode]] = {}
    anchor: str | None = None
    for n in before.nodes:
        if n.name in after_names:
            anchor = n.name
        else:
            ghosts.setdefault(anchor, []).append(_with(n, status=S.REMOVED))
    nodes = list(ghosts.get(None, ()))
    for n in after.nodes:
        old = before_by_name.get(n.name)
        members = n.members if old is None else tuple(dict.fromkeys(n.members + old.members))
        m = _with(n, members=members)
        m.status = node_status(m, d)
        nodes.append(m)
        nodes.extend(ghosts.get(n.name, ()))
    groups = {k: dataclasses.replace(g) for k, g in before.groups.items() if k not in after.groups}
    groups.update({k: dataclasses.replace(g) for k, g in after.groups.items()})
    _set_group_status(groups, nodes, d)
    graph = DisplayGraph(nodes, _merge_edges(before.edges, after.edges), groups, title)
    graph.edges.extend(replaced_edges(graph, d))
    return graph


def _set_group_status(groups: dict[str, DisplayGroup], nodes: list[DisplayNode], d: SnapshotDiff) -> None:
    touched = {g for n in nodes if n.status in (S.ADDED, S.REMOVED, S.CHANGED) for g in n.group}
    for name, g in groups.items():
        if g.owner in d.added:
            g.status = S.ADDED
        elif g.owner in d.removed:
            g.status = S.REMOVED
        elif g.owner in d.changed or name in touched:
            g.status = S.CHANGED
        else:
            g.status = S.UNCHANGED


def _merge_edges(before: list[DisplayEdge], after: list[DisplayEdge]) -> list[DisplayEdge]:
    # Multisets: add(x, x) has two edges between the same nodes.
    old = Counter((e.src, e.dst) for e in before)
    new = Counter((e.src, e.dst) for e in after)
    out = []
    for e in after:
        key = (e.src, e.dst)
        status = S.UNCHANGED if old[key] > 0 else S.ADDED
        old[key] -= 1
        out.append(_with(e, status=status))
    for e in before:
        key = (e.src, e.dst)
        if new[key] > 0:
            new[key] -= 1
            continue
        out.append(_with(e, status=S.REMOVED))
    return out


def replaced_edges(graph: DisplayGraph, d: SnapshotDiff) -> list[DisplayEdge]:
    """Dashed edges from each removed node to the visible nodes that replaced it."""
    shown: dict[int, str] = {}
    for n in graph.nodes:
        if n.instr_id is not None:
            shown[n.instr_id] = n.name
    for n in graph.nodes:
        for m in n.members:
            shown.setdefault(m, n.name)
    by_name = graph.by_name()
    edges = []
    for old, news in sorted(d.replaced_by.items()):
        src = shown.get(old)
        if old not in d.removed or src is None:
            continue
        targets = list(dict.fromkeys(t for t in (shown.get(i) for i in news) if t is not None and t != src))
        # Linking to the add inside a fused cluster says more than linking to the cluster's
        # output node as well, so drop an owner when one of its inner nodes is a target.
        owners = {
            f"i{graph.groups[g].owner}"
            for t in targets
            for g in by_name[t].group
            if g in graph.groups and f"i{graph.groups[g].owner}" != t
        }
        targets = [t for t in targets if t not in owners]
        # An origin lists every matched instruction; when the replacement holds a node with the
        # ghost's own op (the add inside the fused add+relu), that is the link worth drawing.
        same_op = [t for t in targets if by_name[t].op == by_name[src].op]
        # More than a couple of arrows per ghost is clutter (and layout time) without insight.
        edges.extend(DisplayEdge(src, t, kind="replaced") for t in (same_op or targets)[:MAX_REPLACED_LINKS])
    return edges


def _options(
    before: ProgramSnapshot, after: ProgramSnapshot, d: SnapshotDiff | None, expand: Expand
) -> tuple[SnapshotDiff, Expand]:
    if d is None:
        d = diff(before, after)
    if expand == "auto" or isinstance(expand, Clusters):
        # Decide once for both sides so a node is a cluster in both or in neither.
        total = max(before.total_instructions(), after.total_instructions())
        expand = expand.resolved(total) if isinstance(expand, Clusters) else total <= AUTO_EXPAND_MAX
    return d, expand


def _title(title: str, d: SnapshotDiff) -> str:
    return title or d.summary()


def diff_graph(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    d: SnapshotDiff | None = None,
    *,
    module: str = "main",
    expand: Expand = "auto",
    focus: Focus = "auto",
    chains: bool | None = None,
    min_chain: int = 4,
    budget: int | None = DEFAULT_BUDGET,
    focus_ids: Collection[int] | None = None,
    show_ids: bool = False,
    literals: bool = True,
    title: str = "",
    scopes: Mapping[int, str] | None = None,
) -> DisplayGraph:
    """The merged diff view of two snapshots of one program.

    focus: hops of context kept around the changed nodes (the rest summarised), None for the
    whole graph, "auto" for DEFAULT_HOPS when the graph has more than AUTO_FOCUS_OVER nodes.
    focus_ids: centre on these instructions instead of on every change (e.g. one fused block of
    a pass that changed the whole model); implies focus.
    chains: collapse runs of unchanged nodes (None: when the graph is big). budget: node cap,
    counting every node drawn. scopes (instruction id -> model scope, both snapshots'): over the
    budget, scope groups fold into one node each first (render.fit), so an unrolled LSTM shows
    its steps rather than ~200 scattered nodes with summaries between.
    """
    d, expand = _options(before, after, d, expand)
    kw = dict(module=module, expand=expand, show_ids=show_ids, literals=literals)
    merged = merge_graphs(build_graph(before, **kw), build_graph(after, **kw), d, _title(title, d))
    _add_undrawn_module_changes(merged, before, after, d)
    big = len(merged.nodes) > AUTO_FOCUS_OVER
    seeds, hops = _focus(merged, focus, focus_ids, big)
    chains = big if chains is None else chains
    if not scopes or budget is None:
        return scale_graph(
            merged,
            seeds=seeds,
            hops=hops,
            chains=chains,
            min_chain=min_chain,
            chain_statuses=(S.UNCHANGED,),
            budget=budget,
        )
    g = scale_graph(
        merged,
        seeds=seeds,
        hops=hops,
        chains=chains,
        min_chain=min_chain,
        chain_statuses=(S.UNCHANGED,),
        budget=None,
        hubs=None,
    )
    hubs = None if budget <= LONG_EDGES_FINE else HUB_FANOUT  # a small drawing draws shared inputs once
    g = fit_by_scopes(g, scopes, d, budget, hubs)
    names = {n.name for n in g.nodes}
    g = apply_budget(g, budget, [s for s in seeds if s in names], hubs)  # what scopes could not fold
    return split_hubs(g, hubs) if hubs is not None else g


def _add_undrawn_module_changes(
    merged: DisplayGraph, before: ProgramSnapshot, after: ProgramSnapshot, d: SnapshotDiff
) -> None:
    """A module added or removed with no instruction of the drawing owning it (e.g. the fused
    modules dead_code_elimination drops once no instruction calls them) gets one node saying so;
    otherwise such a pass would draw as if it had changed nothing."""
    drawn = {n.instr_id for n in merged.nodes if n.instr_id is not None}
    drawn |= {i for n in merged.nodes for i in n.members}
    drawn_modules = {g.module for g in merged.groups.values()} | {n.module for n in merged.nodes}
    for names, snap, status in ((d.modules_removed, before, S.REMOVED), (d.modules_added, after, S.ADDED)):
        for name in names:
            mod = next((m for m in snap.modules if m.name == name), None)
            if mod is None or name in drawn_modules or drawn & {r.id for r in mod.instrs}:
                continue
            ops = [r.op.name for r in mod.instrs if not r.op.name.startswith("@")]
            verb = "removed (no longer used)" if status == S.REMOVED else "added (not used yet)"
            merged.nodes.append(
                DisplayNode(
                    f"module_{status}_{''.join(c if c.isalnum() else '_' for c in name)}",
                    f"module {name}\n{verb}\n{', '.join(dict.fromkeys(ops)) or 'empty'}",
                    "module",
                    S.SUMMARY,
                    module=name,
                    status=status,
                    kind="summary",
                    members=tuple(r.id for r in mod.instrs),
                    tooltip=f"module {name}: {len(mod.instrs)} instructions, {verb}",
                )
            )


def _focus(
    merged: DisplayGraph, focus: Focus, focus_ids: Collection[int] | None, big: bool
) -> tuple[set[str], int | None]:
    if focus_ids is not None:
        ids = set(focus_ids)
        seeds = {n.name for n in merged.nodes if n.instr_id in ids or ids & set(n.members)}
        # A focus on new nodes should show what they replaced (and vice versa), however many
        # hops away the layout puts the ghosts: follow the replaced-by links, and take whole
        # clusters, whose insides are further from the owner than the hop count.
        units = {n.group[0] for n in merged.nodes if n.name in seeds and n.group}
        seeds |= {n.name for n in merged.nodes if n.group and n.group[0] in units}
        for e in merged.edges:
            if e.kind == "replaced" and (e.src in seeds or e.dst in seeds):
                seeds |= {e.src, e.dst}
        return seeds, DEFAULT_HOPS if focus in ("auto", None) else focus
    return changed_names(merged), (DEFAULT_HOPS if big else None) if focus == "auto" else focus


def compare_panels(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    d: SnapshotDiff | None = None,
    *,
    module: str = "main",
    expand: Expand = "auto",
    focus: Focus = "auto",
    chains: bool | None = None,
    min_chain: int = 4,
    budget: int | None = DEFAULT_BUDGET // 2,
    focus_ids: Collection[int] | None = None,
    show_ids: bool = False,
    literals: bool = True,
    labels: tuple[str, str] = ("before", "after"),
) -> tuple[DisplayGraph, DisplayGraph]:
    """Before and after as two graphs of their own (drawn apart, e.g. side by side with synced
    pan/zoom), coloured by the diff and cut to the same region around the change."""
    d, expand = _options(before, after, d, expand)
    kw = dict(module=module, expand=expand, show_ids=show_ids, literals=literals)
    bg, ag = build_graph(before, **kw), build_graph(after, **kw)
    merged = merge_graphs(bg, ag, d)
    drawn = len(merged.nodes)
    _add_undrawn_module_changes(merged, before, after, d)
    for n in merged.nodes[drawn:]:  # a dropped module shows on the before side, a new one after
        (bg if n.status == S.REMOVED else ag).nodes.append(n)
    status = {n.name: n.status for n in merged.nodes}
    big = len(merged.nodes) > AUTO_FOCUS_OVER
    seeds, hops = _focus(merged, focus, focus_ids, big)
    keep = set(distances(merged, seeds, hops)) if hops is not None and seeds else None
    edges = _panel_edges(bg.edges, ag.edges)
    panels = []
    for label, g, es in ((labels[0], bg, edges[0]), (labels[1], ag, edges[1])):
        groups = {k: dataclasses.replace(merged.groups[k]) for k in g.groups}
        g = DisplayGraph([_with(n, status=status[n.name]) for n in g.nodes], es, groups)
        # Focus on the merged graph, where ghosts link to their replacements, so both panels
        # show the same region even when the seeds exist on one side only.
        if keep is not None:
            g = summarize(g, keep & {n.name for n in g.nodes})
        mine = {s for s in seeds if s in {n.name for n in g.nodes}}
        g = scale_graph(
            g,
            seeds=mine,
            chains=big if chains is None else chains,
            min_chain=min_chain,
            chain_statuses=(S.UNCHANGED,),
            budget=budget,
        )
        panels.append(dataclasses.replace(g, title=f"{label} ({g.instruction_count()} instructions)"))
    return panels[0], panels[1]


def side_by_side(
    before: ProgramSnapshot, after: ProgramSnapshot, d: SnapshotDiff | None = None, *, title: str = "", **kw
) -> DisplayGraph:
    """Before and after as two panels of one graph (so dot aligns their ranks). Node names get a
    `b_` / `a_` prefix; classes keep `iid_<stable id>` so a node can be found in both panels.
    Keywords as for compare_panels."""
    if d is None:
        d = diff(before, after)
    kw.setdefault("budget", DEFAULT_BUDGET // 2)
    left, right = compare_panels(before, after, d, **kw)
    panels = [_prefixed(left, "b_", left.title), _prefixed(right, "a_", right.title)]
    return DisplayGraph(
        [n for p in panels for n in p.nodes],
        [e for p in panels for e in p.edges],
        {k: v for p in panels for k, v in p.groups.items()},
        _title(title, d),
    )


def _panel_edges(before: list[DisplayEdge], after: list[DisplayEdge]) -> tuple[list[DisplayEdge], list[DisplayEdge]]:
    merged = _merge_edges(before, after)
    new = merged[: len(after)]
    gone = Counter((e.src, e.dst) for e in merged[len(after) :])
    old = []
    for e in before:
        key = (e.src, e.dst)
        old.append(_with(e, status=S.REMOVED if gone[key] > 0 else S.UNCHANGED))
        gone[key] -= 1
    return old, new


def _prefixed(g: DisplayGraph, prefix: str, label: str) -> DisplayGraph:
    panel = f"cluster_{prefix}panel"

    def gname(name: str) -> str:
        return name.replace("cluster_", f"cluster_{prefix}", 1)

    nodes = [
        dataclasses.replace(n, name=prefix + n.name, group=(panel,) + tuple(gname(x) for x in n.group)) for n in g.nodes
    ]
    edges = [dataclasses.replace(e, src=prefix + e.src, dst=prefix + e.dst) for e in g.edges]
    groups = {panel: DisplayGroup(panel, label, (), S.SUMMARY)}
    for k, grp in g.groups.items():
        groups[gname(k)] = dataclasses.replace(grp, name=gname(k), parent=(panel,) + tuple(map(gname, grp.parent)))
    return DisplayGraph(nodes, edges, groups, label)
