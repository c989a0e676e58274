"""Unified diff of the printed IR of two snapshots, aligned by stable instruction id.

A plain text diff of two printouts shows every line after an inserted instruction as changed,
because the `@N` names are positions and shift. Here lines are matched by the instruction they
print: an instruction whose content (op, inputs by id, submodules, shape) did not change is
context, however its printed names moved; a changed one shows as `-old` / `+new`. Hunk line
numbers refer to the full printouts (`ProgramSnapshot.text`, the numbered trace files).
"""

from __future__ import annotations

import difflib

from migx_explore.compiler.printer import Namer, format_instruction
from migx_explore.compiler.snapshot import ProgramSnapshot

_Key = tuple


def _keyed_lines(snap: ProgramSnapshot, other: ProgramSnapshot, side: str) -> list[tuple[_Key, str]]:
    """(key, text) per line of `print_program(snap)`; equal keys on both sides mean 'same line'."""
    prog = snap.to_program()
    other_ids = other.by_id
    out: list[tuple[_Key, str]] = []
    for k, m in enumerate(prog.get_modules()):
        if k:
            out.append((("sep", m.name), ""))
        ms = snap.by_name[m.name]
        header = f'module: "{m.name}"' + (" bypass" if m.bypass else "")
        out.append((("module", m.name, m.bypass), header))
        namer = Namer(m)
        for ins in m:
            rec = ms.by_id[ins.id]
            twin = other_ids.get(ins.id)
            same = twin is not None and twin[0] == m.name and twin[1].same_content(rec)
            # A changed instruction gets a side-specific key so it can never match its old self.
            key = ("ins", ins.id) if same else ("ins", ins.id, side)
            out.append((key, format_instruction(ins, namer)))
    return out


def text_diff(before: ProgramSnapshot, after: ProgramSnapshot, *, context: int = 3, before_name: str = "before",
              after_name: str = "after") -> str:
    """The unified diff (empty string when nothing changed)."""
    a = _keyed_lines(before, after, "a")
    b = _keyed_lines(after, before, "b")
    ka, kb = [k for k, _ in a], [k for k, _ in b]
    matcher = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    out: list[str] = []
    for group in matcher.get_grouped_opcodes(context):
        if not out:
            out += [f"--- {before_name}", f"+++ {after_name}"]
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                # Context prints the new names: they match the file a user opens next.
                out.extend(" " + text for _, text in b[b1:b2])
                continue
            if tag in ("replace", "delete"):
                out.extend("-" + text for _, text in a[a1:a2])
            if tag in ("replace", "insert"):
                out.extend("+" + text for _, text in b[b1:b2])
    return "\n".join(out) + ("\n" if out else "")


def _range(start: int, stop: int) -> str:
    # Unified diff convention: 1-based start, and an empty range starts at the line before.
    n = stop - start
    first = start + 1 if n else start
    return f"{first}" if n == 1 else f"{first},{n}"
