"""A trace as a Model Explorer folder: one graph collection, node-data overlays and a compare
mapping per pass.

    export_trace(session, "out/yolo")          # or a Trace (ours, or one read from MIGraphX)

writes

    out/yolo/graphs.json            the collection: "000 input", one graph per pass that changed
                                    the IR ("012 fusion.fuse_pointwise_reduce"), "NNN final", and
                                    the module graphs their fused nodes open (subgraphIds)
    out/yolo/node_data/*.json       overlays ({graphId: {results, gradient}}): provenance (the
                                    pass that made each instruction), gpu_time_us (per kernel,
                                    when the session was timed), numeric_error (when checked)
    out/yolo/compare/NNN.json       per pass: its before/after mapping by instruction identity,
                                    with Model Explorer's diff highlights on
    out/yolo/trace.migx             the index (JSON): which graph is which pass, its before graph,
                                    its mapping file; the adapter and the launcher read it

`graphs.json` opens in Model Explorer with no adapter (its built-in JSON loader).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from migx_explore.compiler.pass_infra import PassRecord, Trace
from migx_explore.compiler.snapshot import ProgramSnapshot

from ..render import style as S
from ..scopes import ScopeTable
from .graphs import GraphSet, namespace
from .overlays import gpu_time_data, numeric_error_data, provenance_data

if TYPE_CHECKING:
    from ..session import Session

MANIFEST = "trace.migx"
COLLECTION = "graphs.json"
FORMAT = "migx-explore/model-explorer 1"


@dataclass
class PassGraph:
    """One exported pass: its graph, the graph of the program before it, its mapping file."""

    index: int  # the trace record's index
    path: str
    graph: str
    before: str
    mapping: str  # relative to the folder ("" for the input and final graphs)
    added: int = 0
    removed: int = 0
    changed: int = 0
    # The layers (Model Explorer group ids) holding what the pass removed / made: the launcher
    # opens them, since diff highlights show on drawn nodes only.
    layers_before: list[str] = field(default_factory=list)
    layers_after: list[str] = field(default_factory=list)


@dataclass
class Export:
    folder: str
    label: str
    passes: list[PassGraph] = field(default_factory=list)
    node_data: dict[str, str] = field(default_factory=dict)  # overlay name -> path in folder
    input_graph: str = ""
    final_graph: str = ""
    nodes: int = 0
    seconds: float = 0.0

    @property
    def collection(self) -> str:
        return os.path.join(self.folder, COLLECTION)

    def for_record(self, index: int) -> PassGraph | None:
        return next((p for p in self.passes if p.index == index), None)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "label": self.label,
            "collection": COLLECTION,
            "input": self.input_graph,
            "final": self.final_graph,
            "node_data": self.node_data,
            "passes": [vars(p) for p in self.passes],
        }


def exported_records(trace: Trace, extra: Iterable[int] = ()) -> list[PassRecord]:
    """The records that get a graph: the top-level passes that changed the IR, plus `extra`
    (record indices, e.g. the nested or unchanged pass a user is looking at)."""
    want = {r.index for r in trace.top_level() if r.changed} | set(extra)
    return [r for r in trace.records if r.index in want and r.status != "failed"]


def export_trace(
    source: Session | Trace,
    folder: str,
    *,
    label: str | None = None,
    records: Sequence[int] = (),
    timing: Any = None,
    numeric_inputs: dict | None = None,
) -> Export:
    """Write the Model Explorer folder for `source` (a Session, or a Trace from our pass manager
    or a MIGraphX import) into `folder`; `records` adds graphs for those record indices beyond
    the passes that changed the IR. A Session brings its GPU timing (when timed) and its numeric
    inputs (when checked); pass them for a bare Trace."""
    t0 = time.perf_counter()
    trace, name, timing, numeric_inputs = _unpack(source, label, timing, numeric_inputs)
    os.makedirs(os.path.join(folder, "compare"), exist_ok=True)
    os.makedirs(os.path.join(folder, "node_data"), exist_ok=True)
    out = Export(folder, name)
    graphs = _Graphs(trace, name)
    width = max(3, len(str(len(trace.records) + 1)))
    out.input_graph = graphs.add(f"{0:0{width}d} input", trace.initial, None, None)
    for rec in exported_records(trace, records):
        out.passes.append(_export_pass(graphs, rec, f"{rec.index + 1:0{width}d}", folder))
    out.final_graph = graphs.add(f"{len(trace.records) + 1:0{width}d} final", trace.final, None, None)
    gs = graphs.gs
    _write_json(out.collection, {"label": name, "graphs": gs.graphs, "graphSorting": "name_asc"})
    out.nodes = sum(len(g["nodes"]) for g in gs.graphs)
    _write_overlays(out, graphs, timing, numeric_inputs)
    _write_json(os.path.join(folder, MANIFEST), out.as_json())
    out.seconds = time.perf_counter() - t0
    return out


class _Graphs:
    """The graphs of one export as they are added, with each graph's program and layers (the
    pass entries and the overlays read them back by graph id)."""

    def __init__(self, trace: Trace, name: str):
        self.trace, self.name = trace, name
        self.table = ScopeTable(trace)
        self.created = _provenance(trace)
        self.gs = GraphSet()
        self.graph_of: dict[str, ProgramSnapshot] = {}
        self.scopes_of: dict[str, dict[int, str]] = {}

    def add(
        self, gid: str, snap: ProgramSnapshot, upto: PassRecord | None, rec: PassRecord | None, before: bool = False
    ) -> str:
        """Add `snap` as graph `gid`, layered by the scopes as of `upto`, styled with what `rec`
        removed (`before`) or added and changed."""
        created = self.created
        scopes = self.scopes_of[gid] = self.table.scopes_of(snap, upto)
        self.gs.add_program(
            gid,
            snap,
            scopes,
            status=_change_status(rec, before),
            extra_attrs=lambda i: [{"key": "created by", "value": created[i][1]}] if i in created else [],
            info=_info(self.trace, rec, snap, self.name, before),
        )
        self.graph_of[gid] = snap
        return gid


def _change_status(rec: PassRecord | None, before: bool) -> Callable[[int], str | None]:
    """A node's change style in a graph of `rec`: its removals in the before graph, its additions
    and changes in the after graph; none for the input and final graphs."""
    d = rec.diff if rec is not None else None
    if d and before:
        return lambda i: S.REMOVED if i in d.removed else None
    if d:
        return lambda i: S.ADDED if i in d.added else S.CHANGED if i in d.changed else None
    return lambda _i: None


def _export_pass(graphs: _Graphs, rec: PassRecord, num: str, folder: str) -> PassGraph:
    """Add the before and after graphs of one pass, write its compare mapping, and describe it."""
    trace = graphs.trace
    before, after = trace.snapshots(rec)
    prev = trace.records[rec.index - 1] if rec.index > 0 else None
    # Each pass has its own before graph, styled with what the pass removed: the compare
    # view's left pane then shows the pass's removals with no mapping file (Model Explorer
    # reads one only from its Sync menu), and not the previous pass's additions.
    bid = graphs.add(f"{num} {rec.path} (before)", before, prev, rec, before=True)
    # a pass asked for that changed nothing still gets its own name (the same program)
    gid = graphs.add(f"{num} {rec.path}", after, rec, rec)
    mapping = os.path.join("compare", f"{num}.json")
    _write_json(os.path.join(folder, mapping), _mapping(graphs.gs.node_ids(bid), graphs.gs.node_ids(gid)))
    d = rec.diff
    return PassGraph(
        rec.index,
        rec.path,
        gid,
        bid,
        mapping,
        len(d.added) if d else 0,
        len(d.removed) if d else 0,
        len(d.changed) if d else 0,
        _layers(graphs.scopes_of[bid], d.removed) if d else [],
        _layers(graphs.scopes_of[gid], d.added | d.changed) if d else [],
    )


def _write_overlays(out: Export, graphs: _Graphs, timing: Any, numeric_inputs: dict | None) -> None:
    """Write the node-data overlays that have data and list them in `out.node_data`."""
    trace, graph_of = graphs.trace, graphs.graph_of
    overlays = {
        "provenance": provenance_data(graph_of, graphs.created),
        "gpu_time_us": gpu_time_data(graph_of, trace.final, timing) if timing is not None else None,
        "numeric_error": numeric_error_data(trace, out.passes, graph_of, numeric_inputs) if numeric_inputs else None,
    }
    for key, data in overlays.items():
        if data:
            rel = os.path.join("node_data", f"{key}.json")
            _write_json(os.path.join(out.folder, rel), data)
            out.node_data[key] = rel


def _unpack(source: Any, label: str | None, timing: Any, numeric_inputs: dict | None):
    if isinstance(source, Trace):
        return source, label or "trace", timing, numeric_inputs
    from .. import gpu_bridge  # the session's recorded timing; loads no GPU stack

    s = source
    trace = s.trace
    if timing is None:
        timing = gpu_bridge.session_timing(s)
    if numeric_inputs is None and s.traces.numeric:
        cfg = s.traces.numeric_config()  # the inputs the per-pass check ran on (given or generated)
        numeric_inputs = cfg.inputs if cfg is not None else None
    return trace, label or s.name, timing, numeric_inputs


def _provenance(trace: Trace) -> dict[int, tuple[int, str]]:
    """Instruction id -> (record number, path) of the top-level pass that made it."""
    out: dict[int, tuple[int, str]] = {}
    for rec in trace.top_level():
        if rec.diff is not None:
            for i in rec.diff.added:
                out.setdefault(i, (rec.index + 1, rec.path))
    return out


def _layers(scopes: dict[int, str], ids: Iterable[int], limit: int = 40) -> list[str]:
    """The deepest layers holding `ids`, as Model Explorer names group nodes (`a/b___group___`)."""
    spaces = {namespace(scopes[i]) for i in ids if i in scopes} - {""}
    deepest = sorted(n for n in spaces if not any(o.startswith(n + "/") for o in spaces))
    return [f"{n}___group___" for n in deepest[:limit]]


def _mapping(left: set[str], right: set[str]) -> dict[str, Any]:
    """Model Explorer's sync-navigation data for a pass (the node ids of its before and after
    graphs): each node kept maps to itself; what the pass removed (left) or made (right) maps to
    nothing, which is what its diff highlights mark."""
    kept = sorted(left & right, key=lambda i: (len(i), i))
    return {
        "mapping": {i: i for i in kept},
        "disableMappingFallback": True,
        "showDiffHighlights": True,
        "deletedNodesBorderColor": S.STATUS_STYLE[S.REMOVED].border,
        "deletedNodesBorderWidth": 3,
        "newNodesBorderColor": S.STATUS_STYLE[S.ADDED].border,
        "newNodesBorderWidth": 3,
    }


def _info(
    trace: Trace, rec: PassRecord | None, snap: ProgramSnapshot, name: str, before: bool = False
) -> dict[str, str]:
    """Graph-level attributes (Model Explorer's side panel with nothing selected)."""
    info = {"model": name, "instructions": str(snap.total_instructions()), "modules": str(snap.module_count())}
    if rec is None:
        return info
    if before:  # the program the pass was given; its removals styled
        info["before pass"] = rec.path
        if rec.diff is not None:
            info["removed"] = str(len(rec.diff.removed))
        return info
    info.update({"pass": rec.path, "pipeline": rec.pipeline, "time": f"{rec.time_s * 1e3:.2f} ms"})
    if rec.diff is not None:
        info["diff"] = rec.diff.summary()
    if rec.numeric is not None:
        info["numeric"] = rec.numeric.describe()
    if rec.changed:
        from ..rewrite_summary import record_rewrites

        rows = record_rewrites(trace, rec)
        if rows:
            info["rewrites"] = "; ".join(row.label for row in rows[:12]) + (" …" if len(rows) > 12 else "")
    return info


def _write_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, separators=(",", ":")))  # the C encoder: json.dump streams in Python


def check_export_folder(folder: str) -> None:
    """MigxError unless `folder` can take an export: absent (its parent exists), empty, or an
    earlier export of ours (whose files it replaces)."""
    from ..errors import MigxError

    if os.path.isdir(folder):
        if os.listdir(folder) and not os.path.isfile(os.path.join(folder, MANIFEST)):
            raise MigxError(f"--model-explorer {folder!r} is not empty and holds no earlier export (no {MANIFEST})")
    elif os.path.exists(folder):
        raise MigxError(f"--model-explorer {folder!r} exists and is not a folder")
    elif not os.path.isdir(os.path.dirname(os.path.abspath(folder))):
        raise MigxError(f"--model-explorer {folder!r}: its parent folder does not exist")


def load_manifest(folder: str) -> dict[str, Any]:
    """The index of an exported folder, with a one-line error when it is not one."""
    from ..errors import MigxError

    path = os.path.join(folder, MANIFEST) if os.path.isdir(folder) else folder
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise MigxError(
            f"{folder}: not a Model Explorer export (no {MANIFEST}; write one with trace --model-explorer)"
        ) from None
    except ValueError as e:
        raise MigxError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise MigxError(f"{path}: not a migx-explore Model Explorer index (format {FORMAT!r} expected)")
    return data


__all__ = [
    "COLLECTION",
    "MANIFEST",
    "check_export_folder",
    "Export",
    "PassGraph",
    "export_trace",
    "exported_records",
    "load_manifest",
]
