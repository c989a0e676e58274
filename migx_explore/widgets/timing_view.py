"""GPU timing results (gpu.timing.TimingResult) as HTML tables and a matplotlib figure rendered
to inline SVG. Pure functions: no widgets, and matplotlib only through its object API (no
pyplot state), imported when a figure is drawn."""

from __future__ import annotations

import html
import io
from collections.abc import Iterable
from typing import Any

MODE_LABEL = {"eager": "eager (a launch per kernel)", "graph": "graph capture (one launch)"}
MODE_COLOUR = {"eager": "#d62728", "graph": "#1f77b4"}


def speedup(result: Any) -> float | None:
    """Eager over graph median device time (None unless both modes ran)."""
    m = result.modes
    if "eager" in m and "graph" in m and m["graph"].device_us.median > 0:
        return m["eager"].device_us.median / m["graph"].device_us.median
    return None


def summary(result: Any) -> str:
    """One line: medians per mode and what graph capture saved."""
    parts = [
        f"{mode}: {mt.device_us.median:.1f} µs device, {mt.host_us.median:.1f} µs per run"
        for mode, mt in result.modes.items()
    ]
    s = speedup(result)
    if s is not None:
        eager, graph = result.modes["eager"], result.modes["graph"]
        saved = eager.enqueue_us.median - graph.enqueue_us.median
        parts.append(
            f"graph capture {s:.2f}x faster on the device; the host saves {saved:.1f} µs of "
            f"enqueue time ({saved / max(eager.launches, 1):.2f} µs per eager launch)"
        )
    return "; ".join(parts)


def table_html(result: Any) -> str:
    rows = []
    for mode, mt in result.modes.items():
        d, h = mt.device_us, mt.host_us
        rows.append(
            f"<tr><th>{html.escape(MODE_LABEL.get(mode, mode))}</th>"
            f"<td>{d.median:.1f}</td><td>{d.p10:.1f} – {d.p90:.1f}</td><td>{h.median:.1f}</td>"
            f"<td>{mt.enqueue_us.median:.1f}</td><td>{mt.launches}</td>"
            f"<td>{mt.enqueue_per_launch_us:.2f}</td></tr>"
        )
    head = (
        "<tr><th>mode</th><th>device µs<br>median</th><th>device µs<br>p10 – p90</th><th>host µs<br>per run</th>"
        "<th>enqueue µs</th><th>launches</th><th>enqueue µs<br>per launch</th></tr>"
    )
    s = speedup(result)
    foot = (
        f"<p>{result.kernels} kernels, {result.blas_calls} BLAS calls"
        + (f", {result.graph_nodes} graph nodes" if result.graph_nodes >= 0 else "")
        + (f"; graph capture is <b>{s:.2f}x</b> faster on the device" if s is not None else "")
        + ".</p>"
        + (f"<p>{html.escape(result.segments_line())}</p>" if result.graph_parts else "")
    )
    return f'<table class="migx-timing-results">{head}{"".join(rows)}</table>{foot}'


def runs_html(runs: Iterable[Any]) -> str:
    """Every timed pipeline variant of a session (Session.timings.values(): label and result), to
    compare toggles."""
    rows = []
    for run in runs:
        spec, r = run.label, run.result
        cells = "".join(
            f"<td>{r.modes[m].device_us.median:.1f}</td>" if m in r.modes else "<td>–</td>" for m in ("eager", "graph")
        )
        launches = r.modes["eager"].launches if "eager" in r.modes else "–"
        rows.append(f"<tr><td><code>{html.escape(spec)}</code></td>{cells}<td>{launches}</td></tr>")
    if not rows:
        return ""
    return (
        '<table class="migx-timing-runs"><tr><th>pipeline (spec)</th><th>eager µs</th><th>graph µs</th>'
        f"<th>launches</th></tr>{''.join(rows)}</table>"
    )


def svg_of(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.find("<svg") :]  # inline: drop the XML prolog and doctype


def closed_svg(fig: Any) -> str:
    """A pyplot figure as inline SVG, closed afterwards (pyplot keeps every open figure alive)."""
    import matplotlib.pyplot as plt

    try:
        return svg_of(fig)
    finally:
        plt.close(fig)


def figure_svg(result: Any, top: int = 12) -> str:
    """Left: per-mode latency distribution (device and host time, median with the p10–p90
    range); right: the slowest kernels of an eager run. Returned as inline SVG markup."""
    from matplotlib.figure import Figure

    eager = result.modes.get("eager")
    kernels = sorted(eager.per_kernel, key=lambda k: -k.us)[:top] if eager is not None else []
    fig = Figure(figsize=(12, 3.8) if kernels else (5.5, 3.6), layout="constrained")
    axes = fig.subplots(1, 2 if kernels else 1, squeeze=False)[0]
    ax = axes[0]
    labels = []
    for k, (mode, mt) in enumerate(result.modes.items()):
        for j, (what, st) in enumerate((("device", mt.device_us), ("host/run", mt.host_us))):
            y = 2 * k + j
            ax.errorbar(
                [st.median],
                [y],
                xerr=[[st.median - st.p10], [st.p90 - st.median]],
                fmt="o",
                capsize=5,
                color=MODE_COLOUR.get(mode, "#555"),
                alpha=1.0 if what == "device" else 0.55,
            )
            ax.annotate(
                f"{st.median:.1f}", (st.median, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8
            )
            labels.append(f"{mode} {what}")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("µs (median, p10–p90)")
    spread = [st for mt in result.modes.values() for st in (mt.device_us, mt.host_us)]
    if max(st.p90 for st in spread) > 20 * max(min(st.p10 for st in spread), 1e-9):
        ax.set_xscale("log")  # host and device times can differ by orders of magnitude
    ax.set_title("latency per mode", fontsize=10)
    ax.invert_yaxis()
    if kernels:
        kx = axes[1]
        names = [f"{k.instruction.split(' ')[0]} {k.kernel[:26]}" for k in kernels]
        kx.barh(
            range(len(kernels)),
            [k.us for k in kernels],
            color=["#9467bd" if k.kind == "blas" else "#2ca02c" for k in kernels],
        )
        kx.set_yticks(range(len(kernels)), names, fontsize=7)
        kx.invert_yaxis()
        kx.set_xlabel("µs per kernel (eager, median)")
        total = sum(k.us for k in eager.per_kernel)
        kx.set_title(
            f"slowest kernels ({len(eager.per_kernel)} steps, {total:.1f} µs total; green: generated, purple: BLAS)",
            fontsize=9,
        )
    return svg_of(fig)


def recorded_html(model: str = "") -> str:
    """The timings recorded on a real GPU (gpu_bridge.recorded_results), labelled with device and
    date; the loaded model's row first and marked. Empty when no recording ships."""
    from ..gpu_bridge import recorded_results

    run = recorded_results()
    if run is None or not run.models:
        return ""

    def us(v: float | None) -> str:
        return "–" if v is None else f"{v:.1f}"

    order = sorted(run.models.values(), key=lambda m: (m.model != model, m.model))
    rows = "".join(
        f'<tr class="{"migx-recorded-current" if m.model == model else ""}"><td>{html.escape(m.model)}</td>'
        f"<td>{us(m.eager_us)}</td><td>{us(m.graph_us)}</td><td>{m.eager_us / m.graph_us:.2f}x</td>"
        f"<td>{m.launches}</td><td>{us(m.torch_eager_us)}</td><td>{us(m.torch_graph_us)}</td></tr>"
        for m in order
        if m.graph_us and m.graph_us == m.graph_us
    )
    return (
        f'<div class="migx-recorded-label"><b>Recorded on {html.escape(run.device)}, {html.escape(run.date)}</b> '
        f"(not measured here; from {html.escape(run.source)}, median device µs per run):</div>"
        '<table class="migx-recorded-table"><tr><th>model</th><th>eager µs</th><th>graph µs</th>'
        "<th>graph speed-up</th><th>launches</th><th>torch eager µs</th><th>torch graph µs</th></tr>"
        f"{rows}</table>"
    )
