"""The display graph: plain dataclasses between the IR and the drawing (trex / Model Explorer style).

`build_graph(snapshot)` turns a ProgramSnapshot (or ModuleSnapshot, or live Program) into nodes,
edges and groups. Node names are `i<stable id>`, so the same instruction has the same DOT name
(and SVG id) in every pass; that is what keeps layouts and browser tests stable across passes.
Nothing here imports graphviz.

Fused submodules (any instruction with module inputs) are either expanded into a cluster, with
the submodule's params fed by the instruction's inputs and its @return feeding the instruction's
node, or collapsed into one node that lists the fused ops.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Literal

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.printer import format_op
from migx_explore.compiler.snapshot import InstrRecord, ModuleSnapshot, ProgramSnapshot, snapshot

from . import style as S

# Expanding every fused module of a big model turns each into a cluster; dot's cluster handling
# is the slowest part of layout, so "auto" expands only small programs.
AUTO_EXPAND_MAX = 300

Source = ProgramSnapshot | ModuleSnapshot | Program


@dataclass(frozen=True)
class Clusters:
    """Which fused submodules are drawn as clusters: all of them or none (`default`; "auto":
    all when the program has at most AUTO_EXPAND_MAX instructions), except the owners in
    `flipped` (instruction ids, stable across passes), which get the opposite. The explorer keeps
    one of these per model, so a cluster the user opened stays open while stepping."""

    default: bool | Literal["auto"] = "auto"
    flipped: frozenset[int] = frozenset()

    def resolved(self, instructions: int) -> Clusters:
        """The same choice with "auto" decided for a program of this many instructions."""
        if self.default != "auto":
            return self
        return Clusters(instructions <= AUTO_EXPAND_MAX, self.flipped)

    def expands(self, owner: int) -> bool:
        return bool(self.default) != (owner in self.flipped)

    def with_owner(self, owner: int, expanded: bool, instructions: int) -> Clusters:
        """The choice with `owner`'s cluster expanded or collapsed ("auto" is decided first, for
        a program of `instructions` instructions, so the choice keeps its meaning)."""
        r = self.resolved(instructions)
        flipped = r.flipped - {owner} if expanded == bool(r.default) else r.flipped | {owner}
        return Clusters(r.default, frozenset(flipped))


Expand = bool | Literal["auto"] | Collection[str | int] | Clusters


@dataclass
class DisplayNode:
    name: str  # DOT node name: "i<id>" for instructions, stable across passes
    label: str
    op: str
    category: str
    group: tuple[str, ...] = ()  # enclosing clusters, outermost first
    attrs: dict[str, str] = field(default_factory=dict)  # the key attributes the label shows
    instr_id: int | None = None
    module: str = "main"
    shape: str = ""
    status: str | None = None  # added | removed | changed | unchanged (diff views only)
    kind: str = "instr"  # instr | fused (a collapsed submodule) | summary | chain
    members: tuple[int, ...] = ()  # instruction ids this node stands for
    tooltip: str = ""


@dataclass
class DisplayEdge:
    src: str
    dst: str
    label: str = ""
    kind: str = "data"  # data | replaced | summary
    status: str | None = None
    shape: str = ""  # the value's shape, shown as the label when edge labels are on


@dataclass
class DisplayGroup:
    name: str  # "cluster_..." (graphviz draws a box only for names starting with "cluster")
    label: str
    parent: tuple[str, ...]
    category: str
    owner: int | None = None  # the instruction whose submodule this is
    module: str = ""
    status: str | None = None


@dataclass
class DisplayGraph:
    nodes: list[DisplayNode] = field(default_factory=list)
    edges: list[DisplayEdge] = field(default_factory=list)
    groups: dict[str, DisplayGroup] = field(default_factory=dict)
    title: str = ""

    def by_name(self) -> dict[str, DisplayNode]:
        return {n.name: n for n in self.nodes}

    def node_for(self, instr_id: int) -> DisplayNode | None:
        """The node showing an instruction (itself, or the collapsed/summary node holding it)."""
        for n in self.nodes:
            if n.instr_id == instr_id:
                return n
        for n in self.nodes:
            if instr_id in n.members:
                return n
        return None

    def instruction_count(self) -> int:
        return sum(len(n.members) for n in self.nodes)

    def __iter__(self) -> Iterator[DisplayNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)


def node_name(instr_id: int) -> str:
    return f"i{instr_id}"


def as_snapshot(source: Source) -> ProgramSnapshot | ModuleSnapshot:
    return snapshot(source) if isinstance(source, Program) else source


def build_graph(
    source: Source,
    module: str = "main",
    *,
    expand: Expand = "auto",
    show_ids: bool = False,
    literals: bool = True,
    title: str = "",
) -> DisplayGraph:
    """The display graph of one module (submodules appear inside it as clusters or fused nodes).

    expand: True / False for every fused submodule, "auto" (expand when the program is small), a
    collection of module names and owner instruction ids to expand, or a Clusters choice.
    literals: False leaves literal nodes out (their consumers' labels count them instead).
    """
    snap = as_snapshot(source)
    if isinstance(snap, ModuleSnapshot):
        prog, ms = None, snap
    else:
        prog, ms = snap, snap.module(module)
    if expand == "auto" or isinstance(expand, Clusters):
        total = prog.total_instructions() if prog is not None else len(ms)
        expand = expand.resolved(total) if isinstance(expand, Clusters) else total <= AUTO_EXPAND_MAX
    builder = _Builder(prog, expand, show_ids, literals)
    builder.add_module(ms, (), None, None)
    return DisplayGraph(builder.nodes, builder.edges, builder.groups, title)


class _Builder:
    def __init__(self, prog: ProgramSnapshot | None, expand: Expand, show_ids: bool, literals: bool):
        self.prog = prog
        self.expand = expand
        self.show_ids = show_ids
        self.literals = literals
        self.nodes: list[DisplayNode] = []
        self.edges: list[DisplayEdge] = []
        self.groups: dict[str, DisplayGroup] = {}
        self.expanded: set[str] = set()  # a submodule shared by two instructions is drawn once
        self.shapes: dict[str, str] = {}  # node name -> short shape of the value it produces
        self.hidden: set[int] = set()  # literal ids left out when literals=False

    # -- decisions -------------------------------------------------------------------------------
    def _expands(self, rec: InstrRecord) -> bool:
        if self.prog is None or any(m not in self.prog.by_name or m in self.expanded for m in rec.modules):
            return False
        if isinstance(self.expand, bool):
            return self.expand
        if isinstance(self.expand, Clusters):
            return self.expand.expands(rec.id)
        return rec.id in self.expand or any(m in self.expand for m in rec.modules)

    # -- building ----------------------------------------------------------------------------------
    def add_module(
        self, ms: ModuleSnapshot, group: tuple[str, ...], param_srcs: list[str] | None, return_to: str | None
    ) -> None:
        params = [r for r in ms.instrs if r.name == "@param"]
        bind = (
            dict(zip((p.id for p in params), param_srcs))
            if param_srcs is not None and len(param_srcs) == len(params)
            else {}
        )
        # Literals are listed first in a module; drawing (and summarising) them next to their
        # first user keeps each weight beside its conv instead of in one block at the top.
        first_user: dict[int, int] = {}
        for rec in ms.instrs:
            for i in rec.inputs:
                first_user.setdefault(i, rec.id)
        deferred: dict[int, list[InstrRecord]] = {}
        order: list[InstrRecord] = []
        for rec in ms.instrs:
            if rec.name == "@literal" and rec.id in first_user:
                deferred.setdefault(first_user[rec.id], []).append(rec)
                continue
            order.extend(deferred.pop(rec.id, ()))
            order.append(rec)
        for rec in order:
            if rec.name == "@return" and return_to is not None:
                # The owner's node stands for the submodule's output, so @return needs no node.
                for i in rec.inputs:
                    self._edge(node_name(i), return_to)
                continue
            if rec.name == "@literal" and not self.literals:
                self.hidden.add(rec.id)
                continue
            if rec.modules and self._expands(rec):
                self._add_expanded(rec, ms.name, group)
                continue
            self._add_node(rec, ms.name, group)
            if rec.id in bind:
                self._edge(bind[rec.id], node_name(rec.id))
            for i in rec.inputs:
                if i not in self.hidden:
                    self._edge(node_name(i), node_name(rec.id))

    def _add_expanded(self, rec: InstrRecord, module: str, group: tuple[str, ...]) -> None:
        labels = {m: m for m in rec.modules}
        shown = list(rec.modules)
        if rec.name == "select_module" and len(rec.modules) > 1:
            # A select_module over a range: one representative per body, "× 255 like this"
            # (not `if`: its branches are alternatives, not copies).
            from ..like_this import group_alike

            like = group_alike(self.prog, rec.modules)
            shown = [g.representative for g in like]
            labels = {g.representative: g.label() for g in like}
        subs = [self.prog.module(m) for m in shown]
        self.expanded.update(rec.modules)
        owner = node_name(rec.id)
        inputs = [node_name(i) for i in rec.inputs if i not in self.hidden]
        single = len(subs) == 1 and len(rec.modules) == 1
        for sub in subs:
            gname = f"cluster_{owner}_{_safe(sub.name)}"
            cat = S.category_of(rec.op, rec.name)
            self.groups[gname] = DisplayGroup(gname, f"{rec.name} [{labels[sub.name]}]", group, cat, rec.id, sub.name)
            nparams = sum(1 for r in sub.instrs if r.name == "@param")
            srcs = inputs if nparams == len(inputs) else None
            self.add_module(sub, group + (gname,), srcs, owner)
            if srcs is None and single:
                # Inputs could not be bound to params (e.g. if/loop): feed the owner directly.
                for src in inputs:
                    self._edge(src, owner)
        # With one submodule the owner sits inside its cluster as the fused kernel's output.
        owner_group = group + (f"cluster_{owner}_{_safe(subs[0].name)}",) if single else group
        self._add_node(rec, module, owner_group, expanded=True)
        if not single:
            for src in inputs:
                self._edge(src, owner)

    def _add_node(self, rec: InstrRecord, module: str, group: tuple[str, ...], expanded: bool = False) -> None:
        name = node_name(rec.id)
        shape, shape_text = _shape_info(rec.shape)
        self.shapes[name] = shape
        # Inside a pointwise body every value is a per-element scalar ({1}, strides {0});
        # repeating "float 1" on each node is noise.
        if group and not rec.shape.is_tuple and rec.shape.lens == (1,) and rec.shape.strides == (0,):
            shape = ""
        cat, op_lines, attrs, op_text = _op_info(rec.op)
        lines, attrs = self._label(rec, shape, expanded, op_lines, attrs)
        hidden_lits = sum(1 for i in rec.inputs if i in self.hidden)
        if hidden_lits:
            lines.insert(-1, f"+{hidden_lits} literal" + ("s" if hidden_lits > 1 else ""))
        kind, members = "instr", (rec.id,)
        if rec.modules and not expanded:
            kind, members = "fused", (rec.id,) + tuple(self._sub_ids(rec.modules, set()))
        tooltip = f"#{rec.id} {op_text} -> {shape_text}"
        self.nodes.append(
            DisplayNode(
                name,
                "\n".join(x for x in lines if x),
                rec.name,
                cat,
                group,
                attrs,
                rec.id,
                module,
                shape,
                kind=kind,
                members=members,
                tooltip=tooltip,
            )
        )

    def _sub_ids(self, names: tuple[str, ...], seen: set[str]) -> Iterator[int]:
        if self.prog is None:
            return
        for m in names:
            if m in seen or m not in self.prog.by_name:
                continue
            seen.add(m)
            for r in self.prog.module(m).instrs:
                yield r.id
                yield from self._sub_ids(r.modules, seen)

    def _label(
        self, rec: InstrRecord, shape: str, expanded: bool, op_lines: tuple[str, ...], op_attrs: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        tag = f"  #{rec.id}" if self.show_ids else ""
        if rec.name == "@param":
            return [f"{rec.op['name']}{tag}", shape], {}
        if rec.name == "@literal":
            head = "literal"
            data = rec.literal.data if rec.literal is not None else None
            if data is not None and data.size == 1:
                head += f" {S.format_attr_value(data.reshape(-1)[0].item())}"
            return [head + tag, shape], {}
        if rec.name == "@return":
            return ["@return" + tag], {}
        lines = [rec.name + tag, *op_lines]
        attrs = dict(op_attrs)
        if rec.modules and not expanded and self.prog is not None:
            ops = [
                r.name
                for m in rec.modules
                if m in self.prog.by_name
                for r in self.prog.module(m).instrs
                if not r.name.startswith("@")
            ]
            lines.append("[" + S.op_summary(ops) + "]")
            attrs["fused"] = ", ".join(ops)
        elif rec.modules and not expanded:
            lines.append("[" + ", ".join(rec.modules) + "]")
        lines.append(shape)
        return lines, attrs

    def _edge(self, src: str, dst: str) -> None:
        shape = self.shapes.get(src, "")
        self.edges.append(DisplayEdge(src, dst, shape=shape))


class _IdentityCache:
    """Results keyed by object identity. Ops and shapes are immutable and shared between the
    snapshots of successive passes, but many are equal-yet-distinct (every conv has its own Op),
    so a by-value cache pays a slow attribute-by-attribute __eq__ on each hit; by identity a hit
    is one dict lookup. Entries hold the object, so an id cannot be reused while cached."""

    def __init__(self, fn, maxsize: int = 50_000):
        self.fn, self.maxsize, self.data = fn, maxsize, {}

    def __call__(self, obj):
        hit = self.data.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if len(self.data) >= self.maxsize:
            self.data.clear()
        out = self.fn(obj)
        self.data[id(obj)] = (obj, out)
        return out


def _op_pieces(op: Op) -> tuple[str, tuple[str, ...], dict[str, str], str]:
    """(category, label lines after the name, shown attributes, printed op for the tooltip)."""
    lines: list[str] = []
    attrs: dict[str, str] = {}
    if op.name.startswith("gpu::"):
        kernel, launch = S.gpu_kernel_info(op)
        if kernel:
            lines.append(S.format_attr_value(kernel, 40))
            attrs["kernel"] = kernel
        if launch:
            lines.append(launch)
            attrs["launch"] = launch
    pairs = S.key_attrs(op) if not op.name.startswith("@") else ()
    attrs.update(pairs)
    lines.extend(S.attr_lines(pairs))
    return S.category_of(op, op.name), tuple(lines), attrs, format_op(op)[:500]


_op_info = _IdentityCache(_op_pieces)
_shape_info = _IdentityCache(lambda shape: (S.short_shape(shape), str(shape)))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


# The label pieces other drawings of instructions share (render/instance.py, render/overview.py).
op_info = _op_info
shape_info = _shape_info
