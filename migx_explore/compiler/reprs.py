"""Short text reprs and notebook `_repr_html_` tables for what a notebook user prints: program
snapshots, snapshot diffs and pass records. A repr says what the object is in one line (counts,
names), never its contents or an address; the HTML form is a small table."""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import Any

# The classes these functions describe import this module, so they are typed here by their names
# in the docstrings only (an import back would be a cycle): snap is a ProgramSnapshot, d a
# SnapshotDiff, rec a PassRecord.
ProgramSnapshot = SnapshotDiff = PassRecord = Any

TOP_OPS = 8  # op names listed per table cell; the rest are counted


def table(title: str, rows: list[tuple[str, str]]) -> str:
    """A two-column HTML table under a bold title (cells are escaped here)."""
    body = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{escape(k)}</th>"
        f"<td style='text-align:left'>{escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<div class='migx-repr'><b>{escape(title)}</b><table>{body}</table></div>"


def op_counts(names: list[str]) -> str:
    """'convolution × 4, add × 2, … (+3 more)' from op names, most frequent first."""
    counts = Counter(names).most_common()
    shown = ", ".join(f"{op} × {n}" if n > 1 else op for op, n in counts[:TOP_OPS])
    more = len(counts) - TOP_OPS
    return shown + (f", … (+{more} more)" if more > 0 else "") if counts else "none"


def _modules_phrase(snap: ProgramSnapshot) -> str:
    n = snap.module_count()
    return "1 module" if n == 1 else f"{n} modules"


def snapshot_repr(snap: ProgramSnapshot) -> str:
    return f"<ProgramSnapshot: {snap.total_instructions()} instructions in {_modules_phrase(snap)}>"


def snapshot_html(snap: ProgramSnapshot) -> str:
    rows = [("instructions", str(snap.total_instructions())), ("modules", str(snap.module_count()))]
    mods = snap.modules
    for m in mods[:TOP_OPS]:
        rows.append((f"module {m.name}", f"{len(m)} instructions: " + op_counts([r.name for r in m.instrs])))
    if len(mods) > TOP_OPS:
        rows.append(("…", f"{len(mods) - TOP_OPS} more modules"))
    return table("program snapshot", rows)


def diff_repr(d: SnapshotDiff) -> str:
    return f"<SnapshotDiff: {d.summary()}>"


def diff_html(d: SnapshotDiff) -> str:
    after = d.after.by_id if d.after is not None else {}
    rows = [
        ("summary", d.summary()),
        ("added", f"{len(d.added)}: " + op_counts([after[i][1].name for i in d.added if i in after])),
        ("removed", str(len(d.removed))),
        ("changed", f"{len(d.changed)}: " + op_counts([after[i][1].name for i in d.changed if i in after])),
    ]
    if d.modules_added:
        rows.append(("modules added", _names(d.modules_added)))
    if d.modules_removed:
        rows.append(("modules removed", _names(d.modules_removed)))
    return table("what the pass changed", rows)


def _names(names: tuple[str, ...]) -> str:
    more = len(names) - TOP_OPS
    return ", ".join(names[:TOP_OPS]) + (f", … (+{more} more)" if more > 0 else "")


def _status(rec: PassRecord) -> str:
    if rec.status == "ok":
        return rec.diff.summary() if rec.diff is not None else "ok"
    return rec.status + (f": {rec.reason}" if rec.reason else "")


def record_repr(rec: PassRecord) -> str:
    return f"<PassRecord {rec.index} {rec.path}: {_status(rec)}, {rec.time_s * 1e3:.2f} ms>"


def record_html(rec: PassRecord) -> str:
    rows: list[tuple[str, str]] = [
        ("pass", rec.path + (" (your pass)" if rec.user else "")),
        ("status", rec.status + (f": {rec.reason}" if rec.reason else "")),
        ("change", rec.diff.summary() if rec.diff is not None else "not recorded"),
        ("time", f"{rec.time_s * 1e3:.2f} ms"),
    ]
    if rec.options:
        rows.append(("options", ", ".join(f"{k}={short_value(v)}" for k, v in rec.options.items())))
    if rec.validation:
        rows.append(("validation", rec.validation))
    if rec.numeric is not None:
        rows.append(("numeric check", rec.numeric.describe() if hasattr(rec.numeric, "describe") else str(rec.numeric)))
    if rec.children:
        rows.append(("nested passes", str(len(rec.children))))
    if rec.replacements:
        rows.append(("replacements", str(len(rec.replacements))))
    return table(f"pass {rec.index}: {rec.path}", rows)


def short_value(value: Any) -> str:
    """An option value for display: functions and classes by name, never `<function ... at 0x...>`."""
    if callable(value):
        return getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or type(value).__name__
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
