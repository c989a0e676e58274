"""The panel protocol: one part of the explorer built from the `PANELS` list in `explorer.py`.

A panel is a subclass of `Panel` in a module of its own: class attributes say where it goes and
how it looks, `build()` makes its widgets, and hooks say when the explorer calls it. Adding one is
that module plus one entry in `PANELS` (or `Explorer(panels=[*PANELS, MyPanel])` from a notebook);
the explorer builds every entry, gathers their CSS into its stylesheet, places their widgets and
calls their hooks in a loop. `SweepPanel` is the shared shape of the panels that run one sweep
over pipeline variants (waterfall, ordering study).

    class Count(Panel):
        name, title, css_class = "count", "Instructions", "migx-count"
        def build(self): self.out = widgets().HTML(""); return self.out
        def on_step(self, session): self.out.value = str(session.after().total_instructions())
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from ..errors import UserInputError
from ..session import Session
from ._common import ErrorBox, TaskProgress, widgets
from .timing_view import closed_svg

PLACES = ("below", "main")


class Panel:
    """One explorer panel. Subclasses set the class attributes and `build`; hooks are optional.

    - `name`: the explorer attribute it is reached by (`ex.gpu`); unique, not an explorer name.
    - `title`: the accordion's title (a "below" panel).
    - `css_class`: the stable class of its outer widget (browser tests select on it).
    - `css`: its own CSS rules (no `<style>` tag); the explorer puts every panel's into its stylesheet.
    - `place`: "below" (an accordion under the graph, `opened` or closed at first) or "main" (a
      box in the main column under the position row, shown as it is).
    - `toolbar`: widgets for the position row (set in `build`: the recipe's toggle button); a
      panel that is only a toolbar returns None from `build` and has no `widget`.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    css_class: ClassVar[str] = ""
    css: ClassVar[str] = ""
    place: ClassVar[str] = "below"
    opened: ClassVar[bool] = False

    def __init__(self, errors: ErrorBox, get_session: Callable[[], Session | None]):
        self.errors = errors
        self._get_session = get_session
        self.toolbar: tuple[Any, ...] = ()
        self.widget = self._frame(self.build())

    def build(self) -> Any:
        """Make the panel's widgets; returns the body (the accordion's content for "below"), or
        None for a panel that is only a toolbar."""
        raise NotImplementedError(f"{type(self).__name__}.build")

    # ---- hooks: the explorer calls these; a hook's error goes to the error box, named by the panel
    def on_session(self, session: Session) -> None:
        """A model was loaded (or a session set): drop what belongs to the last one."""

    def on_step(self, session: Session) -> None:
        """The position moved (a step, a goto, a re-trace that kept the pass)."""

    def on_trace(self, session: Session) -> None:
        """The configuration or the trace changed (load, toggle, the background trace finished)."""

    @property
    def session(self) -> Session:
        """The explorer's session; a clear error when no model is loaded (a button pressed early)."""
        s = self._get_session()
        if s is None:
            raise UserInputError("load a model first")
        return s

    def _frame(self, body: Any) -> Any:
        if body is None:
            return None
        if self.place == "main":
            return body.add_class(self.css_class) if self.css_class else body
        return widgets().Accordion(
            [body], titles=(self.title,), selected_index=0 if self.opened else None, _dom_classes=[self.css_class]
        )


def check_panels(
    classes: Iterable[type[Panel]], taken: Callable[[str], bool] = lambda _name: False
) -> list[type[Panel]]:
    """The panel classes in order, after checking each can be placed: a subclass of Panel, a
    name that is an identifier nothing else on the explorer uses (`taken`), unique, a known place."""
    out: list[type[Panel]] = []
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Panel)):
            raise TypeError(f"explorer panels are Panel subclasses, not {cls!r}")
        what = f"panel {cls.__name__}"
        if not cls.name.isidentifier() or taken(cls.name) or any(c.name == cls.name for c in out):
            raise ValueError(f"{what}: name {cls.name!r} is empty, not an identifier, or already used on the explorer")
        if cls.place not in PLACES:
            raise ValueError(f"{what}: place {cls.place!r} is not one of {', '.join(PLACES)}")
        out.append(cls)
    return out


def placed(panels: Iterable[Panel], place: str) -> list[Any]:
    """The widgets that go in `place`: "toolbar" (the position row) takes every panel's toolbar,
    "main" and "below" the bodies of the panels placed there."""
    if place == "toolbar":
        return [w for p in panels for w in p.toolbar]
    return [p.widget for p in panels if p.place == place and p.widget is not None]


def panel_style(panels: Iterable[Panel]) -> str:
    """One `<style>` element with every panel class's CSS, each class's once."""
    rules = dict.fromkeys(type(p).css.strip() for p in panels if type(p).css.strip())
    return "<style>\n" + "\n".join(rules) + "\n</style>" if rules else ""


def call_hook(
    panels: Iterable[Panel], hook: str, session: Session, errors: ErrorBox | None = None
) -> list[tuple[str, Exception]]:
    """Call `hook` on every panel; one that fails does not stop the rest. Its error is shown in
    `errors`, or returned as (where, error) for the caller to show (without `errors`)."""
    failed = []
    for p in panels:
        try:
            getattr(p, hook)(session)
        except Exception as e:  # noqa: BLE001 - shown to the user, not swallowed
            failed.append((f"{p.title or p.name} panel", e))
    if errors is not None:
        for where, e in failed:
            errors.show(e, where)
    return failed


def gpu_reason() -> str | None:
    """Why GPU work is unavailable here (None: a GPU is usable); read when a panel is built."""
    from ..gpu_bridge import unavailable_reason

    return unavailable_reason()


class SweepPanel(Panel):
    """A panel that runs one sweep of pipeline variants: a choice of variants, "time on the GPU",
    a run button, a progress bar, then a table and a chart. Subclasses name the classes' prefix
    (`migx-waterfall` gives .migx-waterfall-run, -gpu, -table-box, -plot, -progress and the choice's
    `<prefix>-<choice_class>`), the choices, and `sweep` / `table_html`."""

    choices: ClassVar[tuple[tuple[str, str], ...]] = ()
    choice_label: ClassVar[str] = ""
    choice_class: ClassVar[str] = ""
    run_label: ClassVar[str] = ""
    run_icon: ClassVar[str] = ""
    action: ClassVar[str] = ""  # what the run button does, in front of its errors
    gpu_by_default: ClassVar[bool] = False  # ticked when a GPU is usable
    no_gpu_hint: ClassVar[str] = ""  # shown (with the reason's first clause) when none is

    def build(self) -> Any:
        W = widgets()
        p = self.css_class
        self.reason = gpu_reason()
        self.last: Any = None
        self.choice = W.Dropdown(
            options=list(self.choices),
            value=self.choices[0][1],
            description=self.choice_label,
            _dom_classes=[f"{p}-{self.choice_class}"],
        )
        self.time_gpu = W.Checkbox(
            self.gpu_by_default and self.reason is None,
            description="time on the GPU",
            indent=False,
            disabled=self.reason is not None,
            layout=W.Layout(width="auto"),
            _dom_classes=[f"{p}-gpu"],
        )
        self.run_button = W.Button(description=self.run_label, icon=self.run_icon, _dom_classes=[f"{p}-run"])
        self.tracker = TaskProgress(p)
        self.progress, self.progress_label = self.tracker.bar, self.tracker.label
        self.table = W.HTML("", _dom_classes=[f"{p}-table-box"])
        self.plot = W.HTML("", _dom_classes=[f"{p}-plot"])
        self.run_button.on_click(self.errors.guard(lambda _b: self.run(), self.action))
        rows = [W.HBox([self.choice, self.time_gpu, self.run_button])]
        if self.no_gpu_hint:
            hint = "" if self.reason is None else f"{self.no_gpu_hint} ({self.reason.split(';')[0]})."
            rows.append(W.HTML(f"<i>{html.escape(hint)}</i>" if hint else ""))
        return W.VBox([*rows, self.tracker.widget, self.table, self.plot])

    def _report(self, done: int, total: int, what: str) -> None:
        self.tracker.report(done, total, what)

    def sweep(self, session: Session, choice: str, time_gpu: bool) -> Any:
        """Run the sweep (reporting through self._report); returns a result with `.plot()`."""
        raise NotImplementedError(f"{type(self).__name__}.sweep")

    def table_html(self, result: Any) -> str:
        raise NotImplementedError(f"{type(self).__name__}.table_html")

    def run(self) -> Any:
        """Run the sweep on the explorer's session and show its table and chart."""
        result = self.sweep(self.session, self.choice.value, self.time_gpu.value)
        self.table.value = self.table_html(result)
        self.plot.value = closed_svg(result.plot())
        self.last = result
        return result
