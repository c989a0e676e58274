"""Change regions: a pass's change split into connected pieces that can each be read on screen.

A region is a set of rewrite instances (rewrite_summary.py) joined through data edges: changed
instructions that touch each other are one region; changes far apart are separate regions. Each
region knows its scope (the common module path of what it holds), so the view can say "region 3
of 41 · /model.8/m.0", expand the groups holding it and keep the rest collapsed.

`first_view` decides what a pass opens on: its first region, drawn at reading scale, when that
region is small enough to be read in one pane; else the rewrite summary (lowering, where the whole
program is one connected change, or a pass that did the same thing in dozens of places).
Data only: no widgets, no graphviz.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migx_explore.compiler.snapshot import ProgramSnapshot

from .rewrite_summary import RewriteRow
from .scopes import common_scope

# A region can be drawn legibly (labels >= 10 px at 1280x800) only when it has at most this many
# touched instructions, its longest dependency chain is at most LEGIBLE_DEPTH long and no level
# is wider than LEGIBLE_WIDTH. That is the cheap test; the view then measures the drawing itself
# (`drawing_fits`), since what lies between touched nodes decides how far apart dot puts them.
LEGIBLE_NODES = 24
LEGIBLE_DEPTH = 10
LEGIBLE_WIDTH = 8
# The view zooms so the changed nodes fill the graph pane. Measured in the browser at 1280x800
# (tests/browser/test_legibility.py), the on-screen label height is about
# min(10500 / width, 3450 / height) px for changed nodes spanning width x height drawing units
# (points): labels reach 10 px while the changed nodes span at most this box.
READABLE_BOX = (1000.0, 345.0)
# Past this many regions a pass did one thing in many places: the summary says it in one line.
SUMMARY_OVER_REGIONS = 12


@dataclass(frozen=True)
class Region:
    ids: tuple[int, ...]  # the touched instructions (removed, added, changed), program order
    scope: str  # their common scope ("" at the top)
    depth: int  # the longest chain of touched instructions feeding one another
    width: int = 1  # the most touched instructions at one depth
    noun: str = "region"  # "instance" where each entry is one rewrite instance (Compare)
    note: str = ""  # what the entry is, e.g. the rewrite row it belongs to

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def legible(self) -> bool:
        return self.size <= LEGIBLE_NODES and self.depth <= LEGIBLE_DEPTH and self.width <= LEGIBLE_WIDTH

    def describe(self, k: int, n: int) -> str:
        """e.g. "region 3 of 41 · /model.8/m.0" (k counts from 0)."""
        return f"{self.noun} {k + 1} of {n} · /{self.scope}" + (f" · {self.note}" if self.note else "")


def change_regions(
    before: ProgramSnapshot, after: ProgramSnapshot, rows: Sequence[RewriteRow], scopes: Mapping[int, str] | None = None
) -> list[Region]:
    """The regions of one step, in program order. `rows` are the step's rewrite rows; `scopes`
    maps ids (of either snapshot) to scopes."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra

    for row in rows:
        for inst in row.instances:
            ids = inst.ids
            for i in ids:
                parent.setdefault(i, i)
            for i in ids[1:]:
                union(ids[0], i)
    edges: dict[int, set[int]] = {}
    for snap in (before, after):
        for m in snap.modules:
            for r in m.instrs:
                if r.id not in parent:
                    continue
                for i in r.inputs:
                    if i in parent and i != r.id:
                        union(r.id, i)
                        edges.setdefault(r.id, set()).add(i)
    position = _positions(before, after)
    groups: dict[int, list[int]] = {}
    for i in parent:
        groups.setdefault(find(i), []).append(i)
    regions = []
    for ids in groups.values():
        ids.sort(key=lambda i: position.get(i, 0))
        scope = common_scope(scopes[i] for i in ids if scopes and scopes.get(i)) if scopes else ""
        regions.append(Region(tuple(ids), scope, *_depth_width(ids, edges)))
    regions.sort(key=lambda r: position.get(r.ids[0], 0))
    return regions


def _positions(before: ProgramSnapshot, after: ProgramSnapshot) -> dict[int, float]:
    """Program order over both snapshots: after's order, with what was removed placed just after
    the instruction it followed in before."""
    pos: dict[int, float] = {}
    for k, r in enumerate(r for m in after.modules for r in m.instrs):
        pos[r.id] = float(k)
    last = -1.0
    for r in (r for m in before.modules for r in m.instrs):
        if r.id in pos:
            last = pos[r.id]
        else:
            last += 1e-4
            pos[r.id] = last
    return pos


def _depth_width(ids: list[int], edges: Mapping[int, set[int]]) -> tuple[int, int]:
    inside = set(ids)
    depth: dict[int, int] = {}
    for i in ids:  # program order: inputs come first
        depth[i] = 1 + max((depth.get(j, 0) for j in edges.get(i, ()) if j in inside), default=0)
    levels: dict[int, int] = {}
    for d in depth.values():
        levels[d] = levels.get(d, 0) + 1
    return max(depth.values(), default=0), max(levels.values(), default=0)


def drawing_fits(width: float, height: float) -> bool:
    """Whether changed nodes spanning this box (drawing units) read at >= 10 px in the pane."""
    return width <= READABLE_BOX[0] and height <= READABLE_BOX[1]


def first_view(regions: Sequence[Region]) -> str:
    """ "region" (draw regions[0] at reading scale) or "summary" (the rewrite summary first)."""
    if not regions or len(regions) > SUMMARY_OVER_REGIONS or not regions[0].legible:
        return "summary"
    return "region"


__all__ = [
    "LEGIBLE_DEPTH",
    "LEGIBLE_NODES",
    "LEGIBLE_WIDTH",
    "READABLE_BOX",
    "SUMMARY_OVER_REGIONS",
    "Region",
    "change_regions",
    "drawing_fits",
    "first_view",
]
