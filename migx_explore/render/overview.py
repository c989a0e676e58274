"""A big change drawn as its scope overview: one box per scope with its op count and change badge,
opened a level at a time (Model Explorer's collapsed layers), never as a thousand 1 px nodes.

`scope_overview` draws the model's top scopes as collapsed nodes ("/model.2 · 34 ops · +12 −10
~3") joined by the data that flows between them. A scope in `expanded` is drawn as a box holding
its child scopes; an expanded scope without children shows its instructions. Past `budget`
drawn nodes the deepest openings are drawn collapsed again, so the drawing stays readable
whatever the user opened. Nodes that hold a change are coloured as changed, so the view centres
on them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from migx_explore.compiler.snapshot import ProgramSnapshot, SnapshotDiff

from ..scopes import auto_opened
from . import style as S
from .model import DisplayEdge, DisplayGraph, DisplayGroup, DisplayNode, shape_info
from .scoped import GROUP_NODE_PREFIX, SCOPE_GROUP_PREFIX, scope_id

OVERVIEW_BUDGET = 60  # nodes drawn at most (collapsed scopes and opened instructions together)
OVERVIEW_OVER = 60  # a whole change touching more instructions than this is drawn as the overview


def _parts(scope: str) -> list[str]:
    return [p for p in scope.split("/") if p]


def _key(scope: str, expanded: Collection[str]) -> tuple[str, bool]:
    """The scope a node of `scope` is drawn as, and whether it is drawn as itself (its scope and
    every scope above it opened)."""
    parts = _parts(scope)
    k = 0
    while k < len(parts):
        key = "/".join(parts[: k + 1])
        if key not in expanded:
            return key, False
        k += 1
    return "/".join(parts), bool(parts) or "" in expanded


def scope_overview(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    d: SnapshotDiff,
    scopes: Mapping[int, str],
    expanded: Collection[str] = (),
    *,
    region: Collection[int] = (),
    budget: int = OVERVIEW_BUDGET,
    title: str = "",
) -> DisplayGraph:
    """The overview graph (see the module docstring). `region`: count only these ids in the
    change badges (one change region's overview); empty: every change."""
    main_b, main_a = before.modules[0], after.modules[0]
    recs = {r.id: r for r in main_a.instrs}
    for r in main_b.instrs:
        recs.setdefault(r.id, r)
    order = [r.id for r in main_a.instrs] + [r.id for r in main_b.instrs if r.id in d.removed]
    counted = set(region) if region else None
    opened = set(expanded) | auto_opened(scopes.get(i, "") for i in order)
    while True:
        keys = {i: _key(scopes.get(i, ""), opened) for i in order}
        drawn = {k for k, own in keys.values() if not own} | {i for i, (_, own) in keys.items() if own}
        if len(drawn) <= budget or not opened:
            break
        opened.discard(max(opened, key=lambda s: len(_parts(s))))  # close the deepest opening
    badges: dict[str, Counter] = {}
    members: dict[str, list[int]] = {}
    for i in order:
        key, own = keys[i]
        if own:
            continue
        members.setdefault(key, []).append(i)
        status = _status(i, d)
        if status and (counted is None or i in counted):
            badges.setdefault(key, Counter())[status] += 1
    nodes: list[DisplayNode] = []
    groups: dict[str, DisplayGroup] = {}
    name_of: dict[int, str] = {}
    made: set[str] = set()
    for i in order:
        key, own = keys[i]
        path = _groups(key if own else key.rpartition("/")[0], groups)
        if own:
            r = recs[i]
            status = _status(i, d) or S.UNCHANGED
            short, _ = shape_info(r.shape)
            name = f"i{i}"
            nodes.append(
                DisplayNode(
                    name,
                    f"{r.op.name}\n{short}" if short else r.op.name,
                    r.op.name,
                    S.category_of(r.op, r.op.name),
                    path,
                    {},
                    i,
                    "main",
                    short,
                    status if counted is None or i in counted or status == S.UNCHANGED else S.ELSEWHERE,
                    "instr",
                    (i,),
                    f"#{i} {r.op.name}",
                )
            )
            name_of[i] = name
            continue
        name = GROUP_NODE_PREFIX + scope_id(key or "")
        name_of[i] = name
        if name in made:
            continue
        made.add(name)
        b = badges.get(key, Counter())
        ops = Counter(recs[j].op.name for j in members[key] if not recs[j].op.name.startswith("@"))
        top = ", ".join(op for op, _ in ops.most_common(4))
        badge = " ".join(f"{sign}{b[st]}" for sign, st in (("+", S.ADDED), ("−", S.REMOVED), ("~", S.CHANGED)) if b[st])
        label = f"/{key}" if key else "(top level)"
        # two short lines: the drawing's width is what limits its scale in a wide pane
        lines = [label, f"{len(members[key])} ops" + (f" · {badge}" if badge else "")]
        nodes.append(
            DisplayNode(
                name,
                "\n".join(x for x in lines if x),
                "scope",
                S.SUMMARY,
                path,
                {"scope": key},
                None,
                "main",
                "",
                S.CHANGED if badge else S.UNCHANGED,
                "summary",
                tuple(members[key]),
                f"/{key}: {len(members[key])} instructions ({badge or 'unchanged'}): {top}; open it in the scope tree",
            )
        )
    edges: list[DisplayEdge] = []
    seen: set[tuple[str, str]] = set()
    for snap_main in (main_a, main_b):
        for r in snap_main.instrs:
            dst = name_of.get(r.id)
            for j in r.inputs:
                src = name_of.get(j)
                if src is None or dst is None or src == dst or (src, dst) in seen:
                    continue
                seen.add((src, dst))
                edges.append(DisplayEdge(src, dst, status=S.UNCHANGED))
    return DisplayGraph(nodes, edges, groups, title)


def _status(i: int, d: SnapshotDiff) -> str | None:
    if i in d.added:
        return S.ADDED
    if i in d.removed:
        return S.REMOVED
    if i in d.changed:
        return S.CHANGED
    return None


def _groups(scope: str, groups: dict[str, DisplayGroup]) -> tuple[str, ...]:
    parts = _parts(scope)
    path: list[str] = []
    for k in range(len(parts)):
        name = SCOPE_GROUP_PREFIX + scope_id("/".join(parts[: k + 1]))
        if name not in groups:
            groups[name] = DisplayGroup(name, "/" + "/".join(parts[: k + 1]), tuple(path), S.OTHER, module="main")
        path.append(name)
    return tuple(path)


__all__ = ["OVERVIEW_BUDGET", "OVERVIEW_OVER", "scope_overview"]
