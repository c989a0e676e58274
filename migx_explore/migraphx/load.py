"""Reading a MIGraphX text file: a compile trace becomes a Trace, a printed program a one-record
trace (or, when every op is ours, a program our own pipelines can run), and a Session over it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Program
from migx_explore.compiler.migraphx_text import Problem, read_program
from migx_explore.compiler.pass_infra import PassRecord, Trace
from migx_explore.compiler.snapshot import diff, snapshot

from .log import Dump, PassTime, looks_like_trace, split_log
from .trace import NUMERIC_NOTE, MigraphxTrace, read_trace, times_only

MAX_LOG_BYTES = 2 << 30


@dataclass
class MigraphxLog:
    """What a MIGraphX text file held: `kind` "trace" (passes) or "program" (one printed program)."""

    kind: str
    read: MigraphxTrace
    program: Program | None = None  # for kind "program": the program read
    notes: list[str] = field(default_factory=list)

    @property
    def trace(self) -> Trace:
        return self.read.trace

    @property
    def problems(self) -> list[Problem]:
        return self.read.problems

    def summary(self) -> str:
        if self.kind == "trace":
            return self.read.summary()
        head = [f"MIGraphX program{' ' + self.read.version if self.read.version else ''}"]
        return "\n".join(head + self.notes + self.read.summary().splitlines()[2:])


def read_text(path: str) -> str:
    """The file's text, or a one-line error naming the file."""
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise MigxError(f"{path}: cannot read ({e.strerror or e})") from None
    if size > MAX_LOG_BYTES:
        raise MigxError(f"{path}: {size} bytes is more than the {MAX_LOG_BYTES >> 30} GiB a log may have")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise MigxError(f"{path}: cannot read ({e.strerror or e})") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell's `>` writes UTF-16 with a BOM
        return data.decode("utf-16", errors="replace")
    if b"\0" in data[:4096]:
        raise MigxError(f"{path}: a binary file (an .mxr?), not MIGraphX text; print it with migraphx-driver read")
    return data.decode("utf-8-sig", errors="replace")


def refuse_mxr(path: object) -> None:
    """A one-line error for MIGraphX's binary program files, which only MIGraphX can print."""
    if isinstance(path, (str, os.PathLike)) and str(path).endswith(".mxr"):
        raise MigxError(
            f"{path}: an .mxr file (MIGraphX's msgpack program) is not read here; "
            f"print it with `migraphx-driver read {os.path.basename(str(path))}` and load that text"
        )


def is_migraphx_text(path: object) -> bool:
    """Whether `path` names a text file that looks like MIGraphX output (a printed program or a
    compile log): not .onnx, and MIGraphX text near the top (see looks_like_migraphx)."""
    if not isinstance(path, (str, os.PathLike)) or str(path).endswith((".onnx", ".mxr", ".zip")):
        return False
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return looks_like_migraphx(head)


_TEXT_START = re.compile(
    r"(?m)^(\S+ = (@param:|@literal|@return|[A-Za-z_][\w:]*[\[(]| ?\S)|Pass: |Module: .*, Pass: |module: \"|"
    r"[A-Za-z_][\w:]*: [-+0-9.eE]+ms\s*$)"
)


def looks_like_migraphx(head: bytes) -> bool:
    """Whether the first bytes of a file are MIGraphX text (UTF-8 or, from PowerShell, UTF-16):
    an instruction, a `module:`, `Pass:` or pass-time line; no NUL bytes, no zip."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = head.decode("utf-16", errors="replace")
    elif b"\0" in head or head.startswith(b"PK"):
        return False
    else:
        text = head.decode("utf-8-sig", errors="replace")
    return bool(_TEXT_START.search(text))


def read_log(source: str, *, version: str | None = None, text: bool = False) -> MigraphxLog:
    """A MIGraphX log or printed program from a path (or the text itself with text=True)."""
    if not text:
        refuse_mxr(source)
    body = source if text else read_text(source)
    events = split_log(body)
    if looks_like_trace(events):
        return MigraphxLog("trace", read_trace(body, version=version, events=events))
    dumps = [e for e in events.events if isinstance(e, Dump)]
    if not dumps and any(isinstance(e, PassTime) for e in events.events):
        return MigraphxLog("trace", times_only(events, version))
    if not dumps:
        what = "the text" if text else source
        raise MigxError(f"{what}: no MIGraphX program or pass trace in it (no '<name> = <op>' or 'Pass:' lines)")
    whole = [d for d in dumps if d.program_level]
    chosen = (whole or dumps)[-1]
    notes = []
    if len(dumps) > 1:
        notes.append(f"the text holds {len(dumps)} program prints; read the last, from line {chosen.first}")
    r = read_program(chosen.lines)
    snap = snapshot(r.program)
    snap.scopes = r.program.scopes
    rec = PassRecord(0, "migraphx.read", "read", "migraphx", 0, 0, None, {})
    rec.before, rec.after, rec.diff = snap, snap, diff(snap, snap)
    mt = MigraphxTrace(Trace(snap, [rec]), list(r.problems), version=events.version, symbols=r.symbols)
    if r.opaque:
        notes.append(f"{sum(r.opaque.values())} instruction(s) kept as MIGraphX printed them (not evaluated)")
    return MigraphxLog("program", mt, r.program, notes)


def load_session(cls: type, source: str, *, version: str | None = None, **kw: Any):
    """A Session (of class `cls`) over a MIGraphX log or printed program (see Session.from_migraphx)."""
    from .fixed import FixedTraceCache

    log = read_log(source, version=version)
    name = kw.pop("name", os.path.basename(source))
    kw.setdefault("numeric", False)
    kw.setdefault("validate", False)
    if log.kind == "program" and not log.read.problems and _all_ours(log.program):
        # every instruction is an op of ours: our own pipelines can compile MIGraphX's program
        s = cls(log.program, name=name, **kw)
    else:
        s = cls(log.trace.initial.to_program(), name=name, **kw)
        s.traces = FixedTraceCache(log.trace, lock=s.config.lock)
    s.source = {"kind": "migraphx", "value": str(source), "input_dims": {}}
    s.state(LoadedLog).log = log
    return s


class LoadedLog:
    """The MIGraphX log a session was read from (Session.state; `migx-explore trace` prints its summary)."""

    log: Any = None


def _all_ours(program: Program | None) -> bool:
    from migx_explore.compiler.migraphx_text import is_opaque

    return program is not None and not any(is_opaque(i.op) for m in program.modules.values() for i in m)


__all__ = [
    "MigraphxLog",
    "NUMERIC_NOTE",
    "is_migraphx_text",
    "looks_like_migraphx",
    "refuse_mxr",
    "load_session",
    "read_log",
    "read_text",
]
