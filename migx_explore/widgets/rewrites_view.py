"""The rewrite-summary pane and the change-region bar (thin ipywidgets glue over rewrite_summary.py and
regions.py).

RewritesPanel: one clickable row per rewrite (`{add, sigmoid, mul} → pointwise × 88`); a click
shows the row's next instance in the graph (the region holding it), a button shows the graph.
RegionBar: "◀ region 3 of 41 · /model.8/m.0 ▶" above the graph, stepping through regions.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from ..regions import Region
from ..rewrite_summary import RewriteRow
from ._common import ErrorBox, pin_to_main_shell, widgets

MAX_ROWS = 40  # rows shown as buttons; the rest are summed up in one line


def summary_html(path: str, rows: Sequence[RewriteRow], regions: Sequence[Region]) -> str:
    """The pane's heading: what the pass did, in numbers."""
    if not rows:
        return f"<b>{html.escape(path)}</b>: no change"
    touched = sum(len(r.ids) for r in rows)
    return (
        f"<b>{html.escape(path)}</b>: {len(rows)} rewrite{'s' if len(rows) != 1 else ''} over {touched} "
        f"instructions, in {len(regions)} region{'s' if len(regions) != 1 else ''}. Click a row to see its "
        "instances in the graph, one per click."
    )


def region_of(regions: Sequence[Region], ids: Sequence[int]) -> int:
    """The index of the region holding any of `ids` (0 when none does)."""
    want = set(ids)
    return next((k for k, r in enumerate(regions) if want & set(r.ids)), 0)


class RewritesPanel:
    """`widget`: heading, "show the graph" button and one button per row. `on_show(ids)` is called
    with an instance's ids (row click) or () (the graph button)."""

    def __init__(self, errors: ErrorBox, on_show: Callable[[Sequence[int]], None]):
        W = widgets()
        self.heading = W.HTML("", _dom_classes=["migx-rewrites-heading"])
        self.graph_button = W.Button(
            description="Show the graph",
            tooltip="draw this pass's change as a graph",
            _dom_classes=["migx-rewrites-graph"],
            layout=W.Layout(width="auto", min_width="9em"),
        )
        self.rows_box = W.VBox([], _dom_classes=["migx-rewrites-rows"])
        self.note = W.HTML("", _dom_classes=["migx-rewrites-note"])
        self.widget = W.VBox(
            [W.HBox([self.heading, self.graph_button]), self.rows_box, self.note],
            _dom_classes=["migx-pane", "migx-rewrites"],
            layout=W.Layout(width="100%"),
        )
        self._on_show = on_show
        self._rows: list[RewriteRow] = []
        self._next: dict[int, int] = {}  # row -> the instance its next click shows
        self.graph_button.on_click(errors.guard(lambda _b: on_show(()), "show the graph"))
        self._errors = errors

    def show(self, path: str, rows: Sequence[RewriteRow], regions: Sequence[Region]) -> None:
        W = widgets()
        self._rows = list(rows)
        self._next = {}
        self.heading.value = summary_html(path, rows, regions)
        buttons = []
        for k, row in enumerate(self._rows[:MAX_ROWS]):
            b = W.Button(
                description=row.label,
                tooltip=f"{row.kind}: click to show instance 1 of {row.count}",
                _dom_classes=["migx-rewrite-row", f"migx-rewrite-{row.kind}"],
                layout=W.Layout(width="auto", max_width="100%"),
            )
            b.on_click(self._errors.guard(lambda _b, k=k: self.step(k), "rewrite row"))
            buttons.append(b)
        pin_to_main_shell(*buttons)  # clicks keep their order with the stepper's (see there)
        self.rows_box.children = buttons
        more = len(self._rows) - MAX_ROWS
        self.note.value = f"<i>… {more} more rows (pass_changes.rewrites(session))</i>" if more > 0 else ""

    def step(self, k: int) -> tuple[int, ...]:
        """Show row k's next instance; returns its ids."""
        row = self._rows[k]
        j = self._next.get(k, 0) % row.count
        self._next[k] = j + 1
        ids = row.instances[j].ids
        self.note.value = f"<i>{html.escape(row.label)}: instance {j + 1} of {row.count}</i>"
        self._on_show(ids)
        return ids


class RegionBar:
    """`widget`: ◀ / ▶ buttons around "region k of n · /scope"; `on_move(k)` is called with the new
    region index."""

    def __init__(self, errors: ErrorBox, on_move: Callable[[int], None]):
        W = widgets()
        self.prev = W.Button(
            description="◀",
            tooltip="previous change region",
            layout=W.Layout(width="3em"),
            _dom_classes=["migx-region-prev"],
        )
        self.next = W.Button(
            description="▶",
            tooltip="next change region",
            layout=W.Layout(width="3em"),
            _dom_classes=["migx-region-next"],
        )
        self.label = W.HTML("", _dom_classes=["migx-region-label"])
        self.whole = W.ToggleButton(
            False,
            description="whole change",
            tooltip="draw every region at once",
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-region-all"],
        )
        self.widget = W.HBox([self.prev, self.label, self.next, self.whole], _dom_classes=["migx-region-bar"])
        self.regions: list[Region] = []
        self.index = 0
        self._on_move = on_move
        self.prev.on_click(errors.guard(lambda _b: self.move(-1), "previous region"))
        self.next.on_click(errors.guard(lambda _b: self.move(1), "next region"))
        self.whole.observe(errors.guard(lambda _c: (self._label(), on_move(self.index)), "whole change"), "value")

    def set(self, regions: Sequence[Region], index: int = 0) -> None:
        self.regions = list(regions)
        self.index = max(0, min(index, len(self.regions) - 1))
        self._label()

    @property
    def current(self) -> int | None:
        """The region to draw (None: the whole change)."""
        return None if self.whole.value or not self.regions else self.index

    def move(self, step: int) -> None:
        if not self.regions:
            return
        self.whole.value = False
        self.index = (self.index + step) % len(self.regions)
        self._label()
        self._on_move(self.index)

    def _label(self) -> None:
        n = len(self.regions)
        if self.whole.value:
            self.label.value = f"all {n} region{'s' if n != 1 else ''}"
        else:
            self.label.value = (
                html.escape(self.regions[self.index].describe(self.index, n)) if n else "no change region"
            )
        self.prev.disabled = self.next.disabled = n <= 1

    @property
    def text(self) -> str:
        return html.unescape(self.label.value)


__all__ = ["MAX_ROWS", "RegionBar", "RewritesPanel", "region_of", "summary_html"]
