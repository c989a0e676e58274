"""Scopes of instructions through a trace: the model's own module paths, kept by every pass.

The importer records the scope of each imported instruction (`Program.scopes`, from node names or
dynamo metadata, compiler/onnx/scopes.py). An instruction a pass creates inherits through its
`origin`: the common prefix of the scopes it came from (a fused op over `model.8/m.0/cv1` and
`model.8/m.0/cv2` is in `model.8/m.0`). Params and literals, which no node owns, sit with their
first user, as Model Explorer draws weights inside the layer that reads them.

A model without scopes (names like `conv_12`, or none) gets scopes derived from the graph: the
main chain is cut where a single value is live (the articulation points a residual stack has
between blocks), the pieces are packed into `block.N` groups of a readable size, and a long
model gets a `stage.M` level above them, so no view is one flat graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from migx_explore.compiler.pass_infra import PassRecord, Trace
from migx_explore.compiler.snapshot import ModuleSnapshot, ProgramSnapshot

BLOCK_OPS = 12  # aim for derived blocks of about this many compute ops
STAGE_BLOCKS = 8  # blocks per derived stage once there are more than this many blocks
_UNOWNED = ("@param", "@literal")


def split_scope(scope: str) -> tuple[str, ...]:
    return tuple(p for p in scope.split("/") if p) if scope else ()


def common_scope(scopes: Iterable[str]) -> str:
    """The longest common prefix (by parts) of `scopes`."""
    it = iter(scopes)
    first = next(it, None)
    if first is None:
        return ""
    prefix = split_scope(first)
    for s in it:
        parts = split_scope(s)
        k = 0
        while k < min(len(prefix), len(parts)) and prefix[k] == parts[k]:
            k += 1
        prefix = prefix[:k]
        if not prefix:
            break
    return "/".join(prefix)


def derived_scopes(snap: ProgramSnapshot, module: str = "main") -> dict[int, str]:
    """Scopes for a program without any: `block.N` (and `stage.M/block.N` when long) along the main
    module, cut at points where one value carries everything forward."""
    ms = snap.module(module)
    compute = [r for r in ms.instrs if r.op.name not in _UNOWNED and r.op.name != "@return"]
    pos = {r.id: k for k, r in enumerate(compute)}
    last_use: dict[int, int] = {}
    for k, r in enumerate(compute):
        for i in r.inputs:
            if i in pos:
                last_use[i] = k
    cuts = _cuts(compute, pos, last_use)
    pieces, start = [], 0
    for c in cuts + [len(compute) - 1]:
        if c >= start:
            pieces.append(compute[start : c + 1])
            start = c + 1
    blocks: list[list] = []
    for piece in pieces:  # pack pieces into blocks of about BLOCK_OPS ops
        if blocks and len(blocks[-1]) + len(piece) <= BLOCK_OPS:
            blocks[-1].extend(piece)
        elif len(piece) > 2 * BLOCK_OPS:  # a long piece without cut points: split it evenly
            n = -(-len(piece) // BLOCK_OPS)
            size = -(-len(piece) // n)
            blocks.extend(piece[k : k + size] for k in range(0, len(piece), size))
        else:
            blocks.append(list(piece))
    staged = len(blocks) > STAGE_BLOCKS
    out: dict[int, str] = {}
    for b, block in enumerate(blocks):
        name = f"stage.{b // STAGE_BLOCKS}/block.{b}" if staged else f"block.{b}"
        for r in block:
            out[r.id] = name
    return out


def _cuts(compute: list, pos: dict[int, int], last_use: dict[int, int]) -> list[int]:
    """Positions k where the only value made at or before k and used after k is compute[k]'s."""
    cuts, live = [], set()
    ends: dict[int, list[int]] = {}
    for i, k in last_use.items():
        ends.setdefault(k, []).append(i)
    for k, r in enumerate(compute):
        if r.id in last_use:
            live.add(r.id)
        for i in ends.get(k, ()):
            live.discard(i)
        if live == {r.id}:
            cuts.append(k)
    return cuts


class ScopeTable:
    """The scope of every instruction of one trace, by stable id, filled in trace order (a pass's
    new instructions take the common scope of their origins)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        initial = trace.initial
        self.derived = not initial.scopes
        self.table: dict[int, str] = dict(initial.scopes) if initial.scopes else derived_scopes(initial)
        self._seen: set[int] = set()
        self._refined: set[int] = set()  # ids whose scope a pass split into finer ones (see _read)
        self._done = 0  # records read so far
        self._read(initial)

    def scopes_of(self, snap: ProgramSnapshot, upto: PassRecord | None = None) -> dict[int, str]:
        """Every instruction of `snap` (a snapshot of this trace, at or before `upto`) -> its scope;
        params, literals and instructions with no known origin take their first user's (else
        their first input's) scope."""
        self._advance(upto.index + 1 if upto is not None else len(self.trace.records))
        self._read(snap)
        out: dict[int, str] = {}
        owner_scope: dict[str, str] = {}
        for m in snap.modules:  # callers come before the modules they call
            placed = _placed(m, self.table, owner_scope.get(m.name, ""))
            out.update(placed)
            for r in m.instrs:
                for name in r.modules:
                    owner_scope.setdefault(name, placed[r.id])
        return out

    def _advance(self, upto: int) -> None:
        records = self.trace.records
        while self._done < min(upto, len(records)):
            rec = records[self._done]
            if rec.after is not None:
                self._read(rec.after)
            self._done += 1

    def _read(self, snap: ProgramSnapshot) -> None:
        for m in snap.modules:
            if id(m) in self._seen:
                continue
            self._seen.add(id(m))
            for r in m.instrs:
                if r.id not in self.table and snap.scopes.get(r.id):  # a pass named it (rewrite_rnn's steps)
                    self.table[r.id] = snap.scopes[r.id]
                    self._refined.update(r.origin)
                elif r.id not in self.table and r.origin:
                    # an origin with no scope (an allocation, a param) says nothing about where
                    # the new instruction belongs: only scoped origins count; nor does one whose
                    # scope a pass refined (the unrolled lstm, in every step's origins) beside others
                    known = [self.table[o] for o in r.origin if self.table.get(o) and o not in self._refined]
                    known = known or [self.table[o] for o in r.origin if self.table.get(o)]
                    scope = common_scope(known)
                    if scope:
                        self.table[r.id] = scope


def _placed(m: ModuleSnapshot, table: Mapping[int, str], default: str) -> dict[int, str]:
    out = {r.id: table[r.id] for r in m.instrs if table.get(r.id) and r.op.name not in _UNOWNED}
    users: dict[int, int] = {}
    for r in m.instrs:
        for i in r.inputs:
            users.setdefault(i, r.id)
    # Latest first, so a chain of unscoped values reaches the scope of whoever reads its end.
    for r in reversed(m.instrs):
        if r.id in out:
            continue
        u = users.get(r.id)
        if u is not None and u in out:
            out[r.id] = out[u]
    for r in m.instrs:
        if r.id not in out:
            found = next((out[i] for i in r.inputs if i in out), None)
            if found is not None:
                out[r.id] = found
    # What is still unplaced reads nothing scoped and feeds nothing scoped (a constant the
    # importer folded away): it goes with the next placed instruction in program order.
    nxt = default
    for r in reversed(m.instrs):
        if r.id in out:
            nxt = out[r.id]
        else:
            out[r.id] = nxt
    return out


def auto_opened(scopes: Iterable[str]) -> set[str]:
    """The scopes a tree or overview opens by itself: while everything sits under one scope
    (every instruction of a BERT export under `bert`), showing that one box says nothing."""
    all_parts = [split_scope(s) for s in scopes]
    opened: set[str] = set()
    prefix: tuple[str, ...] = ()
    while all_parts:
        k = len(prefix)
        heads = {p[: k + 1] for p in all_parts}
        if len(heads) != 1:
            return opened
        head = next(iter(heads))
        if len(head) <= k or all(len(p) == len(head) for p in all_parts):
            return opened
        prefix = head
        opened.add("/".join(prefix))
    return opened


def tree_rows(
    scopes: Iterable[str], opened: Iterable[str], badges: Mapping[str, int] | None = None, limit: int = 80
) -> list[tuple[str, int, bool, int]]:
    """The rows of a scope tree: (scope, depth, has children, badge) for the top scopes and the
    children of every opened one, in first-seen order; at most `limit` rows."""
    children: dict[str, list[str]] = {}
    seen: set[str] = set()
    for s in scopes:
        parts = split_scope(s)
        for k in range(len(parts)):
            key = "/".join(parts[: k + 1])
            if key not in seen:
                seen.add(key)
                children.setdefault("/".join(parts[:k]), []).append(key)
    is_open = set(opened)
    badges = badges or {}
    out: list[tuple[str, int, bool, int]] = []

    def walk(parent: str, depth: int) -> None:
        for c in children.get(parent, ()):
            if len(out) >= limit:
                return
            out.append((c, depth, c in children, badges.get(c, 0)))
            if c in is_open:
                walk(c, depth + 1)

    walk("", 0)
    return out


__all__ = [
    "BLOCK_OPS",
    "STAGE_BLOCKS",
    "ScopeTable",
    "auto_opened",
    "common_scope",
    "derived_scopes",
    "split_scope",
    "tree_rows",
]
