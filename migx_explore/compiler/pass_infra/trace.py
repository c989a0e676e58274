"""The trace a pass manager run leaves behind: one plain-data record per pass (nested passes
included), in execution order. The explorer, renderer and CLI read it; `write_trace` lays it out
MLIR-style as numbered files plus a JSON index."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..ir import Replacement
from ..pattern_rewriter import MatchRecord
from ..reprs import record_html, record_repr
from ..snapshot import ProgramSnapshot, SnapshotDiff


@dataclass
class NumericCheck:
    """The outputs after a pass against the unoptimized program's (compiler/verify.py decides)."""

    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""  # e.g. "unavailable: gpu::code_object has no reference compute"
    rms: float = float("nan")  # relative RMS error of the worst output (MIGraphX's rms_range)
    threshold: float = float("nan")  # its threshold (nan in allclose mode)
    output: int = 0  # index of the worst output
    tolerance: str = ""  # the rule applied, e.g. "relative RMS <= 9.54e-06 (float32)"
    # Set when a discontinuous op chose differently among near-ties and the outputs were compared
    # with the reference re-run on that choice (compiler/discontinuous.py), e.g. "TopK tie order
    # differs at 3 of 300 positions; inputs within tolerance (...)".
    selection: str = ""

    def describe(self) -> str:
        if self.note:
            return self.note
        head = f"output {self.output}: " if self.output else ""
        tail = f"; {self.selection}" if self.selection else ""
        if self.threshold == self.threshold:  # not nan: rms mode
            return f"{head}rms {self.rms:.3e} (threshold {self.threshold:.3e}), max|err| {self.max_abs:.3e}{tail}"
        return f"{head}max|err| {self.max_abs:.3e}, max rel {self.max_rel:.3e} ({self.tolerance}){tail}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "ok": self.ok,
            "note": self.note,
            "rms": self.rms,
            "threshold": self.threshold,
            "output": self.output,
            "tolerance": self.tolerance,
            "selection": self.selection,
        }


@dataclass
class PassRecord:
    index: int
    path: str  # e.g. "fusion.fuse_pointwise_reduce/fuse_pointwise#2"
    name: str
    pipeline: str
    entry: int | None  # position in its pipeline (top-level records only)
    depth: int
    parent: int | None
    options: dict[str, Any]
    enabled: bool = True
    status: str = "ok"  # ok | disabled | failed
    reason: str = ""  # why disabled, or the failure message
    time_s: float = 0.0
    before: ProgramSnapshot | None = None
    after: ProgramSnapshot | None = None
    diff: SnapshotDiff | None = None
    validation: str | None = None  # None = valid; else the validation message
    # Computed on demand when a check was left pending (`defer_numeric`): reading it runs the
    # check; `numeric_ready` tells without running anything.
    numeric: NumericCheck | None = field(default=None, repr=False, compare=False)
    matches: list[MatchRecord] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    user: bool = False
    # Claims "new computes old's value" made during the pass (nested passes' included), in order.
    replacements: list[Replacement] = field(default_factory=list)
    # Per-pass figures of instrumentations beyond the built-in ones, by name (instrumentation.py).
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.diff is not None and not self.diff.is_noop

    @property
    def numeric_ready(self) -> bool:
        """Whether `numeric` is there to read without running a check (a result, or no check)."""
        return self.__dict__.get("_numeric_pending") is None

    @property
    def numeric_pending(self) -> bool:
        """A check is attached and has not run: reading `numeric` runs it."""
        return not self.numeric_ready

    def defer_numeric(self, check: Callable[[], NumericCheck | None]) -> None:
        """Leave the numeric check for whoever first reads `numeric` (or a background filler)."""
        if self.__dict__.get("_numeric") is None:
            self.__dict__["_numeric_pending"] = check

    @property
    def noop(self) -> bool:
        return self.status == "ok" and not self.changed

    def __repr__(self) -> str:
        return record_repr(self)

    def _repr_html_(self) -> str:
        return record_html(self)

    def summary(self) -> dict[str, Any]:
        d = self.diff
        return {
            "index": self.index,
            "path": self.path,
            "name": self.name,
            "pipeline": self.pipeline,
            "entry": self.entry,
            "depth": self.depth,
            "parent": self.parent,
            "options": jsonable(self.options),
            "enabled": self.enabled,
            "status": self.status,
            "reason": self.reason,
            "time_ms": self.time_s * 1e3,
            "changed": self.changed,
            "noop": self.noop,
            "user": self.user,
            "added": len(d.added) if d else 0,
            "removed": len(d.removed) if d else 0,
            "changed_instructions": len(d.changed) if d else 0,
            "instructions": self.after.total_instructions() if self.after else None,
            "validation": self.validation,
            "numeric": self.numeric.as_dict() if self.numeric else None,
            "matches": [{"rule": m.rule, "root": m.root, "module": m.module} for m in self.matches],
            "children": self.children,
            **({"figures": jsonable(self.figures)} if self.figures else {}),
        }


def _get_numeric(rec: PassRecord) -> NumericCheck | None:
    d = rec.__dict__
    if d.get("_numeric_pending") is not None:
        with d.setdefault("_numeric_lock", threading.Lock()):  # setdefault is atomic
            check = d.get("_numeric_pending")
            if check is not None:  # not computed meanwhile by another thread
                d["_numeric"] = check()
                d["_numeric_pending"] = None
    return d.get("_numeric")


def _set_numeric(rec: PassRecord, value: NumericCheck | None) -> None:
    rec.__dict__["_numeric"] = value
    rec.__dict__["_numeric_pending"] = None


def _record_state(rec: PassRecord) -> dict[str, Any]:
    """What a record pickles (and copies): not the lock of its lazy check, which exists once the
    check was read, and not a check still pending (a closure over this process's evaluator);
    a copy of a pending record has no result."""
    state = dict(rec.__dict__)
    state.pop("_numeric_lock", None)
    state["_numeric_pending"] = None
    return state


PassRecord.numeric = property(_get_numeric, _set_numeric, doc="The numeric check's result (None: not checked).")
PassRecord.__getstate__ = _record_state


def jsonable(v: Any) -> Any:
    """`v` as plain JSON data: containers recursively, anything else as its str."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


@dataclass
class Trace:
    initial: ProgramSnapshot
    records: list[PassRecord] = field(default_factory=list)
    error: str | None = None
    failed_index: int | None = None

    @property
    def final(self) -> ProgramSnapshot:
        """The last good snapshot (after a failure: the state before the failing pass)."""
        for r in reversed(self.records):
            if r.depth == 0 and r.after is not None and r.status != "failed":
                return r.after
        return self.initial

    def top_level(self) -> list[PassRecord]:
        return [r for r in self.records if r.depth == 0]

    def children(self, rec: PassRecord) -> list[PassRecord]:
        return [self.records[i] for i in rec.children]

    def __iter__(self) -> Iterator[PassRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def snapshots(self, rec: PassRecord) -> tuple[ProgramSnapshot, ProgramSnapshot]:
        """(before, after) of a record. A disabled or failed pass has no after snapshot: it left
        the IR as it was."""
        before = rec.before or self.initial
        return before, (rec.after if rec.after is not None else before)

    def find(self, path: str) -> PassRecord:
        """Look up by full path, or by a unique suffix such as 'fuse_pointwise'."""
        for r in self.records:
            if r.path == path:
                return r
        hits = [r for r in self.records if r.path.endswith("." + path) or r.path.endswith("/" + path)]
        if not hits:
            hits = [r for r in self.records if r.name == path]
        if not hits:
            raise KeyError(f"no pass {path!r} in the trace")
        return hits[0]

    def first_numeric_failure(self) -> PassRecord | None:
        for r in self.records:
            if r.numeric is not None and not r.numeric.ok and not r.numeric.note:
                return r
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "initial_instructions": self.initial.total_instructions(),
            "final_instructions": self.final.total_instructions(),
            "error": self.error,
            "failed_index": self.failed_index,
            "passes": [r.summary() for r in self.records],
        }


def record_file_name(rec: PassRecord) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.#-]+", "_", rec.path.replace("/", "."))
    return f"{rec.index + 1:03d}_{stem}.txt"


# Past this many modules, a nested pass's file holds only the modules it changed: a decode step
# traced over 255 lengths has thousands of modules and thousands of nested passes (optimize_module
# per submodule), and a whole printout per nested pass made gigabytes of files.
FULL_NESTED_FILE_MODULES = 64


def _record_text(trace: Trace, rec: PassRecord) -> str:
    after = rec.after
    if rec.depth == 0 or len(after.modules) <= FULL_NESTED_FILE_MODULES:
        return after.text
    before = trace.snapshots(rec)[0].by_name
    changed = [m for m in after.modules if before.get(m.name) is not m]
    gone = sorted(before.keys() - after.by_name.keys())
    note = (
        f"# only the {len(changed)} of {len(after.modules)} modules this nested pass changed; the others are "
        f"as in the file of its top-level pass" + (f"; removed: {', '.join(gone)}" if gone else "") + "\n"
    )
    return note + "\n".join(m.text for m in changed)


def write_trace(
    trace: Trace,
    out_dir: str,
    *,
    changed_only: bool = True,
    extra: dict[str, Any] | None = None,
    per_pass: Callable[[PassRecord], dict[str, Any]] | None = None,
) -> list[str]:
    """Write `000_input.txt`, one numbered IR file per (changed) pass and `index.json`.

    per_pass: extra keys for a record's index entry (the explorer adds its rewrite summary;
    the compiler layer cannot compute it)."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "000_input.txt")
    with open(path, "w") as f:
        f.write(trace.initial.text)
    written.append(path)
    index = trace.to_json()
    for rec, entry in zip(trace.records, index["passes"]):
        entry["file"] = None
        if per_pass is not None:
            entry.update(per_pass(rec))
        if rec.after is None or (changed_only and not rec.changed):
            continue
        name = record_file_name(rec)
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(f"# pass {rec.path} ({rec.diff.summary() if rec.diff else ''})\n")
            f.write(_record_text(trace, rec))
        entry["file"] = name
        written.append(os.path.join(out_dir, name))
    if extra:
        index.update(extra)
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    written.append(os.path.join(out_dir, "index.json"))
    return written
