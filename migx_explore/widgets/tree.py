"""The pipeline tree: five sub-pipelines, their passes and nested children, a checkbox per pass
and per pipeline, a filter box and "hide unchanged passes".

Rows come from `queries.tree_rows`; this module only turns them into controls. Row widgets are
pooled by (kind, path) and updated in place, so a toggle (which changes statuses, not the
structure) costs trait updates instead of rebuilding ~100 widgets in the browser."""

from __future__ import annotations

import dataclasses
import functools
import html
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._common import ErrorBox, path_class, pin_to_main_shell, set_state_classes, widgets
from .queries import TreeRow, row_matches

ROW_STATES = (
    "migx-changed",
    "migx-noop",
    "migx-disabled",
    "migx-failed",
    "migx-pending",
    "migx-not-run",
    "migx-tracing",
)


@dataclass
class _RowWidgets:
    box: Any
    check: Any | None
    goto: Any
    info: Any
    row: TreeRow | None = None


NUMERIC_MARK = {
    "ok": ("✓", "migx-num-ok", "outputs match the reference"),
    "bad": ("✗", "migx-num-bad", "outputs differ from the reference beyond tolerance"),
    "note": ("–", "migx-num-note", "numeric check unavailable"),
    "pending": ("…", "migx-num-pending", "numeric check running in the background"),
}


def _info_text(r: TreeRow) -> str:
    """The row's right-hand text as HTML (the widget cuts it with an ellipsis; the tooltip has all)."""
    if r.kind == "pipeline":
        return html.escape(f"{r.summary} · {r.time_ms:.1f} ms" if r.enabled else "pipeline disabled")
    if r.status in ("disabled", "pending", "not run", "tracing"):
        return f'<span class="migx-row-reason">{html.escape(r.reason)}</span>'
    if r.status == "failed":
        return f'<span class="migx-row-reason">{html.escape("FAILED: " + r.reason)}</span>'
    mark = NUMERIC_MARK.get(r.numeric)
    num = f' <span class="{mark[1]}" title="{mark[2]}">{mark[0]}</span>' if mark else ""
    return f"{html.escape(r.summary)} · {r.time_ms:.2f} ms{num}"


class PipelineTree:
    """Widget: `widget` holds the filter row and the scrolling tree.

    on_toggle(path, enabled) is called for pass and pipeline checkboxes; on_select(record index,
    or the entry's path while the trace has not reached it) when a pass name is clicked;
    on_view_change() when the filter or "hide unchanged" changes."""

    def __init__(
        self,
        errors: ErrorBox,
        on_toggle: Callable[[str, bool], None],
        on_select: Callable[[int | str], None],
        on_view_change: Callable[[str, bool], None],
    ):
        W = widgets()
        self.errors = errors
        self._on_toggle, self._on_select, self._on_view_change = on_toggle, on_select, on_view_change
        self.filter = W.Text(
            placeholder="filter passes (e.g. fuse)",
            continuous_update=False,
            layout=W.Layout(width="12em"),
            _dom_classes=["migx-filter"],
        )
        self.hide_unchanged = W.Checkbox(
            False,
            description="hide unchanged",
            indent=False,
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-hide-unchanged"],
        )
        self.rows_box = W.VBox([], _dom_classes=["migx-tree"])
        self.widget = W.VBox(
            [W.HBox([self.filter, self.hide_unchanged]), self.rows_box],
            _dom_classes=["migx-tree-panel"],
            layout=W.Layout(width="100%"),
        )
        self._pool: dict[tuple[str, str], _RowWidgets] = {}
        from ipywidgets.widgets.widget_bool import CheckboxStyle
        from ipywidgets.widgets.widget_string import HTMLStyle

        self._shared = {
            "row": W.Layout(),
            "goto": W.Layout(width="auto"),
            "info": W.Layout(),
            "check": W.Layout(width="22px", min_width="22px"),
            "button": W.ButtonStyle(),
            "html": HTMLStyle(),
            "check_style": CheckboxStyle(),
        }
        self._collapsed: set[str] = set()
        self._rows: list[TreeRow] = []
        # The thread redrawing rows (None: none): values it sets are not user clicks. Per thread,
        # as the background trace redraws rows while the user may be clicking on the kernel thread.
        self._updating: int | None = None
        self.filter.observe(errors.guard(self._filter_changed, "filter"), "value")
        self.hide_unchanged.observe(errors.guard(self._filter_changed, "hide unchanged"), "value")

    # ---- building ---------------------------------------------------------------------------------
    def _make(self, r: TreeRow) -> _RowWidgets:
        # ~100 rows: widget creation dominates a first draw, so rows share Layout and Style
        # models and indentation/visibility are CSS classes rather than widgets of their own.
        W, sh = widgets(), self._shared
        goto = W.Button(
            description=r.name,
            layout=sh["goto"],
            style=sh["button"],
            _dom_classes=["migx-pass-goto", path_class(r.path)],
        )
        info = W.HTML("", layout=sh["info"], style=sh["html"], _dom_classes=["migx-row-info"])
        check = None
        if r.kind != "child":
            css = "migx-pipeline-checkbox" if r.kind == "pipeline" else "migx-pass-checkbox"
            check = W.Checkbox(
                r.enabled,
                indent=False,
                layout=sh["check"],
                style=sh["check_style"],
                _dom_classes=[css, path_class(r.path)],
            )
            check.observe(
                self.errors.guard(lambda ch, key=(r.kind, r.path): self._checked(key, ch["new"]), "toggle"), "value"
            )
        if r.kind == "pipeline":
            goto.add_class("migx-pipeline-name")
            goto.on_click(self.errors.guard(lambda _b, name=r.path: self._toggle_collapse(name), "collapse"))
            classes = ["migx-tree-row", "migx-pipeline-row", path_class(r.path)]
        else:
            goto.on_click(self.errors.guard(lambda _b, key=(r.kind, r.path): self._select(key), "select pass"))
            classes = [
                "migx-tree-row",
                "migx-pass-row" if r.kind == "pass" else "migx-child",
                f"migx-depth-{min(r.depth, 6)}",
                path_class(r.path),
            ]
        parts = [check, goto, info] if check is not None else [goto, info]
        return _RowWidgets(W.HBox(parts, layout=sh["row"], _dom_classes=classes), check, goto, info)

    def update(self, rows: Sequence[TreeRow], current: int | None) -> None:
        """Show `rows` (from queries.tree_rows), marking the record `current`."""
        self._updating = threading.get_ident()
        try:
            boxes = []
            for r in rows:
                key = (r.kind, r.path)
                rw = self._pool.get(key)
                if rw is None:
                    rw = self._pool[key] = self._make(r)
                    pin_to_main_shell(rw.box)  # clicks keep their order with the others (see there)
                self._refresh_row(rw, r, current)
                boxes.append(rw.box)
            # set once every row has its widgets: the background trace updates the tree from
            # its thread while the kernel thread may be reading it
            self._rows = list(rows)
            if tuple(boxes) != tuple(self.rows_box.children):
                self.rows_box.children = tuple(boxes)
            self._apply_visibility()
        finally:
            self._updating = None

    def _refresh_row(self, rw: _RowWidgets, r: TreeRow, current: int | None) -> None:
        if rw.row == r and (r.index == current) == ("migx-current" in rw.box._dom_classes):
            return
        rw.row = r
        if rw.check is not None:
            rw.check.value = r.enabled
            rw.check.disabled = not r.toggleable
            rw.check.tooltip = (("disable " if r.enabled else "enable ") + r.path) if r.toggleable else r.reason
        tip = r.path + (f"\n{r.reason}" if r.reason else "") + (f"\n{r.summary}" if r.summary else "")
        if r.kind != "pipeline":
            tip += pass_info_text(r.name)
        if rw.goto.tooltip != tip:
            rw.goto.tooltip = tip
        text = _info_text(r)
        if rw.info.value != text:
            rw.info.value = text
        if r.kind != "pipeline":
            set_state_classes(rw.box, ROW_STATES, r.css_state)
        is_current = r.index is not None and r.index == current
        if is_current and "migx-current" not in rw.box._dom_classes:
            rw.box.add_class("migx-current")
        elif not is_current and "migx-current" in rw.box._dom_classes:
            rw.box.remove_class("migx-current")

    def set_numeric(self, path: str, state: str) -> None:
        """Update one pass row's numeric mark (the deferred check fills them in one at a time)."""
        rw = self._pool.get(("pass", path))
        if rw is None or rw.row is None or rw.row.numeric == state:
            return
        rw.row = dataclasses.replace(rw.row, numeric=state)
        self._rows = [rw.row if (r.kind, r.path) == ("pass", path) else r for r in self._rows]
        rw.info.value = _info_text(rw.row)

    def current_selector(self, current: int | None) -> str:
        """A CSS selector of the current row (the explorer scrolls the tree to it)."""
        for r in self._rows:
            if r.index is not None and r.index == current:
                return ".migx-tree-row." + path_class(r.path)
        return ""

    def mark_current(self, current: int | None) -> None:
        """Move the highlight without recomputing rows (the stepper's hot path)."""
        for r in self._rows:
            rw = self._pool[(r.kind, r.path)]
            on = r.index is not None and r.index == current
            if on != ("migx-current" in rw.box._dom_classes):
                (rw.box.add_class if on else rw.box.remove_class)("migx-current")

    # ---- filtering ------------------------------------------------------------------------------
    def _apply_visibility(self) -> None:
        text, hide = self.filter.value.strip(), self.hide_unchanged.value
        shown_in: dict[str, bool] = {}
        for r in self._rows:
            if r.kind == "pipeline":
                continue
            ok = row_matches(r, text, hide) and r.pipeline not in self._collapsed
            shown_in[r.pipeline] = shown_in.get(r.pipeline, False) or row_matches(r, text, hide)
            self._set_display(self._pool[(r.kind, r.path)].box, ok)
        for r in self._rows:
            if r.kind == "pipeline":
                head = self._pool[(r.kind, r.path)]
                self._set_display(head.box, shown_in.get(r.pipeline, False) or not (text or hide) or not r.enabled)
                head.goto.description = ("▸ " if r.pipeline in self._collapsed else "▾ ") + r.name

    @staticmethod
    def _set_display(box: Any, visible: bool) -> None:
        # A class, not box.layout.display: the rows share one Layout model.
        if visible == ("migx-hidden" in box._dom_classes):
            (box.remove_class if visible else box.add_class)("migx-hidden")

    def visible_paths(self) -> list[str]:
        """Paths of the pass and child rows currently shown (tests and the README check this)."""
        return [
            r.path
            for r in self._rows
            if r.kind != "pipeline" and "migx-hidden" not in self._pool[(r.kind, r.path)].box._dom_classes
        ]

    def _filter_changed(self, _change: dict) -> None:
        self._apply_visibility()
        self._on_view_change(self.filter.value.strip(), self.hide_unchanged.value)

    def _toggle_collapse(self, pipeline: str) -> None:
        self._collapsed ^= {pipeline}
        self._apply_visibility()

    # ---- events -----------------------------------------------------------------------------------
    def _checked(self, key: tuple[str, str], value: bool) -> None:
        if self._updating == threading.get_ident():
            return
        self._on_toggle(key[1], bool(value))

    def _select(self, key: tuple[str, str]) -> None:
        r = self._pool[key].row
        if r is None:
            return
        if r.index is not None:
            self._on_select(r.index)
        elif r.kind == "pass" and r.status == "tracing":
            # the background trace has not reached it yet: go by path (traced as far as it). The
            # click used to do nothing here, and a click soon after a load looked lost.
            self._on_select(r.path)

    # ---- programmatic access (tests, notebooks) -------------------------------------------------
    def checkbox(self, path: str) -> Any:
        """The checkbox of a pass entry or pipeline, by path ('fusion', 'required.eliminate_identity#1')."""
        for kind in ("pass", "pipeline"):
            rw = self._pool.get((kind, path))
            if rw is not None and rw.check is not None:
                return rw.check
        raise KeyError(f"no checkbox for {path!r}")

    def goto_button(self, path: str) -> Any:
        for kind in ("pass", "child"):
            rw = self._pool.get((kind, path))
            if rw is not None:
                return rw.goto
        raise KeyError(f"no row for {path!r}")


@functools.lru_cache(maxsize=512)
def pass_info_text(name: str) -> str:
    """Tooltip lines about a pass: its MIGraphX source file, how it fares on MIGraphX's own unit
    tests (docs/migraphx_conformance.md) and its note (what we do differently, and why)."""
    from migx_explore.compiler.pass_infra import pass_registry
    from migx_explore.compiler.pass_infra.conformance import conformance_summary

    cls = pass_registry().get(name)
    if cls is None:
        return ""
    info = cls.info()
    lines = [
        f"MIGraphX: {info['migraphx_source']}" if info.get("migraphx_source") else "",
        conformance_summary(name),
        info.get("note") or "",
    ]
    return "".join(f"\n{line}" for line in lines if line)
