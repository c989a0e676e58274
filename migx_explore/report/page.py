"""The report as one HTML file: stylesheet, the explorer's graph view (vendored svg-pan-zoom and
graph_view.js, the same front end the notebook uses), the page script, the summary data as JSON
and one compressed blob per changed pass. Nothing is fetched: it opens from file:// offline."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parent / "assets"


def _script_json(data: Any) -> str:
    # Inside <script>, "</" could end the element early; "<\/" means the same to JSON.parse.
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def _graph_view_js() -> tuple[str, str]:
    """(css, module code) of the explorer's graph view, without its anywidget export."""
    from ..widgets.graph_view import CSS, esm

    code = esm().replace("export default { render };", "")
    return CSS, code


def _repro_html(repro: dict[str, Any]) -> str:
    labels = [
        ("model", "model"),
        ("source", "source"),
        ("model_sha256", "model file sha256"),
        ("program_sha256", "input program sha256 (printed IR)"),
        ("input_dims", "input dims"),
        ("spec", "pipeline spec"),
        ("mode", "compile mode"),
        ("precision", "precision"),
        ("migraphx_env", "MIGraphX equivalent"),
        ("inputs", "numeric-check inputs"),
        ("version", "package version"),
        ("python", "python"),
        ("created", "created"),
        ("command", "command line"),
    ]
    rows = "".join(
        f'<tr class="rep-repro-{k}"><th>{html.escape(label)}</th><td><code>{html.escape(str(repro[k]))}'
        f"</code></td></tr>"
        for k, label in labels
        if repro.get(k)
    )
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in repro.get("warnings", ()))
    return (
        f'<table class="rep-table rep-repro">{rows}</table>'
        + (f'<h3>Ordering warnings</h3><ul class="rep-repro-warnings">{warn}</ul>' if warn else "")
        + f'<h3>Repro script</h3><pre class="rep-repro-script">{html.escape(repro.get("script", ""))}</pre>'
    )


def _overview_html(ov: dict[str, Any], repro: dict[str, Any]) -> str:
    ins, ln = ov["instructions"], ov["launches"]
    parts = [
        f'<code class="rep-head-spec">{html.escape(str(repro.get("spec", "")))}</code>',
        html.escape(str(repro.get("precision", ""))),
        f"<b>{ins[0]} → {ins[1]}</b> instructions",
        f"<b>{ln[0]} → {ln[1]}</b> kernel launches",
        f"<b>{ov['passes']}</b> passes ({ov['changed']} changed the IR, {ov['disabled']} disabled)",
        f"{ov['time_ms']:.1f} ms in passes",
    ]
    if ov["numeric_failure"]:
        f = ov["numeric_failure"]
        parts.append(f'<b style="color:#ff8a80">numeric check broken at {html.escape(f["path"])}</b>')
    elif ov["numeric_checked"]:
        parts.append(f"numeric check: {ov['numeric_checked']} passes within tolerance")
    if ov["error"]:
        parts.append(f'<b style="color:#ff8a80">error: {html.escape(ov["error"])}</b>')
    if ov["warnings"]:
        tip = html.escape("\n".join(ov["warnings"]), quote=True)
        parts.append(f'<span class="rep-warnings" title="{tip}">⚠ {len(ov["warnings"])} ordering warning(s)</span>')
    return " · ".join(parts)


def _legend_html() -> str:
    from ..render import style as S

    return "".join(
        f'<i style="background:{st.fill};border:1px solid {st.border}"></i>{k}'
        for k, st in ((k, S.STATUS_STYLE[k]) for k in (S.ADDED, S.REMOVED, S.CHANGED, S.UNCHANGED))
    )


def page_html(data: dict[str, Any], blobs: dict[int, str], *, gpu_html: str, repro: dict[str, Any]) -> str:
    gv_css, gv_js = _graph_view_js()
    css = (ASSETS / "report.css").read_text(encoding="utf-8")
    js = (ASSETS / "report.js").read_text(encoding="utf-8")
    name = html.escape(data["model"])
    body = (
        (ASSETS / "body.html")
        .read_text(encoding="utf-8")
        .format(
            name=name,
            overview=_overview_html(data["overview"], repro),
            gpu=gpu_html,
            repro=_repro_html(repro),
            legend=_legend_html(),
        )
    )
    blob_tags = "\n".join(
        f'<script type="application/octet-stream" id="migx-blob-{i}">{b}</script>' for i, b in sorted(blobs.items())
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="{html.escape(repro.get("version", "migx-explore"))}">'
        f"<title>migx-explore report: {name}</title><style>{gv_css}\n{css}</style></head><body>\n{body}\n"
        f'<script type="application/json" id="migx-report-data">{_script_json(data)}</script>\n{blob_tags}\n'
        f'<script type="module">\n{gv_js}\n{js}\n</script>\n</body></html>\n'
    )


__all__ = ["page_html"]
