"""One rewrite instance drawn at reading scale: what it consumed (before) beside what replaced it
(after), with one hop of context on each side as small grey stubs.

The drawing is built from the instance's own records, never from the whole program, so it costs
the size of the instance (a `lowering` instance of a 1,350-node program is a handful of nodes).
A fused instruction lists the ops it absorbed; an allocation shows its offset and bytes (what
`memory_coloring` changes); literals an instruction reads are counted in its label, not drawn.
A long chain of consumed ops folds into one node listing them in order, so a fusion of twenty
ops still reads. `render_instance` lays the graph out top-down and left-right and keeps the one
that reads larger in the pane.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from migx_explore.compiler.snapshot import InstrRecord, ProgramSnapshot, SnapshotDiff

from . import style as S
from .model import DisplayEdge, DisplayGraph, DisplayGroup, DisplayNode, op_info, shape_info

STUBS_PER_SIDE = 8  # context nodes per side; past it one "… N more" stub
STUBS_BIG = 3  # the same for a side of more than 4 instructions (the instance itself needs the room)
FOLD_OVER = 5  # a side with more instruction nodes than this folds its chains
LIST_OVER = 10  # a side with more is drawn as one node listing its ops in program order
ABSORBED_SHOWN = 6  # ops of a fused instruction listed one a line; past it, counted
_ALLOC = ("allocate", "hip::allocate", "load", "hip::hip_allocate_memory", "hip::hip_copy_literal")


def _records(snap: ProgramSnapshot) -> tuple[dict[int, InstrRecord], dict[int, list[int]], dict[int, str]]:
    """id -> record, id -> users (ids), id -> module name, over every module."""
    recs: dict[int, InstrRecord] = {}
    users: dict[int, list[int]] = {}
    module: dict[int, str] = {}
    for m in snap.modules:
        for r in m.instrs:
            recs[r.id] = r
            module[r.id] = m.name
            for i in r.inputs:
                users.setdefault(i, []).append(r.id)
    return recs, users, module


_INDEX: dict[int, tuple[ProgramSnapshot, tuple]] = {}


def _index(snap: ProgramSnapshot) -> tuple:
    hit = _INDEX.get(id(snap))
    if hit is not None and hit[0] is snap:
        return hit[1]
    if len(_INDEX) > 8:
        _INDEX.clear()
    out = _records(snap)
    _INDEX[id(snap)] = (snap, out)
    return out


def _absorbed(r: InstrRecord, snap: ProgramSnapshot) -> list[str]:
    ops: list[str] = []
    for name in r.modules:
        if name in snap.by_name:
            ops += [x.op.name for x in snap.module(name).instrs if not x.op.name.startswith("@")]
    return ops


def instr_label(r: InstrRecord, snap: ProgramSnapshot) -> list[str]:
    """The lines of a full node: op, key attributes, absorbed ops, allocation figures, shape."""
    _cat, op_lines, _attrs, _text = op_info(r.op)
    short, _full = shape_info(r.shape)
    lines = [r.op.name, *op_lines]
    if r.op.name == "@param":
        lines = [f"@param {r.op.attrs.get('name', '')}".strip()]
    elif r.op.name == "@literal":
        lines = ["literal"]
    ops = _absorbed(r, snap)
    if ops:
        shown = (
            ops
            if len(ops) <= ABSORBED_SHOWN
            else ops[: ABSORBED_SHOWN - 1] + [f"+{len(ops) - ABSORBED_SHOWN + 1} more"]
        )
        lines.append("absorbed: " + ", ".join(shown[:3]))
        if len(shown) > 3:
            lines.append("  " + ", ".join(shown[3:]))
    if r.op.name in _ALLOC or r.op.name.endswith("::allocate"):
        try:
            lines.append(f"{r.shape.bytes():,} bytes")
        except Exception:  # noqa: BLE001 - a dynamic or tuple shape has no fixed size
            pass
    if short:
        lines.append(short)
    return lines


def _stub_label(r: InstrRecord) -> str:
    # one short line: context says what the instance reads and feeds; its shape is in the tooltip
    name = r.op.attrs.get("name", "") if r.op.name == "@param" else ""
    return f"{r.op.name} {name}".strip()


def _side(
    prefix: str,
    title: str,
    snap: ProgramSnapshot,
    ids: Sequence[int],
    d: SnapshotDiff,
    stub_limit: int = STUBS_PER_SIDE,
) -> DisplayGraph:
    recs, users, _module = _index(snap)
    ids = [i for i in ids if i in recs]
    # Literals the rewrite made or consumed are counted in their reader's label, not drawn: a
    # weight beside each op doubles the drawing and says nothing about the rewrite.
    lits = [i for i in ids if recs[i].op.name == "@literal"]
    if len(lits) < len(ids):
        ids = [i for i in ids if recs[i].op.name != "@literal"]
    if len(ids) > 4:
        stub_limit = min(stub_limit, STUBS_BIG)
    inside = set(ids)
    panel = f"cluster_{prefix}panel"
    nodes: list[DisplayNode] = []
    edges: list[DisplayEdge] = []
    status = {i: S.ADDED if i in d.added else S.REMOVED if i in d.removed else S.CHANGED for i in ids}
    if len(ids) > LIST_OVER:  # too many to draw one by one at reading scale: one node lists them
        folded = {ids[0]: list(ids)}
    else:
        folded = _fold_chains(ids, recs, users) if len(ids) > FOLD_OVER else {}
    head_of = {i: h for h, chain in folded.items() for i in chain}
    drawn: dict[int, str] = {}
    for i in ids:
        h = head_of.get(i, i)
        if h in drawn.values() or f"{prefix}i{h}" in {n.name for n in nodes}:
            drawn[i] = f"{prefix}i{h}"
            continue
        r = recs[i]
        name = f"{prefix}i{h}"
        drawn[i] = name
        if h in folded:
            chain = folded[h]
            ops = [recs[c].op.name for c in chain]
            what = "in a chain" if len(chain) < len(ids) or len(ids) <= LIST_OVER else "in program order"
            label = f"{len(chain)} ops {what}:\n" + "\n".join(_wrap(ops))
            cat = S.category_of(recs[chain[-1]].op, recs[chain[-1]].op.name)
        else:
            lits = sum(1 for j in r.inputs if j in recs and recs[j].op.name == "@literal" and j not in inside)
            lines = instr_label(r, snap)
            if lits:
                lines.insert(len(lines) - 1, f"+{lits} literal" + ("s" if lits > 1 else ""))
            label = "\n".join(lines)
            cat = S.category_of(r.op, r.op.name)
        nodes.append(
            DisplayNode(
                name, label, r.op.name, cat, (panel,), {}, h, "main", "", status[i], "instr", (i,), f"#{i} {r.op.name}"
            )
        )
    stubs: dict[int, str] = {}
    extra = 0

    def stub(j: int) -> str | None:
        nonlocal extra
        if j in stubs:
            return stubs[j]
        if len(stubs) >= stub_limit:
            extra += 1
            return None
        r = recs[j]
        name = stubs[j] = f"{prefix}s{j}"
        nodes.append(
            DisplayNode(
                name,
                _stub_label(r),
                r.op.name,
                S.REF,
                (panel,),
                {},
                None,
                "main",
                "",
                S.UNCHANGED,
                "stub",
                (),
                f"#{j} {r.op.name} -> {shape_info(r.shape)[1]} (context, unchanged)",
            )
        )
        return name

    seen_edges: set[tuple[str, str]] = set()

    def edge(a: str, b: str) -> None:
        if a != b and (a, b) not in seen_edges:
            seen_edges.add((a, b))
            edges.append(DisplayEdge(a, b, status=S.UNCHANGED))

    for i in ids:
        for j in recs[i].inputs:
            if j in inside:
                edge(drawn[j], drawn[i])
            elif j in recs and recs[j].op.name != "@literal":
                s = stub(j)
                if s:
                    edge(s, drawn[i])
    for i in ids:
        for u in users.get(i, ()):
            if u not in inside and recs[u].op.name != "@return":
                s = stub(u)
                if s:
                    edge(drawn[i], s)
    if extra:  # said in the panel's title: a node for it would take a place in the layout
        title = f"{title} (+{extra} neighbours not drawn)"
    if not ids:
        empty = "nothing: removed" if prefix == "a_" else "nothing: new"
        nodes.append(DisplayNode(f"{prefix}empty", empty, "empty", S.SUMMARY, (panel,), kind="stub"))
    groups = {panel: DisplayGroup(panel, title, (), S.SUMMARY)}
    return DisplayGraph(nodes, edges, groups, title)


def _wrap(ops: list[str], width: int = 34) -> list[str]:
    lines, cur = [], ""
    for op in ops:
        item = op if not cur else f"→ {op}"
        if cur and len(cur) + 1 + len(item) > width:
            lines.append(cur)
            cur = f"→ {op}"
        else:
            cur = f"{cur} {item}" if cur else item
    if cur:
        lines.append(cur)
    return lines


def _fold_chains(
    ids: list[int], recs: Mapping[int, InstrRecord], users: Mapping[int, list[int]]
) -> dict[int, list[int]]:
    """Maximal runs (length >= 3) where each link is the next one's only input from the set and
    has it as its only user: head id -> run ids in order."""
    inside = set(ids)

    def ins(i: int) -> list[int]:
        return [j for j in recs[i].inputs if j in inside]

    def outs(i: int) -> list[int]:
        return [u for u in users.get(i, ()) if u in inside]

    out: dict[int, list[int]] = {}
    taken: set[int] = set()
    for i in ids:
        if i in taken:
            continue
        prev = ins(i)
        if len(prev) == 1 and len(outs(prev[0])) == 1 and prev[0] not in taken:
            continue  # not the start of a run
        run = [i]
        while True:
            nxt = outs(run[-1])
            if len(nxt) != 1 or len(ins(nxt[0])) != 1 or nxt[0] in taken:
                break
            run.append(nxt[0])
        if len(run) >= 3:
            out[i] = run
            taken.update(run)
    return out


def instance_graph(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    before_ids: Sequence[int],
    after_ids: Sequence[int],
    d: SnapshotDiff,
    *,
    titles: tuple[str, str] = ("before", "after"),
) -> DisplayGraph:
    """Before and after of one instance as two panels of one graph (see the module docstring)."""
    b = _side("b_", titles[0], before, before_ids, d)
    a = _side("a_", titles[1], after, after_ids, d)
    return DisplayGraph(b.nodes + a.nodes, b.edges + a.edges, {**b.groups, **a.groups}, "")


def instance_sides(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    before_ids: Sequence[int],
    after_ids: Sequence[int],
    d: SnapshotDiff,
    *,
    titles: tuple[str, str] = ("before", "after"),
) -> tuple[DisplayGraph, DisplayGraph]:
    """The two panels of instance_graph as graphs of their own (Compare's synced panels)."""
    return _side("b_", titles[0], before, before_ids, d), _side("a_", titles[1], after, after_ids, d)


def _fit_scale(svg: str, pane: tuple[float, float]) -> float:
    import re

    m = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', svg)
    if not m:
        return 0.0
    w, h = float(m.group(1)), float(m.group(2))
    return min(pane[0] / max(w, 1.0), pane[1] / max(h, 1.0))


def render_instance(graph: DisplayGraph, pane: tuple[float, float], prefix: str = "in_") -> str:
    """SVG of an instance graph, laid out top-down or left-right, whichever reads larger in a
    pane of this size (px)."""
    from .dot import DotOptions, render_svg, to_dot

    best, best_scale = "", -1.0
    for rankdir in ("TB", "LR"):
        # tighter spacing than a whole graph's: a handful of nodes, and the pane's height is short
        text = to_dot(graph, DotOptions(rankdir=rankdir, id_prefix=prefix, rank_hints=False))
        text = text.replace('ranksep="0.3"', 'ranksep="0.18"').replace('nodesep="0.2"', 'nodesep="0.14"')
        svg = str(render_svg(text, DotOptions(rankdir=rankdir, id_prefix=prefix, rank_hints=False)))
        scale = _fit_scale(svg, pane)
        if scale > best_scale:
            best, best_scale = svg, scale
    return best


def changed_ids(graph: DisplayGraph) -> Collection[int]:
    return [n.instr_id for n in graph.nodes if n.instr_id is not None]


__all__ = [
    "FOLD_OVER",
    "LIST_OVER",
    "STUBS_PER_SIDE",
    "changed_ids",
    "instance_graph",
    "instr_label",
    "render_instance",
]
