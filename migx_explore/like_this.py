"""Group submodules whose bodies are the same up to numbers ("dim_16 x 255 like this").

split_single_dyn_dim copies a module body once per value of a dynamic dimension (dim_1 ..
dim_255 for a decode step over past lengths 1..255), and every later pass rewrites each copy the
same way. Drawn or printed one by one they bury the program; grouped, the view shows one
representative with the count and lists what differs between the members (the shapes along the
dynamic axis, the values of folded shape computations, the numbers in generated names).

Two modules are alike when their printouts, with every integer and every elided literal's
content taken out, are equal line by line, and their submodules are alike in the same order. A
module's skeleton is computed once per module snapshot (snapshots share unchanged modules).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from migx_explore.compiler.snapshot import ModuleSnapshot, ProgramSnapshot

_NUMBER = re.compile(r"-?\d+")
_LITERAL = re.compile(r"@literal\{([^}]*)\}")
# Members listed by name in a note before the rest are only counted.
LISTED_MEMBERS = 3
# Varying places listed per group (a decode body has dozens; the first few say what varies).
LISTED_PLACES = 4


def strip_numbers(text: str) -> str:
    """`text` with every integer taken out: two lines of alike modules compare equal."""
    return _NUMBER.sub("#", text)


@dataclass(frozen=True)
class Varying:
    """One place where the members differ: `where` (the representative's line, e.g. `@3 =
    reshape dims`), and the member values in member order."""

    where: str
    values: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.where}: {value_range(self.values)}"


@dataclass(frozen=True)
class LikeGroup:
    representative: str
    members: tuple[str, ...]  # the representative first
    varying: tuple[Varying, ...] = ()

    @property
    def count(self) -> int:
        return len(self.members)

    def label(self) -> str:
        """e.g. 'dim_1 × 255 like this'."""
        return f"{self.representative} × {self.count} like this" if self.count > 1 else self.representative

    def note(self) -> str:
        """One line: the members and what differs between them."""
        if self.count == 1:
            return self.representative
        names = ", ".join(self.members[:LISTED_MEMBERS]) + (", ..." if self.count > LISTED_MEMBERS else "")
        places = "; ".join(v.describe() for v in self.varying[:LISTED_PLACES])
        more = f"; +{len(self.varying) - LISTED_PLACES} more places" if len(self.varying) > LISTED_PLACES else ""
        what = f" differing in {places}{more}" if places else " (identical)"
        return f"{self.label()} ({names}){what}"


def value_range(values: Sequence[str]) -> str:
    """'1..255' for consecutive integers, else the distinct values (the first few)."""
    distinct = list(dict.fromkeys(values))
    if all(_NUMBER.fullmatch(v) for v in distinct) and len(distinct) > 2:
        nums = sorted(int(v) for v in distinct)
        if nums == list(range(nums[0], nums[-1] + 1)):
            return f"{nums[0]}..{nums[-1]}"
    shown = ", ".join(distinct[:5])
    return shown + (f", ... ({len(distinct)} values)" if len(distinct) > 5 else "")


class _Skeletons:
    """Skeleton and values of each module, cached by module snapshot identity."""

    def __init__(self, snap: ProgramSnapshot):
        self.snap = snap
        self._cache: dict[int, tuple[tuple, tuple[str, ...], tuple[str, ...]]] = {}

    def of(self, name: str) -> tuple[tuple, tuple[str, ...], tuple[str, ...]]:
        """(skeleton, values, places): the text with numbers taken out, the numbers in order,
        and for each number the line it sits on (cut short) and its position there."""
        ms = self.snap.module(name)
        got = self._cache.get(id(ms))
        if got is None:
            got = self._cache[id(ms)] = self._read(ms, set())
        return got

    def _read(self, ms: ModuleSnapshot, seen: set[str]) -> tuple[tuple, tuple[str, ...], tuple[str, ...]]:
        seen = seen | {ms.name}
        prefix = ms.name + ":"
        skeleton: list = []
        values: list[str] = []
        places: list[str] = []
        lines = ms.text.splitlines()[1:]  # the header names the module itself
        for rec, line in zip(ms.instrs, lines):
            line = line.replace(prefix, "")
            head = line.split(" -> ")[0][:60]
            lit = _LITERAL.search(line)
            if lit is not None:  # a literal's values are one value, however many numbers it prints
                body = lit.group(1)
                values.append(
                    f"data {rec.literal.content_hash() & 0xFFFF:04x}"
                    if body == " ... " or len(body) > 40
                    else "{" + body + "}"
                )
                places.append(f"{head.split(' = ')[0]} = literal values")
                line = line[: lit.start()] + "@literal{L}" + line[lit.end() :]
                head = line.split(" -> ")[0][:60]
            numbers = _NUMBER.findall(line)
            values.extend(numbers)
            places.extend(f"{head} (number {k + 1})" for k in range(len(numbers)))
            skeleton.append(_NUMBER.sub("#", line))
            for sub in rec.modules:
                if sub in seen or sub not in self.snap.by_name:
                    skeleton.append(("missing", sub))
                    continue
                sk, vals, pl = self._read(self.snap.module(sub), seen)
                skeleton.append(sk)
                values.extend(vals)
                places.extend(pl)
        return tuple(skeleton), tuple(values), tuple(places)


def group_alike(snap: ProgramSnapshot, names: Iterable[str]) -> list[LikeGroup]:
    """The modules `names` grouped by skeleton, in order of first appearance; each group lists
    the places where its members' numbers differ."""
    sk = _Skeletons(snap)
    buckets: dict[tuple, list[str]] = {}
    for name in names:
        if name in snap.by_name:
            buckets.setdefault(sk.of(name)[0], []).append(name)
    groups = []
    for members in buckets.values():
        vals = [sk.of(m)[1] for m in members]
        places = sk.of(members[0])[2]
        varying = tuple(
            Varying(places[k], tuple(v[k] for v in vals))
            for k in range(len(places))
            if any(v[k] != vals[0][k] for v in vals[1:])
        )
        groups.append(LikeGroup(members[0], tuple(members), varying))
    return groups


def split_owners(snap: ProgramSnapshot) -> list[tuple[str, int, list[LikeGroup]]]:
    """(module, owner instruction id, groups) for every instruction with several submodules
    (a select_module over a range): what the views fold."""
    out = []
    for ms in snap.modules:
        for rec in ms.instrs:
            if len(rec.modules) > 1:
                out.append((ms.name, rec.id, group_alike(snap, rec.modules)))
    return out


def like_this_summary(snap: ProgramSnapshot) -> list[str]:
    """Lines for the text summaries: per multi-submodule instruction, its groups."""
    lines = []
    for module, owner, groups in split_owners(snap):
        total = sum(g.count for g in groups)
        kinds = "one body" if len(groups) == 1 else f"{len(groups)} bodies"
        lines.append(f"{module} #{owner}: {total} submodules, {kinds}")
        lines.extend(f"  {g.note()}" for g in groups)
    return lines


def range_note(trace) -> str:
    """'traced as 5 buckets: 16, 32, 64, 128, 255 (sizes 1..255)' when split_single_dyn_dim ran
    with buckets, else '' (the views say so: the trace is not of every size)."""
    from migx_explore.compiler.passes.split_single_dyn_dim import bucket_sizes, single_dyn_dim

    for rec in trace.records:
        if rec.name != "split_single_dyn_dim" or not rec.changed or not rec.options.get("buckets"):
            continue
        found = single_dyn_dim(rec.before.to_program().main) if rec.before is not None else None
        if found is None:
            return f"traced in buckets ({rec.options['buckets']})"
        dim = found[0]
        sizes = bucket_sizes(dim.min, dim.max, rec.options["buckets"])
        return (
            f"traced as {len(sizes)} buckets: {', '.join(map(str, sizes))} (sizes {dim.min}..{dim.max}; "
            f"each bucket stands for the sizes up to it)"
        )
    return ""


# The explorer traces a range of at most this many sizes size by size (P=1..64 traces in ~30 s on a
# 2-core machine); a longer one is traced as the decoder's buckets unless the user asks for every size.
EXACT_SIZES_LIMIT = 64


def bucket_long_ranges(session, limit: int = EXACT_SIZES_LIMIT) -> str:
    """Make `session` trace its dynamic range as the decoder's buckets when the range holds more
    than `limit` sizes (one submodule per size over P=1..255 takes minutes and gigabytes; five
    buckets take seconds). Returns the note to show ('' when nothing changed); the configuration's
    warnings say it too. Set split_single_dyn_dim's buckets back to '' to trace every size."""
    from migx_explore.compiler.passes.split_single_dyn_dim import single_dyn_dim

    # Most models have no dynamic input: say so from the snapshot's records before rebuilding a
    # Program (a copy of the whole model) on every explorer load.
    main = session.initial.module("main")
    if not any(r.name == "@param" and r.shape.dyn_dims is not None for r in main.instrs):
        return ""
    found = single_dyn_dim(session.initial.to_program().main)
    if found is None or found[0].max - found[0].min + 1 <= limit:
        return ""
    entries = [e for _, e, _ in session.config.entries() if e.pass_.name == "split_single_dyn_dim"]
    if not entries or any(getattr(e.pass_, "buckets", "") for e in entries):
        return ""
    session.config.set_options("split_single_dyn_dim", buckets="pow2")
    dim = found[0]
    return f"the dynamic range {dim.min}..{dim.max} has more than {limit} sizes: traced as the decoder's buckets"


__all__ = [
    "EXACT_SIZES_LIMIT",
    "LikeGroup",
    "Varying",
    "bucket_long_ranges",
    "group_alike",
    "like_this_summary",
    "range_note",
    "split_owners",
    "strip_numbers",
    "value_range",
]
