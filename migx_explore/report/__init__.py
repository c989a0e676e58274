"""One self-contained HTML report of a model's passes, to attach to a bug or hand to a student.

    s = Session.from_model("yolov8")
    write_report(s, "yolov8.html")                       # or: migx-explore report yolov8 --out yolov8.html
    write_report(s, "yolov8.html", gpu=True)             # with the GPU timing table and waterfall

The page holds the pipeline tree (toggles in effect, no-op passes dimmed), and per pass the
statistics, rewrite summary, numeric check, text diff and graph diff (the explorer's own graph
view: pan/zoom, expand/collapse, change regions), plus GPU timing when asked, and what it takes to
make it again (model hash, spec, precision, version, command line). Graphs are drawn here, once,
and stored deflated; the browser inflates a pass when it is opened, so the file stays small and
opens fast. Nothing is fetched: no server, no network.

Modules: `collect` (tree, stats, numerics: plain data), `graphs` (drawings, regions, packing),
`timing` (the GPU section), `repro` (how to reproduce), `page` (the HTML).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from migx_explore.compiler.pass_infra import PassRecord

    from ..session import Session

Progress = Callable[[int, int, str], None]
# A report is meant to be attached to a bug or mailed: past this size the second drawing of the
# biggest passes is left out (graphs.fit_budget). yolov8 (796 instructions) takes about 4 MB.
MAX_BYTES = 4_800_000


@dataclass
class ReportInfo:
    path: str
    bytes: int
    passes: int  # records in the trace
    drawn: int  # passes with a stored diff
    seconds: float
    gpu: bool
    undrawn: list[str] = field(default_factory=list)  # "pass: why" for each pass graphviz could not draw

    def __str__(self) -> str:
        return (
            f"wrote {self.path}: {self.bytes / 2**20:.2f} MiB, {self.passes} passes, {self.drawn} with diffs"
            f"{', GPU timing' if self.gpu else ''} ({self.seconds:.1f} s)"
            + (
                f"; {len(self.undrawn)} graph diffs could not be drawn (first: {self.undrawn[0]})"
                if self.undrawn
                else ""
            )
        )


def _no_gpu_html(model: str, why: str | None) -> str:
    import html

    from .timing import recorded_html

    lines = [
        '<p class="rep-no-gpu">GPU timing was not run for this report'
        + (f" ({html.escape(why)})" if why else "")
        + ". Make it with <code>--gpu</code> "
        "(or <code>write_report(s, path, gpu=True)</code>) where a GPU is usable.</p>"
    ]
    recorded = recorded_html(model)
    if recorded:
        lines.append(recorded)
    return "".join(lines)


def build_report(
    session: Session,
    *,
    graphs: bool = True,
    gpu: bool = False,
    command: str = "",
    inputs_path: str | None = None,
    files: Mapping[int, Sequence[str]] | None = None,
    waterfall_by: str | None = "pipeline",
    iters: int = 50,
    warmup: int = 5,
    max_bytes: int | None = MAX_BYTES,
    progress: Progress | None = None,
    graph_budget: int | None = None,
    on_drawn: Callable[[PassRecord, str], None] | None = None,
) -> tuple[str, dict[str, Any]]:
    """(html, stats) of the report of `session`'s current configuration.

    graphs: draw a graph diff per changed pass (graphviz; off: text diffs only). gpu: time the
    final program and its waterfall (raises GpuUnavailable, saying why, where no GPU is usable).
    files: record index -> file names beside the report to link (trace's index.html). max_bytes:
    the size the page aims to stay under (None: no limit). graph_budget, on_drawn: as for
    graphs.pass_blobs (trace --svg draws each pass once, for the page and its file)."""
    from ..rewrite_summary import record_rewrites
    from . import collect
    from .graphs import pass_blobs
    from .page import page_html
    from .repro import repro_info

    trace = session.run()
    for rec in session.traces.unchecked(trace):  # a deferred numeric check (the explorer's) is finished first
        session.traces.check_numeric(rec)
    rewrites = {r.index: record_rewrites(trace, r) for r in trace.records if r.changed}
    data: dict[str, Any] = {
        "model": session.name,
        "graphs": graphs,
        "overview": collect.overview(session),
        "pipelines": collect.pipeline_tree(session),
        "passes": collect.pass_rows(session, rewrites),
        "files": {str(k): list(v) for k, v in (files or {}).items()},
    }
    gpu_html = _gpu_html(session, gpu, waterfall_by=waterfall_by, iters=iters, warmup=warmup)
    repro = repro_info(session, command=command, inputs_path=inputs_path)
    rest = len(page_html(data, {}, gpu_html=gpu_html, repro=repro).encode("utf-8"))
    budget = None if max_bytes is None else max(max_bytes - rest - 100 * len(trace.records), 0)
    undrawn: list[str] = []
    blobs = pass_blobs(
        session,
        rewrites=rewrites,
        graphs=graphs,
        budget=budget,
        progress=progress,
        on_error=lambda rec, e: undrawn.append(f"{rec.path}: {e}"),
        graph_budget=graph_budget,
        on_drawn=on_drawn,
    )
    text = page_html(data, blobs, gpu_html=gpu_html, repro=repro)
    return text, {"passes": len(trace.records), "drawn": len(blobs), "undrawn": undrawn}


def _gpu_html(session: Session, gpu: bool, **timing: Any) -> str:
    """The report's GPU section: the final program timed (and its waterfall), or why not."""
    if not gpu:
        return _no_gpu_html(session.name, None)
    from .timing import gpu_section

    return gpu_section(session, **timing)


def write_report(session: Session, path: str | os.PathLike, **kw: Any) -> ReportInfo:
    """Write the report to `path` (atomically: a failure leaves no half-written file). Keywords
    as for build_report."""
    from ..outputs import atomic_file

    t0 = time.perf_counter()
    text, stats = build_report(session, **kw)
    target = os.fspath(path)
    with atomic_file(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(target, 0o666 & ~umask)  # a page to share: not the temporary file's private 0600
    return ReportInfo(
        target,
        os.path.getsize(target),
        stats["passes"],
        stats["drawn"],
        time.perf_counter() - t0,
        bool(kw.get("gpu")),
        stats["undrawn"],
    )


__all__ = ["MAX_BYTES", "ReportInfo", "build_report", "write_report"]
