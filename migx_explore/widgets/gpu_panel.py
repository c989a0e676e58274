"""The GPU panel: compile the session's final program and time it eagerly and through graph
capture; a table and plots of the results. Without a GPU it says why, keeps its button off, and
shows the results recorded on a real GPU (labelled with device and date) instead.

It reaches the GPU only through Session methods (compile_kernels, time, timings). A `Panel`
(widgets/panel.py): its CSS is here, and a load calls `on_session`.

Classes: .migx-gpu (the accordion) .migx-gpu-status (.migx-gpu-ready / .migx-gpu-unavailable)
.migx-gpu-mode-eager .migx-gpu-mode-graph .migx-gpu-warmup .migx-gpu-iters .migx-time
.migx-gpu-progress .migx-gpu-progress-label .migx-timing-table .migx-timing-plot .migx-gpu-recorded."""

from __future__ import annotations

import html
from typing import Any

from ..errors import GpuUnavailable, UserInputError
from ..session import Session
from . import timing_view
from ._common import TaskProgress, widgets
from .panel import Panel, gpu_reason

CSS = """
.migx-explorer .migx-gpu-recorded table { border-collapse: collapse; margin: 4px 0; }
.migx-explorer .migx-gpu-recorded td, .migx-explorer .migx-gpu-recorded th { padding: 1px 8px; text-align: right;
  border-bottom: 1px solid #eee; }
.migx-explorer .migx-recorded-current { background: #fff3c4; }
.migx-explorer .migx-recorded-label { color: #5a4a00; background: #fff8e1; padding: 4px 8px; margin-top: 6px; }
.migx-explorer .migx-gpu-unavailable { color: #8a5a00; background: #fff8e1; padding: 6px 8px; }
.migx-explorer .migx-timing-table table { border-collapse: collapse; margin: 4px 0; }
.migx-explorer .migx-timing-table td, .migx-explorer .migx-timing-table th { padding: 2px 10px; text-align: right;
  border-bottom: 1px solid #eee; }
"""


class GpuPanel(Panel):
    name = "gpu"
    title = "GPU: compile and time (eager vs graph capture)"
    css_class = "migx-gpu"
    css = CSS
    opened = True

    def build(self) -> Any:
        W = widgets()
        errors = self.errors
        self.reason = gpu_reason()
        self.status = W.HTML("", _dom_classes=["migx-gpu-status"])
        self.eager = W.Checkbox(
            True, description="eager", indent=False, layout=W.Layout(width="auto"), _dom_classes=["migx-gpu-mode-eager"]
        )
        self.graph = W.Checkbox(
            True,
            description="graph capture",
            indent=False,
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-gpu-mode-graph"],
        )
        self.iters = W.BoundedIntText(
            100, min=1, max=100000, description="iters", layout=W.Layout(width="11em"), _dom_classes=["migx-gpu-iters"]
        )
        self.warmup = W.BoundedIntText(
            10, min=0, max=10000, description="warmup", layout=W.Layout(width="11em"), _dom_classes=["migx-gpu-warmup"]
        )
        self.run_button = W.Button(
            description="Compile & time", icon="tachometer", button_style="success", _dom_classes=["migx-time"]
        )
        self.tracker = TaskProgress("migx-gpu")
        self.progress, self.progress_label = self.tracker.bar, self.tracker.label
        self.table = W.HTML("", _dom_classes=["migx-timing-table"])
        self.recorded = W.HTML("", _dom_classes=["migx-gpu-recorded"])
        # The figure goes in as SVG markup (not an Output capture) so it is in the saved widget
        # state and the DOM whatever front end runs the kernel.
        self.plot = W.HTML("", _dom_classes=["migx-timing-plot"])
        self.run_button.on_click(errors.guard(lambda _b: self.run(), "GPU timing"))
        self.reset()
        return W.VBox(
            [
                self.status,
                W.HBox([self.eager, self.graph, self.warmup, self.iters, self.run_button]),
                self.tracker.widget,
                self.table,
                self.plot,
                self.recorded,
            ]
        )

    def on_session(self, session: Session) -> None:
        # the recorded results are per built-in model: highlight this one's row
        self.reset(session.source.get("value", session.name) if session.source.get("kind") == "model" else "")

    def reset(self, model: str = "") -> None:
        """Show the GPU's availability (called when a model is loaded); without a GPU, the results
        recorded on a real one."""
        self.recorded.value = timing_view.recorded_html(model) if self.reason else ""
        if self.reason:
            self.status.value = (
                f'<div class="migx-gpu-unavailable"><b>No GPU timing here.</b> {html.escape(self.reason)}</div>'
            )
            self.run_button.disabled = True
            self.run_button.tooltip = self.reason
        else:
            self.status.value = '<div class="migx-gpu-ready">GPU ready: press “Compile & time”.</div>'
            self.run_button.disabled = False
        self.table.value = ""
        self.plot.value = ""
        self.last_result: Any = None

    def _report(self, done: int, total: int, what: str) -> None:
        self.tracker.report(done, total, what)

    def modes(self) -> tuple[str, ...]:
        return tuple(m for m, w in (("eager", self.eager), ("graph", self.graph)) if w.value)

    def run(self) -> Any:
        """Compile the final program and time it in the chosen modes; show table and plots.

        Stages report progress: kernel compilation one kernel at a time (through the kernel
        cache, which finalize then hits), then one timing run per mode."""
        session = self.session
        if self.reason:
            raise GpuUnavailable(f"GPU timing unavailable: {self.reason}")
        modes = self.modes()
        if not modes:
            raise UserInputError("pick at least one mode (eager, graph capture)")
        from ..gpu_bridge import compile_session_kernels, time_session

        compile_session_kernels(session, self._report)
        result = time_session(
            session, modes=modes, warmup=self.warmup.value, iters=self.iters.value, progress=self._report
        )
        self.last_result = result
        self._report(len(modes), len(modes), "done: " + timing_view.summary(result))
        self.show(result, session)
        return result

    def show(self, result: Any, session: Session) -> None:
        self.table.value = timing_view.table_html(result) + timing_view.runs_html(session.timings.values())
        self.plot.value = timing_view.figure_svg(result)

    def summary(self) -> str:
        """The last result in one line (notebooks print it)."""
        return "not timed yet" if self.last_result is None else timing_view.summary(self.last_result)
