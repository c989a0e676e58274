"""The panel protocol (migx_explore/widgets/panel.py) without a browser: a panel defined here and
added as one entry of `explorer.PANELS` is built, placed, styled and called through its hooks;
panels that cannot be placed fail with an error naming them; a failing hook is shown, not raised."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from migx_explore.errors import UserInputError  # noqa: E402
from migx_explore.session import Session  # noqa: E402
from migx_explore.widgets import explorer as explorer_mod  # noqa: E402
from migx_explore.widgets._common import widgets  # noqa: E402
from migx_explore.widgets.panel import Panel  # noqa: E402

TOY_CSS = ".migx-explorer .migx-toy-count { color: #123456; }"


class ToyPanel(Panel):
    """Counts the instructions after the current pass and remembers every hook call."""

    name = "toy"
    title = "Toy: instructions here"
    css_class = "migx-toy"
    css = TOY_CSS

    def build(self):
        W = widgets()
        self.calls: list[tuple[str, int]] = []
        self.count = W.HTML("", _dom_classes=["migx-toy-count"])
        self.toolbar = (W.Button(description="toy", _dom_classes=["migx-toy-button"]),)
        return W.VBox([self.count])

    def on_session(self, session):
        self.calls.append(("session", session.position))

    def on_trace(self, session):
        self.calls.append(("trace", session.position))

    def on_step(self, session):
        self.calls.append(("step", session.position))
        self.count.value = str(session.after().total_instructions())


def _tree(widget):
    stack, out = [widget], []
    while stack:
        w = stack.pop()
        out.append(w)
        stack.extend(getattr(w, "children", ()) or ())
    return out


@pytest.fixture
def toy_explorer(monkeypatch):
    monkeypatch.setattr(explorer_mod, "PANELS", [*explorer_mod.PANELS, ToyPanel])  # the one entry
    ex = explorer_mod.Explorer(Session.from_model("mlp", numeric=False))
    yield ex
    ex.wait(60)


def test_one_entry_adds_a_panel_that_shows_and_gets_every_hook(toy_explorer):
    ex = toy_explorer
    toy = ex.toy
    assert isinstance(toy, ToyPanel) and toy in ex.panels and type(ex.panels[-1]) is ToyPanel
    shown = _tree(ex.widget)
    assert toy.widget in shown and toy.toolbar[0] in shown
    assert "migx-toy" in toy.widget._dom_classes and toy.widget.get_title(0) == ToyPanel.title
    assert toy.widget.selected_index is None  # a "below" panel starts closed unless `opened`
    style = next(w for w in shown if "migx-style" in getattr(w, "_dom_classes", ()))
    assert TOY_CSS in style.value and ".migx-gpu-unavailable" in style.value  # every panel's CSS
    assert style.value.count(TOY_CSS) == 1

    # The passes after the first are traced in the background, and its end calls on_trace
    # again: waited for, so that the step below is the only call it makes (on a loaded machine
    # the trace had ended during the step, and its call came first).
    assert ex.wait(60)
    kinds = [k for k, _ in toy.calls]
    assert kinds[0] == "session" and "trace" in kinds and "step" in kinds
    before = len(toy.calls)
    rec = ex.next()
    assert toy.calls[before:] == [("step", ex.session.position)]
    assert toy.count.value == str(ex.session.after().total_instructions()) and rec is ex.session.current
    ex.wait(60)
    ex.toggle(ex.session.current.path, False)
    assert ("trace", ex.session.position) in toy.calls[before + 1 :]


def test_the_shipped_panels_are_reached_by_name_and_placed():
    ex = explorer_mod.Explorer()
    assert [p.name for p in ex.panels] == [cls.name for cls in explorer_mod.PANELS]
    assert ex.gpu.widget.selected_index == 0 and ex.waterfall.widget.selected_index is None
    main = next(w for w in _tree(ex.widget) if "migx-main" in getattr(w, "_dom_classes", ()))
    assert ex.recipe.widget in main.children and "migx-recipe-menu" in ex.recipe.widget._dom_classes
    row = next(w for w in main.children if "migx-position-row" in w._dom_classes)
    assert ex.recipe.button in row.children and ex.model_explorer.toolbar[0] in row.children
    assert ex.model_explorer.widget is None  # a toolbar-only panel
    bottom = ex.widget.children
    assert bottom.index(ex.gpu.widget) < bottom.index(ex.waterfall.widget) < bottom.index(ex.study.widget)
    with pytest.raises(UserInputError, match="load a model first"):
        ex.study.run()


def test_no_panels_is_an_explorer_without_them():
    ex = explorer_mod.Explorer(panels=[])
    assert ex.panels == [] and not hasattr(ex, "gpu")
    row = next(w for w in _tree(ex.widget) if "migx-position-row" in getattr(w, "_dom_classes", ()))
    assert row.children == (ex.stepper.position,)


def _named(name, place="below"):
    return type("Named", (ToyPanel,), {"name": name, "place": place})


@pytest.mark.parametrize(
    "panels, message",
    [
        ([ToyPanel, ToyPanel], "name 'toy' .* already used"),
        ([_named("status")], "panel Named: name 'status'"),  # an explorer attribute
        ([_named("next")], "panel Named: name 'next'"),  # an explorer method
        ([_named("two words")], "not an identifier"),
        ([_named("side", place="left")], "place 'left' is not one of below, main"),
    ],
)
def test_a_panel_that_cannot_be_placed_is_named(panels, message):
    with pytest.raises(ValueError, match=message):
        explorer_mod.Explorer(panels=panels)


def test_a_panel_must_be_a_panel_class():
    with pytest.raises(TypeError, match="Panel subclasses, not 3"):
        explorer_mod.Explorer(panels=[3])


class BrokenPanel(ToyPanel):
    name = "broken"
    title = "Broken"

    def on_session(self, session):
        raise UserInputError("cannot read this model")


def test_a_failing_hook_is_shown_and_the_load_goes_on():
    ex = explorer_mod.Explorer(Session.from_model("mlp", numeric=False), panels=[BrokenPanel, ToyPanel])
    ex.wait(60)
    assert "Broken panel: cannot read this model" in ex.errors.text
    assert ex.toy.calls[0][0] == "session" and ex.views.drawn("diff").startswith("<svg")
