"""Three small anywidgets for what plain ipywidgets cannot do in the browser:

- ClickableSvg: an SVG whose elements carrying `data-index` report clicks (the metrics chart:
  click a pass to go there);
- ScrollTo: scrolls a row into view inside its own scrolling box (the tree follows the current
  pass) without scrolling the notebook;
- ChunkedUpload: reads a local file in the browser and sends it to the kernel in 4 MiB pieces,
  so models of any size arrive (one websocket message per piece stays under the server's 10 MiB
  message limit, where ipywidgets' FileUpload sends the whole file in one message and a 12 MB
  model silently dropped the connection); errors reach the kernel as text.

Each is its own few lines of ES module; traits are the interface (tests set and read them).
ClickableSvg and ScrollTo keep their traits on a plain ipywidgets box, drawn by a hosted
anywidget (hosted.py says why: they need the kernel's later messages); ChunkedUpload only sends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .hosted import host_base

CHUNK_BYTES = 4 << 20

_CLICKABLE_ESM = """
function render({ model, el }) {
  el.classList.add("migx-clickable-svg");
  const draw = () => { el.innerHTML = model.get("svg"); };
  el.addEventListener("click", (ev) => {
    const hit = ev.target.closest && ev.target.closest("[data-index]");
    if (!hit) return;
    model.set("clicked", Number(hit.getAttribute("data-index")));
    model.set("clicks", model.get("clicks") + 1);
    model.save_changes();
  });
  model.on("change:svg", draw);
  draw();
}
"""

_SCROLL_ESM = """
function render({ model, el }) {
  el.style.display = "none";
  const go = () => {
    const sel = model.get("selector");
    if (!sel) return;
    requestAnimationFrame(() => {
      const row = document.querySelector(sel);
      const box = row && row.closest(model.get("container"));
      if (!row || !box) return;
      const r = row.getBoundingClientRect(), b = box.getBoundingClientRect();
      if (r.top < b.top || r.bottom > b.bottom) {
        box.scrollTop += (r.top - b.top) - (b.height - r.height) / 2;
      }
    });
  };
  model.on("change:tick", go);
  go();
}
"""

_UPLOAD_ESM = """
function render({ model, el }) {
  el.classList.add("migx-upload");
  const input = document.createElement("input");
  input.type = "file";
  input.accept = model.get("accept");
  input.className = "migx-upload-input";
  const label = document.createElement("span");
  label.className = "migx-upload-label";
  el.appendChild(input);
  el.appendChild(label);
  const chunk = model.get("chunk_bytes");
  input.addEventListener("change", async () => {
    const f = input.files && input.files[0];
    if (!f) return;
    try {
      model.send({ kind: "start", name: f.name, size: f.size });
      for (let off = 0; off < f.size || off === 0; off += chunk) {
        const buf = await f.slice(off, Math.min(off + chunk, f.size)).arrayBuffer();
        const mb = (n) => (n / 1048576).toFixed(1);
        label.textContent = `uploading ${mb(Math.min(off + chunk, f.size))} / ${mb(f.size)} MB`;
        model.send({ kind: "chunk", offset: off }, undefined, [buf]);
        if (f.size === 0) break;
      }
      model.send({ kind: "end", name: f.name, size: f.size });
      label.textContent = "";
    } catch (e) {
      label.textContent = "upload failed";
      model.send({ kind: "error", message: String(e && e.message || e) });
    }
    input.value = "";
  });
}
export default { render };
"""


@functools.cache
def _classes() -> dict[str, type]:
    import anywidget
    import traitlets as t

    class ClickableSvg(host_base()):
        svg = t.Unicode("").tag(sync=True)
        clicked = t.Int(-1).tag(sync=True)  # data-index of the last clicked element
        clicks = t.Int(0).tag(sync=True)  # counts clicks, so clicking the same element twice still reports

        def __init__(self, **kw: Any):
            super().__init__(**kw)
            self.attach("ClickableSvgRenderer", _CLICKABLE_ESM)

    class ScrollTo(host_base()):
        selector = t.Unicode("").tag(sync=True)
        container = t.Unicode(".migx-tree").tag(sync=True)
        tick = t.Int(0).tag(sync=True)

        def __init__(self, **kw: Any):
            super().__init__(**kw)
            self.attach("ScrollToRenderer", _SCROLL_ESM)

        def scroll(self, selector: str) -> None:
            self.selector = selector
            self.tick += 1

    class ChunkedUpload(anywidget.AnyWidget):
        _esm = _UPLOAD_ESM
        accept = t.Unicode(".onnx").tag(sync=True)
        chunk_bytes = t.Int(CHUNK_BYTES).tag(sync=True)
        status = t.Unicode("").tag(sync=True)  # what the kernel received, or why it failed

        def __init__(
            self,
            on_file: Callable[[str, bytes], None] | None = None,
            on_error: Callable[[str], None] | None = None,
            **kw: Any,
        ):
            super().__init__(**kw)
            self._on_file, self._on_error = on_file, on_error
            self._name, self._size, self._parts = "", 0, bytearray()
            self.on_msg(self._message)

        def _message(self, _widget: Any, content: dict, buffers: list) -> None:
            kind = content.get("kind")
            if kind == "start":
                self._name, self._size, self._parts = content["name"], int(content["size"]), bytearray()
                self.status = f"receiving {self._name} ({self._size / 1e6:.1f} MB)"
            elif kind == "chunk":
                if int(content["offset"]) != len(self._parts):
                    self._fail(f"upload of {self._name}: piece at byte {content['offset']} arrived out of order")
                    return
                for b in buffers:
                    self._parts += bytes(b)
            elif kind == "end":
                self.receive(self._name, bytes(self._parts), expected=self._size)
            elif kind == "error":
                self._fail(f"upload of {self._name or 'the file'} failed in the browser: {content.get('message')}")

        def receive(self, name: str, data: bytes, expected: int | None = None) -> None:
            """A whole file arrived (also the entry point for tests and notebooks)."""
            if expected is not None and len(data) != expected:
                self._fail(f"upload of {name}: received {len(data)} of {expected} bytes")
                return
            self.status = f"uploaded {name} ({len(data) / 1e6:.1f} MB)"
            if self._on_file:
                self._on_file(name, data)

        def _fail(self, message: str) -> None:
            self.status = message
            self._parts = bytearray()
            if self._on_error:
                self._on_error(message)

    return {"ClickableSvg": ClickableSvg, "ScrollTo": ScrollTo, "ChunkedUpload": ChunkedUpload}


def ClickableSvg(**kw: Any) -> Any:  # noqa: N802 - factories standing for classes (anywidget loads lazily)
    return _classes()["ClickableSvg"](**kw)


def ScrollTo(**kw: Any) -> Any:  # noqa: N802
    return _classes()["ScrollTo"](**kw)


def ChunkedUpload(**kw: Any) -> Any:  # noqa: N802
    return _classes()["ChunkedUpload"](**kw)


__all__ = ["CHUNK_BYTES", "ChunkedUpload", "ClickableSvg", "ScrollTo"]
