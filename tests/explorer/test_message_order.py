"""The explorer's browser messages keep their order when the kernel serves widgets from several
threads (ipykernel 7 "subshells", issue 23's lost Load click).

ipykernel 7 routes each widget's messages to the shell thread of the last message that made the
widget send an update (`Comm._reply_subshell_for`). After a failed load the model dropdown had
been updated from a subshell message and the Load button never had, so the two went to different
threads: with the subshell's thread starved (the old model's numeric check holds the GIL) the
click was handled first, loaded the old bad path again, and the dropdown's handler then cleared
that error. `TwoShells` below routes and runs messages as that kernel does, with the subshell held
until released, which reproduces it on every run."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

pytest.importorskip("ipywidgets")
kernel_comm = pytest.importorskip("ipykernel.comm.comm")

SUBSHELL = "widgets-subshell"  # JupyterLab's one subshell for all widget comms (perCommTarget)


class TwoShells:
    """The kernel's main shell and one subshell: a thread each, each serving its queue in order;
    the subshell's thread waits for `release()` before its first message."""

    def __init__(self) -> None:
        self.queues: dict[str | None, queue.Queue] = {None: queue.Queue(), SUBSHELL: queue.Queue()}
        self.held = threading.Event()
        self.errors: list[Exception] = []
        self.threads = [threading.Thread(target=self._serve, args=(route,), daemon=True) for route in self.queues]
        for t in self.threads:
            t.start()

    def _serve(self, route: str | None) -> None:
        if route == SUBSHELL:
            self.held.wait(60)
        while True:
            item = self.queues[route].get()
            if item is None:
                return
            comm, data = item
            try:
                comm.handle_msg({"content": {"comm_id": comm.comm_id, "data": data}, "buffers": []})
            except Exception as e:  # noqa: BLE001 - reported by release_and_drain
                self.errors.append(e)
            finally:
                self.queues[route].task_done()

    def send(self, widget: Any, data: dict) -> None:
        """A message from the browser, sent on the widgets' subshell, routed as ipykernel does."""
        route = widget.comm._reply_subshell_for(data, SUBSHELL)
        self.queues[route].put((widget.comm, data))

    def release_and_drain(self) -> None:
        """The main shell serves what it has first (the subshell's thread is the starved one),
        then the subshell runs; both finish."""
        self.queues[None].join()
        self.held.set()
        for q in self.queues.values():
            q.put(None)
        for t in self.threads:
            t.join(60)
        assert not self.errors, self.errors


def _walk(root: Any):
    stack = [root]
    while stack:
        w = stack.pop()
        yield w
        stack.extend(getattr(w, "children", ()) or ())


def test_load_click_after_a_failed_load_uses_the_model_picked_before_it(monkeypatch):
    import comm

    from migx_explore.widgets.explorer import Explorer

    # widgets get ipykernel's comm (its per-widget routing), not the test-time dummy
    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: kernel_comm.BaseComm(*a, **k))
    ex = Explorer()
    for w in _walk(ex.widget):  # opened while a cell ran on the main shell
        if getattr(w, "comm", None) is not None:
            w.comm._reply_subshell_id = None
    picker = ex.picker
    picker.path.value = "/nonexistent/model.onnx"
    picker.load_button.click()
    assert "nonexistent" in ex.errors.text
    # the path box's handler (on the subshell) set the dropdown to "": its echo went out under
    # that message, so ipykernel now routes the dropdown's messages to the subshell
    picker.builtin.comm._reply_subshell_id = SUBSHELL

    shells = TwoShells()
    mlp = [v for _label, v in picker.builtin.options].index("mlp")
    shells.send(picker.builtin, {"method": "update", "state": {"index": mlp}, "buffer_paths": []})
    shells.send(picker.load_button, {"method": "custom", "content": {"event": "click"}})
    shells.release_and_drain()
    assert ex.wait(120)

    assert "mlp" in ex.title.value, (ex.title.value, ex.errors.text)
    assert not ex.errors.text.strip(), ex.errors.text


def test_every_explorer_widget_is_served_on_the_main_shell(monkeypatch):
    """Rows made later (the tree's, on load) are pinned too, whatever their last update's route."""
    import comm

    from migx_explore.widgets.explorer import Explorer

    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: kernel_comm.BaseComm(*a, **k))
    ex = Explorer()
    ex.load("mlp")
    ex.wait(120)
    served = [w for w in _walk(ex.widget) if getattr(w, "comm", None) is not None]
    assert len(served) > 50
    for w in served:
        w.comm._reply_subshell_id = SUBSHELL  # as if last updated from a subshell message
    routes = {w.comm._reply_subshell_for({}, SUBSHELL) for w in served}
    assert routes == {None}, routes
