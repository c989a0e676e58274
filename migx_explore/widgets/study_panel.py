"""The ordering-study panel: which orderings matter for this model. Runs migx_explore.study.study_order
(every movable pass swapped with its neighbour, or adjacent sub-pipelines) as Dask tasks, and
shows the ranked moves with the rewrites each gains or loses, the moves the ordering constraints
forbid, and the chart. Thin glue: the study itself is migx_explore.study."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from ..errors import UserInputError
from ..gpu_bridge import unavailable_reason as gpu_unavailable_reason
from ..session import Session
from ._common import ErrorBox, TaskProgress, widgets
from .timing_view import closed_svg


def study_html(st: Any, top: int = 15) -> str:
    """The ranked moves as an HTML table, then the forbidden moves and the notes."""
    rows = []
    by_label = {x["variant"]: x for x in st.rows()}
    for k, r in enumerate(st.ranked()[:top], 1):
        d = by_label[r["label"]]
        cls = ' class="migx-study-failed"' if r.get("error") else ""
        rows.append(
            f"<tr{cls}><td>{k}</td><td><code>{html.escape(r['label'])}</code></td>"
            f"<td>{_num(d['d_launches'])}</td><td>{_num(d['d_blas'])}</td><td>{_num(d['d_instructions'])}</td>"
            f"<td>{html.escape(st.describe(r).split(': ', 1)[-1])}</td></tr>"
        )
    b = st.baseline
    head = (
        f"<div class='migx-study-summary'>{len(st.variants)} moves run ({html.escape(st.where)}), "
        f"{len(st.skipped)} forbidden by ordering constraints, <b>{len(st.ranked())} change something</b>; "
        f"shipped order: {b.get('instructions')} instructions, {b.get('launches')} launches, "
        f"{b.get('blas')} BLAS calls</div>"
    )
    table = (
        (
            "<table class='migx-study-table'><tr><th>#</th><th>move</th><th>Δ launches</th><th>Δ BLAS</th>"
            "<th>Δ instr.</th><th>what changes</th></tr>" + "".join(rows) + "</table>"
        )
        if rows
        else ("<div><i>No move changes the compiled program.</i></div>")
    )
    skipped = "".join(f"<li><code>{html.escape(s.label)}</code>: {html.escape(s.reason)}</li>" for s in st.skipped)
    skipped = (
        f"<details><summary>not run (ordering constraints)</summary><ul>{skipped}</ul></details>" if skipped else ""
    )
    note = f"<div class='migx-study-note'>{html.escape(st.note)}</div>" if st.note else ""
    return head + table + skipped + note


def _num(v: Any) -> str:
    return "–" if v is None else (f"{v:+d}" if isinstance(v, int) else f"{v:+.1f}")


class StudyPanel:
    def __init__(self, errors: ErrorBox, get_session: Callable[[], Session | None]):
        W = widgets()
        self.errors = errors
        self._get_session = get_session
        self.reason = gpu_unavailable_reason()
        self.workers: int | None = None  # None: a local Dask cluster sized to the machine; 0: serially
        self.scope = W.Dropdown(
            options=[("swap adjacent passes", "pass"), ("swap sub-pipelines", "pipeline")],
            value="pass",
            description="moves",
            _dom_classes=["migx-study-scope"],
        )
        self.time_gpu = W.Checkbox(
            False,
            description="time on the GPU",
            indent=False,
            disabled=self.reason is not None,
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-study-gpu"],
        )
        self.run_button = W.Button(description="Run ordering study", icon="random", _dom_classes=["migx-study-run"])
        self.tracker = TaskProgress("migx-study")
        self.progress, self.progress_label = self.tracker.bar, self.tracker.label
        self.table = W.HTML("", _dom_classes=["migx-study-table-box"])
        self.plot = W.HTML("", _dom_classes=["migx-study-plot"])
        self.run_button.on_click(errors.guard(lambda _b: self.run(), "ordering study"))
        body = W.VBox(
            [W.HBox([self.scope, self.time_gpu, self.run_button]), self.tracker.widget, self.table, self.plot]
        )
        self.widget = W.Accordion(
            [body], titles=("Ordering study: which orderings matter",), selected_index=None, _dom_classes=["migx-study"]
        )
        self.last: Any = None

    def _report(self, done: int, total: int, what: str) -> None:
        self.tracker.report(done, total, what)

    def run(self) -> Any:
        session = self._get_session()
        if session is None:
            raise UserInputError("load a model first")
        from ..study import study_order

        st = study_order(
            session, scope=self.scope.value, gpu=self.time_gpu.value, progress=self._report, workers=self.workers
        )
        self.table.value = study_html(st)
        self.plot.value = closed_svg(st.plot())
        self.last = st
        return st
