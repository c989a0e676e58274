"""Front-end widgets whose state lives on a plain ipywidgets model and whose drawing is an
anywidget ES module: `HostedBox` carries the traits, its one child (a `renderer`) only draws.

Why not the anywidget's own model: anywidget (0.11, and its main branch) gives each model 2 s from
its creation in the browser to load and bind its ES module; past that the model's `ready` promise
is rejected for good and every later message from the kernel to that model is dropped
(AnyModel._handle_comm_msg awaits `ready`), while its view still renders once the module loads.
An explorer opening on a loaded machine (a cold JupyterLab start, CI) creates hundreds of widget
models at once, and the graph view's module was bound late: the pane drew its toolbar and never a
drawing (no graph after clicking Diff). Its view also removes the listeners ipywidgets' own view
code put on the model (`model.off(null, null, view)` before rendering), so `_dom_classes` set
after the first render never reached the page.

Here the kernel talks only to a plain Box model, which nothing gates; the renderer model carries
only its module, its stylesheet and the host's model id, all in its first message, so it needs no
later message. Its view finds the host model through the widget manager and runs the module's
`render` against it (get / set / save_changes / send / on / off, as anywidget's model)."""

from __future__ import annotations

import functools

# Appended to a module that defines `function render({ model, el })` (and exports nothing): the
# export anywidget loads, which renders against the host model named by the `host` trait.
HOSTED_EXPORT = """
const hostedRender = render;
export default {
  async render({ model, el }) {
    const host = await model.widget_manager.get_model(model.get("host"));
    const ctx = {};  // the listeners this view adds to the host, removed with the view
    const proxy = {
      get: (k) => host.get(k),
      set: (k, v) => host.set(k, v),
      save_changes: () => host.save_changes(),
      send: (content, callbacks, buffers) => host.send(content, callbacks, buffers),
      on: (name, fn) => host.on(name, fn, ctx),
      off: (name, fn) => host.off(name, fn, ctx),
      widget_manager: model.widget_manager,
    };
    const cleanup = hostedRender({ model: proxy, el });
    return () => { host.off(null, null, ctx); if (typeof cleanup === "function") cleanup(); };
  },
};
"""


@functools.cache
def _renderer_class(name: str, esm: str, css: str) -> type:
    import anywidget
    import traitlets as t

    # anywidget reads _esm and _css from the class; one class per module
    return type(
        name,
        (anywidget.AnyWidget,),
        {"_esm": esm + HOSTED_EXPORT, "_css": css, "host": t.Unicode("").tag(sync=True)},
    )


@functools.cache
def host_base() -> type:
    """The base of hosted widgets: a VBox whose synced traits (declared by subclasses) the
    renderer reads and writes; subclasses call `attach(name, esm, css)` in __init__."""
    import ipywidgets as W

    class HostedBox(W.VBox):
        def attach(self, name: str, esm: str, css: str = "") -> None:
            """Make the renderer child (the module defines `render`, the export is added)."""
            self.renderer = _renderer_class(name, esm, css)(host=self.model_id)
            self.children = (self.renderer,)

    return HostedBox


__all__ = ["HOSTED_EXPORT", "host_base"]
