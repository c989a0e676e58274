"""The explorer: layout and glue between a Session and the picker, tree, stepper, views and GPU
panel. Every control calls a method here; every method works on the Session and then refreshes
the parts that changed. The same methods are the Python API notebooks and tests drive.

    ex = migx_explore.explore("yolo")     # displays itself as the last expression of a cell
    ex.next(3); ex.toggle("fusion.fuse_pointwise_reduce", False); ex.views.svg("diff")
"""

from __future__ import annotations

import html
import time
from typing import Any

from ..session import Session, SessionError
from . import queries
from ._common import CSS, ErrorBox, widgets
from .gpu_panel import GpuPanel
from .picker import ModelPicker, make_session
from .tree import PipelineTree
from .views import Views
from .waterfall_panel import WaterfallPanel


class Progress:
    """A progress bar with a label for long work (tracing, kernel compilation, timing)."""

    def __init__(self, css: str):
        W = widgets()
        self.bar = W.IntProgress(0, min=0, max=1, layout=W.Layout(width="280px"), _dom_classes=[css + "-bar"])
        self.label = W.HTML("", _dom_classes=[css + "-label"])
        self.widget = W.HBox([self.bar, self.label], _dom_classes=[css], layout=W.Layout(display="none"))

    def __call__(self, done: int, total: int, what: str) -> None:
        self.widget.layout.display = None
        self.bar.max = max(total, 1)
        self.bar.value = min(done, self.bar.max)
        self.label.value = f"{what} ({done}/{total})"

    def finish(self, message: str) -> None:
        self.bar.value = self.bar.max
        self.label.value = message


class Stepper:
    """first / back / next / last buttons, a slider over the passes the view visits, the position."""

    KEYMAP = {"n": "next", "j": "next", "p": "prev", "k": "prev", "f": "first", "l": "last"}

    def __init__(self, errors: ErrorBox, explorer: Explorer):
        W = widgets()
        ex = explorer

        def button(desc: str, icon: str, css: str, fn: Any, tip: str) -> Any:
            b = W.Button(description=desc, icon=icon, tooltip=tip, layout=W.Layout(width="auto"), _dom_classes=[css])
            b.on_click(errors.guard(lambda _b: fn(), css))
            return b

        self.first = button("", "fast-backward", "migx-first", ex.first, "first pass")
        self.prev = button("back", "step-backward", "migx-prev", ex.prev, "previous pass (key: p or ←)")
        self.next = button("next", "step-forward", "migx-next", ex.next, "next pass (key: n or →)")
        self.last = button("", "fast-forward", "migx-last", ex.last, "last pass")
        self.slider = W.IntSlider(0, min=0, max=0, readout=False, continuous_update=False,
                                  layout=W.Layout(width="360px"), _dom_classes=["migx-slider"])
        self.position = W.HTML("", _dom_classes=["migx-position"])
        self.nested = W.Checkbox(False, description="step into nested passes", indent=False,
                                 layout=W.Layout(width="auto"), _dom_classes=["migx-nested"])
        # Keyboard: JupyterLab owns the notebook's keys, and ipywidgets runs no custom JS, so
        # keys are read from a small text box (n/p/f/l, or j/k) that stays focused while typing.
        self.keys = W.Text("", placeholder="keys: n p f l", continuous_update=True,
                           layout=W.Layout(width="7em"), tooltip="click here, then press n / p (next / previous), "
                           "f / l (first / last)", _dom_classes=["migx-keys"])
        self.widget = W.HBox([self.first, self.prev, self.next, self.last, self.slider, self.keys, self.nested],
                             _dom_classes=["migx-stepper"], layout=W.Layout(align_items="center"))
        self._quiet = False
        self.slider.observe(errors.guard(self._slid, "slider"), "value")
        self.keys.observe(errors.guard(self._key, "keys"), "value")
        self.nested.observe(errors.guard(lambda c: ex.set_nested(c["new"]), "nested"), "value")
        self._ex = ex

    def show(self, session: Session) -> None:
        vis = session.visible()
        self._quiet = True
        try:
            self.slider.max = max(len(vis) - 1, 0)
            self.slider.disabled = not vis
            if session.position in vis:
                self.slider.value = vis.index(session.position)
        finally:
            self._quiet = False
        self.position.value = f"<b>{queries.position_label(session)}</b>"

    def _slid(self, change: dict) -> None:
        if self._quiet:
            return
        vis = self._ex.session.visible()
        if vis:
            self._ex.goto(vis[min(change["new"], len(vis) - 1)])

    def _key(self, change: dict) -> None:
        typed = change["new"]
        if not typed:
            return
        self.keys.value = ""
        action = self.KEYMAP.get(typed[-1].lower())
        if action:
            getattr(self._ex, action)()


class Explorer:
    """The explorer widget around a Session. Display it (it is the last expression of a cell, or
    `display(ex)`); drive it from Python with next/prev/first/last/goto/toggle/load."""

    def __init__(self, session: Session | None = None, *, view: str = "diff", model_name: str = ""):
        W = widgets()
        self.errors = ErrorBox()
        self.progress = Progress("migx-progress")
        self.picker = ModelPicker(self.errors, self.set_session, initial=model_name)
        self.tree = PipelineTree(self.errors, self.toggle, self.goto, self._view_changed)
        self.stepper = Stepper(self.errors, self)
        self.views = Views(self.errors, initial=view)
        self.gpu = GpuPanel(self.errors, lambda: self.session)
        self.waterfall = WaterfallPanel(self.errors, lambda: self.session)
        self.title = W.HTML("", _dom_classes=["migx-title"])
        self.status = W.HTML("", _dom_classes=["migx-status"])
        right = W.VBox([self.stepper.widget, self.stepper.position, self.views.widget],
                       layout=W.Layout(width="66%"), _dom_classes=["migx-main"])
        self.views.widget.layout.width = "100%"
        self.widget = W.VBox([W.HTML(CSS, _dom_classes=["migx-style"]), self.title, self.picker.widget,
                              self.progress.widget, self.errors.widget, self.status,
                              W.HBox([self.tree.widget, right], layout=W.Layout(grid_gap="8px")),
                              self.gpu.widget, self.waterfall.widget], _dom_classes=["migx-explorer"])
        self.session: Session | None = None
        self.last_refresh_s = 0.0
        if session is not None:
            self.set_session(session)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # ---- loading ------------------------------------------------------------------------------------
    def load(self, model: Any, input_dims: dict | None = None, **kw: Any) -> Session:
        """Open a built-in model name, an .onnx path, ONNX bytes or a ModelProto."""
        session = make_session(model, input_dims, **kw)
        self.set_session(session)
        return session

    def set_session(self, session: Session) -> None:
        self.session = session
        session.on_progress = self.progress
        self.tree.filter.value, self.tree.hide_unchanged.value = session.view.filter, session.view.hide_unchanged
        self.title.value = f"<h3 style='margin:4px 0'>migx-explore · {html.escape(session.name)}</h3>"
        self.gpu.reset()
        self.refresh()
        self.first()

    # ---- recomputing --------------------------------------------------------------------------------
    def refresh(self, keep: str | None = None) -> None:
        """Re-trace what toggles invalidated, then redraw tree, stepper and views; `keep` is the
        pass path to stay on (record indexes shift when nested passes come and go)."""
        s = self._require()
        t0 = time.perf_counter()
        s.run()
        if keep is not None:
            try:
                s.goto(keep)
            except SessionError:  # the pass is gone (removed by the user): stay at the same index
                pass
        info = s.last_retrace
        self.progress.finish(f"traced {len(s.trace.records)} passes ({info.ran} run, {info.reused} reused from "
                             f"cache) in {time.perf_counter() - t0:.2f} s")
        if s.error:
            self.errors.show(s.error, "pipeline")
        self.tree.update(queries.tree_rows(s), s.position)
        self._show_position()
        self.last_refresh_s = time.perf_counter() - t0
        spec = html.escape(s.spec_or_label())
        self.status.value = (f"<span class='migx-status-text'>{s.trace.initial.total_instructions()} → "
                             f"{s.final().total_instructions()} instructions · spec: <code>{spec}</code></span>")

    def _show_position(self) -> None:
        s = self._require()
        self.stepper.show(s)
        self.tree.mark_current(s.position)
        self.views.update(s)

    def _require(self) -> Session:
        if self.session is None:
            raise RuntimeError("no model loaded: pick one above and press Load, or call .load(...)")
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
        self._require().view.nested = nested
        self._snap_to_visible()

    def _view_changed(self, text: str, hide_unchanged: bool) -> None:
        if self.session is None:
            return
        self.session.view.filter, self.session.view.hide_unchanged = text, hide_unchanged
        self._snap_to_visible()

    def _snap_to_visible(self) -> None:
        s = self._require()
        vis = s.visible()
        if vis and s.position not in vis:
            later = [i for i in vis if i >= s.position]
            s.goto(later[0] if later else vis[-1])
        self._show_position()


def explore(model: Any = None, *, input_dims: dict | None = None, view: str = "diff", **kw: Any) -> Explorer:
    """Open the explorer on a built-in model name, an .onnx path, a ModelProto or a Session
    (None: an empty explorer with the model picker)."""
    ex = Explorer(view=view, model_name=model if isinstance(model, str) else "")
    if model is not None:
        ex.load(model, input_dims, **kw)
    return ex
