"""Program snapshots as Model Explorer graphs (plain JSON dicts in the shape of the package's
`graph_builder` dataclasses, so exporting needs no Model Explorer install).

One graph per snapshot's main module; every other module (a fused kernel's body, an `if` branch,
a bucket of a dynamic range) is a graph of its own that the owning node points to through
`subgraphIds`. A module snapshot a pass left alone is the same object in the next snapshot, so
its graph is written once and shared by every pass graph that contains it.

Node ids are the stable instruction ids (decision 1 of the design), which is what makes Model
Explorer's "match node id" sync and our compare mappings line up across passes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from migx_explore.compiler import dtypes
from migx_explore.compiler.op import Op
from migx_explore.compiler.op_format import format_value
from migx_explore.compiler.snapshot import InstrRecord, ModuleSnapshot, ProgramSnapshot

from ..render import style as S
from ..render.scale import HUB_FANOUT
from ..scopes import split_scope

# Model Explorer shows attribute values in a side panel; kernel source and binaries are bulk that
# nobody reads there (and they made pass graphs megabytes each).
ATTR_LIMIT = 400

# What a pass did to an instruction, as node styles (the diff view's colours, render/style.py):
# added and changed in the pass's graph, removed in its "(before)" graph.
CHANGE_STYLE = {
    status: {"backgroundColor": st.fill, "borderColor": st.border, "hoveredBorderColor": st.border}
    for status, st in S.STATUS_STYLE.items()
    if status in (S.ADDED, S.CHANGED, S.REMOVED)
}


@functools.lru_cache(maxsize=65536)
def namespace(scope: str) -> str:
    """A scope as Model Explorer's layer path ("/model.2/m.0/cv1" -> "model.2/m.0/cv1")."""
    return "/".join(split_scope(scope))


def _kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


@dataclass
class _OpInfo:
    label: str
    attrs: list[dict[str, Any]]


_op_cache: dict[int, tuple[Op, _OpInfo]] = {}


def _op_info(op: Op) -> _OpInfo:
    """Label and attributes of an op, cached by identity (ops are immutable and shared between
    the snapshots of successive passes)."""
    hit = _op_cache.get(id(op))
    if hit is not None and hit[0] is op:
        return hit[1]
    attrs = [_kv("op", op.name)]
    if op.name.startswith("gpu::"):
        kernel, launch = S.gpu_kernel_info(op)
        if kernel:
            attrs.append(_kv("kernel", kernel))
        if launch:
            attrs.append(_kv("launch", launch))
    try:
        pairs = op.non_default_attrs()
    except Exception:  # noqa: BLE001 - a half-defined GPU op must not break the export
        pairs = list(op.attrs.items())
    for k, v in pairs:
        text = format_value(v)  # MIGraphX's spelling, as the printer writes it
        if len(text) > ATTR_LIMIT:
            text = text[: ATTR_LIMIT - 1] + "…"
        attrs.append(_kv(k, text))
    info = _OpInfo(op.name, attrs)
    if len(_op_cache) > 50_000:
        _op_cache.clear()
    _op_cache[id(op)] = (op, info)
    return info


@dataclass
class GraphSet:
    """The graphs of one export: pass graphs by id, and module graphs shared between them."""

    graphs: list[dict[str, Any]] = field(default_factory=list)
    _modules: dict[int, tuple[ModuleSnapshot, str]] = field(default_factory=dict)
    _ids: set[str] = field(default_factory=set)
    _nodes: dict[tuple, tuple[Any, Any, dict[str, Any]]] = field(default_factory=dict)

    def add_program(
        self,
        graph_id: str,
        snap: ProgramSnapshot,
        scopes: Mapping[int, str],
        *,
        status: Callable[[int], str | None] = lambda _i: None,
        extra_attrs: Callable[[int], list[dict[str, Any]]] = lambda _i: [],
        info: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Add the graph of `snap`'s main module (and graphs for the modules it reaches) as
        `graph_id`; `status(id)` is "added"/"changed"/None (the node's change style)."""
        if graph_id in self._ids:
            raise ValueError(f"graph id {graph_id!r} is used twice in one export")
        g = self._module_graph(graph_id, snap.module("main"), snap, scopes, status, extra_attrs, tag=graph_id)
        if info:
            g["groupNodeAttributes"] = {"": dict(info)}
        return g

    def node_ids(self, graph_id: str) -> set[str]:
        """The node ids of one graph of this export."""
        return {n["id"] for g in self.graphs if g["id"] == graph_id for n in g["nodes"]}

    def _sub_id(
        self, name: str, snap: ProgramSnapshot, scopes: Mapping[int, str], status, extra_attrs, tag: str
    ) -> str:
        ms = snap.module(name)
        hit = self._modules.get(id(ms))
        if hit is not None and hit[0] is ms:
            return hit[1]
        gid = f"{name} ({tag.split(' ', 1)[0]})"
        k = 2
        while gid in self._ids:
            gid, k = f"{name} ({tag.split(' ', 1)[0]}.{k})", k + 1
        self._modules[id(ms)] = (ms, gid)
        self._module_graph(gid, ms, snap, scopes, status, extra_attrs, tag=tag)
        return gid

    def _module_graph(
        self,
        gid: str,
        ms: ModuleSnapshot,
        snap: ProgramSnapshot,
        scopes: Mapping[int, str],
        status,
        extra_attrs,
        tag: str,
    ) -> dict[str, Any]:
        self._ids.add(gid)
        g: dict[str, Any] = {"id": gid, "nodes": []}
        self.graphs.append(g)  # before its subgraphs: the list reads parent first
        nodes = g["nodes"]
        in_main = ms.name == "main"
        hubs = _hubs(ms)
        copies: set[str] = set()
        for r in ms.instrs:
            scope = namespace(scopes.get(r.id, "")) if in_main else ""
            hub_in = tuple(i for i in r.inputs if i in hubs)
            nodes.extend(_hub_copies(hubs, hub_in, scope, copies))
            subs = (
                tuple(self._sub_id(m, snap, scopes, status, extra_attrs, tag) for m in r.modules if m in snap.by_name)
                if r.modules
                else ()
            )
            # Module graphs are shared between passes: only the pass graph itself (main) carries
            # what this pass did; a changed kernel body shows as its owner's change.
            st = status(r.id) if in_main else None
            users = hubs[r.id][1] if r.id in hubs else None
            nodes.append(self._instr_node(r, scope, hub_in, users, subs, st, extra_attrs))
        return g

    def _instr_node(
        self,
        r: InstrRecord,
        scope: str,
        hub_in: tuple[int, ...],
        hub_users: int | None,
        subs: tuple[str, ...],
        st: str | None,
        extra_attrs,
    ) -> dict[str, Any]:
        """The node of one instruction (`hub_users`: its users when it is a hub, else None)."""
        # An instruction a pass left alone is the very same node in the next pass graph (the
        # JSON repeats it; building it once is what keeps a long trace's export fast).
        key = (
            r.id,
            id(r.op),
            id(r.shape),
            r.inputs,
            r.origin,
            id(r.literal),
            subs,
            scope,
            st,
            hub_in,
            hub_users is not None,
        )
        hit = self._nodes.get(key)
        if hit is not None and hit[0] is r.op and hit[1] is r.shape:
            return hit[2]
        node = _node(r, scope, hub_in)
        if hub_users is not None:
            node["attrs"].append(_kv("users", f"{hub_users} (a copy stands in each layer that uses it)"))
        if subs:
            node["subgraphIds"] = list(subs)
            node["attrs"].append(_kv("modules", ", ".join(r.modules)))
        if st in CHANGE_STYLE:
            node["style"] = CHANGE_STYLE[st]
            node["attrs"].append(_kv("change", st))
        node["attrs"].extend(extra_attrs(r.id))
        self._nodes[key] = (r.op, r.shape, node)
        return node


def _hub_copies(
    hubs: Mapping[int, tuple[InstrRecord, int]], hub_in: tuple[int, ...], scope: str, drawn: set[str]
) -> list[dict[str, Any]]:
    """The copies of the hubs `hub_in` not yet drawn in layer `scope` (adding them to `drawn`):
    each is drawn just before its layer's first user."""
    out = []
    for h in hub_in:
        cid = _copy_id(h, scope)
        if cid not in drawn:
            drawn.add(cid)
            out.append(_hub_copy(hubs[h], scope, cid))
    return out


def _hubs(ms: ModuleSnapshot) -> dict[int, tuple[InstrRecord, int]]:
    """Instructions with more than HUB_FANOUT users (id -> (record, users)). Why: the final
    program's scratch buffer feeds 163 kernels of yolov10n across every layer; Model Explorer
    routed those edges between all the collapsed layers, and drawing them in software WebGL
    took the final graph from 3.5 s to 10.5 s to open. As in our own drawings
    (render/scale.py split_hubs), each layer that uses such a value gets its own copy of it."""
    users: dict[int, int] = {}
    for r in ms.instrs:
        for i in set(r.inputs):
            users[i] = users.get(i, 0) + 1
    if not any(k > HUB_FANOUT for k in users.values()):
        return {}
    return {r.id: (r, users[r.id]) for r in ms.instrs if users.get(r.id, 0) > HUB_FANOUT}


def _copy_id(hub: int, scope: str) -> str:
    """The copy of a hub in one layer: stable across pass graphs, like instruction ids."""
    return f"{hub}@{scope}"


def _hub_copy(hub: tuple[InstrRecord, int], scope: str, cid: str) -> dict[str, Any]:
    r, users = hub
    node = _node(r, scope)
    node["id"] = cid
    node["label"] = f"↳ {node['label']}"
    node["incomingEdges"] = []  # the hub itself keeps its inputs
    node["attrs"].append(_kv("copy of", f"#{r.id} (used by {users} instructions)"))
    return node


_shape_cache: dict[int, tuple[Any, list[dict[str, Any]]]] = {}


def _shape_attrs(shape: Any) -> list[dict[str, Any]]:
    """`tensor_shape` as MIGraphX prints it (`float_type, {1, 16, 192}`; the strides too when not
    standard)."""
    hit = _shape_cache.get(id(shape))
    if hit is not None and hit[0] is shape:
        return hit[1]
    text = str(shape)
    if not shape.is_tuple and shape.dyn_dims is None:
        lens = ", ".join(map(str, shape.lens))
        text = f"{dtypes.dtype(shape.type).migraphx}, {{{lens}}}"  # MIGraphX prints float_type
        if not shape.standard():
            text += f", {{{', '.join(map(str, shape.strides))}}}"
    out = [_kv("tensor_shape", text)]
    if len(_shape_cache) > 50_000:
        _shape_cache.clear()
    _shape_cache[id(shape)] = (shape, out)
    return out


def _node(r: InstrRecord, scope: str, hub_in: tuple[int, ...] = ()) -> dict[str, Any]:
    name = r.op.name
    if name == "@param":
        label, attrs = str(r.op["name"]), [_kv("op", "@param")]
    elif name == "@literal":
        label, attrs = "@literal", [_kv("op", "@literal")]
        data = r.literal.data if r.literal is not None else None
        if data is not None and data.size == 1:
            label = f"literal {S.format_attr_value(data.reshape(-1)[0].item())}"
    else:
        info = _op_info(r.op)
        label, attrs = info.label, list(info.attrs)
    attrs.append(_kv("id", f"#{r.id}"))
    if r.origin:
        attrs.append(_kv("origin", ", ".join(f"#{i}" for i in r.origin)))
    node: dict[str, Any] = {
        "id": str(r.id),
        "label": label,
        "namespace": scope,
        "attrs": attrs,
        "incomingEdges": [
            {
                "sourceNodeId": _copy_id(i, scope) if i in hub_in else str(i),
                "sourceNodeOutputId": "0",
                "targetNodeInputId": str(k),
            }
            for k, i in enumerate(r.inputs)
        ],
    }
    if name != "@return":
        node["outputsMetadata"] = [{"id": "0", "attrs": _shape_attrs(r.shape)}]
    return node


__all__ = ["ATTR_LIMIT", "CHANGE_STYLE", "GraphSet", "namespace"]
