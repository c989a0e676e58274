"""Cutting a MIGraphX log into what it holds: pass headers, program and module dumps, pass times,
and everything else (driver banner, logger lines, tuning output, other threads' prints).

Every trace format since 2018 (docs/migraphx_traces.md, from src/pass_manager.cpp's history):

    Pass: <name>                                  2018-2020, ROCm 5.6 ... develop 2026
    Module: <module>, Pass: <name>                ROCm 4.5-5.5
    Pass: <name> completed in (s): <seconds>      ROCm 5.5 (after each module)
    (no header, only the dumps)                   dev builds of early 2023 (PR #1380)
    <name>: <ms>ms                                MIGRAPHX_TIME_PASSES (any period since 2023)
    Validate ...                                  debug builds

A dump right after a header is that pass's per-module block (no `module:` line) or, when it starts
with `module: "main"`, the program-level snapshot printed once per pass after every module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from migx_explore.compiler.migraphx_text import header_name, is_instruction_line

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PASS = re.compile(r"^Pass:\s*(\S.*?)\s*$")
_MODULE_PASS = re.compile(r"^Module:\s*(.*?),\s*Pass:\s*(\S.*?)\s*$")
_COMPLETED = re.compile(r"^Pass:\s*(\S.*?)\s+completed in \(s\):\s*([-+0-9.eE]+)\s*$")
_TIME = re.compile(r"^([A-Za-z_][\w:]*(?:\{[^}]*\})?):\s*([-+0-9.eE]+)\s*ms\s*$")
_VALIDATE = re.compile(r"^Validate\b")
_BANNER = re.compile(r"Running \[ MIGraphX Version: ([^\]]*?)\s*\]")
# Driver and logger lines (stdout up to ROCm 7.2, the logger on stderr in develop 2026).
_NOISE = re.compile(
    r"^(Compiling \.\.\.|Reading:|Allocating params|Running performance report|Quantizing to|Saving |"
    r"Skipped \d+ configs|Winning GEMM solution|Benchmarking|Compilation time:|Summary:|Batch size:|Rate:|"
    r"Total time:|Total instructions time:|Overhead|Percentiles|terminate called|\s*what\(\):|Error |Dump: |"
    r"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|\[ MIGraphX Version|Running \[ MIGraphX|"
    r"[A-Z][A-Z0-9_]+=.*\\\s*$|MIGRAPHX_|Run instruction:|Time: |"
    r"\S+: [-+0-9.eE]+ms( / \d+ = [-+0-9.eE]+ms)?, [-+0-9.eE]+%|"  # perf report summary rows
    r"module \{|module attributes |func\.func |%[\w.#]+ = |return( %|$)|\}+$|#map\d* = )"  # MIGRAPHX_TRACE_MLIR's MLIR
)


@dataclass
class Header:
    name: str
    line: int
    module: str | None = None  # `Module: M, Pass: X` names it; `Pass: X` does not


@dataclass
class Dump:
    lines: list[tuple[int, str]] = field(default_factory=list)
    closed: bool = False  # ended by a blank line or what follows, not by the end of the text
    modules: set = field(default_factory=set)  # module headers seen (a repeated one starts a new print)
    follows: str = ""  # the line before it, other prints aside: "header", "time", "blank", "dump"

    @property
    def program_level(self) -> bool:
        """A whole-program print (`module: "main"` first), not one module's block."""
        return bool(self.lines) and header_name(self.lines[0][1]) is not None

    @property
    def first(self) -> int:
        return self.lines[0][0] if self.lines else 0

    @property
    def last(self) -> int:
        return self.lines[-1][0] if self.lines else 0


@dataclass
class PassTime:
    name: str
    ms: float
    line: int


@dataclass
class LogEvents:
    """A log in order: Header, Dump and PassTime events, and the lines that were neither."""

    events: list = field(default_factory=list)
    noise: list[tuple[int, str]] = field(default_factory=list)  # driver/logger lines, recognised
    stray: list[tuple[int, str]] = field(default_factory=list)  # unrecognised lines (interleaved prints)
    version: str = ""  # from the driver banner
    validate_lines: int = 0  # debug builds' `Validate ...`
    line_count: int = 0
    last_line: int = 0  # the last line that is not blank
    completed: dict[int, float] = field(default_factory=dict)  # header index -> seconds (ROCm 5.5)
    errors: list[tuple[int, str]] = field(default_factory=list)  # `Error <pass>: <what>`, `what(): ...`


def clean(line: str) -> str:
    return _ANSI.sub("", line).rstrip("\r\n").rstrip()


def split_log(text: str) -> LogEvents:
    """The events of a log. A blank line ends a dump only where the next line is no instruction of
    the same dump: MIGraphX ends each module with one blank line and each program with two."""
    lines = text.splitlines()
    splitter = _Splitter()
    splitter.out.line_count = len(lines)
    for no, raw in enumerate(lines, 1):
        s = clean(raw)
        if not s.strip():
            splitter.blank()
            continue
        splitter.blank_run = 0
        splitter.out.last_line = no
        st = s.strip()
        if not (splitter.pass_line(st, no) or splitter.dump_line(st, no)):
            splitter.other_line(st, no)
    splitter.close(at_end=True)
    return splitter.out


class _Splitter:
    """split_log's state: the events so far, the dump being read, the blank lines just seen and
    what the last significant line was (`prev`: blank, header, dump or time)."""

    def __init__(self) -> None:
        self.out = LogEvents()
        self.dump: Dump | None = None
        self.blank_run = 0
        self.prev = "blank"

    def close(self, at_end: bool = False) -> None:
        if self.dump is not None and self.dump.lines:
            self.dump.closed = not at_end
            self.out.events.append(self.dump)
        self.dump = None

    def blank(self) -> None:
        self.prev = "blank"
        self.blank_run += 1
        if self.dump is not None and not self.dump.program_level:
            self.close()  # a per-module block ends at its blank line
        elif self.dump is not None and self.blank_run >= 2:
            self.close()  # a program ends with two

    def pass_line(self, st: str, no: int) -> bool:
        """A pass's completion time or header (of a module pass, or a program pass)."""
        out = self.out
        m = _COMPLETED.match(st)
        if m:
            self.close()
            seconds = float(m.group(2))
            for k in range(len(out.events) - 1, -1, -1):
                if isinstance(out.events[k], Header) and out.events[k].name == m.group(1):
                    out.completed[k] = out.completed.get(k, 0.0) + seconds
                    break
            return True
        m = _MODULE_PASS.match(st)
        header = Header(m.group(2), no, m.group(1).strip().strip('"')) if m else None
        if header is None and (m := _PASS.match(st)):
            header = Header(m.group(1), no)
        if header is None:
            return False
        self.close()
        out.events.append(header)
        self.prev = "header"
        return True

    def dump_line(self, st: str, no: int) -> bool:
        """A module header or an instruction: a line of the current dump, or the first of a new one."""
        name = header_name(st)
        if name is not None:
            if self.dump is None or not self.dump.program_level or name in self.dump.modules:
                self.close()
                self.dump = Dump(follows=self.prev)
            self.dump.modules.add(name)
        elif not is_instruction_line(st):
            return False
        elif self.dump is None:
            self.dump = Dump(follows=self.prev)
        self.dump.lines.append((no, st))
        self.prev = "dump"
        return True

    def other_line(self, st: str, no: int) -> None:
        """Validation lines, pass times, the banner, other threads' noise and stray lines."""
        out = self.out
        if _VALIDATE.match(st):
            out.validate_lines += 1
            return
        m = _TIME.match(st)
        if m:
            out.events.append(PassTime(m.group(1), float(m.group(2)), no))
            self.prev = "time" if self.prev in ("header", "time") else self.prev
            return
        b = _BANNER.search(st)
        if b and not out.version:
            out.version = b.group(1).strip()
        # driver/logger/other threads' lines leave `prev` alone: they interleave anywhere
        if _NOISE.match(st) or b:
            out.noise.append((no, st))
            if st.startswith(("Error ", "what():")) or "terminate called" in st or "[ERROR]" in st:
                out.errors.append((no, st))
        else:
            out.stray.append((no, st))
            if self.dump is not None and (" = " in st or st.startswith("@")):
                self.dump.lines.append((no, st))  # a garbled instruction: the program reader reports it


def looks_like_trace(events: LogEvents) -> bool:
    """Pass headers; or, for the headerless dev builds of early 2023, pass times between dumps,
    or per-module dumps each followed by a whole-program one."""
    if any(isinstance(e, Header) for e in events.events):
        return True
    dumps = [e for e in events.events if isinstance(e, Dump)]
    if len(dumps) >= 2 and any(isinstance(e, PassTime) for e in events.events):
        return True
    kinds = [d.program_level for d in dumps]
    return any(not a and b for a, b in zip(kinds, kinds[1:])) and len(dumps) >= 3


__all__ = ["Dump", "Header", "LogEvents", "PassTime", "clean", "looks_like_trace", "split_log"]
