"""The Recipe / export menu's "Save report": one self-contained HTML page of the session's passes
(migx_explore.report) written beside the notebook, to attach or hand around. A thin row: a path,
a button, a line saying what was written (errors go to the explorer's error box)."""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable
from typing import Any

from ..errors import UserInputError
from ..session import Session
from ._common import ErrorBox, widgets


def default_report_name(session: Session) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", session.name.rsplit(".", 1)[0] or "model") + "_report.html"


class ReportSaver:
    def __init__(self, errors: ErrorBox, session: Callable[[], Session | None]):
        W = widgets()
        self.errors = errors
        self._session = session
        self.path = W.Text(
            "",
            placeholder="report.html",
            description="file",
            layout=W.Layout(width="22em"),
            _dom_classes=["migx-report-path"],
        )
        self.button = W.Button(
            description="Save report",
            icon="download",
            _dom_classes=["migx-report-save"],
            tooltip="write one HTML page of every pass (tree, stats, rewrite summaries, numerics, "
            "text and graph diffs) that opens offline in any browser",
        )
        self.result = W.HTML("", _dom_classes=["migx-report-result"])
        self.button.on_click(errors.guard(lambda _b: self.save(), "save report"))
        self.widget = W.HBox(
            [self.path, self.button, self.result],
            _dom_classes=["migx-report-row"],
            layout=W.Layout(align_items="center", grid_gap="6px"),
        )

    def reset(self, session: Session) -> None:
        self.path.value = default_report_name(session)

    def save(self) -> Any:
        """Write the report of the current configuration; returns its ReportInfo."""
        s = self._session()
        if s is None:
            raise UserInputError("no model loaded: load one before saving a report")
        path = self.path.value.strip() or default_report_name(s)
        self.result.value = "<i>drawing every changed pass…</i>"
        try:
            from ..report import write_report

            info = write_report(s, path)
        except Exception:
            self.result.value = ""
            raise
        self.result.value = (
            f"saved <code>{html.escape(os.path.abspath(info.path))}</code> "
            f"({info.bytes / 2**20:.2f} MiB, {info.drawn} passes drawn)"
        )
        return info


__all__ = ["ReportSaver", "default_report_name"]
