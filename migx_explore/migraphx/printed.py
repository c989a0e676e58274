"""Helpers on the module prints of a MIGraphX log (trace.py): which module a block looks like,
the submodules a line names, `?` inputs filled from the print before, and whether a print the
log ends in was cut short."""

from __future__ import annotations

import re
from collections import Counter

from migx_explore.compiler.migraphx_text import header_name

REFS = re.compile(r"\), \[([^\]]*)\]|^\S+ = [^(\[]*(?:\[.*\])?, \[([^\]]*)\]")


def module_refs(line: str) -> list[str]:
    """The submodules an instruction line names (`, [If_0_if, If_0_else]`)."""
    m = REFS.search(line.split(" -> ")[0])
    if m is None:
        return []
    return [r.strip() for r in (m.group(1) or m.group(2) or "").split(",") if r.strip()]


def cut_short(before: dict[str, list[tuple[int, str]]], after: dict[str, list[tuple[int, str]]]) -> bool:
    """Whether a program print the text ends in (no closing blank lines) stops short: a module of
    the program before it is missing, or its last module lacks the `@return` it had before (or,
    new, that every other module printed has)."""
    if any(m not in after for m in before):
        return True
    last = next(reversed(after), None)
    if last is None:
        return False

    def returns(m: str, prog: dict) -> bool:
        return any(" = @return" in s for _, s in prog.get(m, ()))

    others = [m for m in after if m != last]
    had = returns(last, before) if before.get(last) else bool(others) and all(returns(m, after) for m in others)
    return had and not returns(last, after)


def op_part(line: str) -> str:
    """An instruction line without its names: what stays when a module is printed with or without
    `<module>:` prefixes, `?` inputs, or renumbered."""
    _, _, rhs = line.partition(" = ")
    head, _, rest = rhs.partition("(")
    shape = rest.rpartition(" -> ")[2] if " -> " in rest else ""
    return head + " -> " + shape.split(" # ")[0]


def shares(block: list[tuple[int, str]], module: list[tuple[int, str]]) -> float:
    """How much a block looks like a module: the share of its instructions the module holds (by
    op and shape), half credit for a shape alone (a pass changed the op), less for a size apart."""
    block = [(n, s) for n, s in block if "@return" not in s] or block  # a return matches any module
    if not block:
        return 0.0
    parts = [op_part(s) for _, s in module if "@return" not in s]
    have, shapes = Counter(parts), Counter(p.partition(" -> ")[2] for p in parts)
    score = 0.0
    for _, s in block:
        part = op_part(s)
        if have[part] > 0:
            have[part] -= 1
            shapes[part.partition(" -> ")[2]] -= 1
            score += 1
        elif shapes[part.partition(" -> ")[2]] > 0:
            shapes[part.partition(" -> ")[2]] -= 1
            score += 0.5
    return score / len(block) - 0.1 * abs(len(parts) - len(block)) / max(len(block), 1)


def resolve_unnamed(new: list[tuple[int, str]], old: list[tuple[int, str]], module: str) -> list[tuple[int, str]]:
    """A module printed on its own shows values of the module around it as `?`; take those
    inputs from the same instruction (same name, op and shape) in the program printed before."""
    if not any("?" in s for _, s in new):
        return list(new)
    prefix = module + ":"
    before: dict[tuple[str, str, str], list[str]] = {}
    for _, s in old:
        key, args = masked(s.replace(prefix, ""))
        if key is not None:
            before[key] = args
    out = []
    for no, s in new:
        key, args = masked(s)
        theirs = before.get(key) if key is not None and "?" in args else None
        if theirs is not None and len(theirs) == len(args):
            filled = [t if a == "?" else a for a, t in zip(args, theirs)]
            head, _, rest = s.partition("(")
            s = head + "(" + ",".join(filled) + ")" + rest[rest.index(")") + 1 :]
        out.append((no, s))
    return out


ARGS = re.compile(r"^(\S+) = ([^(]*)\(([^()]*)\)(.*)$")


def masked(line: str) -> tuple[tuple[str, str, str] | None, list[str]]:
    m = ARGS.match(line)
    if m is None:
        return None, []
    return (m.group(1), m.group(2), m.group(4)), m.group(3).split(",")


def modules_of(lines: list[tuple[int, str]]) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    cur = "main"
    for no, s in lines:
        name = header_name(s)
        if name is not None:
            cur = name
            out.setdefault(cur, [])
            continue
        out.setdefault(cur, []).append((no, s))
    return out
