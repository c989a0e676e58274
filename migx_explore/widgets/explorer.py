"""The explorer: layout and glue between a Session and the picker, tree, stepper, views and the
panels (`PANELS`: each a `widgets.panel.Panel` in a module of its own, built from this list and
called through its hooks). Every control calls a method here; every method works on the Session
and then refreshes the parts that changed. The same methods are the Python API notebooks and
tests drive.

    ex = migx_explore.explore("yolov8")    # displays itself as the last expression of a cell
    ex.next(3); ex.toggle("fusion.fuse_pointwise_reduce", False); ex.views.drawn("diff")

Loading is one transaction: the new session is imported and traced, and its first view chosen,
before any control changes, so a failed load leaves title, tree, graph and stats on the old
model with the error shown. The per-pass numeric check runs after the first graph is up, in the
background (NumericFiller), and a new load or toggle cancels what is left of it.
"""

from __future__ import annotations

import html
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ..errors import describe_error
from ..like_this import bucket_long_ranges
from ..session import Session, SessionError
from . import queries
from ._common import CSS, ErrorBox, pin_to_main_shell, widgets
from .background import NumericFiller, TraceFiller
from .dom_tools import ScrollTo
from .gpu_panel import GpuPanel
from .main_thread import MainThreadCalls
from .model_explorer_button import ModelExplorerButton
from .panel import Panel, call_hook, check_panels, panel_style, placed
from .picker import ModelPicker, make_session
from .recipe_panel import RecipePanel
from .study_panel import StudyPanel
from .tree import PipelineTree
from .views import Views
from .waterfall_panel import WaterfallPanel

# The explorer's panels, in the order shown: a new panel is its module plus one entry here.
PANELS: list[type[Panel]] = [RecipePanel, ModelExplorerButton, GpuPanel, WaterfallPanel, StudyPanel]


class Progress:
    """A progress bar with a label for long work (tracing, kernel compilation, timing)."""

    def __init__(self, css: str):
        W = widgets()
        self.bar = W.IntProgress(0, min=0, max=1, layout=W.Layout(width="200px"), _dom_classes=[css + "-bar"])
        self.label = W.HTML("", _dom_classes=[css + "-label"])
        self.widget = W.HBox([self.bar, self.label], _dom_classes=[css], layout=W.Layout(display="none"))
        self._last = 0.0
        self.note = ""  # what stays in front of the pass names (e.g. the load's result while the rest traces)

    def __call__(self, done: int, total: int, what: str) -> None:
        # A trace reports ~100 passes in a second or two: redraw at most ~10 times a second (each
        # update is three widget messages), and always the last one.
        now = time.perf_counter()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        self.widget.layout.display = None
        self.bar.max = max(total, 1)
        self.bar.value = min(done, self.bar.max)
        self.label.value = html.escape(f"{self.note}{what} ({done}/{total})")

    def finish(self, message: str) -> None:
        self.widget.layout.display = None
        self.bar.value = self.bar.max
        self.note = ""
        self.label.value = html.escape(message)


class Stepper:
    """first / back / next / last buttons, a slider over the passes the view visits, the position."""

    KEYMAP = {"n": "next", "j": "next", "p": "prev", "k": "prev", "f": "first", "l": "last"}

    def __init__(self, errors: ErrorBox, explorer: Explorer):
        W = widgets()
        ex = explorer

        def button(desc: str, icon: str, css: str, fn: Any, tip: str) -> Any:
            b = W.Button(
                description=desc,
                icon=icon,
                tooltip=tip,
                layout=W.Layout(width="auto", min_width="36px"),
                _dom_classes=[css],
            )
            b.on_click(errors.guard(lambda _b: fn(), tip.split(" (")[0]))
            return b

        self.first = button("", "fast-backward", "migx-first", ex.first, "first pass")
        self.prev = button("back", "step-backward", "migx-prev", ex.prev, "previous pass (key: p)")
        self.next = button("next", "step-forward", "migx-next", ex.next, "next pass (key: n)")
        self.last = button("", "fast-forward", "migx-last", ex.last, "last pass")
        self.slider = W.IntSlider(
            0,
            min=0,
            max=0,
            readout=False,
            continuous_update=False,
            layout=W.Layout(flex="1 1 160px", min_width="120px"),
            _dom_classes=["migx-slider"],
        )
        self.position = W.HTML("", _dom_classes=["migx-position"])
        self.nested = W.Checkbox(
            False,
            description="nested passes",
            indent=False,
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-nested"],
        )
        # Keyboard: JupyterLab owns the notebook's keys, so keys are read from a small text box
        # (n/p/f/l, or j/k) that stays focused while typing.
        self.keys = W.Text(
            "",
            placeholder="keys: n p f l",
            continuous_update=True,
            layout=W.Layout(width="7em"),
            tooltip="click here, then press n / p (next / previous), "
            "f / l (first / last), [ / ] (previous / next change region)",
            _dom_classes=["migx-keys"],
        )
        self.widget = W.HBox(
            [self.first, self.prev, self.next, self.last, self.slider, self.keys, self.nested],
            _dom_classes=["migx-stepper"],
            layout=W.Layout(align_items="center", width="100%"),
        )
        self._quiet = False
        self.slider.observe(errors.guard(self._slid, "slider"), "value")
        self.keys.observe(errors.guard(self._key, "keys"), "value")
        self.nested.observe(errors.guard(lambda c: ex.set_nested(c["new"]), "nested passes"), "value")
        self._ex = ex

    def show(self, session: Session) -> None:
        # the slider grows while the trace finishes in the background
        vis = session.cursor.visible(session.trace_so_far)
        self._quiet = True
        try:
            self.slider.max = max(len(vis) - 1, 0)
            self.slider.disabled = not vis
            if session.position in vis:
                self.slider.value = vis.index(session.position)
        finally:
            self._quiet = False
        self.position.value = f"<b>{html.escape(queries.position_label(session))}</b>"

    def _slid(self, change: dict) -> None:
        if self._quiet:
            return
        vis = self._ex.session.cursor.visible(self._ex.session.trace_so_far)
        if vis:
            self._ex.goto(vis[min(change["new"], len(vis) - 1)])

    def _key(self, change: dict) -> None:
        typed = change["new"]
        if not typed:
            return
        self.keys.value = ""
        key = typed[-1].lower()
        if key in "[]":
            self._ex.views.region_bar.move(-1 if key == "[" else 1)
            return
        action = self.KEYMAP.get(key)
        if action:
            getattr(self._ex, action)()


class Explorer:
    """The explorer widget around a Session. Display it (it is the last expression of a cell, or
    `display(ex)`); drive it from Python with next/prev/first/last/goto/toggle/load. Its panels
    are `panels` (default `PANELS`), each also reached by its name: `ex.gpu`, `ex.recipe`."""

    def __init__(
        self,
        session: Session | None = None,
        *,
        view: str = "diff",
        model_name: str = "",
        graph_height: int = 640,
        panels: Sequence[type[Panel]] | None = None,
    ):
        W = widgets()
        self.css_id = "migx-ex-" + uuid.uuid4().hex[:8]  # scopes browser-side lookups to this explorer
        self.errors = ErrorBox()
        self._init_state()
        self.picker = ModelPicker(self.errors, self.set_session, initial=model_name)
        self.tree = PipelineTree(self.errors, self.toggle, self.goto, self._view_changed)
        self.stepper = Stepper(self.errors, self)
        self.views = Views(
            self.errors,
            initial=view,
            on_pick=self.errors.guard(self.goto, "metrics chart"),
            graph_height=graph_height,
            calls=self.calls,
        )
        self.panels = [
            cls(self.errors, lambda: self.session) for cls in check_panels(PANELS if panels is None else panels)
        ]
        self.scroller = ScrollTo(container=f".{self.css_id} .migx-tree")
        self.title = W.HTML("", _dom_classes=["migx-title"])
        self.status = W.HTML("", _dom_classes=["migx-status"])
        self.widget = self._layout()
        pin_to_main_shell(self.widget)  # browser messages handled in the order sent (see there)
        self._name_panels()
        if session is not None:
            self.set_session(session)

    def _layout(self) -> Any:
        """The explorer's box: header, picker, progress and errors above the side column and the
        main column (stepper, panels, views)."""
        W = widgets()
        left = W.VBox(
            [self.tree.widget, self.views.scope_tree.widget, self.views.stats, self.views.warnings],
            # the graph is what the user reads: the side column gives way first (at
            # 1280x800 in JupyterLab the graph pane had 510 px of the width)
            layout=W.Layout(width="290px", min_width="230px", flex="0 1 290px"),
            _dom_classes=["migx-side"],
        )
        right = W.VBox(
            [
                self.stepper.widget,
                W.HBox([self.stepper.position, *placed(self.panels, "toolbar")], _dom_classes=["migx-position-row"]),
                *placed(self.panels, "main"),
                self.views.widget,
            ],
            layout=W.Layout(flex="1 1 auto", min_width="0", width="auto"),
            _dom_classes=["migx-main"],
        )
        return W.VBox(
            [
                W.HTML(CSS + panel_style(self.panels), _dom_classes=["migx-style"]),
                # one line for the title and the instruction counts: the height above the graph
                # pane is what decides how much of it a laptop screen shows (issue 36)
                W.HBox([self.title, self.status], _dom_classes=["migx-header"]),
                self.picker.widget,
                W.HBox(
                    [self.progress.widget, self.numeric_progress],
                    layout=W.Layout(grid_gap="12px"),
                    _dom_classes=["migx-progress-row"],
                ),
                self.errors.widget,
                # beside each other on a wide explorer, the side column under the pane on a narrow
                # one (the CSS container query in _common.py)
                W.HBox([left, right], layout=W.Layout(grid_gap="8px", width="100%"), _dom_classes=["migx-body"]),
                *placed(self.panels, "below"),
                self.scroller,
            ],
            _dom_classes=["migx-explorer", self.css_id],
        )

    def _init_state(self) -> None:
        """What the explorer holds besides its controls: the loaded session, the background trace
        and numeric check with their progress lines and locks, the last load's timings."""
        W = widgets()
        self.session: Session | None = None
        self.progress = Progress("migx-progress")
        self.numeric_progress = W.HTML("", _dom_classes=["migx-numeric-progress"])
        self._stats_lock = threading.Lock()
        # The jobs' results are applied on the kernel's main thread (see main_thread.py); in a
        # script they run on the job's thread, and the UI lock keeps them between the user's calls.
        self.calls = MainThreadCalls(lambda e: self.errors.show(e, "background update"))
        post = self.calls.post
        self.numeric = NumericFiller(
            lambda *a: post(self._numeric_result, *a), lambda e: post(self.errors.show, e, "numeric check")
        )
        self._ui_lock = threading.RLock()
        self.tracer = TraceFiller(
            lambda s: post(self._trace_progress, s),
            lambda s: post(self._trace_done, s),
            lambda e: post(self._trace_failed, e),
        )
        self.last_refresh_s = 0.0
        self.last_load: dict[str, float] = {}
        self._rows_for = -1  # how many trace records the tree shows
        self._done_message = ""

    def _name_panels(self) -> None:
        """Each panel reached as `self.<its name>`, once every other attribute is set: a name the
        explorer already uses is an error naming the panel."""
        check_panels([type(p) for p in self.panels], lambda name: hasattr(self, name))
        for p in self.panels:
            setattr(self, p.name, p)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        pin_to_main_shell(self.widget)  # and any widget a panel made since
        # Shown as a cell's result: the drawing a step in that cell asked for is put in first, so
        # the view appears with it (and a notebook executed headless saves it).
        self.views.wait(30)
        return self.widget._repr_mimebundle_(**kwargs)

    # ---- loading (one transaction) ---------------------------------------------------------------------
    def load(self, model: Any, input_dims: dict | None = None, **kw: Any) -> Session:
        """Open a built-in model name, an .onnx path, ONNX bytes or a ModelProto. The numeric
        check is deferred until the first graph is shown unless defer_numeric=False is given."""
        kw.setdefault("defer_numeric", True)
        t0 = time.perf_counter()
        session = make_session(model, input_dims, **kw)
        bucket_long_ranges(session)  # a P=1..255 range traces in seconds; the warnings pane says so
        self.set_session(session, started=t0)
        return session

    def set_session(self, session: Session, *, started: float | None = None) -> None:
        """Trace `session` as far as its first changed pass and show that; the rest of the trace
        follows in the background (the tree fills in), then the numeric check. Everything that
        can fail before the first graph (import, the passes up to it) happens before any control
        changes; a pass that fails is part of the new state, shown with its error."""
        t0 = started if started is not None else time.perf_counter()
        t_trace = time.perf_counter()
        session.traces.on_progress = self.progress
        session.cursor.view.filter = self.tree.filter.value.strip()
        session.cursor.view.hide_unchanged = self.tree.hide_unchanged.value
        session.first_changed()  # traces only as far as the pass shown first
        t_traced = time.perf_counter()
        rows = queries.tree_rows(session, so_far=True)
        rows_for = len(session.trace_so_far.records)
        # ---- commit: from here on only display updates
        self.tracer.cancel()
        self.numeric.cancel()
        with self._ui_lock:
            self.session = session
            # again under the lock: the old trace may have finished meanwhile and started its check
            self.numeric.cancel()
            self.numeric_progress.value = ""
            self.views.reset_clusters()  # opened clusters belong to the old model's instruction ids
            self.errors.clear()
            self.title.value = f"<h3 class='migx-title-text'>migx-explore · {html.escape(session.name)}</h3>"
            self.tree.update(rows, session.position)
            failed = call_hook(self.panels, "on_session", session)  # shown below: a redraw clears the box
            self._rows_for = rows_for
            self._show_position()
            self._show_status()
            for where, e in failed:
                self.errors.show(e, where)
            if session.trace_so_far.error:
                self.errors.show(session.trace_so_far.error, "pipeline")
        t_shown = time.perf_counter()
        self.last_load = {
            "import_s": t_trace - t0,
            "trace_s": t_traced - t_trace,
            "first_view_s": t_shown - t_traced,
            "total_s": t_shown - t0,
            "passes_traced": float(len(session.trace_so_far.records)),
        }
        self._continue(
            session,
            f"loaded {session.name} ({session.initial.total_instructions()} instructions): "
            f"traced in {t_traced - t_trace:.2f} s, first graph after {t_shown - t0:.2f} s",
        )

    def _continue(self, session: Session, message: str) -> None:
        """Say `message`; finish the trace in the background, then run the numeric check (neither
        blocks the user)."""
        self._done_message = message
        if session.trace_complete:
            self.progress.finish(message)
            self._start_numeric()
        else:
            self.progress.finish(message + "; tracing the other passes in the background")
            self.progress.note = message + "; tracing in the background: "
            self.tracer.restart(session)

    def wait(self, timeout: float | None = 600) -> bool:
        """Block until the background trace and numeric check are done and their results shown
        (scripts, tests, a cell); False on timeout."""
        return self.calls.wait_until(lambda: not (self.tracer.running() or self.numeric.running()), timeout)

    def _trace_progress(self, session: Session) -> None:
        with self._ui_lock:  # checked under the lock: a load swaps the session under it
            if session is not self.session:
                return
            self._update_tree(session)
            self.stepper.show(session)

    def _trace_done(self, session: Session) -> None:
        with self._ui_lock:
            if session is not self.session:
                return
            self._update_tree(session)
            self.stepper.show(session)
            self._show_status()
            if session.trace.error:
                self.errors.show(session.trace.error, "pipeline")
            # inside the lock: a load must not slip in between the check above and these lines
            # (the old model's message, or the old model's numeric check, on the new one)
            self.progress.finish(
                f"{self._done_message}; then the other passes in the background "
                f"({len(session.trace.records)} pass records)"
            )
            self._start_numeric(session)

    def _trace_failed(self, e: BaseException) -> None:
        """The background trace stopped on an error of ours: say so where the progress said
        "tracing", so the line never claims work that has stopped."""
        self.errors.show(e, "background trace")
        self.progress.finish(f"{self._done_message}; the background trace stopped: {describe_error(e).text}")

    def _update_tree(self, s: Session) -> None:
        self._rows_for = len(s.trace_so_far.records)
        self.tree.update(queries.tree_rows(s, so_far=True), s.position)

    def _show_status(self) -> None:
        s = self._require()
        spec = html.escape(s.config.label())
        final = f"{s.final().total_instructions()}" if s.trace_complete else "… (tracing)"
        self.status.value = (
            f"<span class='migx-status-text'>{s.initial.total_instructions()} → "
            f"{final} instructions · spec: <code>{spec}</code></span>"
        )
        call_hook(self.panels, "on_trace", s, self.errors)

    # ---- the deferred numeric check ----------------------------------------------------------------------
    def _start_numeric(self, session: Session | None = None) -> None:
        def started(n: int) -> None:
            self.numeric_progress.value = f"numeric check: 0/{n} passes…" if n else ""

        self.numeric.restart(session or self._require(), started)

    def _numeric_result(self, session: Session, rec: Any, done: int, total: int) -> None:
        if session is not self.session:
            return
        self.tree.set_numeric(rec.path, session.traces.numeric_state(rec))
        # This runs on the numeric thread: without the lock a step on the kernel thread could land
        # between the position check and the write, and the stats would end on the pass just left.
        with self._stats_lock:
            if self.session.position == rec.index:
                self.views.refresh_stats()
        done_checks = [r.numeric for r in session.trace.top_level() if r.numeric_ready and r.numeric is not None]
        bad = sum(1 for n in done_checks if not n.ok)
        self.numeric_progress.value = (
            f"numeric check: {done}/{total} passes"
            + ("…" if done < total else " ✓")
            + (f" — <b class='migx-bad'>{bad} beyond tolerance</b>" if bad else "")
        )

    # ---- recomputing --------------------------------------------------------------------------------
    def refresh(self, keep: str | None = None) -> None:
        """Re-trace what toggles invalidated, then redraw tree, stepper and views; `keep` is the
        pass path to stay on (record indexes shift when nested passes come and go)."""
        s = self._require()
        t0 = time.perf_counter()
        self.tracer.cancel()
        self.numeric.cancel()
        if keep is not None:  # re-traces from the first affected pass only as far as `keep`
            try:
                s.goto(keep)
            except SessionError:  # the pass is gone (removed by the user): stay at the same index
                pass
        s.current  # noqa: B018 - traced at least as far as the position
        info = s.traces.last_retrace
        with self._ui_lock:
            if s.trace_so_far.error:
                self.errors.show(s.trace_so_far.error, "pipeline")
            self._update_tree(s)
            self._show_position()
            self._show_status()
        self.last_refresh_s = time.perf_counter() - t0
        self._continue(
            s,
            f"re-traced {info.ran}/{len(s.config.flat()) - info.reused} passes in "
            f"{self.last_refresh_s:.2f} s" + (f" (from {info.first_run.split('#')[0]})" if info.first_run else ""),
        )

    def _show_position(self) -> None:
        with self._ui_lock:
            self._draw_position()

    def _draw_position(self) -> None:
        s = self._require()
        n = len(s.trace_so_far.records)
        if n != self._rows_for:  # stepping traced further than the tree shows
            self._update_tree(s)
        self.stepper.show(s)
        self.tree.mark_current(s.position)
        with self._stats_lock:  # the step's stats are written last (see _numeric_result)
            self.views.update(s)
        sel = self.tree.current_selector(s.position)
        if sel:
            self.scroller.scroll(f".{self.css_id} {sel}")
        call_hook(self.panels, "on_step", s, self.errors)

    def _require(self) -> Session:
        if self.session is None:
            raise SessionError("no model loaded: pick one above and press Load, or call .load(...)")
        return self.session

    # ---- stepping -----------------------------------------------------------------------------------
    def next(self, n: int = 1) -> Any:
        rec = self._require().step(n)
        self._show_position()
        return rec

    def prev(self, n: int = 1) -> Any:
        rec = self._require().back(n)
        self._show_position()
        return rec

    def first(self) -> Any:
        rec = self._require().first()
        self._show_position()
        return rec

    def last(self) -> Any:
        rec = self._require().last()
        self._show_position()
        return rec

    def goto(self, where: str | int) -> Any:
        rec = self._require().goto(where)
        self._show_position()
        return rec

    # ---- toggles and view filters --------------------------------------------------------------------
    def toggle(self, target: str, enabled: bool) -> list[str]:
        """Switch a pass entry, a pass name everywhere, or a pipeline on/off and re-trace."""
        s = self._require()
        keep = s.current.path  # read before the toggle: afterwards `current` would re-trace
        changed = s.set_enabled(target, enabled)
        self.refresh(keep)
        return changed

    def set_nested(self, nested: bool) -> None:
        self._require().cursor.view.nested = nested
        self._snap_to_visible()

    def _view_changed(self, text: str, hide_unchanged: bool) -> None:
        if self.session is None:
            return
        self.session.cursor.view.filter, self.session.cursor.view.hide_unchanged = text, hide_unchanged
        self._snap_to_visible()

    def _snap_to_visible(self) -> None:
        s = self._require()
        s.cursor.snap_to_visible(s.trace_so_far)
        self._show_position()


def explore(model: Any = None, *, input_dims: dict | None = None, view: str = "diff", **kw: Any) -> Explorer:
    """Open the explorer on a built-in model name, an .onnx path, a ModelProto or a Session
    (None: an empty explorer with the model picker)."""
    ex = Explorer(view=view, model_name=model if isinstance(model, str) else "")
    if model is not None:
        ex.load(model, input_dims, **kw)
    return ex
