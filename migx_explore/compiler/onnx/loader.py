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
        check_strings(source, "the model")
        return source, None, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return _decode(data, "model bytes"), None, data
    if not isinstance(source, (str, os.PathLike)):
        raise ImportError_(
            f"an ONNX model is a path, bytes or an onnx.ModelProto, not {type(source).__name__} {source!r:.40}"
        )
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
    check_strings(model, what)
    return model


def check_strings(model: onnx.ModelProto, what: str) -> None:
    """Refuse a string field that is not valid UTF-8 (protobuf hands it over as bytes, which every
    name comparison downstream would trip on), naming the field's path in the model."""
    where = _bad_string(model, "")
    if where is not None:
        raise ImportError_(f"cannot read {what}: {where} is not valid UTF-8 text")


def _bad_string(model: onnx.ModelProto, path: str) -> str | None:
    """The first string field, among those anything reads (names, types, domains, metadata), that
    protobuf could not decode; a hand-written walk, as a generic one over every field is ~50x slower."""
    for i, p in enumerate(model.metadata_props):
        if isinstance(p.key, bytes) or isinstance(p.value, bytes):
            return f"metadata_props[{i}]"
    for k in ("producer_name", "producer_version", "domain", "doc_string"):
        if isinstance(getattr(model, k), bytes):
            return k
    for i, o in enumerate(model.opset_import):
        if isinstance(o.domain, bytes):
            return f"opset_import[{i}].domain"
    found = _bad_in_graph(model.graph, "graph")
    for i, f in enumerate(model.functions):
        found = found or _bad_in_nodes(f.node, f"functions[{i}]") or _bad_in_names(f, f"functions[{i}]")
    return found


def _bad_in_graph(g, path: str) -> str | None:
    for field in ("input", "output", "value_info"):
        for i, v in enumerate(getattr(g, field)):
            if isinstance(v.name, bytes) or isinstance(v.doc_string, bytes):
                return f"{path}.{field}[{i}].name"
            if v.type.HasField("tensor_type") and any(
                isinstance(d.dim_param, bytes) for d in v.type.tensor_type.shape.dim
            ):
                return f"{path}.{field}[{i}] (in {v.name!r}): a dim_param"
    for field in ("initializer", "sparse_initializer"):
        for i, t in enumerate(getattr(g, field)):
            if field == "initializer" and (
                isinstance(t.name, bytes)
                or any(isinstance(e.key, bytes) or isinstance(e.value, bytes) for e in t.external_data)
            ):
                return f"{path}.initializer[{i}] (its name or external data)"
    if isinstance(g.name, bytes):
        return f"{path}.name"
    return _bad_in_nodes(g.node, path)


def _bad_in_names(f, path: str) -> str | None:
    for k in ("name", "domain"):
        if isinstance(getattr(f, k), bytes):
            return f"{path}.{k}"
    for k in ("input", "output", "attribute"):
        if any(isinstance(v, bytes) for v in getattr(f, k)):
            return f"{path}.{k}"
    return None


def _bad_in_nodes(nodes, path: str) -> str | None:
    for i, n in enumerate(nodes):
        here = f"{path}.node[{i}]"
        for k in ("name", "op_type", "domain", "doc_string"):
            if isinstance(getattr(n, k), bytes):
                return f"{here}.{k}"
        named = f" (in {n.name!r})" if n.name else ""
        for k in ("input", "output"):
            for j, v in enumerate(getattr(n, k)):
                if isinstance(v, bytes):
                    return f"{here}.{k}[{j}]{named}"
        for j, p in enumerate(n.metadata_props):
            if isinstance(p.key, bytes) or isinstance(p.value, bytes):
                return f"{here}.metadata_props[{j}]{named}"
        for a in n.attribute:
            if isinstance(a.name, bytes) or isinstance(a.ref_attr_name, bytes):
                return f"{here}.attribute{named}: a name"
            if a.HasField("g"):
                found = _bad_in_graph(a.g, f"{here}.attribute {a.name!r}")
                if found:
                    return found
            for k, sub in enumerate(a.graphs):
                found = _bad_in_graph(sub, f"{here}.attribute {a.name!r}[{k}]")
                if found:
                    return found
    return None


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
        except (ValueError, OSError, RuntimeError):  # a NUL byte, a link loop (RuntimeError before 3.13)
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
