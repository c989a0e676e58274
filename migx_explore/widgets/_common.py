"""Shared bits of the explorer widgets: the error box every callback reports into, CSS class
helpers and the stylesheet (each panel's own rules are in its module, widgets/panel.py).

ipywidgets is imported inside functions only, so `import migx_explore.widgets` works without it."""

from __future__ import annotations

import functools
import html
import os
import re
import traceback
from collections.abc import Callable
from typing import Any

from ..errors import describe_error

# Classes tests and users select on; keep them stable (they are part of the explorer's API).
CSS = """
<style>
.migx-explorer { font-size: 13px; max-width: 100%; }
.migx-explorer .migx-progress-label, .migx-explorer .migx-numeric-progress { white-space: nowrap; }
.migx-explorer .migx-title-text { margin: 2px 0; font-size: 15px; }
.migx-explorer .migx-tree { height: 270px; overflow-y: auto; border: 1px solid #ddd; padding: 2px 4px;
  flex: none; }
.migx-explorer .migx-tree-row { min-height: 22px; align-items: center; flex-wrap: nowrap; width: 100%;
  overflow: hidden; }
.migx-explorer .migx-tree-row > .migx-pass-goto { flex: 0 1 auto; min-width: 40px; max-width: 62%; }
.migx-explorer .migx-tree-row > .migx-row-info { flex: 1 1 0; min-width: 0; overflow: hidden; }
.migx-explorer .migx-tree-row .migx-row-info .widget-html-content { overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; display: block; }
.migx-explorer .migx-num-ok { color: #1b7f3b; font-weight: 700; }
.migx-explorer .migx-num-bad { color: #b00020; font-weight: 700; }
.migx-explorer .migx-num-pending, .migx-explorer .migx-num-note { color: #999; }
.migx-explorer .migx-side .migx-stats-table { font-size: 11.5px; line-height: 1.25; }
.migx-explorer .migx-side .migx-stats-table th { white-space: nowrap; }
.migx-explorer .migx-side .migx-stats-table td { word-break: break-word; }
.migx-explorer .migx-warnings { font-size: 11px; }
.migx-explorer .migx-warnings ul { margin: 2px 0; padding-left: 16px; }
.migx-explorer .migx-position-row { align-items: center; justify-content: space-between; width: 100%; }
.migx-explorer .migx-stepper { flex-wrap: nowrap; }
.migx-explorer .migx-stepper .migx-nested { flex: none; width: max-content !important; min-width: max-content; }
.migx-explorer .migx-stepper .migx-nested label { overflow: visible; white-space: nowrap; }
.migx-explorer .migx-stepper button { flex: none; }
.migx-explorer .migx-view-select .widget-toggle-button { padding: 0 8px; }
.migx-explorer .migx-legend { font-size: 11px; color: #444; line-height: 1.6; }
.migx-explorer .migx-legend-item { margin-right: 8px; white-space: nowrap; }
.migx-explorer .migx-legend-chip { display: inline-block; width: 11px; height: 11px; border: 2px solid;
  vertical-align: -2px; margin-right: 3px; border-radius: 2px; }
.migx-explorer .migx-compare-text { max-height: 260px; overflow: auto; }
.migx-explorer .migx-cmp-text { font-family: monospace; font-size: 11px; border-collapse: collapse; width: 100%; }
.migx-explorer .migx-cmp-text td { white-space: pre; vertical-align: top; padding: 0 6px; width: 50%;
  border-right: 1px solid #ddd; }
.migx-explorer .migx-cmp-replace td, .migx-explorer .migx-cmp-delete td:first-child { background: #ffeef0; }
.migx-explorer .migx-cmp-insert td:last-child, .migx-explorer .migx-cmp-replace td:last-child { background: #e6ffed; }
.migx-explorer .migx-metrics { overflow-x: auto; }
.migx-explorer .migx-upload { display: inline-flex; align-items: center; gap: 4px; font-size: 12px; }
.migx-explorer .migx-upload-input { max-width: 15em; }
.migx-explorer .migx-tree-row .widget-checkbox { width: 22px; }
.migx-explorer .migx-hidden { display: none !important; }
.migx-explorer .migx-depth-2 { padding-left: 40px; } .migx-explorer .migx-depth-3 { padding-left: 58px; }
.migx-explorer .migx-depth-4, .migx-explorer .migx-depth-5, .migx-explorer .migx-depth-6 { padding-left: 76px; }
.migx-explorer .migx-tree-row button.migx-pass-goto { text-align: left; background: none; box-shadow: none;
  width: auto;
  height: 22px; line-height: 22px; padding: 0 4px; overflow: hidden; text-overflow: ellipsis; }
.migx-explorer .migx-tree-row button.migx-pass-goto:hover { text-decoration: underline; }
.migx-explorer .migx-tree-row .migx-row-info { color: #666; font-size: 11px; white-space: nowrap; }
.migx-explorer .migx-pipeline-row { background: #eef2f7; font-weight: bold; margin-top: 4px; }
.migx-explorer .migx-noop button.migx-pass-goto, .migx-explorer .migx-disabled button.migx-pass-goto,
.migx-explorer .migx-pending button.migx-pass-goto, .migx-explorer .migx-not-run button.migx-pass-goto,
.migx-explorer .migx-tracing button.migx-pass-goto { color: #999; }
.migx-explorer .migx-disabled button.migx-pass-goto, .migx-explorer .migx-pending button.migx-pass-goto
  { text-decoration: line-through; }
.migx-explorer .migx-changed button.migx-pass-goto { color: #0b5394; font-weight: 600; }
.migx-explorer .migx-failed button.migx-pass-goto { color: #b00020; font-weight: 700; }
.migx-explorer .migx-current { background: #fff3c4; }
.migx-explorer .migx-child { opacity: 0.9; }
.migx-explorer .migx-graph { overflow: auto; max-height: 720px; border: 1px solid #e3e3e3; background: white; }
.migx-explorer .migx-graph svg { max-width: none; height: auto; }
.migx-explorer .migx-stats .widget-html-content, .migx-explorer .migx-warnings .widget-html-content,
.migx-explorer .migx-pane .widget-html-content, .migx-explorer .migx-gpu .widget-html-content { line-height: 1.4; }
.migx-explorer .migx-stats-table th { text-align: left; padding: 1px 8px 1px 0; color: #555; font-weight: normal; }
.migx-explorer .migx-stats-table td { padding: 1px 4px; }
.migx-explorer td.migx-good { color: #1b7f3b; } .migx-explorer td.migx-bad { color: #b00020; font-weight: 600; }
.migx-explorer .migx-text-diff pre { font-size: 12px; line-height: 1.35; margin: 0; }
.migx-explorer .migx-text-diff .add { background: #e6ffed; color: #1b5e20; display: block; }
.migx-explorer .migx-text-diff .del { background: #ffeef0; color: #b00020; display: block; }
.migx-explorer .migx-text-diff .hunk { color: #6f42c1; display: block; }
.migx-explorer .migx-warnings-list { color: #8a5a00; } .migx-explorer .migx-warnings-none { color: #666; }
.migx-error-box .migx-error { color: #b00020; background: #fff0f0; border: 1px solid #f3b6b6;
  padding: 4px 8px; margin: 2px 0; }
.migx-error-box .migx-error pre { white-space: pre-wrap; font-size: 11px; color: #444; }
.migx-explorer .migx-rewrite-row { justify-content: flex-start; text-align: left; }
.migx-explorer .migx-scope-tree { max-height: 190px; overflow-y: auto; border: 1px solid #ddd; padding: 2px 4px;
  flex: none; }
.migx-explorer .migx-scope-rows { gap: 0; }
.migx-explorer .migx-scope-row { height: 20px; line-height: 20px; padding: 0 4px; text-align: left;
  justify-content: flex-start; background: none; box-shadow: none; font-size: 12px; flex: none;
  width: max-content !important; max-width: 100%; min-width: 0; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.migx-explorer .migx-scope-row:hover { text-decoration: underline; }
.migx-explorer .migx-scope-changed { color: #a04000; font-weight: 600; }
.migx-explorer .migx-scope-note { color: #666; font-size: 11px; }
.migx-explorer .migx-rewrites-rows { max-height: 84px; overflow-y: auto; flex: none; }
.migx-explorer .migx-rewrite-row { height: 24px; flex: none; }
.migx-explorer .migx-rewrite-selected { background: #fff3c4; font-weight: 600; }
.migx-explorer .migx-instance-bar { gap: 4px; }
.migx-explorer .migx-instance-where { gap: 2px 4px; align-items: center; font-size: 12px; }
.migx-explorer .migx-instance-scope { height: 22px; line-height: 22px; padding: 0 6px; font-size: 12px; }
.migx-explorer .migx-instance-scope.migx-current { background: #fff3c4; }
.migx-explorer .migx-instance-alike { color: #1b7f3b; font-weight: 600; }
.migx-explorer .migx-busy { color: #a05a00; }
/* "drawing…" floats over the pane's toolbar: a line that came and went moved everything under it
   (the tree under the pane on a narrow explorer) while the user was clicking there */
.migx-explorer .migx-views { position: relative; }
.migx-explorer .migx-views > .migx-busy { position: absolute; right: 8px; z-index: 5; background: #fff8e1;
  padding: 0 6px; border-radius: 3px; pointer-events: none; }
.migx-explorer .migx-rewrites-graph { flex: none; }
.migx-explorer .migx-rewrites-heading { flex: 1 1 0; min-width: 0; }
/* The layout at laptop size (issue 36: the graph pane >= 60% of a 1280 px window with Lab's file
   browser open, all of it above the fold): a compact header, and on a narrow explorer the side
   column goes under the pane as a row of boxes. */
/* width: the container's inline size no longer comes from its content (a box holding the
   explorer in a row would shrink it to nothing) */
.migx-explorer { container-type: inline-size; container-name: migx-explorer; width: 100%; }
.migx-explorer .migx-header { align-items: baseline; gap: 4px 14px; flex-wrap: wrap; }
.migx-explorer .migx-header .migx-title { flex: none; }
.migx-explorer .migx-header .migx-status { flex: 1 1 16em; min-width: 0; }
.migx-explorer .migx-status .widget-html-content, .migx-explorer .migx-position .widget-html-content,
.migx-explorer .migx-progress-label .widget-html-content { white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; display: block; }
.migx-explorer .migx-progress-row, .migx-explorer .migx-progress { min-width: 0; max-width: 100%; }
.migx-explorer .migx-progress-label { flex: 1 1 auto; min-width: 0; }
.migx-explorer .migx-picker { flex-flow: row wrap; align-items: center; }
.migx-explorer .migx-picker > .widget-hbox { display: contents; }
.migx-explorer .migx-picker .migx-model-path { width: 15em !important; }
.migx-explorer .migx-picker .migx-input-dims { width: 19em !important; }
.migx-explorer .migx-position { flex: 1 1 0; min-width: 0; }
.migx-explorer .migx-position-row { flex-wrap: nowrap; gap: 6px; }
.migx-explorer .migx-position-row > :not(.migx-position) { flex: none; }
/* the stats' labels wrap at their spaces, so a narrow column leaves the values (pass names) room */
.migx-explorer .migx-side .migx-stats-table { table-layout: fixed; width: 100%; }
.migx-explorer .migx-side .migx-stats-table th { white-space: normal; width: 36%; }
@container migx-explorer (max-width: 1040px) {
  .migx-body { flex-wrap: wrap; }
  .migx-body > .migx-main { order: 1; flex: 1 1 100% !important; width: 100% !important; }
  .migx-body > .migx-side { order: 2; flex: 1 1 100% !important; width: 100% !important; min-width: 0 !important;
    flex-flow: row wrap !important; align-items: flex-start; gap: 6px 10px; }
  .migx-body > .migx-side > * { flex: 1 1 250px !important; min-width: 230px; width: auto !important; }
  .migx-body > .migx-side > .migx-tree-panel { flex: 2 1 340px !important; }
}
</style>
"""


def widgets() -> Any:
    """ipywidgets, imported on first use (so the package imports without notebook libraries)."""
    import ipywidgets

    return ipywidgets


def css_token(text: str) -> str:
    """A CSS-class-safe form of a pass path: 'required.eliminate_identity#1' -> 'required-eliminate_identity-1'."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def path_class(path: str) -> str:
    """The class that names one tree row's pass (tests select `.migx-path-<token>`)."""
    return "migx-path-" + css_token(path)


def set_state_classes(widget: Any, states: tuple[str, ...], state: str | None) -> None:
    """Leave exactly one of `states` (or none) among the widget's classes, in one trait update."""
    new = [c for c in widget._dom_classes if c not in states] + ([state] if state else [])
    if list(widget._dom_classes) != new:
        widget._dom_classes = tuple(new)


DEBUG_ENV = "MIGX_EXPLORE_DEBUG"


class TaskProgress:
    """A panel's progress bar and its "what (done/total)" label, hidden until the first report;
    `report` is the callback the session's sweeps and timings call."""

    def __init__(self, prefix: str):
        W = widgets()
        self.bar = W.IntProgress(
            0, min=0, max=1, layout=W.Layout(width="280px", display="none"), _dom_classes=[f"{prefix}-progress"]
        )
        self.label = W.HTML("", _dom_classes=[f"{prefix}-progress-label"])
        self.widget = W.HBox([self.bar, self.label])

    def report(self, done: int, total: int, what: str) -> None:
        self.bar.layout.display = None
        self.bar.max = max(total, 1)
        self.bar.value = min(done, self.bar.max)
        self.label.value = f"{html.escape(what)} ({done}/{total})"


class ErrorBox:
    """One error box for callbacks and long-running work: the latest error, one line (what was
    being done, the file or pass it concerns, the problem), replaced by the next action's.

    Callbacks run inside the kernel's comm handler, where an exception would only reach the
    browser console log; `guard` catches it and shows it here instead (never swallowed). The
    traceback of an internal error is behind a disclosure in debug mode only (`debug=True`, or
    MIGX_EXPLORE_DEBUG=1: the notebook's --debug)."""

    def __init__(self, keep: int = 1, debug: bool | None = None):
        W = widgets()
        self.keep = keep
        self.debug = os.environ.get(DEBUG_ENV, "") not in ("", "0") if debug is None else debug
        self.messages: list[str] = []
        self.widget = W.HTML("", _dom_classes=["migx-error-box"])

    def show(self, err: BaseException | str, where: str = "") -> None:
        if isinstance(err, BaseException):
            # The CLI's error boundary decides the line (a known error as it is, an internal one
            # named as such); never a class name such as ImportError_ in front of it.
            msg = describe_error(err)
            head, tb = msg.text, ""
            if not msg.known:  # the CLI's line points at --debug; here debug mode is the env setting
                detail = " ".join(str(err).split())[:300]
                head = f"internal error {type(err).__name__}" + (f": {detail}" if detail else "")
                if self.debug:
                    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
                else:
                    head += f" (a bug in migx-explore; {DEBUG_ENV}=1 shows its traceback)"
        else:
            head, tb = " ".join(str(err).split()), ""
        prefix = f"{where}: " if where else ""
        item = f'<div class="migx-error"><b>{html.escape(prefix + head)}</b>'
        if tb:
            item += f"<details><summary>traceback</summary><pre>{html.escape(tb)}</pre></details>"
        self.messages = [item + "</div>", *self.messages][: self.keep]
        self.widget.value = "".join(self.messages)

    def clear(self) -> None:
        self.messages = []
        self.widget.value = ""

    @property
    def text(self) -> str:
        """The shown messages without markup (tests read this)."""
        return html.unescape(re.sub(r"<[^>]+>", " ", self.widget.value))

    def guard(self, fn: Callable[..., Any], where: str = "") -> Callable[..., Any]:
        """Wrap a widget callback so its exceptions land in this box."""

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.clear()  # the next action replaces the last one's error
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - shown to the user, not swallowed
                self.show(e, where or getattr(fn, "__name__", ""))
                return None

        return wrapped


def _main_shell(_data: Any, _frontend_route: str | None) -> None:
    return None  # the kernel's main shell thread


def pin_to_main_shell(*roots: Any) -> None:
    """Have the kernel handle every browser message of these widgets (and their children) on its
    main shell thread, in the order the browser sent them.

    Why: ipykernel 7 with JupyterLab 4.4+ handles widget messages on "subshell" threads, and it
    routes each widget's messages to the thread of the last message that made that widget send an
    update (`Comm._reply_subshell_for`). Two widgets of one form can so be served by two threads:
    after a failed load, the model dropdown (updated from a subshell) and the Load button (never
    updated: main thread) went to different threads, the click could be handled before the
    dropdown's new value arrived, loaded the old (bad) path again, and the dropdown's handler
    then cleared that error: the click looked lost (issue 23). On one thread they keep their
    order, as with ipykernel 6. Harmless where the comm has no such routing (tests, ipykernel 6)."""
    stack = list(roots)
    while stack:
        w = stack.pop()
        comm = getattr(w, "comm", None)
        if comm is not None and getattr(comm, "_reply_subshell_for", None) is not _main_shell:
            comm._reply_subshell_for = _main_shell
        stack.extend(getattr(w, "children", ()) or ())
