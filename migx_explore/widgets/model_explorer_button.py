"""The "Open in Model Explorer" button: the current pass (before | after when "compare" is ticked) in Google
Model Explorer's own page, opened in a new tab through migx_explore.model_explorer (export, reused
for later clicks on the same trace, then its server on 127.0.0.1). A thin row: a button, a
checkbox, a line with the link that opens the page again (errors go to the error box, e.g. the
one-line install hint when the package is missing). A `Panel` (widgets/panel.py) with no body: its
row goes in the position row. tests/browser/test_model_explorer.py clicks it.

Classes: .migx-me-row .migx-model-explorer (the button) .migx-me-compare .migx-me-link."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from ..session import Session
from ._common import ErrorBox, widgets
from .panel import Panel


class ModelExplorerButton(Panel):
    name = "model_explorer"
    title = "Open in Model Explorer"
    css_class = "migx-me-row"

    def __init__(self, errors: ErrorBox, session: Callable[[], Session | None], *, browser: bool = True):
        self._browser = browser  # False in tests: the link is made, no tab is opened
        super().__init__(errors, session)

    def build(self) -> None:
        W = widgets()
        self.opened: Any = None  # the last launch.Opened
        self.button = W.Button(
            description="Open in Model Explorer",
            icon="external-link",
            tooltip="this pass in Google Model Explorer (layers from the model's scopes, overlays; "
            "with 'compare' the pass's before | after with its changes highlighted)",
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-model-explorer"],
        )
        self.compare = W.Checkbox(
            True, description="compare", indent=False, layout=W.Layout(width="auto"), _dom_classes=["migx-me-compare"]
        )
        self.link = W.HTML("", _dom_classes=["migx-me-link"])
        self.button.on_click(self.errors.guard(lambda _b: self.open(), "Open in Model Explorer"))
        self.toolbar = (W.HBox([self.button, self.compare, self.link], _dom_classes=[self.css_class]),)

    def open(self) -> Any:
        from ..model_explorer import open_in_model_explorer

        s = self._get_session()
        if s is None:
            self.link.value = "load a model first"
            return None
        self.link.value = "exporting the trace…"
        compare = self.compare.value
        # One pane gets every overlay the export has (the first one colours the nodes, the rest
        # are a click away in Model Explorer's side panel). The compare view gets none: Model
        # Explorer attaches node data from the address to one pane only, and its fills would
        # cover the removed nodes' red there.
        overlay = None if compare else "all"
        self.opened = open_in_model_explorer(s, compare=compare, browser=self._browser, overlay=overlay)
        url = html.escape(self.opened.url, quote=True)
        self.link.value = f'<a href="{url}" target="_blank">Model Explorer: {html.escape(self.opened.graph)}</a>'
        return self.opened


__all__ = ["ModelExplorerButton"]
