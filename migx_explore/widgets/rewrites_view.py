"""The rewrite-summary pane and the change-region bar (thin ipywidgets glue over rewrite_summary.py,
instances.py and regions.py).

RewritesPanel: one clickable row per rewrite (`{add, sigmoid, mul} → pointwise × 88`); a click
draws the row's first instance (Views draws it in the graph pane), ◀ ▶ step through its
instances, the scope picker jumps to one in a scope; "Whole change" draws the pass's whole change.
RegionBar: "◀ region 3 of 41 · /model.8/m.0 ▶" above the graph, stepping through regions.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from ..instances import InstanceView
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
        f"instructions, in {len(regions)} region{'s' if len(regions) != 1 else ''}"
    )


def region_of(regions: Sequence[Region], ids: Sequence[int]) -> int:
    """The index of the region holding any of `ids` (0 when none does)."""
    want = set(ids)
    return next((k for k, r in enumerate(regions) if want & set(r.ids)), 0)


class RewritesPanel:
    """`widget`: heading, "whole change" button, one button per row, and the instance bar:
    ◀ "instance 3 of 69 · /model.2/m.0 · all 69 alike" ▶ and where the row's instances are, one
    button per scope (a click jumps to an instance there). `on_show(ids)` is called with () (the
    whole-change button); `on_instance()` after the instance shown changed (`self.view`)."""

    def __init__(
        self, errors: ErrorBox, on_show: Callable[[Sequence[int]], None], on_instance: Callable[[], None] | None = None
    ):
        W = widgets()
        self.heading = W.HTML("", _dom_classes=["migx-rewrites-heading"])
        self.graph_button = W.Button(
            description="Whole change",
            tooltip="draw this pass's whole change (a scope overview when it is big)",
            _dom_classes=["migx-rewrites-graph"],
            layout=W.Layout(width="auto", min_width="9em"),
        )
        self.rows_box = W.VBox([], _dom_classes=["migx-rewrites-rows"])
        self.note = W.HTML("", _dom_classes=["migx-rewrites-note"])
        self.prev = W.Button(
            description="◀",
            tooltip="previous instance",
            layout=W.Layout(width="3em"),
            _dom_classes=["migx-instance-prev"],
        )
        self.next = W.Button(
            description="▶", tooltip="next instance", layout=W.Layout(width="3em"), _dom_classes=["migx-instance-next"]
        )
        self.label = W.HTML("", _dom_classes=["migx-instance-label"])
        self.where_box = W.HBox([], _dom_classes=["migx-instance-where"], layout=W.Layout(flex_flow="row wrap"))
        self.scopes = W.Dropdown(
            options=[],
            tooltip="jump to an instance in this scope",
            layout=W.Layout(width="auto", max_width="22em"),
            _dom_classes=["migx-instance-scopes"],
        )
        self._quiet = False
        self.scopes.observe(
            errors.guard(lambda c: self._quiet or self.jump(c["new"] or ""), "jump to a scope"), "value"
        )
        self.bar = W.HBox(
            [self.prev, self.label, self.next, self.where_box],
            _dom_classes=["migx-instance-bar"],
            layout=W.Layout(align_items="center"),
        )
        self.widget = W.VBox(
            [W.HBox([self.heading, self.graph_button]), self.rows_box, self.note, self.bar],
            _dom_classes=["migx-pane", "migx-rewrites"],
            layout=W.Layout(width="100%"),
        )
        self._on_show = on_show
        self._on_instance = on_instance
        self._rows: list[RewriteRow] = []
        self._buttons: list = []
        self._pool: list = []
        self.view: InstanceView | None = None
        self.graph_button.on_click(errors.guard(lambda _b: on_show(()), "whole change"))
        self.prev.on_click(errors.guard(lambda _b: self.move(-1), "previous instance"))
        self.next.on_click(errors.guard(lambda _b: self.move(1), "next instance"))
        self._errors = errors

    def show(
        self, path: str, rows: Sequence[RewriteRow], regions: Sequence[Region], view: InstanceView | None = None
    ) -> None:
        W = widgets()
        self._rows = list(rows)
        self.view = view
        self.heading.value = summary_html(path, rows, regions)
        shown = self._rows[:MAX_ROWS]
        while len(self._pool) < len(shown):  # buttons are reused from pass to pass (see ScopeTree)
            k = len(self._pool)
            b = W.Button(layout=W.Layout(width="auto", max_width="100%"), _dom_classes=["migx-rewrite-row"])
            b.on_click(self._errors.guard(lambda _b, k=k: self.step(k), "rewrite row"))
            pin_to_main_shell(b)  # clicks keep their order with the stepper's (see there)
            self._pool.append(b)
        for b, row in zip(self._pool, shown):
            with b.hold_sync():
                b.description = row.label
                b.tooltip = f"{row.kind}: click to draw instance 1 of {row.count}"
                b._dom_classes = ("migx-rewrite-row", f"migx-rewrite-{row.kind}")
        buttons = self._pool[: len(shown)]
        self._buttons = buttons
        if list(self.rows_box.children) != buttons:
            self.rows_box.children = buttons
        more = len(self._rows) - MAX_ROWS
        self._more = f"<i>… {more} more rows (pass_changes.rewrites(session))</i>" if more > 0 else ""
        self.note.value = self._more
        self._describe()

    _more = ""

    def step(self, k: int) -> tuple[int, ...]:
        """Row k's click: its first instance (the row shown stays on its instance; ◀ ▶ step);
        returns the instance's ids."""
        v = self.view
        if v is None:
            return ()
        if v.row != k:
            v.pick(k, 0)
        return self._changed()

    def move(self, by: int) -> tuple[int, ...]:
        """The next (1) or previous (-1) instance of the row shown."""
        if self.view is None or not self._rows:
            return ()
        self.view.step(by)
        return self._changed()

    def jump(self, scope: str) -> tuple[int, ...]:
        """An instance of the row shown in `scope` (the where line's buttons)."""
        if self.view is None or not self._rows:
            return ()
        self.view.jump(scope)
        return self._changed()

    def _changed(self) -> tuple[int, ...]:
        self._describe()
        if self._on_instance is not None:
            self._on_instance()
        inst = self.view.current if self.view is not None else None
        return inst.ids if inst is not None else ()

    def _describe(self) -> None:
        W = widgets()
        v = self.view
        if v is None or not self._rows:
            self.label.value = ""
            self.where_box.children = ()
            self.bar.layout.display = "none"
            return
        self.bar.layout.display = None
        for k, b in enumerate(self._buttons):
            cls = [c for c in b._dom_classes if c != "migx-rewrite-selected"]
            b._dom_classes = tuple(cls + (["migx-rewrite-selected"] if k == v.row else []))
        row = self._rows[v.row]
        places = v.places()
        alike = places.alike()
        self.label.value = html.escape(v.describe()) + (
            f" · <span class='migx-instance-alike'>{html.escape(alike)}</span>" if alike else ""
        )
        self.note.value = self._more
        self.prev.disabled = self.next.disabled = row.count <= 1
        count = places.where(0).split(":")[0]
        kids = [W.HTML(html.escape(count), _dom_classes=["migx-instance-count"])]
        if len(places.by_scope) > 1:
            # one compact control (the pane's height is for the drawing): pick a scope to jump there
            self._quiet = True
            try:
                self.scopes.options = [(f"/{sc} × {c}" if sc else f"(top) × {c}", sc) for sc, c, _ in places.by_scope]
                self.scopes.value = v.scope() if v.scope() in {sc for sc, _, _ in places.by_scope} else None
            finally:
                self._quiet = False
            kids.append(self.scopes)
        self.where_box.children = kids
        pin_to_main_shell(self.where_box)  # the new count line too (see there)


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
