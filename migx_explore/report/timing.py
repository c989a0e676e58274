"""The report's GPU section: the final program timed eagerly and through graph capture (table and
slowest kernels), and the waterfall (what each sub-pipeline or pass is worth: Δ launches, Δ µs),
as static HTML and inline SVG (no matplotlib, no script: the page only shows it)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..session import Session


def _device() -> str:
    try:
        from migx_explore.gpu.runtime import get_backend

        return get_backend().describe()
    except Exception as e:  # noqa: BLE001 - the label is decoration; the timing itself succeeded
        return f"unknown device ({type(e).__name__})"


def kernels_html(result: Any, top: int = 15) -> str:
    eager = result.modes.get("eager")
    if eager is None or not eager.per_kernel:
        return ""
    ks = sorted(eager.per_kernel, key=lambda k: -k.us)[:top]
    total = sum(k.us for k in eager.per_kernel) or 1.0
    rows = "".join(
        f"<tr><td><code>{html.escape(k.instruction[:60])}</code></td><td><code>{html.escape(k.kernel[:48])}</code>"
        f"</td><td>{html.escape(k.kind)}</td><td>{k.us:.2f}</td><td>{100 * k.us / total:.1f}%</td>"
        f'<td><div class="rep-bar" style="width:{100 * k.us / ks[0].us:.1f}%"></div></td></tr>'
        for k in ks
    )
    return (
        f"<h3>Slowest kernels (eager run, {len(eager.per_kernel)} steps, {total:.1f} µs in all)</h3>"
        '<table class="rep-table rep-kernels"><tr><th>instruction</th><th>kernel</th><th>kind</th>'
        f"<th>µs</th><th>share</th><th></th></tr>{rows}</table>"
    )


def waterfall_svg(rows: list[dict[str, Any]], width: int = 720) -> str:
    """Horizontal bars per variant: Δ launches and Δ eager / graph µs over the full pipeline."""
    rows = rows[1:]
    cols = [("d_launches", "Δ launches")] + [
        (f"d_{m}_us", f"Δ {m} µs") for m in ("eager", "graph") if any(r[f"d_{m}_us"] is not None for r in rows)
    ]
    if not rows:
        return ""
    label_w, row_h, top = 230, 22, 26
    col_w = (width - label_w) / len(cols)
    h = top + row_h * len(rows) + 8
    out = [
        f'<svg class="rep-waterfall-svg" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
        f'viewBox="0 0 {width} {h}" font-family="Helvetica,Arial,sans-serif" font-size="11">'
    ]
    for c, (key, title) in enumerate(cols):
        x0 = label_w + c * col_w
        vals = [abs(r[key] or 0) for r in rows]
        scale = (col_w / 2 - 30) / (max(vals) or 1)
        mid = x0 + col_w / 2
        out.append(f'<text x="{mid:.1f}" y="14" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>')
        out.append(f'<line x1="{mid:.1f}" y1="{top - 4}" x2="{mid:.1f}" y2="{h - 4}" stroke="#888"/>')
        for k, r in enumerate(rows):
            v = r[key]
            y = top + k * row_h
            if v is None:
                continue
            w = abs(v) * scale
            x = mid if v >= 0 else mid - w
            colour = "#c0392b" if v > 0 else "#27ae60"
            out.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row_h - 8}" fill="{colour}"/>')
            tx = mid + w + 3 if v >= 0 else mid - w - 3
            anchor = "start" if v >= 0 else "end"
            text = f"{v:+d}" if isinstance(v, int) else f"{v:+.1f}"
            out.append(f'<text x="{tx:.1f}" y="{y + row_h - 8}" text-anchor="{anchor}">{text}</text>')
    for k, r in enumerate(rows):
        out.append(f'<text x="4" y="{top + k * row_h + row_h - 8}">{html.escape(r["variant"][:36])}</text>')
    out.append("</svg>")
    return "".join(out)


def waterfall_html(wf: Any) -> str:
    def cell(v: Any, signed: bool = False) -> str:
        if v is None:
            return "<td>–</td>"
        cls = ' class="rep-worse"' if signed and v > 0 else (' class="rep-better"' if signed and v < 0 else "")
        text = (
            (f"{v:+d}" if isinstance(v, int) else f"{v:+.1f}")
            if signed
            else (f"{v:.1f}" if isinstance(v, float) else str(v))
        )
        return f"<td{cls}>{text}</td>"

    rows = wf.rows()
    body = "".join(
        f"<tr><td><code>{html.escape(r['variant'])}</code></td>{cell(r['launches'])}{cell(r['d_launches'], True)}"
        f"{cell(r['eager_us'])}{cell(r['d_eager_us'], True)}{cell(r['graph_us'])}{cell(r['d_graph_us'], True)}"
        f"<td>{html.escape(r['error'])}</td></tr>"
        for r in rows
    )
    what = {"pass": "each pass disabled", "pipeline": "each sub-pipeline disabled", "prefix": "pipeline prefixes"}.get(
        wf.by, wf.by
    )
    note = f'<p class="rep-note">{html.escape(wf.timing_note)}</p>' if wf.timing_note else ""
    return (
        f"<h3>Waterfall: {html.escape(what)} (red: slower or more launches without it)</h3>"
        '<table class="rep-table rep-waterfall"><tr><th>variant</th><th>launches</th><th>Δ</th><th>eager µs</th>'
        f"<th>Δ eager</th><th>graph µs</th><th>Δ graph</th><th></th></tr>{body}</table>{note}" + waterfall_svg(rows)
    )


MODE_LABEL = {"eager": "eager (a launch per kernel)", "graph": "graph capture (one launch)"}


def timing_html(result: Any) -> str:
    """Per mode: device time (median, p10-p90), host time per run, enqueue time and launches, and
    what graph capture saved."""
    rows = "".join(
        f"<tr><th>{html.escape(MODE_LABEL.get(mode, mode))}</th><td>{mt.device_us.median:.1f}</td>"
        f"<td>{mt.device_us.p10:.1f} – {mt.device_us.p90:.1f}</td><td>{mt.host_us.median:.1f}</td>"
        f"<td>{mt.enqueue_us.median:.1f}</td><td>{mt.launches}</td><td>{mt.enqueue_per_launch_us:.2f}</td></tr>"
        for mode, mt in result.modes.items()
    )
    m = result.modes
    foot = f"{result.kernels} kernels, {result.blas_calls} BLAS calls" + (
        f", {result.graph_nodes} graph nodes" if result.graph_nodes >= 0 else ""
    )
    if "eager" in m and "graph" in m and m["graph"].device_us.median > 0:
        saved = m["eager"].enqueue_us.median - m["graph"].enqueue_us.median
        foot += (
            f"; graph capture is <b>{m['eager'].device_us.median / m['graph'].device_us.median:.2f}x</b> faster "
            f"on the device and saves {saved:.1f} µs of host enqueue time per run"
        )
    if result.graph_parts:
        foot += f"<br>{html.escape(result.segments_line())}"
    return (
        '<table class="rep-table migx-timing-results"><tr><th>mode</th><th>device µs<br>median</th>'
        "<th>device µs<br>p10 – p90</th><th>host µs<br>per run</th><th>enqueue µs</th><th>launches</th>"
        f"<th>enqueue µs<br>per launch</th></tr>{rows}</table><p>{foot}.</p>"
    )


def recorded_html(model: str) -> str:
    """The timings recorded on a real GPU that ship with the package, labelled as such (shown
    where this report did not time anything); empty when there are none."""
    from ..gpu_bridge import recorded_results

    run = recorded_results()
    if run is None or not run.models:
        return ""
    rows = "".join(
        f'<tr class="{"rep-recorded-current" if m.model == model else ""}"><td>{html.escape(m.model)}</td>'
        f"<td>{m.eager_us:.1f}</td><td>{m.graph_us:.1f}</td><td>{m.launches}</td></tr>"
        for m in sorted(run.models.values(), key=lambda m: (m.model != model, m.model))
        if m.graph_us == m.graph_us
    )
    return (
        f"<h3>Recorded on {html.escape(run.device)}, {html.escape(run.date)} (not measured for this report; "
        f"from {html.escape(run.source)}, median device µs per run)</h3>"
        '<table class="rep-table rep-recorded"><tr><th>model</th><th>eager µs</th><th>graph µs</th>'
        f"<th>launches</th></tr>{rows}</table>"
    )


def gpu_section(
    session: Session, *, waterfall_by: str | None = "pipeline", iters: int = 50, warmup: int = 5, inputs: Any = None
) -> str:
    """Time the session's final program (and its waterfall variants) and return the section's HTML.
    Raises GpuUnavailable (one line, what to install) where no GPU stack is usable."""
    from ..gpu_bridge import time_session
    from ..waterfall import waterfall

    result = time_session(session, modes=("eager", "graph"), warmup=warmup, iters=iters)
    parts = [
        f'<p class="rep-device">Measured on <b>{html.escape(_device())}</b>, {iters} runs after {warmup} '
        f"warm-up runs per mode.</p>",
        f'<div class="rep-timing-table">{timing_html(result)}</div>',
        kernels_html(result),
    ]
    if waterfall_by:
        wf = waterfall(session, by=waterfall_by, iters=max(iters // 2, 3), warmup=max(warmup // 2, 1), inputs=inputs)
        parts.append(f'<div class="rep-waterfall-box">{waterfall_html(wf)}</div>')
    return "".join(parts)


__all__ = ["gpu_section", "kernels_html", "recorded_html", "timing_html", "waterfall_html", "waterfall_svg"]
