"""The scope tree beside the graph: the model's own scopes (node-name paths, dynamo name scopes or
graph-derived blocks), each with the number of rewrite instances the current pass made in it.

A click on a scope opens it (its children appear in the tree, and in the scope overview of a
whole change its box opens into its child scopes) or closes it again; in the Rewrites view it
also jumps to an instance inside it. The open scopes are one choice for the model
(Views.open_scopes), kept while stepping. Thin glue over scopes.tree_rows.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping

from ..scopes import tree_rows
from ._common import ErrorBox, pin_to_main_shell, widgets

ROWS = 80  # rows drawn at most (top scopes and the children of opened ones)


def scope_named(name: str, scopes: Iterable[str]) -> str | None:
    """The scope a group in the drawing stands for, from its graphviz name: `scope_model_2_m_0`
    (a collapsed group node) or `cluster_scope_model_2_m_0` (an open scope's box) is `model.2/m.0`
    when that is a scope of the model (or one above one); None otherwise."""
    from ..render.scoped import GROUP_NODE_PREFIX, ROOT_ID, SCOPE_GROUP_PREFIX, scope_id

    for prefix in (SCOPE_GROUP_PREFIX, GROUP_NODE_PREFIX):
        if name.startswith(prefix):
            want = name[len(prefix) :]
            break
    else:
        return None
    for scope in scopes:
        parts = [p for p in scope.split("/") if p]
        for k in range(len(parts), 0, -1):
            if scope_id("/".join(parts[:k])) == want:
                return "/".join(parts[:k])
    return "" if want == ROOT_ID else None


class ScopeTree:
    """`widget`: a heading and one button per visible scope; `on_click(scope)` after a click."""

    def __init__(self, errors: ErrorBox, on_click: Callable[[str], None]):
        W = widgets()
        self.heading = W.HTML("<b>Scopes</b>", _dom_classes=["migx-scope-heading"])
        self.rows = W.VBox([], _dom_classes=["migx-scope-rows"])
        self.widget = W.VBox([self.heading, self.rows], _dom_classes=["migx-scope-tree"])
        self._errors = errors
        self._on_click = on_click
        self._shown: list = []
        self._pool: list = []

    def show(self, scopes: list[str], opened: set[str], badges: Mapping[str, int], path: str = "") -> None:
        """Redraw for a pass: `scopes` the distinct scopes of its program, `badges` its instances
        per scope."""
        W = widgets()
        rows = tree_rows(scopes, opened, badges, ROWS)
        if rows == self._shown:
            return
        self._shown = rows
        total = badges.get("", 0)
        self.heading.value = (
            f"<b>Scopes</b> <span class='migx-scope-note'>{total} rewrite{'s' if total != 1 else ''} in "
            f"{html.escape(path)}</span>"
            if path
            else "<b>Scopes</b>"
        )
        # Buttons are reused from step to step (a new widget costs a comm round trip; a step
        # that only moves the badges sets a few traits instead).
        while len(self._pool) < len(rows):
            k = len(self._pool)
            b = W.Button(layout=W.Layout(width="auto"), _dom_classes=["migx-scope-row"])
            b.on_click(self._errors.guard(lambda _b, k=k: self._on_click(self._shown[k][0]), "scope tree"))
            pin_to_main_shell(b)  # clicks keep their order with the stepper's (see there)
            self._pool.append(b)
        for b, (scope, depth, has_children, badge) in zip(self._pool, rows):
            name = scope.rsplit("/", 1)[-1]
            mark = ("▾ " if scope in opened else "▸ ") if has_children else "  "
            with b.hold_sync():
                b.description = f"{mark}{name}" + (f"  · {badge}" if badge else "")
                b.tooltip = f"/{scope}: {badge} rewrite instance{'s' if badge != 1 else ''} in this pass" + (
                    "; click to open / close" if has_children else ""
                )
                b.layout.margin = f"0 0 0 {12 * depth}px"
                b._dom_classes = tuple(
                    ["migx-scope-row", f"migx-scope-depth-{min(depth, 6)}"]
                    + (["migx-scope-changed"] if badge else [])
                    + (["migx-scope-open"] if scope in opened else [])
                )
        if len(self.rows.children) != len(rows):
            self.rows.children = self._pool[: len(rows)]

    @property
    def labels(self) -> list[str]:
        """The rows as shown (tests)."""
        return [b.description for b in self.rows.children]


__all__ = ["ROWS", "ScopeTree", "scope_named"]
