"""Ours beside theirs: a model traced through our pipelines next to MIGraphX's trace of the same
model, pass by pass. Passes pair by catalogue name (MIGraphX's `gpu::lowering` is our
`lowering`, in order); each pair shows what each side's pass did to the op histogram and the
instruction count, the kernels after it, and a graph diff of the two programs after it (ids
matched by content, id_alignment). The first pass where the two changes differ is named: the
fidelity table of docs/migraphx_conformance.md, on the user's own model."""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field

from migx_explore.compiler.pass_infra import PassRecord, Trace
from migx_explore.compiler.snapshot import InstrRecord, ProgramSnapshot, diff
from migx_explore.id_alignment import IdAligner


def op_counts(snap: ProgramSnapshot) -> Counter:
    """Ops over every module (params, literals and @return left out)."""
    return Counter(r.op.name for m in snap.modules for r in m.instrs if not r.op.name.startswith("@"))


def kernel_names(snap: ProgramSnapshot) -> Counter:
    """The kernels main launches: a code object's symbol name, else the gpu op's name."""
    out: Counter = Counter()
    for r in snap.module("main").instrs:
        name = r.op.name
        if name == "gpu::code_object":
            out[str(r.op.get("symbol_name", "") or name)] += 1
        elif name.startswith("gpu::") and name not in ("gpu::precompile_op",):
            out[name] += 1
    return out


def _delta(before: Counter, after: Counter) -> dict[str, int]:
    keys = set(before) | set(after)
    return {k: after[k] - before[k] for k in sorted(keys) if after[k] != before[k]}


@dataclass
class PassPair:
    """One pass on both sides (either may be None where the other side has no such pass)."""

    name: str
    pipeline: str
    ours: PassRecord | None
    theirs: PassRecord | None
    ours_delta: dict[str, int] = field(default_factory=dict)  # op -> count change made by the pass
    theirs_delta: dict[str, int] = field(default_factory=dict)
    ours_instructions: int | None = None
    theirs_instructions: int | None = None
    ours_kernels: Counter = field(default_factory=Counter)
    theirs_kernels: Counter = field(default_factory=Counter)
    graph_diff: str = ""  # the two programs after the pass: "+a -r ~c" of theirs against ours

    @property
    def agrees(self) -> bool:
        return self.ours is not None and self.theirs is not None and self.ours_delta == self.theirs_delta

    def row(self) -> str:
        def fmt(d: dict[str, int]) -> str:
            return ", ".join(f"{k} {v:+d}" for k, v in d.items()) or "no change"

        mark = "=" if self.agrees else ("?" if self.ours is None or self.theirs is None else "≠")
        ours = "(not in ours)" if self.ours is None else fmt(self.ours_delta)
        theirs = "(not in MIGraphX's trace)" if self.theirs is None else fmt(self.theirs_delta)
        counts = f"{self.ours_instructions if self.ours_instructions is not None else '-'} / "
        counts += f"{self.theirs_instructions if self.theirs_instructions is not None else '-'}"
        return f"{mark} {self.pipeline + '.' + self.name:<44} {counts:>11}  ours: {ours}  |  MIGraphX: {theirs}"


@dataclass
class Comparison:
    pairs: list[PassPair]
    initial: str  # the two input programs, op by op

    @property
    def first_parting(self) -> PassPair | None:
        """The first pass both sides ran whose changes differ."""
        return next((p for p in self.pairs if p.ours is not None and p.theirs is not None and not p.agrees), None)

    def report(self) -> str:
        head = [
            "ours vs MIGraphX, pass by pass (= same change, ≠ different, ? one side only); "
            "instructions after: ours / MIGraphX",
            f"input programs: {self.initial}",
        ]
        rows = [p.row() for p in self.pairs if p.ours_delta or p.theirs_delta or p.ours is None or p.theirs is None]
        part = self.first_parting
        tail = [
            f"first pass where they part: {part.pipeline}.{part.name} ({part.graph_diff} after it)"
            if part
            else "the two agree on every pass both ran"
        ]
        if self.pairs:
            last = next((p for p in reversed(self.pairs) if p.ours and p.theirs), None)
            if last is not None:
                tail.append(
                    f"kernels after {last.name}: ours {dict(last.ours_kernels)}; MIGraphX {dict(last.theirs_kernels)}"
                )
        return "\n".join(head + rows + tail)


class _ValuesUnseen(IdAligner):
    """id_alignment with literals matched by shape: a MIGraphX log elides their values."""

    def strong_key(self, r: InstrRecord, module: str, base: bool = False) -> tuple:
        key = super().strong_key(r, module, base)
        return key[:-1] + (None,) if r.literal is not None else key


def _key(r: PassRecord) -> str:
    if r.status == "disabled" or r.name == "id":
        return "id"  # enable_pass leaves an `id` entry where a pass is switched off
    ours = r.options.get("ours") if isinstance(r.options, dict) else None
    return str(ours or r.name).removeprefix("gpu::")


def compare(ours: Trace, theirs: Trace) -> Comparison:
    """Pair the top-level passes of two traces by name, in order, and compare what each did."""
    a, b = ours.top_level(), theirs.top_level()
    sm = difflib.SequenceMatcher(a=[_key(r) for r in a], b=[_key(r) for r in b], autojunk=False)
    pairs: list[PassPair] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            pairs += [_pair(x, y, ours, theirs) for x, y in zip(a[i1:i2], b[j1:j2])]
        else:
            pairs += [_pair(x, None, ours, theirs) for x in a[i1:i2]]
            pairs += [_pair(None, y, ours, theirs) for y in b[j1:j2]]
    return Comparison(pairs, _initial(ours.initial, theirs.initial))


def _pair(x: PassRecord | None, y: PassRecord | None, ours: Trace, theirs: Trace) -> PassPair:
    ref = x or y
    p = PassPair(ref.name if _key(ref) == "id" else _key(ref), ref.pipeline, x, y)
    if x is not None and x.after is not None:
        before, after = ours.snapshots(x)
        p.ours_delta = _delta(op_counts(before), op_counts(after))
        p.ours_instructions = after.total_instructions()
        p.ours_kernels = kernel_names(after)
    if y is not None and y.after is not None:
        before, after = theirs.snapshots(y)
        p.theirs_delta = _delta(op_counts(before), op_counts(after))
        p.theirs_instructions = after.total_instructions()
        p.theirs_kernels = kernel_names(after)
    if x is not None and y is not None and x.after is not None and y.after is not None:
        mine = x.after
        aligned = _ValuesUnseen(mine, y.after, 0).run()
        p.graph_diff = diff(mine, aligned).summary()
    return p


def _initial(ours: ProgramSnapshot, theirs: ProgramSnapshot) -> str:
    a, b = op_counts(ours), op_counts(theirs)
    if a == b:
        return f"the same ops ({sum(a.values())} instructions)"
    only = _delta(a, b)
    return "MIGraphX's differs from ours by " + ", ".join(f"{k} {v:+d}" for k, v in only.items())


__all__ = ["Comparison", "PassPair", "compare", "kernel_names", "op_counts"]
