"""The ordering-study panel: which orderings matter for this model. Runs migx_explore.study.study_order
(every movable pass swapped with its neighbour, or adjacent sub-pipelines) as Dask tasks, and
shows the ranked moves with the rewrites each gains or loses, the moves the ordering constraints
forbid, and the chart. Thin glue (a `SweepPanel`, widgets/panel.py): the study itself is
migx_explore.study.

Classes: .migx-study (the accordion) .migx-study-scope .migx-study-gpu .migx-study-run
.migx-study-progress .migx-study-table-box (.migx-study-table) .migx-study-plot."""

from __future__ import annotations

import html
from typing import Any

from ..session import Session
from .panel import SweepPanel


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


class StudyPanel(SweepPanel):
    name = "study"
    title = "Ordering study: which orderings matter"
    css_class = "migx-study"
    choices = (("swap adjacent passes", "pass"), ("swap sub-pipelines", "pipeline"))
    choice_label, choice_class = "moves", "scope"
    run_label, run_icon, action = "Run ordering study", "random", "ordering study"

    def build(self) -> Any:
        self.workers: int | None = None  # None: a local Dask cluster sized to the machine; 0: serially
        return super().build()

    @property
    def scope(self) -> Any:
        """The moves dropdown (adjacent passes or sub-pipelines)."""
        return self.choice

    def sweep(self, session: Session, choice: str, time_gpu: bool) -> Any:
        from ..study import study_order

        return study_order(session, scope=choice, gpu=time_gpu, progress=self._report, workers=self.workers)

    def table_html(self, result: Any) -> str:
        return study_html(result)
