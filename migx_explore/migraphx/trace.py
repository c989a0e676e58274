"""A MIGraphX compile log (MIGRAPHX_TRACE_COMPILE / MIGRAPHX_TRACE_PASSES, any period) as our Trace.

One record per pass in the order MIGraphX ran them; a composite pass's nested passes (printed
before it, per module) become its children; per-module blocks are joined into whole programs
(the module a headerless block belongs to is MIGraphX's visiting order: submodules deepest first,
main last, fused bodies skipped); top-level records are grouped into the five pipelines by the
catalogue (gpu/migraphx_catalogue.py) and take MIGRAPHX_TIME_PASSES / `completed in (s)` times.
Instruction ids are carried from one snapshot to the next by content (id_alignment), so every
view's diff, regions and rewrite summaries work as on our own traces. Numeric checks are off: the
log holds no weights and MIGraphX's kernels do not run here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from migx_explore.compiler.migraphx_text import Problem, ReadProgram, read_program
from migx_explore.compiler.pass_infra import PassRecord, Trace
from migx_explore.compiler.snapshot import ProgramSnapshot, diff, snapshot
from migx_explore.gpu.migraphx_catalogue import COMPOSITES, VERSIONS, CatalogueEntry, catalogue
from migx_explore.id_alignment import IdAligner

from .log import Dump, Header, LogEvents, PassTime, split_log
from .printed import cut_short, module_refs, modules_of, resolve_unnamed, shares

NUMERIC_NOTE = "numeric checks are off: a MIGraphX log holds no weights, and its kernels do not run here"
_FUSED = re.compile(r"(^mlir_|(^|:)(pointwise|reduce|mlir|fused|ck_|concat|split_fused)\w*$)")


@dataclass
class MigraphxTrace:
    """The trace, and what reading the log found."""

    trace: Trace
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    version: str = ""  # MIGraphX version from the driver banner
    catalogue: str = ""  # which catalogue grouped the passes
    stops_at: int | None = None  # line where a truncated log stops mid-pass
    symbols: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def summary(self) -> str:
        t = self.trace
        tops = t.top_level()
        lines = [
            f"MIGraphX trace{' ' + self.version if self.version else ''}: {len(tops)} passes"
            f" ({len(t.records) - len(tops)} nested), grouped by the {self.catalogue} catalogue",
            NUMERIC_NOTE,
        ]
        lines += self.notes
        if self.problems:
            lines.append(f"{len(self.problems)} line(s) not read as written:")
            lines += [f"  {p}" for p in self.problems[:20]]
            if len(self.problems) > 20:
                lines.append(f"  ... and {len(self.problems) - 20} more")
        return "\n".join(lines)


@dataclass
class _Block:
    name: str
    line: int
    module: str | None
    dump: Dump | None = None
    time_ms: float = 0.0
    timed: bool = False


class _MigraphxAligner(IdAligner):
    """id_alignment's matching with MIGraphX's module names kept as they are (a module's name is
    its identity across a real trace; content-matching bodies would rename them)."""

    def match_bodies(self) -> None:
        return None

    def renamed(self) -> ProgramSnapshot:
        for m in self.other.modules:
            self.names[m.name] = m.name
        return super().renamed()


class _Builder:
    def __init__(self, events: LogEvents, version: str | None):
        self.ev = events
        self.out = MigraphxTrace(Trace(ProgramSnapshot((), 0)), version=events.version)
        self.literals: dict = {}
        self.scopes: dict[int, str] = {}
        self.state: dict[str, list[tuple[int, str]]] = {}  # module -> its lines, in program order
        self.snap: ProgramSnapshot | None = None
        self.want_version = version
        self.seen: set[tuple[int, str]] = set()
        self.printed: tuple[str, ...] | None = None  # the last whole-program print read

    # ---- programs --------------------------------------------------------------------------------
    def read(self, lines: list[tuple[int, str]]) -> tuple[ProgramSnapshot, ReadProgram]:
        r = read_program(lines, cache=self.literals)
        for p in r.problems:  # a program is re-read per pass: each bad line is reported once
            if (p.line, p.message) not in self.seen:
                self.seen.add((p.line, p.message))
                self.out.problems.append(p)
        snap = snapshot(r.program)
        if self.snap is not None:
            al = _MigraphxAligner(self.snap, snap, 0)
            aligned = _share_unchanged(self.snap, al.run())
            ids = al.ids
        else:
            aligned, ids = snap, {}
        for i, scope in r.program.scopes.items():
            self.scopes[ids.get(i, i)] = scope
        for i, syms in r.symbols.items():
            self.out.symbols[ids.get(i, i)] = syms
        aligned.scopes = self.scopes
        self.snap = aligned
        return aligned, r

    def set_program(self, dump: Dump) -> ProgramSnapshot:
        """The program a whole-program print shows; most passes change nothing, and a print the
        same as the last one is the same program (not read again)."""
        self.state = modules_of(dump.lines)
        key = tuple(s for _, s in dump.lines)
        if key == self.printed and self.snap is not None:
            return self.snap
        self.printed = key
        return self.read(dump.lines)[0]

    def set_module(self, module: str, dump: Dump) -> ProgramSnapshot:
        lines = resolve_unnamed(dump.lines, self.state.get(module, []), module)
        old = self.state.get(module)
        self.state[module] = lines
        if old is not None and self.snap is not None and [s for _, s in old] == [s for _, s in lines]:
            return self.snap  # the module as it was
        self.printed = None
        for _, s in lines:  # a module the pass just made (fuse_pointwise's `main:pointwise0`) is
            for ref in module_refs(s):  # printed with the program after it: empty until then
                self.state.setdefault(ref, [])
        joined: list[tuple[int, str]] = []
        for name, body in self.state.items():
            joined.append((body[0][0] if body else 0, f'module: "{name}"'))
            joined.extend(body)
        return self.read(joined)[0]

    # ---- records ---------------------------------------------------------------------------------
    def record(self, name: str, before: ProgramSnapshot, after: ProgramSnapshot, depth: int, parent) -> PassRecord:
        t = self.out.trace
        rec = PassRecord(len(t.records), name, name, "", None, depth, parent, {})
        rec.before, rec.after = before, after
        rec.diff = diff(before, after)
        t.records.append(rec)
        if parent is not None:
            t.records[parent].children.append(rec.index)
        return rec

    def build(self) -> MigraphxTrace:
        blocks, initial = self.blocks()
        if initial is not None:
            self.out.trace.initial = self.set_program(initial)
        elif blocks and blocks[0].dump is not None:
            self.out.notes.append(
                "the log has no input program (MIGRAPHX_TRACE_PASSES without MIGRAPHX_TRACE_COMPILE): "
                "the first pass starts from its own result"
            )
            first = blocks[0].dump
            self.out.trace.initial = self.set_program(first) if first.program_level else self.set_module("main", first)
        else:
            self.out.trace.initial = self.read([])[0]
        # since 2021 every pass ends in a program print; a log cut before the first one still
        # shows the period by its input program's `module:` header
        if any(b.dump is not None and b.dump.program_level for b in blocks) or (
            initial is not None and initial.program_level
        ):
            self.with_program_dumps(blocks)
        else:
            self.per_module_only(blocks)
        self.group()
        self.finish()
        return self.out

    def blocks(self) -> tuple[list[_Block], Dump | None]:
        """The log's pass blocks and input program. A log can hold several compiles (driver
        `verify` compiles for ref and gpu; `compile` prints the result after the trace): a program
        printed with no `Pass:` before it starts another, and the longest one is read."""
        blocks: list[_Block] = []
        initial = None
        starts: list[tuple[int, Dump | None]] = [(0, None)]
        has_headers = any(isinstance(e, Header) for e in self.ev.events)
        time: PassTime | None = None  # a MIGRAPHX_TIME_PASSES line not yet given to a block
        for k, e in enumerate(self.ev.events):
            if isinstance(e, Header):
                b = _Block(e.name, e.line, e.module)
                if k in self.ev.completed:
                    b.time_ms, b.timed = self.ev.completed[k] * 1e3, True
                blocks.append(b)
                time = None
            elif isinstance(e, Dump):
                if blocks and blocks[-1].dump is None and (e.follows in ("header", "time") or not has_headers):
                    blocks[-1].dump = e
                elif not blocks and initial is None and time is None:
                    initial = e
                    starts = [(0, e)]
                elif has_headers:
                    starts.append((len(blocks), e))
                else:  # a dump with no header (dev builds of early 2023): named by its time line if any
                    name = time.name if time else (blocks[-1].name if blocks and e.program_level else "")
                    b = _Block(name, e.first, None, e)
                    if time is not None and not e.program_level:
                        b.time_ms, b.timed = time.ms, True
                    blocks.append(b)
                    time = None
            elif isinstance(e, PassTime):
                target = next((b for b in reversed(blocks[-1:]) if b.name == e.name and not b.timed), None)
                if target is None:
                    target = next((b for b in reversed(blocks) if b.name == e.name and not b.timed), None)
                    if target is not None and target.dump is not None:
                        target = None  # a time line before a headerless dump names that dump
                if target is not None:
                    target.time_ms, target.timed = e.ms, True
                else:
                    time = e
        for k, b in enumerate(blocks):
            if not b.name:
                b.name = f"pass#{k + 1}"
        if len(starts) > 1:
            ends = [s for s, _ in starts[1:]] + [len(blocks)]
            pick = max(range(len(starts)), key=lambda j: ends[j] - starts[j][0])
            first, initial = starts[pick]
            runs = [ends[j] - starts[j][0] for j in range(len(starts))]
            where = f"from line {initial.first}" if initial is not None else "at the top"
            self.out.notes.append(
                f"the log holds {len(starts)} program prints with passes between them ({', '.join(map(str, runs))} "
                f"pass blocks): read the longest compile, {where}"
            )
            blocks = blocks[first : ends[pick]]
        return blocks, initial

    def with_program_dumps(self, blocks: list[_Block]) -> None:
        pending: list[_Block] = []
        for b in blocks:
            if b.dump is not None and b.dump.program_level:
                self.top(b, pending)
                pending = []
            else:
                pending.append(b)
        if pending:
            last = pending[-1]
            self.out.stops_at = self.ev.last_line or last.line
            name = _cut_pass_name([p.name for p in pending])
            self.top(_Block(name, last.line, None), pending, truncated=True)

    def top(self, b: _Block, span: list[_Block], truncated: bool = False) -> None:
        before = self.snap
        rec = self.record(b.name, before, before, 0, None)
        rec.time_s = (b.time_ms + sum(x.time_ms for x in span if x.name == b.name)) / 1e3
        own = [x for x in span if x.name == b.name]
        # a log cut inside a pass holds the first modules of its visiting order, not the last
        order = self.visit_order(0 if truncated else len(own))
        visit = self.attribute(own, order)
        segment: list[_Block] = []
        k = 0
        for x in span:
            if x.name == b.name and x in own:
                module = visit[k]
                self.nest(segment, rec, module)
                segment = []
                k += 1
            else:
                segment.append(x)
        if truncated:  # the blocks after the last of its own: the module it was visiting next
            self.nest(segment, rec, order[k] if k < len(order) else "main")
        else:
            self.nest(segment, rec, visit[min(k, len(visit) - 1)] if visit else "main")
        if truncated:
            self.truncated(rec, "inside this pass (no program printed after it)")
            return
        seen, state = len(self.out.problems), self.state
        after = self.set_program(b.dump)
        if not b.dump.closed and (len(self.out.problems) > seen or cut_short(state, self.state)):
            self.out.stops_at = self.ev.last_line
            self.snap = before
            self.truncated(rec, "inside the program printed after this pass")
            return
        rec.after = after
        rec.diff = diff(rec.before, rec.after)

    def truncated(self, rec: PassRecord, where: str) -> None:
        rec.status = "failed"
        rec.reason = f"the log stops at line {self.out.stops_at}, {where}"
        if self.ev.errors:  # the pass threw: MIGraphX's own message says why
            rec.reason += f"; MIGraphX: {self.ev.errors[0][1][:200]}"
        rec.after = None
        rec.diff = None
        self.out.trace.error = f"{rec.name}: {rec.reason}"
        self.out.trace.failed_index = rec.index

    def attribute(self, own: list[_Block], order: list[str]) -> list[str]:
        """The module each of a pass's per-module blocks printed: named by `Module:` headers, else
        MIGraphX's visiting order when the count fits, else the module whose instructions the
        block shares most of (fused bodies are skipped by MIGraphX, and a guess of which are
        fused can miss)."""
        if len(self.state) <= 1 or not own:
            return [x.module or "main" for x in own]
        out = []
        for k, x in enumerate(own):
            prior = order[k] if k < len(order) else "main"
            if x.module or x.dump is None:
                out.append(x.module or prior)
                continue
            scores = {m: shares(x.dump.lines, lines) for m, lines in self.state.items()}
            best = max(scores, key=lambda m: (scores[m], m == prior))
            out.append(best if scores[best] > 0 and scores[best] > scores.get(prior, -1.0) else prior)
        return out

    def visit_order(self, n: int) -> list[str]:
        """Modules a pass visits, as run_passes does: reverse([main] + submodules), bypass ones
        (fused bodies) skipped, so main last."""
        names = [m for m in self.state if m != "main" and not _FUSED.search(m)]
        order = list(reversed(names)) + ["main"]
        return order[-n:] if 0 < n <= len(order) else order

    def nest(self, segment: list[_Block], parent: PassRecord, module: str) -> None:
        """Nested blocks of one module, in print order (post-order: a composite prints after its
        own nested passes), as records under `parent` in pre-order."""
        stack: list[tuple[_Block, list]] = []  # (block, children) awaiting a parent
        for x in segment:
            node = (x, [])
            kids = COMPOSITES.get(x.name)
            if kids:
                while stack and stack[-1][0].name in kids:
                    node[1].insert(0, stack.pop())
            stack.append(node)
        for node in stack:
            self.emit(node, parent, module)

    def emit(self, node: tuple[_Block, list], parent: PassRecord, module: str) -> None:
        x, kids = node
        before = self.snap
        rec = self.record(x.name, before, before, parent.depth + 1, parent.index)
        rec.options = {"module": module}
        rec.time_s = x.time_ms / 1e3
        for kid in kids:
            self.emit(kid, rec, module)
        last = self.ev.events[-1] if self.ev.events else None
        if x.dump is None and isinstance(last, Header) and last.line == x.line:  # ends at its header
            rec.status = "failed"
            rec.reason = f"the log stops at line {self.ev.last_line}, right after this pass's header"
            rec.after = rec.diff = None
        elif x.dump is not None and not x.dump.closed:  # the text ends inside this block
            rec.status = "failed"
            rec.reason = f"the log stops at line {self.ev.last_line}, inside this pass's print of {module}"
            rec.after = rec.diff = None
        elif x.dump is not None:
            rec.after = self.set_module(x.module or module, x.dump)
            rec.diff = diff(rec.before, rec.after)

    def per_module_only(self, blocks: list[_Block]) -> None:
        """2018-2020 logs: every block is a top-level pass over main (or the `Module:` it names)."""
        for k, b in enumerate(blocks):
            before = self.snap
            rec = self.record(b.name, before, before, 0, None)
            rec.time_s = b.time_ms / 1e3
            if b.dump is None and k == len(blocks) - 1 and isinstance(self.ev.events[-1], Header):
                self.out.stops_at = self.ev.last_line  # the text ends at a pass's header
                self.truncated(rec, "right after this pass's header")
            elif b.dump is not None and not b.dump.closed and cut_short(self.state, modules_of(b.dump.lines)):
                self.out.stops_at = self.ev.last_line
                self.truncated(rec, "inside this pass's print")
            elif b.dump is not None:
                rec.after = self.set_module(b.module or "main", b.dump)
                rec.diff = diff(rec.before, rec.after)

    # ---- pipelines and paths ---------------------------------------------------------------------
    def group(self) -> None:
        tops = self.out.trace.top_level()
        names = [r.name for r in tops]
        versions = [self.want_version] if self.want_version else list(reversed(VERSIONS))  # ties: the newer
        best, best_score, best_cat = None, -1.0, ()
        for v in versions:
            cat = catalogue(v)
            sm = difflib.SequenceMatcher(a=names, b=[e.name for e in cat], autojunk=False)
            score = sum(m.size for m in sm.get_matching_blocks())
            if score > best_score:
                best, best_score, best_cat = v, score, cat
        self.out.catalogue = best or ""
        assign: dict[int, CatalogueEntry] = {}
        sm = difflib.SequenceMatcher(a=names, b=[e.name for e in best_cat], autojunk=False)
        for m in sm.get_matching_blocks():
            for k in range(m.size):
                assign[m.a + k] = best_cat[m.b + k]
        _fill_unmatched(assign, names, best_cat)
        pipeline, counts = "", {}
        for k, r in enumerate(tops):
            e = assign.get(k)
            if e is not None:
                pipeline = e.pipeline
                r.entry = [x for x in best_cat if x.pipeline == pipeline].index(e)
                r.options = {"ours": e.ours}
            r.pipeline = pipeline or "passes"
            if r.name == "id":
                r.status, r.reason = "disabled", "an entry enable_pass switched off (MIGraphX prints it as `id`)"
                r.enabled = False
            n = counts[(r.pipeline, r.name)] = counts.get((r.pipeline, r.name), 0) + 1
            r.path = f"{r.pipeline}.{r.name}" + (f"#{n}" if n > 1 else "")
        t = self.out.trace
        for r in t.records:  # children's paths under their parent, numbered among siblings
            seen: dict[str, int] = {}
            for c in r.children:
                kid = t.records[c]
                seen[kid.name] = seen.get(kid.name, 0) + 1
                kid.pipeline = r.pipeline
                kid.path = f"{r.path}/{kid.name}" + (f"#{seen[kid.name]}" if seen[kid.name] > 1 else "")

    def finish(self) -> None:
        ev = self.ev
        if ev.validate_lines:
            self.out.notes.append(f"debug build: {ev.validate_lines} `Validate` line(s) skipped")
        if ev.stray:
            self.out.notes.append(
                f"{len(ev.stray)} line(s) are neither program nor trace (other threads' prints?), first at "
                f"line {ev.stray[0][0]}: {ev.stray[0][1][:80]}"
            )
        if self.out.stops_at is not None:
            self.out.notes.append(f"the log stops at line {self.out.stops_at}, in the middle of a pass")
        if ev.errors:  # a pass threw (PR #4380 prints `Error <pass>: <what>` and dumps an .mxr)
            line, text = ev.errors[0]
            self.out.notes.append(f"MIGraphX reported an error at line {line}: {text[:200]}")
            t = self.out.trace
            if t.error is None:
                t.error = f"line {line}: {text[:200]}"


def _share_unchanged(before: ProgramSnapshot, after: ProgramSnapshot) -> ProgramSnapshot:
    """`after` with each module equal to its `before` counterpart replaced by that very object, as
    our own traces share what a pass left alone: memory grows with what changed, and diffs skip
    the shared modules."""
    old = before.by_name
    mods = []
    shared = 0
    for m in after.modules:
        prev = old.get(m.name) if m.name in old else None
        if prev is not None and prev.bypass == m.bypass and prev.instrs == m.instrs:
            mods.append(prev)
            shared += 1
        else:
            mods.append(m)
    if not shared:
        return after
    return ProgramSnapshot(mods, after.next_id, after.scopes)


def _within(composite: str) -> set[str]:
    """The passes a composite runs, its own nested composites' passes included."""
    out, todo = set(), [composite]
    while todo:
        for kid in COMPOSITES.get(todo.pop(), ()):
            if kid not in out:
                out.add(kid)
                todo.append(kid)
    return out


def _cut_pass_name(names: list[str]) -> str:
    """The pass a log stops inside, from the blocks printed so far: a top-level pass prints one
    name for all its modules, so several names are nested passes of the smallest composite that
    runs them all (itself printed or not); so is one name that is no entry of a catalogue
    (fuse_pointwise runs only inside fuse_pointwise_reduce)."""
    distinct = set(names)
    if len(distinct) == 1 and names[-1] in {e.name for v in VERSIONS for e in catalogue(v)}:
        return names[-1]
    fits = [c for c in COMPOSITES if distinct <= _within(c) | {c}]
    if fits:
        return min(fits, key=lambda c: len(_within(c)))
    return next((n for n in reversed(names) if n in COMPOSITES), names[-1])


def _fill_unmatched(assign: dict[int, CatalogueEntry], names: list[str], cat: tuple[CatalogueEntry, ...]) -> None:
    """Passes the sequence match left out (the log ran passes in another order, or a pass twice)
    take the entry of their name between their matched neighbours, else the next one after the
    previous match, else the first of that name."""
    pos = {id(e): k for k, e in enumerate(cat)}
    for k, name in enumerate(names):
        if k in assign:
            continue
        lo = max((pos[id(assign[j])] for j in assign if j < k), default=-1)
        hi = min((pos[id(assign[j])] for j in assign if j > k), default=len(cat))
        hits = [j for j, e in enumerate(cat) if e.name == name]
        pick = next((j for j in hits if lo < j < hi), None)
        if pick is None:
            pick = next((j for j in hits if j > lo), hits[0] if hits else None)
        if pick is not None:
            assign[k] = cat[pick]


def times_only(events: LogEvents, version: str | None = None) -> MigraphxTrace:
    """A MIGRAPHX_TIME_PASSES log with no program prints: one record per time line (per pass and
    module, in order), each with its time and no program."""
    b = _Builder(events, version)
    b.out.trace.initial = b.read([])[0]
    for e in events.events:
        if isinstance(e, PassTime):
            rec = b.record(e.name, b.snap, b.snap, 0, None)
            rec.time_s = e.ms / 1e3
    b.out.notes.append("a MIGRAPHX_TIME_PASSES log: pass names and times only, no programs")
    b.group()
    b.finish()
    return b.out


def read_trace(text: str, *, version: str | None = None, events: LogEvents | None = None) -> MigraphxTrace:
    """A MIGraphX compile log as a Trace (never raises on bad text: see `.problems`, `.notes`).
    `version`: the catalogue to group by ("2026-05" / "2026-08"); None picks the closer one.
    `events`: split_log(text), when the caller has it already."""
    return _Builder(events if events is not None else split_log(text), version).build()


__all__ = ["MigraphxTrace", "NUMERIC_NOTE", "read_trace", "times_only"]
