"""The waterfall panel: what each pass is worth. Disable each pass (or sub-pipeline, or cut the
pipeline after a prefix), re-trace from the cache, and show Δ kernel launches plus Δ eager and
graph-capture latency on the GPU. Without a GPU it still compares launch counts. A `SweepPanel`
(widgets/panel.py) over `migx_explore.waterfall`.

Classes: .migx-waterfall (the accordion) .migx-waterfall-by .migx-waterfall-gpu .migx-waterfall-run
.migx-waterfall-progress .migx-waterfall-table-box (.migx-waterfall-table) .migx-waterfall-plot."""

from __future__ import annotations

import html
from typing import Any

from ..session import Session
from .panel import SweepPanel


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


class WaterfallPanel(SweepPanel):
    name = "waterfall"
    title = "Waterfall: what each pass is worth"
    css_class = "migx-waterfall"
    choices = (
        ("each pass disabled", "pass"),
        ("each sub-pipeline disabled", "pipeline"),
        ("pipeline prefixes", "prefix"),
    )
    choice_label, choice_class = "variants", "by"
    run_label, run_icon, action = "Run waterfall", "bar-chart", "waterfall"
    gpu_by_default = True
    no_gpu_hint = "No GPU here: launch counts only"

    @property
    def by(self) -> Any:
        """The variants dropdown (each pass, each sub-pipeline, prefixes)."""
        return self.choice

    def sweep(self, session: Session, choice: str, time_gpu: bool) -> Any:
        from ..waterfall import waterfall

        wf = waterfall(session, by=choice, time_gpu=time_gpu, progress=self._report)
        self._report(len(wf.variants), len(wf.variants), "done")
        return wf

    def table_html(self, result: Any) -> str:
        return table_html(result)
