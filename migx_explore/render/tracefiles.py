"""One drawing per pass of a trace, named like `write_trace`'s numbered text files, for the CLI's
`trace --svg` and for browsing a pipeline run as files."""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from .diff import diff_graph
from .dot import DotOptions, RenderError, write_graph
from .model import build_graph
from .scale import apply_budget

if TYPE_CHECKING:  # pragma: no cover
    from migx_explore.compiler.pass_infra import PassRecord, Trace

FORMATS = ("svg", "png", "dot")
# Nodes per drawing (everything drawn counts): about what a screen shows readably. A trace of a
# 5,000-instruction unrolled LSTM wrote 23 MB of SVG at the interactive views' 400, most of it
# ~1,100-node drawings nobody could read; over this, scope groups fold (render.fit).
TRACE_FILE_BUDGET = 80


def has_pass_file(rec: PassRecord, changed_only: bool = True) -> bool:
    """Whether render_trace (or trace --svg) draws a file for this record."""
    return rec.before is not None and rec.after is not None and (rec.changed or not changed_only)


def pass_file_name(rec: PassRecord, fmt: str = "svg") -> str:
    """`012_fusion.fuse_pointwise.svg`: the trace's text file name with another extension."""
    # Reuse the trace writer's naming so a pass's .txt and .svg sort and pair up. Imported here:
    # importing compiler.passes loads every pass module, which `import render` should not need.
    from migx_explore.compiler.pass_infra.trace import record_file_name

    return os.path.splitext(record_file_name(rec))[0] + "." + fmt


def render_trace(
    trace: Trace,
    out_dir: str,
    changed_only: bool = True,
    fmt: str = "svg",
    *,
    include_input: bool = True,
    dot_options: DotOptions | None = None,
    skip: Collection[int] = (),
    **diff_options: Any,
) -> list[str]:
    """Write the merged diff view of each pass (changed passes only by default) as
    `<NNN>_<path>.<fmt>`, plus `000_input.<fmt>` for the starting program. Returns the paths.

    diff_options go to `diff_graph` (focus, budget, expand, ...); big graphs are focused on the
    change automatically, so every file renders in about a second or less. skip: record indices
    whose file is written elsewhere (trace --svg takes them from its report's drawings)."""
    if fmt not in FORMATS:
        raise RenderError(f"render_trace: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    os.makedirs(out_dir, exist_ok=True)
    written = []
    diff_options.setdefault("budget", TRACE_FILE_BUDGET)
    if include_input:
        budget = diff_options["budget"]
        g = build_graph(trace.initial, expand=diff_options.get("expand", "auto"), title="input")
        if budget is not None:
            g = apply_budget(g, budget)
        written.append(write_graph(g, os.path.join(out_dir, f"000_input.{fmt}"), dot_options))
    table = None
    for rec in trace.records:
        if not has_pass_file(rec, changed_only) or rec.index in skip:
            continue
        title = f"{rec.path}: {rec.diff.summary() if rec.diff else ''}"
        if "scopes" not in diff_options:  # fold by the model's scopes when over the budget
            from ..scopes import ScopeTable

            table = table or ScopeTable(trace)
            scopes = {**table.scopes_of(rec.before, rec), **table.scopes_of(rec.after, rec)}
            g = diff_graph(rec.before, rec.after, rec.diff, title=title, scopes=scopes, **diff_options)
        else:
            g = diff_graph(rec.before, rec.after, rec.diff, title=title, **diff_options)
        written.append(write_graph(g, os.path.join(out_dir, pass_file_name(rec, fmt)), dot_options))
    return written
