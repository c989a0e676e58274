"""Unified diff of the printed IR of two snapshots, aligned by stable instruction id.

A plain text diff of two printouts shows every line after an inserted instruction as changed,
because the `@N` names are positions and shift. Here lines are matched by the instruction they
print: an instruction whose content (op, inputs by id, submodules, shape) did not change is
context, however its printed names moved; a changed one shows as `-old` / `+new`. Hunk line
numbers refer to the full printouts (`ProgramSnapshot.text`, the numbered trace files).

Modules are aligned by name first, and only the modules that differ are compared line by line:
a module a pass left alone is the same snapshot object on both sides, so a pass over one of 255
submodules costs that submodule (and a walk over the module names), not the whole program. A
pass that changes 255 alike submodules the same way prints that change once ("× N like this").
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

from migx_explore.compiler.snapshot import ModuleSnapshot, ProgramSnapshot

_Key = tuple
_Opcode = tuple[str, int, int, int, int]


class _Side:
    """One printout as modules laid end to end: module k starts at line `start[k]` (a blank
    separator line before every module but the first, then its header and instructions)."""

    def __init__(self, snap: ProgramSnapshot):
        self.modules = snap.modules
        self.start: list[int] = []
        n = 0
        for k, m in enumerate(self.modules):
            self.start.append(n)
            n += len(m.instrs) + (2 if k else 1)
        self.total = n
        self._lines: dict[int, list[str]] = {}

    def lines(self, k: int) -> list[str]:
        """Module k's printed lines, separator included."""
        got = self._lines.get(k)
        if got is None:
            body = self.modules[k].text.splitlines()
            got = self._lines[k] = ([""] if k else []) + body
        return got

    def line(self, i: int, locate: Callable[[int], int]) -> str:
        k = locate(i)
        return self.lines(k)[i - self.start[k]]


def _module_keys(ms: ModuleSnapshot, other: ModuleSnapshot | None, first: bool, side: str) -> list[_Key]:
    keys: list[_Key] = [] if first else [("sep", ms.name)]
    keys.append(("module", ms.name, ms.bypass))
    twins = other.by_id if other is not None else {}
    for r in ms.instrs:
        twin = twins.get(r.id)
        # A changed instruction gets a side-specific key so it can never match its old self.
        keys.append(("ins", r.id) if twin is not None and twin.same_content(r) else ("ins", r.id, side))
    return keys


def _opcodes(a: _Side, b: _Side) -> list[_Opcode]:
    """Line-level opcodes (difflib's form) over both whole printouts."""
    names_a = [m.name for m in a.modules]
    names_b = [m.name for m in b.modules]
    ops: list[_Opcode] = []

    def add(tag: str, i1: int, i2: int, j1: int, j2: int) -> None:
        if i1 == i2 and j1 == j2:
            return
        if ops and ops[-1][0] == tag == "equal":
            ops[-1] = ("equal", ops[-1][1], i2, ops[-1][3], j2)
        else:
            ops.append((tag, i1, i2, j1, j2))

    def span(side: _Side, k1: int, k2: int) -> tuple[int, int]:
        return (
            side.start[k1] if k1 < len(side.start) else side.total,
            side.start[k2] if k2 < len(side.start) else side.total,
        )

    for tag, ka1, ka2, kb1, kb2 in difflib.SequenceMatcher(None, names_a, names_b, autojunk=False).get_opcodes():
        if tag != "equal":
            (i1, i2), (j1, j2) = span(a, ka1, ka2), span(b, kb1, kb2)
            add(tag if i1 != i2 and j1 != j2 else ("delete" if i1 != i2 else "insert"), i1, i2, j1, j2)
            continue
        for ka, kb in zip(range(ka1, ka2), range(kb1, kb2)):
            ma, mb = a.modules[ka], b.modules[kb]
            (i1, i2), (j1, j2) = span(a, ka, ka + 1), span(b, kb, kb + 1)
            if ma is mb:
                add("equal", i1, i2, j1, j2)
                continue
            keys_a = _module_keys(ma, mb, ka == 0, "a")
            keys_b = _module_keys(mb, ma, kb == 0, "b")
            if (ka == 0) != (kb == 0):  # a separator line on one side only
                keys_a = [("sep", ma.name)] + keys_a if ka else keys_a
                keys_b = [("sep", mb.name)] + keys_b if kb else keys_b
            for t, x1, x2, y1, y2 in difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes():
                add(t, i1 + x1, i1 + x2, j1 + y1, j1 + y2)
    return ops


def text_diff(
    before: ProgramSnapshot,
    after: ProgramSnapshot,
    *,
    context: int = 3,
    before_name: str = "before",
    after_name: str = "after",
    fold_alike: bool = True,
) -> str:
    """The unified diff (empty string when nothing changed). fold_alike: a hunk repeated, up to
    numbers, in modules named alike up to numbers (a dynamic range's split bodies) is printed
    once, followed by a `== the same change ... in N more modules like this: ...` line."""
    import bisect

    a, b = _Side(before), _Side(after)
    ops = _opcodes(a, b)
    if all(op[0] == "equal" for op in ops):
        return ""
    matcher = difflib.SequenceMatcher(None, [], [])
    matcher.opcodes = ops  # difflib groups the opcodes it is given (get_opcodes returns them)

    def loc(side: _Side) -> Callable[[int], int]:
        return lambda i: bisect.bisect_right(side.start, i) - 1

    at_a, at_b = loc(a), loc(b)
    hunks: list[_Hunk] = []
    for group in matcher.get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines: list[str] = []
        modules: set[str] = set()
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                # Context prints the new names: they match the file a user opens next.
                lines.extend(" " + b.line(j, at_b) for j in range(b1, b2))
                modules.update(b.modules[at_b(j)].name for j in (b1, b2 - 1))
                continue
            if tag in ("replace", "delete"):
                lines.extend("-" + a.line(i, at_a) for i in range(a1, a2))
                modules.update(a.modules[at_a(i)].name for i in (a1, a2 - 1))
            if tag in ("replace", "insert"):
                lines.extend("+" + b.line(j, at_b) for j in range(b1, b2))
                modules.update(b.modules[at_b(j)].name for j in (b1, b2 - 1))
        module = next(iter(modules)) if len(modules) == 1 else None
        hunks.append(_Hunk(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@", lines, module))
    if fold_alike:
        hunks = _fold_alike(hunks)
    out = [f"--- {before_name}", f"+++ {after_name}"]
    for h in hunks:
        out.append(h.header)
        out.extend(h.lines)
        if h.same_in:
            out.append(_fold_note(h.same_in))
    return "\n".join(out) + "\n"


@dataclass
class _Hunk:
    header: str
    lines: list[str]
    module: str | None  # the one module the hunk lies in, else None
    same_in: list[str] = field(default_factory=list)  # modules whose identical-up-to-numbers hunk was folded


def _fold_alike(hunks: list[_Hunk]) -> list[_Hunk]:
    """Hunks of modules named alike up to numbers (a range's split bodies dim_1 .. dim_255, their
    fused submodules) that change the same way up to numbers print once: a module's k-th hunk
    folds into the k-th hunk of the first such module. Only the hunks are compared, so the cost
    follows the change, not the program (no module is read that the diff did not touch)."""
    from migx_explore.like_this import strip_numbers

    kept: list[_Hunk] = []
    first: dict[tuple, _Hunk] = {}
    seen: dict[str, int] = {}  # hunks so far per module
    for h in hunks:
        if h.module is None:
            kept.append(h)
            continue
        k = seen[h.module] = seen.get(h.module, -1) + 1
        key = (strip_numbers(h.module), k, tuple(strip_numbers(line) for line in h.lines))
        if key in first:
            first[key].same_in.append(h.module)
        else:
            first[key] = h
            kept.append(h)
    return kept


def _fold_note(modules: list[str]) -> str:
    from migx_explore.like_this import LISTED_MEMBERS

    names = ", ".join(modules[:LISTED_MEMBERS]) + (", ..." if len(modules) > LISTED_MEMBERS else "")
    plural = "s" if len(modules) > 1 else ""
    return f"== the same change, up to numbers, in {len(modules)} more module{plural} like this: {names}"


def _range(start: int, stop: int) -> str:
    # Unified diff convention: 1-based start, and an empty range starts at the line before.
    n = stop - start
    first = start + 1 if n else start
    return f"{first}" if n == 1 else f"{first},{n}"
