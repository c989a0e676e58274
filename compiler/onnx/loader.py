"""Reading a model: a path, serialized bytes or a ModelProto -> a checked ModelProto with every
external tensor's data loaded (only from files inside the model's own folder)."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from onnx import external_data_helper

from ..errors import ImportError_

ModelSource = str | os.PathLike | bytes | onnx.ModelProto


def load_model(source: ModelSource) -> tuple[onnx.ModelProto, Path | None, bytes | None]:
    """Returns (model, folder, serialized bytes); folder is None for bytes / in-memory models, the
    bytes are None for a ModelProto (kept so the checker need not serialize a big model again)."""
    if isinstance(source, onnx.ModelProto):
        return source, None, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return _decode(data, "model bytes"), None, data
    path = Path(source)
    if not path.is_file():
        raise ImportError_(f"ONNX model {str(path)!r} not found" if not path.exists()
                           else f"ONNX model {str(path)!r} is not a file")
    data = path.read_bytes()
    return _decode(data, str(path)), path.resolve().parent, data


def _decode(data: bytes, what: str) -> onnx.ModelProto:
    if not data:
        raise ImportError_(f"cannot read {what}: the file is empty")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:  # noqa: BLE001 - protobuf DecodeError and friends
        raise ImportError_(f"cannot read {what}: not a valid ONNX protobuf ({_first_line(e)}); "
                           "the file may be truncated or not an ONNX model") from None
    if not model.HasField("graph"):
        raise ImportError_(f"cannot read {what}: no graph in the protobuf (truncated or not an ONNX model)")
    return model


def check_model(model: onnx.ModelProto | bytes, what: str) -> None:
    """onnx.checker, with its message on one line (structure only: external data is not read)."""
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, Exception) as e:  # noqa: BLE001
        raise ImportError_(f"{what} fails the ONNX checker: {_first_line(e)}") from None


def load_external_data(model: onnx.ModelProto, folder: Path | None) -> bool:
    """Read external tensor data in place (True if there was any); refuse locations outside `folder`."""
    tensors = [t for t in external_data_helper._get_all_tensors(model)
               if t.HasField("data_location") and t.data_location == onnx.TensorProto.EXTERNAL]
    if not tensors:
        return False
    if folder is None:
        raise ImportError_("the model keeps tensor data in external files; load it from its path so the data "
                           "files can be found next to it")
    root = folder.resolve()
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        target = (root / loc).resolve()
        if not loc or os.path.isabs(loc) or not target.is_relative_to(root):
            raise ImportError_(f"tensor {t.name!r}: external data path {loc!r} escapes the model folder {str(root)!r}; "
                               "refusing to read it")
        if not target.is_file():
            raise ImportError_(f"tensor {t.name!r}: external data file {loc!r} not found in {str(root)!r}")
        offset = int(info.get("offset", 0) or 0)
        length = info.get("length")
        with open(target, "rb") as f:
            f.seek(offset)
            raw = f.read(int(length)) if length else f.read()
        if length and len(raw) != int(length):
            raise ImportError_(f"tensor {t.name!r}: external data file {loc!r} is shorter than its declared "
                               f"offset {offset} + length {length}")
        t.raw_data = raw
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
    return True


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:3])[:400]
