"""The waterfall panel: what each pass is worth. Disable each pass (or sub-pipeline, or cut the
pipeline after a prefix), re-trace from the cache, and show Δ kernel launches plus Δ eager and
graph-capture latency on the GPU. Without a GPU it still compares launch counts."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from ..gpu_bridge import unavailable_reason as gpu_unavailable_reason
from ..session import Session
from ._common import ErrorBox, TaskProgress, widgets
from .timing_view import closed_svg


def table_html(wf: Any) -> str:
    def cell(v: Any, signed: bool = False) -> str:
        if v is None:
            return "<td>–</td>"
        cls = ' class="migx-worse"' if signed and v > 0 else (' class="migx-better"' if signed and v < 0 else "")
        return (
            f"<td{cls}>{v:+.1f}</td>"
            if signed and isinstance(v, float)
            else (
                f"<td{cls}>{v:+d}</td>" if signed else f"<td>{v:.1f}</td>" if isinstance(v, float) else f"<td>{v}</td>"
            )
        )

    rows = []
    for r in wf.rows():
        rows.append(
            f"<tr><td><code>{html.escape(r['variant'])}</code></td>{cell(r['launches'])}"
            f"{cell(r['d_launches'], True)}{cell(r['eager_us'])}{cell(r['d_eager_us'], True)}"
            f"{cell(r['graph_us'])}{cell(r['d_graph_us'], True)}"
            f"<td>{html.escape(r['error'])}</td></tr>"
        )
    note = f'<div class="migx-waterfall-note">{html.escape(wf.timing_note)}</div>' if wf.timing_note else ""
    return (
        '<table class="migx-waterfall-table"><tr><th>variant</th><th>launches</th><th>Δ</th><th>eager µs</th>'
        "<th>Δ eager</th><th>graph µs</th><th>Δ graph</th><th></th></tr>" + "".join(rows) + "</table>" + note
    )


class WaterfallPanel:
    def __init__(self, errors: ErrorBox, get_session: Callable[[], Session | None]):
        W = widgets()
        self.errors = errors
        self._get_session = get_session
        self.reason = gpu_unavailable_reason()
        self.by = W.Dropdown(
            options=[
                ("each pass disabled", "pass"),
                ("each sub-pipeline disabled", "pipeline"),
                ("pipeline prefixes", "prefix"),
            ],
            value="pass",
            description="variants",
            _dom_classes=["migx-waterfall-by"],
        )
        self.time_gpu = W.Checkbox(
            self.reason is None,
            description="time on the GPU",
            indent=False,
            disabled=self.reason is not None,
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-waterfall-gpu"],
        )
        self.run_button = W.Button(description="Run waterfall", icon="bar-chart", _dom_classes=["migx-waterfall-run"])
        self.tracker = TaskProgress("migx-waterfall")
        self.progress, self.progress_label = self.tracker.bar, self.tracker.label
        self.table = W.HTML("", _dom_classes=["migx-waterfall-table-box"])
        self.plot = W.HTML("", _dom_classes=["migx-waterfall-plot"])
        self.run_button.on_click(errors.guard(lambda _b: self.run(), "waterfall"))
        hint = W.HTML(
            ""
            if self.reason is None
            else f"<i>No GPU here: launch counts only ({html.escape(self.reason.split(';')[0])}).</i>"
        )
        body = W.VBox(
            [W.HBox([self.by, self.time_gpu, self.run_button]), hint, self.tracker.widget, self.table, self.plot]
        )
        self.widget = W.Accordion(
            [body], titles=("Waterfall: what each pass is worth",), selected_index=None, _dom_classes=["migx-waterfall"]
        )
        self.last: Any = None

    def _report(self, done: int, total: int, what: str) -> None:
        self.tracker.report(done, total, what)

    def run(self) -> Any:
        session = self._get_session()
        if session is None:
            raise RuntimeError("load a model first")
        from ..waterfall import waterfall

        wf = waterfall(session, by=self.by.value, time_gpu=self.time_gpu.value, progress=self._report)
        self._report(len(wf.variants), len(wf.variants), "done")
        self.table.value = table_html(wf)
        self.plot.value = closed_svg(wf.plot())
        self.last = wf
        return wf
