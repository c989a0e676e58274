"""Pure-Python queries the explorer widgets display: tree rows, stats rows, the metrics series,
input-dims parsing. No ipywidgets here, so all of it is tested without a notebook.

The widgets only turn these rows into controls (STYLE: query functions return data, a thin
wrapper binds them)."""

from __future__ import annotations

import dataclasses
import html
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from migx_explore.compiler.pass_infra import PassEntry, PassRecord, Pipeline, entry_paths

from ..errors import UserInputError
from ..session import Session


@dataclass(frozen=True)
class TreeRow:
    """One line of the pipeline tree: a pipeline, a top-level entry, or a nested child record."""

    kind: str  # "pipeline" | "pass" | "child"
    path: str  # pipeline name, entry path ("required.eliminate_identity#1") or child record path
    name: str
    pipeline: str
    depth: int  # 0 pipelines, 1 entries, 2+ nested children
    enabled: bool  # the checkbox: the entry's (or pipeline's) own switch
    effective: bool  # actually ran: pipeline and entry enabled
    status: str  # ok | disabled | failed | pending (not implemented) | not run (after a failure) | tracing
    changed: bool
    reason: str = ""
    time_ms: float = 0.0
    index: int | None = None  # trace record index to jump to (None: not in the trace)
    toggleable: bool = True  # pending passes and nested children have no switch
    user: bool = False
    summary: str = ""  # "+3 -2 ~1", "no change", "12 passes, 4 changed"
    numeric: str = ""  # TraceCache.numeric_state: ok | bad | note | pending | off | unchanged
    default_enabled: bool = True  # the catalogue's setting (a row the user switched stays in view)

    @property
    def noop(self) -> bool:
        return self.kind != "pipeline" and self.status == "ok" and not self.changed

    @property
    def css_state(self) -> str:
        """One CSS class naming the row's state (the widget dims no-ops and disabled rows)."""
        if self.status in ("failed", "pending", "not run", "tracing"):
            return "migx-" + self.status.replace(" ", "-")
        if not self.effective:
            return "migx-disabled"
        return "migx-changed" if self.changed else "migx-noop"


def is_pending(entry: PassEntry) -> bool:
    """A catalogue entry whose pass is not implemented (it can never be switched on)."""
    return getattr(type(entry.pass_), "pending", False)


def _records_by_path(session: Session) -> dict[str, PassRecord]:
    return {r.path: r for r in session.trace_so_far.records if r.depth == 0}


def _children(session: Session, rec: PassRecord) -> Iterable[PassRecord]:
    records = session.trace_so_far.records  # rec is in it, and so are its children
    for i in rec.children:
        child = records[i]
        yield child
        yield from _children(session, child)


def _row_for_record(
    session: Session,
    rec: PassRecord,
    kind: str,
    depth: int,
    *,
    enabled: bool,
    toggleable: bool,
    reason: str = "",
    default_enabled: bool = True,
) -> TreeRow:
    d = rec.diff
    return TreeRow(
        kind=kind,
        path=rec.path,
        name=rec.name,
        pipeline=rec.pipeline,
        depth=depth,
        enabled=enabled,
        effective=rec.status != "disabled",
        status=rec.status,
        changed=rec.changed,
        reason=rec.reason or reason,
        time_ms=rec.time_s * 1e3,
        index=rec.index,
        toggleable=toggleable,
        user=rec.user,
        summary=d.summary() if d is not None else "",
        numeric=session.traces.numeric_state(rec),
        default_enabled=default_enabled,
    )


def _catalogue_defaults(session: Session) -> dict[str, bool]:
    return {path: e.enabled for pl in session.config.catalog for e, path in zip(pl.entries, entry_paths(pl))}


def _untraced_row(pl: Pipeline, entry: Any, path: str, tracing: bool, default_enabled: bool) -> TreeRow:
    """The row of an entry with no record: being traced in the background, or not run."""
    if tracing:
        status, why = "tracing", "being traced in the background"
    else:
        status, why = "not run", "not run: an earlier pass failed"
    return TreeRow(
        "pass",
        path,
        entry.name,
        pl.name,
        1,
        entry.enabled,
        False,
        status,
        False,
        reason=why,
        toggleable=not is_pending(entry),
        user=entry.user,
        default_enabled=default_enabled,
    )


def pipeline_rows(session: Session, pl: Pipeline, so_far: bool = False) -> list[TreeRow]:
    """The rows of one pipeline: its header, its entries, and each entry's nested children
    (so_far: as far as the trace has run, else tracing the session to the end first)."""
    if not so_far:
        session.run()
    recs = _records_by_path(session)
    tracing = not session.trace_complete and session.trace_so_far.error is None
    defaults = _catalogue_defaults(session)
    body: list[TreeRow] = []
    for entry, path in zip(pl.entries, entry_paths(pl)):
        rec = recs.get(path)
        pending = is_pending(entry)
        if rec is None:  # not traced yet (the rest runs in the background), or after a failure
            body.append(_untraced_row(pl, entry, path, tracing, defaults.get(path, True)))
            continue
        row = _row_for_record(
            session,
            rec,
            "pass",
            1,
            enabled=entry.enabled,
            toggleable=not pending,
            default_enabled=defaults.get(path, True),
        )
        if pending:
            row = dataclasses.replace(row, status="pending")
        body.append(row)
        body.extend(
            _row_for_record(session, c, "child", 1 + c.depth, enabled=True, toggleable=False)
            for c in _children(session, rec)
        )
    passes = [r for r in body if r.kind == "pass"]
    n_changed = sum(r.changed for r in passes)
    head = TreeRow(
        "pipeline",
        pl.name,
        pl.name,
        pl.name,
        0,
        pl.enabled,
        pl.enabled,
        "ok" if pl.enabled else "disabled",
        n_changed > 0,
        reason=pl.doc,
        time_ms=sum(r.time_ms for r in passes),
        summary=f"{len(passes)} passes, {n_changed} changed",
    )
    return [head, *body]


def tree_rows(session: Session, so_far: bool = False) -> list[TreeRow]:
    """Every row of the pipeline tree, in pipeline order: of the whole trace, or (so_far, what
    the explorer shows while the rest is traced in the background) as far as the trace has run,
    entries not traced yet having status "tracing"."""
    if not so_far:
        session.run()
    return [row for pl in session.pipelines for row in pipeline_rows(session, pl, so_far=True)]


def row_matches(row: TreeRow, text: str, hide_unchanged: bool) -> bool:
    """Whether a pass/child row stays visible under the filter box and "hide unchanged". A pass
    the user switched away from the catalogue's setting stays visible, so it can be switched back."""
    if text and text.lower() not in row.path.lower():
        return False
    if not hide_unchanged or row.changed or row.status == "failed":
        return True
    return row.kind == "pass" and row.toggleable and row.enabled != row.default_enabled


def visible_rows(rows: Sequence[TreeRow], text: str = "", hide_unchanged: bool = False) -> list[TreeRow]:
    """Rows left after filtering; a pipeline header stays when any of its rows does."""
    out: list[TreeRow] = []
    head: TreeRow | None = None
    for r in rows:
        if r.kind == "pipeline":
            head = r
            if not r.enabled:  # a switched-off pipeline stays, so it can be switched back on
                out.append(r)
                head = None
            continue
        if row_matches(r, text, hide_unchanged):
            if head is not None:
                out.append(head)
                head = None
            out.append(r)
    return out


# ---- stepping ----------------------------------------------------------------------------------
def position_label(session: Session) -> str:
    """'7 / 56 · required.eliminate_identity#1' over the passes the stepper visits."""
    rec = session.current
    vis = session.cursor.visible(session.trace_so_far)
    more = "" if session.trace_complete else "+"  # the rest is still being traced
    if not vis:
        return "no passes match the current view" if not more else f"tracing… · {rec.path}"
    k = vis.index(rec.index) + 1 if rec.index in vis else "–"
    return f"{k} / {len(vis)}{more} · {rec.path}"


# ---- stats ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StatRow:
    label: str
    value: str
    css: str = ""  # "migx-good" | "migx-bad" | "" (the widget colours the value)


def _delta(before: int, after: int) -> str:
    d = after - before
    return f"{before} → {after} ({'+' if d > 0 else ''}{d})" if d else f"{before} (unchanged)"


def stat_rows(stats: dict[str, Any]) -> list[StatRow]:
    """pass_changes.stats(session) as labelled rows in reading order."""
    rows = [
        StatRow("pass", stats["pass"]),
        StatRow(
            "status",
            stats["status"] + (f": {stats['reason']}" if stats.get("reason") else ""),
            "migx-bad" if stats["status"] == "failed" else "",
        ),
        StatRow("instructions", _delta(stats["instructions_before"], stats["instructions_after"])),
        StatRow("added / removed / changed", f"+{stats['added']} / -{stats['removed']} / ~{stats['changed']}"),
        StatRow("kernel launches", _delta(stats["launches_before"], stats["launches_after"])),
        StatRow("pass time", f"{stats['time_ms']:.3f} ms"),
    ]
    state = stats.get("numeric_state")
    if stats.get("numeric_note"):
        rows.append(StatRow("numeric error", stats["numeric_note"]))
    elif stats.get("numeric_max_abs") is not None:
        ok = stats.get("numeric_ok")
        val = f"max |Δ| = {stats['numeric_max_abs']:.3g}"
        rows.append(
            StatRow(
                "numeric error",
                val + ("" if ok is None else (" ✓" if ok else " ✗ exceeds tolerance")),
                "" if ok is None else ("migx-good" if ok else "migx-bad"),
            )
        )
    else:
        rows.append(StatRow("numeric error", NUMERIC_STATE_TEXT.get(state or "unchanged", "not checked")))
    if stats.get("matches"):
        rows.append(StatRow("rule matches", str(stats["matches"])))
    return rows


NUMERIC_STATE_TEXT = {
    "pending": "checking in the background…",
    "off": "not checked (the numeric check is off)",
    "nested": "checked through its top-level pass",
    "unchanged": "not checked (the pass did not change the IR)",
}


def stats_html(rows: Sequence[StatRow]) -> str:
    body = "".join(
        f'<tr><th>{html.escape(r.label)}</th><td class="{r.css}">{html.escape(r.value)}</td></tr>' for r in rows
    )
    return f'<table class="migx-stats-table">{body}</table>'


def warnings_html(warnings: Sequence[str]) -> str:
    if not warnings:
        return '<div class="migx-warnings-none">Pass order: no ordering-constraint warnings.</div>'
    items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
    return (
        f'<div class="migx-warnings-list"><b>Ordering-constraint warnings ({len(warnings)})</b><ul>{items}</ul></div>'
    )


def metrics_series(session: Session) -> dict[str, list]:
    """Instruction and launch counts after each top-level pass (the IR-metrics sparkline)."""
    from ..stats import launch_count

    out: dict[str, list] = {"index": [], "path": [], "instructions": [], "launches": []}
    for r in session.trace.top_level():
        snap = r.after if r.after is not None else r.before
        if snap is None:
            continue
        out["index"].append(r.index)
        out["path"].append(r.path)
        out["instructions"].append(snap.total_instructions())
        out["launches"].append(launch_count(snap))
    return out


# ---- model picker -----------------------------------------------------------------------------
_DIMS_ITEM = re.compile(r"^\s*([^=\s]+)\s*=\s*([\d\s,x×]+)\s*$")


def parse_dims(text: str) -> dict[str, list[int]]:
    """'x=1,3,224,224; mask=1x77' -> {'x': [1, 3, 224, 224], 'mask': [1, 77]}."""
    out: dict[str, list[int]] = {}
    for item in re.split(r"[;\n]", text or ""):
        if not item.strip():
            continue
        m = _DIMS_ITEM.match(item)
        if not m:
            raise UserInputError(
                f"cannot read input dims {item.strip()!r}; write name=1,3,224,224 (separate inputs with ';')"
            )
        out[m.group(1)] = [int(d) for d in re.split(r"[,x×\s]+", m.group(2).strip()) if d]
    return out


def format_dims(dims: dict[str, Sequence[int | str]]) -> str:
    return "; ".join(f"{k}={','.join(str(d) for d in v)}" for k, v in dims.items())


def onnx_inputs(model: Any) -> dict[str, list[int | str]]:
    """Graph inputs (initializers excluded) with their dims; symbolic dims come back as names."""
    import onnx

    if isinstance(model, bytes):
        proto = onnx.load_from_string(model)
    elif isinstance(model, (str, os.PathLike)):
        proto = onnx.load(os.fspath(model), load_external_data=False)  # shapes only: skip weight files
    else:
        proto = model
    inits = {i.name for i in proto.graph.initializer}
    out: dict[str, list[int | str]] = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        dims: list[int | str] = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                dims.append(d.dim_value)
            else:
                dims.append(d.dim_param or "?")
        out[vi.name] = dims
    return out


def symbolic_inputs(dims: dict[str, list[int | str]]) -> dict[str, list[int | str]]:
    """The inputs whose shape has a symbolic dim (the picker asks for concrete dims for these)."""
    return {k: v for k, v in dims.items() if any(not isinstance(d, int) for d in v)}


def default_dims(dims: dict[str, list[int | str]]) -> dict[str, list[int]]:
    """A starting point for the dims box: symbolic dims become 1 (batch-like)."""
    return {k: [d if isinstance(d, int) else 1 for d in v] for k, v in symbolic_inputs(dims).items()}
