"""The model picker: a built-in example, a path, or an uploaded .onnx file; concrete dims for
symbolic inputs; the compile mode. It builds a Session and hands it to `on_load`."""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Sequence
from typing import Any

from migx_explore.compiler.quantize import PRECISIONS

from ..errors import UserInputError, is_bad_file_error
from ..migraphx import is_migraphx_text
from ..migraphx.load import refuse_mxr
from ..migraphx.modes import mode_options
from ..session import Session
from . import queries
from ._common import ErrorBox, widgets
from .dom_tools import ChunkedUpload


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__.rstrip("_")])[0][:200]


def builtin_models() -> list[str]:
    """Names of the built-in example models ([] while the models package is unavailable)."""
    try:
        from .. import models
    except ImportError:
        return []
    return list(models.list_models())


def builtin_inputs(name: str) -> dict[str, list[int | str]]:
    """Declared input dims of a built-in model (symbolic dims by name), read off its ONNX graph."""
    from .. import models

    return queries.onnx_inputs(models.get_model(name))


def make_session(model: Any, input_dims: dict[str, Sequence[int]] | None = None, **kw: Any) -> Session:
    """A Session from a built-in model name, an ONNX path, ONNX bytes or a ModelProto."""
    dims = input_dims or None
    if isinstance(model, Session):
        return model
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.exists(path) or path.endswith(".onnx"):
            return Session.from_onnx(path, input_dims=dims, **kw)
        return Session.from_model(path, input_dims=dims, **kw)
    if isinstance(model, (bytes, bytearray)) or hasattr(model, "graph"):  # serialized ONNX or a ModelProto
        from migx_explore.compiler.onnx import parse_onnx

        name = kw.pop("name", None) or getattr(getattr(model, "graph", None), "name", None) or "model.onnx"
        return Session(
            parse_onnx(bytes(model) if isinstance(model, bytearray) else model, input_dims=dims), name=name, **kw
        )
    raise TypeError(
        f"cannot open {type(model).__name__}: give a built-in model name ({', '.join(builtin_models())}), "
        f"an .onnx path, ONNX bytes or an onnx.ModelProto"
    )


class ModelPicker:
    """Widget: `widget` holds the controls; Load calls on_load(session) (errors go to the box)."""

    def __init__(self, errors: ErrorBox, on_load: Callable[[Session], None], *, initial: str = ""):
        W = widgets()
        self.errors = errors
        self._on_load = on_load
        self._source_controls(W, initial)
        self._option_controls(W)
        self.load_button = W.Button(
            description="Load", button_style="primary", icon="folder-open", _dom_classes=["migx-load"]
        )
        self.inputs_note = W.HTML("", _dom_classes=["migx-inputs-note"])
        self.widget = self._layout(W)
        self.builtin.observe(errors.guard(self._builtin_changed, "model"), "value")
        self.path.observe(errors.guard(self._path_changed, "path"), "value")
        self.load_button.on_click(errors.guard(lambda _b: self.load(), "load"))
        self._uploaded_bytes: bytes | None = None
        self._uploaded_name = "model.onnx"

    def _source_controls(self, W: Any, initial: str) -> None:
        """What to load: a built-in example, a typed path, or an uploaded file."""
        errors = self.errors
        names = builtin_models()
        self.builtin = W.Dropdown(
            options=[("(built-in examples)", "")] + [(n, n) for n in names],
            value=initial if initial in names else "",
            layout=W.Layout(width="14em"),
            _dom_classes=["migx-model-select"],
        )
        self.path = W.Text(
            "" if initial in names else initial,
            placeholder="or a path to an .onnx file",
            continuous_update=False,
            layout=W.Layout(width="22em"),
            _dom_classes=["migx-model-path"],
        )
        # Chunked: a model of any size arrives (ipywidgets' FileUpload sends one websocket message).
        self.upload = ChunkedUpload(
            on_file=errors.guard(self._uploaded, "upload"), on_error=lambda msg: errors.show(msg, "upload")
        )
        self.upload.add_class("migx-model-upload")

    def _option_controls(self, W: Any) -> None:
        """How to load it: input dims, mode, precision and the per-pass numeric check."""
        self.dims = W.Text(
            "",
            placeholder="input dims for symbolic inputs: x=1,3,224,224; y=1,77",
            continuous_update=False,
            layout=W.Layout(width="26em"),
            _dom_classes=["migx-input-dims"],
        )
        self.mode = W.Dropdown(
            options=mode_options(),
            value="balanced",
            description="mode",
            style={"description_width": "initial"},
            layout=W.Layout(width="10em"),
            _dom_classes=["migx-mode"],
        )
        # The quantize stage (fp16 / bf16 / int8 / fp8) runs before the five pipelines; int8 and fp8
        # calibrate on the session's inputs (seeded random ones unless a feed was given).
        self.precision = W.Dropdown(
            options=PRECISIONS,
            value="fp32",
            description="precision",
            style={"description_width": "initial"},
            layout=W.Layout(width="11em"),
            _dom_classes=["migx-precision"],
        )
        # The per-pass numeric check runs the reference evaluator after every pass that changed the
        # IR: most of a re-trace's time on conv models, so it can be switched off for speed.
        self.numeric = W.Checkbox(
            True,
            description="numeric check per pass",
            indent=False,
            layout=W.Layout(width="auto"),
            _dom_classes=["migx-numeric"],
        )

    def _layout(self, W: Any) -> Any:
        """Two wrapping rows: the model and its options with Load, then dims, check and note."""
        return W.VBox(
            [
                W.HBox(
                    [self.builtin, self.path, self.upload, self.mode, self.precision, self.load_button],
                    layout=W.Layout(flex_flow="row wrap", align_items="center"),
                ),
                W.HBox(
                    [self.dims, self.numeric, self.inputs_note],
                    layout=W.Layout(flex_flow="row wrap", align_items="center"),
                ),
            ],
            _dom_classes=["migx-picker"],
        )

    # ---- inspecting inputs ------------------------------------------------------------------------
    def _show_inputs(self, dims: dict[str, list[int | str]]) -> None:
        sym = queries.symbolic_inputs(dims)
        if sym:
            self.dims.value = queries.format_dims(queries.default_dims(dims))
            self.inputs_note.value = (
                "symbolic inputs: "
                + ", ".join(f"{k}[{', '.join(map(str, v))}]" for k, v in sym.items())
                + " — set concrete dims before loading"
            )
        else:
            self.dims.value = ""
            self.inputs_note.value = "inputs: " + ", ".join(f"{k}{list(v)}" for k, v in dims.items()) if dims else ""

    def _builtin_changed(self, change: dict) -> None:
        if change["new"]:
            self.path.value = ""
            self._uploaded_bytes = None
            self._show_inputs(builtin_inputs(change["new"]))

    def _path_changed(self, change: dict) -> None:
        if change["new"]:
            self.builtin.value = ""
            self._uploaded_bytes = None
            refuse_mxr(change["new"])  # MIGraphX's binary program: how to print it instead
            if is_migraphx_text(change["new"]):  # MIGraphX's printed program or compile log
                self.inputs_note.value = "MIGraphX text: Load shows its own passes (numeric checks off)"
                return
            if os.path.exists(change["new"]):
                try:
                    dims = queries.onnx_inputs(change["new"])
                except Exception as e:  # noqa: BLE001 - reported as one line naming the file
                    if not is_bad_file_error(e):
                        raise  # our bug, not the user's file: the error box says so
                    self.inputs_note.value = f"{html.escape(change['new'])}: not a readable ONNX model"
                    raise UserInputError(f"{change['new']} is not a readable ONNX model ({_first_line(e)})") from None
                self._show_inputs(dims)

    def _uploaded(self, name: str, data: bytes) -> None:
        self.builtin.value, self.path.value = "", ""
        self._uploaded_bytes = None
        self._uploaded_name = name
        refuse_mxr(name)
        if _migraphx_bytes(data):
            self._uploaded_bytes = data
            self.inputs_note.value = f"uploaded {html.escape(name)}: MIGraphX text (its own passes; numeric checks off)"
            return
        try:
            dims = queries.onnx_inputs(data)
        except Exception as e:  # noqa: BLE001 - reported as one line naming the file
            if not is_bad_file_error(e):
                raise  # our bug, not the user's file: the error box says so
            # the note says what Load would do now, not the name of an earlier upload
            self.inputs_note.value = f"{html.escape(name)} not loaded: not a readable ONNX model"
            raise UserInputError(f"{name} is not a readable ONNX model ({_first_line(e)})") from None
        self._uploaded_bytes = data
        self._show_inputs(dims)
        self.inputs_note.value = f"uploaded {html.escape(name)} ({len(data) / 1e6:.1f} MB). " + self.inputs_note.value

    # ---- loading ----------------------------------------------------------------------------------
    def selection(self) -> Any:
        if self._uploaded_bytes is not None:
            return self._uploaded_bytes
        if self.builtin.value:
            return self.builtin.value
        if self.path.value.strip():
            return self.path.value.strip()
        raise UserInputError("pick a built-in example, type a path to an .onnx file, or upload one")

    def load(self) -> Session:
        """Build the session for the current selection and pass it to on_load (which traces it and
        shows it, or changes nothing and raises)."""
        kw: dict[str, Any] = {"numeric": self.numeric.value, "defer_numeric": True}
        if self._uploaded_bytes is not None:
            kw["name"] = self._uploaded_name
        if self.precision.value != "fp32":
            kw["precision"] = self.precision.value
        selection = self.selection()
        text_file = _migraphx_file(selection, self._uploaded_name)
        if text_file is not None:  # a printed program or compile log: MIGraphX's passes, not ours
            session = Session.from_migraphx(text_file, name=kw.get("name") or os.path.basename(text_file))
            self._on_load(session)
            return session
        session = make_session(selection, queries.parse_dims(self.dims.value), **kw)
        if self.mode.value != "balanced":
            session.config.set_mode(self.mode.value)
        self._on_load(session)
        return session


def _migraphx_bytes(data: bytes) -> bool:
    from ..migraphx.load import looks_like_migraphx

    return looks_like_migraphx(data[: 1 << 16])


def _migraphx_file(selection: Any, upload_name: str) -> str | None:
    """A path to read with Session.from_migraphx, or None: a MIGraphX text path as typed, or an
    uploaded MIGraphX text written to a temporary file."""
    if isinstance(selection, str):
        return selection if is_migraphx_text(selection) else None
    if isinstance(selection, bytes) and _migraphx_bytes(selection):
        import tempfile

        fd, path = tempfile.mkstemp(suffix="-" + os.path.basename(upload_name or "migraphx.txt"))
        with os.fdopen(fd, "wb") as f:
            f.write(selection)
        return path
    return None
