"""The Recipe / export menu: a toggle button in the position row opens a box in the main column
with the configuration as a pipeline spec, MIGraphX's MIGRAPHX_DISABLE_PASSES line and a repro
script (migx_explore.recipe), and the "Save report" row (report_saver). A `Panel`
(widgets/panel.py) placed in the main column; a load resets the report's file name, a toggle or
a finished trace refreshes the recipe while the box is open.

Classes: .migx-recipe-button (in the position row) .migx-recipe-menu (the box) .migx-recipe
(.migx-recipe-spec .migx-recipe-env .migx-recipe-script) .migx-report-row (.migx-report-path
.migx-report-save .migx-report-result)."""

from __future__ import annotations

import html
from typing import Any

from ..session import Session
from ._common import widgets
from .panel import Panel
from .report_saver import ReportSaver

CSS = """
.migx-explorer .migx-recipe pre { font-size: 11px; background: #f6f8fa; padding: 4px 6px; margin: 2px 0 6px;
  white-space: pre-wrap; max-height: 220px; overflow: auto; }
"""


def recipe_html(session: Session) -> str:
    """The recipe box: our spec string, MIGraphX's MIGRAPHX_DISABLE_PASSES line, a repro script."""
    from ..recipe import make_recipe

    r = make_recipe(session)
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in r.caveats)
    return (
        f'<div class="migx-recipe-body"><b>pipeline spec</b><pre class="migx-recipe-spec">'
        f"{html.escape(r.spec or '(not expressible as a spec: see caveats)')}</pre>"
        f'<b>MIGraphX</b><pre class="migx-recipe-env">{html.escape(r.env() or "(nothing disabled)")}</pre>'
        + (f"<ul>{caveats}</ul>" if caveats else "")
        + f'<b>repro script</b><pre class="migx-recipe-script">{html.escape(r.script)}</pre></div>'
    )


class RecipePanel(Panel):
    name = "recipe"
    title = "Recipe / export"
    css_class = "migx-recipe-menu"
    css = CSS
    place = "main"

    def build(self) -> Any:
        W = widgets()
        self.button = W.ToggleButton(
            False,
            description="Recipe / export",
            icon="file-code-o",
            tooltip="the pipeline as a spec string, a MIGRAPHX_DISABLE_PASSES line and a repro script",
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-recipe-button"],
        )
        self.toolbar = (self.button,)
        self.html = W.HTML("", layout=W.Layout(display="none"), _dom_classes=["migx-recipe"])
        self.report = ReportSaver(self.errors, self._get_session)
        self.report.widget.layout.display = "none"
        self.button.observe(self.errors.guard(lambda _c: self._toggled(), "recipe"), "value")
        return W.VBox([self.html, self.report.widget])

    def on_session(self, session: Session) -> None:
        self.report.reset(session)

    def on_trace(self, session: Session) -> None:
        if self.button.value:  # drawn only while open: a recipe re-reads the whole configuration
            self.html.value = recipe_html(session)

    def _toggled(self) -> None:
        on = self.button.value
        self.html.layout.display = None if on else "none"
        self.report.widget.layout.display = None if on else "none"
        s = self._get_session()
        if on and s is not None:
            self.html.value = recipe_html(s)
