"""Reading a model: a path, serialized bytes or a ModelProto -> a checked ModelProto with every
external tensor's data loaded (only from files inside the model's own folder)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import onnx
from onnx import external_data_helper

from ..errors import ImportError_, MigxError
from ..limits import check_bytes

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
        raise ImportError_(
            f"ONNX model {str(path)!r} not found" if not path.exists() else f"ONNX model {str(path)!r} is not a file"
        )
    try:
        check_bytes(path.stat().st_size, f"ONNX model {str(path)!r}")
    except MigxError as e:
        raise ImportError_(str(e)) from None
    data = path.read_bytes()
    return _decode(data, str(path)), path.resolve().parent, data


def _decode(data: bytes, what: str) -> onnx.ModelProto:
    if not data:
        raise ImportError_(f"cannot read {what}: the file is empty")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:  # noqa: BLE001 - protobuf DecodeError and friends
        raise ImportError_(
            f"cannot read {what}: not a valid ONNX protobuf ({_first_line(e)}); "
            "the file may be truncated or not an ONNX model"
        ) from None
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
    tensors = [
        t
        for t in external_data_helper._get_all_tensors(model)
        if t.HasField("data_location") and t.data_location == onnx.TensorProto.EXTERNAL
    ]
    if not tensors:
        return False
    if folder is None:
        raise ImportError_(
            "the model keeps tensor data in external files; load it from its path so the data "
            "files can be found next to it"
        )
    root = folder.resolve()
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        try:
            target = (root / loc).resolve()
        except (ValueError, OSError):  # a NUL byte, a link loop
            raise ImportError_(f"tensor {t.name!r}: external data path {loc!r} is not a usable path") from None
        if not loc or os.path.isabs(loc) or not target.is_relative_to(root):
            raise ImportError_(
                f"tensor {t.name!r}: external data path {loc!r} escapes the model folder {str(root)!r}; "
                "refusing to read it"
            )
        offset, length = _external_range(t.name, loc, target, info)
        with open(target, "rb") as f:
            f.seek(offset)
            raw = f.read(length)
        if len(raw) != length:
            raise ImportError_(f"tensor {t.name!r}: external data file {loc!r} changed while being read")
        t.raw_data = raw
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
    return True


def _int_field(tensor: str, key: str, value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ImportError_(f"tensor {tensor!r}: external data {key} {value!r} is not an integer") from None
    if n < 0:
        raise ImportError_(f"tensor {tensor!r}: external data {key} {n} is negative")
    return n


def _external_range(tensor: str, loc: str, target: Path, info: dict[str, str]) -> tuple[int, int]:
    """(offset, length) of a tensor's external data, checked against the file before reading it: a
    regular file (a FIFO would block, a folder cannot be read), in range, within the memory budget."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise ImportError_(
            f"tensor {tensor!r}: external data file {loc!r} not found in {str(target.parent)!r}"
        ) from None
    except OSError as e:
        raise ImportError_(f"tensor {tensor!r}: external data file {loc!r} cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a special file"
        raise ImportError_(f"tensor {tensor!r}: external data location {loc!r} is {kind}; it must be a regular file")
    offset = _int_field(tensor, "offset", info.get("offset")) or 0
    length = _int_field(tensor, "length", info.get("length"))
    if offset > st.st_size:
        raise ImportError_(
            f"tensor {tensor!r}: external data offset {offset} is past the end of {loc!r} ({st.st_size} bytes)"
        )
    if length is None:
        length = st.st_size - offset
    elif offset + length > st.st_size:
        raise ImportError_(
            f"tensor {tensor!r}: external data file {loc!r} ({st.st_size} bytes) is shorter than "
            f"its declared offset {offset} + length {length}"
        )
    try:
        check_bytes(length, f"tensor {tensor!r} external data")
    except MigxError as e:
        raise ImportError_(str(e)) from None
    return offset, length


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:3])[:400]
