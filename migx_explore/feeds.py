"""Real inputs: load a model together with a feed (an .npz file or a dict of arrays).

The feed's shapes fix the model's symbolic dims (every input whose ONNX shape has a dim_param or
unknown dim is imported at the shape fed); a static dim that disagrees with the feed is a
one-line error naming the input and the dim. Inputs the importer needs as constants (shape-like
operands: a reshape target, pads, axes) are frozen to the fed values, as the ONNX reference
backend does. Without a feed, such a model is refused with a message asking for real inputs.

npz keys are the ONNX graph input names (or the program's parameter names)."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.inputs import REAL_INPUTS_HINT
from migx_explore.compiler.ir import Program

from .npz import read_npz

Feed = Mapping[str, Any]


def _as_feed(feed: str | os.PathLike | Feed) -> tuple[dict[str, np.ndarray], str]:
    if isinstance(feed, (str, os.PathLike)):
        return read_npz(feed), str(feed)
    return {k: np.asarray(v) for k, v in feed.items()}, "the inputs"


def _is_onnx(model: Any) -> bool:
    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        return p.is_file() and (p.suffix == ".onnx" or not _is_zip(p))
    return not isinstance(model, Program)  # bytes or a ModelProto


def _is_zip(p: Path) -> bool:

    return zipfile.is_zipfile(p)


def _onnx_input_dims(
    model: Any, feed: dict[str, np.ndarray], where: str, user_dims: Mapping[str, Sequence]
) -> dict[str, list]:
    """input_dims for the importer: the feed's shape for every input with a non-static dim; a
    static dim that disagrees with the feed raises."""
    from migx_explore.compiler.onnx.context import param_name
    from migx_explore.compiler.onnx.loader import load_model

    proto, _, _ = load_model(model)
    inits = {t.name for t in proto.graph.initializer}
    dims: dict[str, list] = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        key = vi.name if vi.name in feed else param_name(vi.name)
        if key not in feed or vi.name in user_dims:
            continue
        got = tuple(feed[key].shape)
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            dims[vi.name] = list(got)
            continue
        decl = [int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim]
        if len(decl) != len(got):
            raise MigxError(
                f"{where}: input {vi.name!r} has rank {len(got)} {list(got)} but the model declares "
                f"rank {len(decl)} {['?' if d is None else d for d in decl]}"
            )
        for i, (d, g) in enumerate(zip(decl, got)):
            if d is not None and d != g:
                raise MigxError(
                    f"{where}: input {vi.name!r} has shape {list(got)} but the model fixes dim {i} "
                    f"to {d} (declared {['?' if x is None else x for x in decl]})"
                )
        if any(d is None for d in decl):
            dims[vi.name] = list(got)
    return {**dims, **dict(user_dims)}


def _import_onnx(
    model: Any,
    feed: dict[str, np.ndarray] | None,
    where: str,
    user_dims: Mapping[str, Sequence],
    *,
    convert: bool = False,
    exact: bool = False,
) -> Program:
    import warnings

    from migx_explore.compiler.onnx import ConstantInputRequired, parse_onnx
    from migx_explore.compiler.onnx.context import param_name

    dims = _onnx_input_dims(model, feed, where, user_dims) if feed is not None else dict(user_dims)
    frozen: dict[str, np.ndarray] = {}
    while True:
        try:
            with warnings.catch_warnings():
                if feed is not None:  # dims fixed by the feed: no "symbolic dim defaulted" warnings
                    warnings.simplefilter("ignore")
                return parse_onnx(
                    model,
                    input_dims={k: v for k, v in dims.items() if k not in frozen} or None,
                    constant_inputs=frozen or None,
                    exact_data_dependent=exact and feed is not None,
                )
        except ConstantInputRequired as e:
            if feed is None:
                raise MigxError(
                    f"{e}; these inputs are shape-like, so random values cannot stand in for them: {REAL_INPUTS_HINT}"
                ) from None
            names = [n for n in _graph_inputs(model) if param_name(n) in e.params and n not in frozen]
            missing = [n for n in names if n not in feed and param_name(n) not in feed]
            if not names or missing:
                raise MigxError(f"{e} ({where} lacks {', '.join(missing) or 'them'})") from None
            for n in names:
                frozen[n] = _typed_as_declared(model, n, feed[n] if n in feed else feed[param_name(n)], where, convert)


def _typed_as_declared(model: Any, name: str, value: np.ndarray, where: str, convert: bool) -> np.ndarray:
    """A value frozen into the model (a fed shape, k, axes) checked against the element type the
    model declares for that input, as feed_for_program checks every other input: ORT refuses an
    int32 shape for an int64 input, and a float k must not be truncated silently."""
    from onnx import helper

    from migx_explore.compiler.onnx.loader import load_model

    proto, _, _ = load_model(model)
    decl = next((vi for vi in proto.graph.input if vi.name == name), None)
    elem = decl.type.tensor_type.elem_type if decl is not None else 0
    if not elem:
        return value
    want = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    want_name = helper.tensor_dtype_to_string(elem).removeprefix("TensorProto.").lower()
    return _cast_or_refuse(value, want, want_name, name, where, convert)


def _type_name(dt: np.dtype) -> str:
    from migx_explore.compiler import dtypes

    try:
        return dtypes.dtype(dt).name
    except (ValueError, KeyError, TypeError):
        return {"U": "string", "S": "bytes", "O": "object", "c": "complex", "M": "datetime", "m": "timedelta"}.get(
            dt.kind, str(dt)
        )


def _cast_or_refuse(v: np.ndarray, want: np.dtype, want_name: str, name: str, where: str, convert: bool) -> np.ndarray:
    """v as `want`, or one line naming the input, the type the model takes and the type given.
    Only a same-kind or integer-to-float cast is made, and only when `convert` asks."""
    if v.dtype == want:
        return v
    castable = v.dtype.kind in "biuf" and (
        np.can_cast(v.dtype, want, "same_kind") or (want.kind == "f" and v.dtype.kind in "iu")
    )
    if not (convert and castable):
        how = f"; {CONVERT_HINT}" if castable else ""
        raise MigxError(
            f"{where}: input {name!r} has element type {_type_name(v.dtype)} but the model takes {want_name} "
            f"(ONNX Runtime refuses it too){how}"
        )
    return v.astype(want)


def _graph_inputs(model: Any) -> list[str]:
    from migx_explore.compiler.onnx.loader import load_model

    proto, _, _ = load_model(model)
    inits = {t.name for t in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in inits]


CONVERT_HINT = "--convert-inputs (convert_inputs=True in Python) converts it"


def feed_for_program(
    program: Program, feed: Feed, where: str = "the inputs", *, require_all: bool = True, convert: bool = False
) -> dict[str, np.ndarray]:
    """The feed keyed by parameter name, checked against the program's inputs (names, shapes and
    element types). require_all=False accepts a feed without the parameters a backend pass added
    (output buffers). An element type other than the input's is refused, as ONNX Runtime refuses
    it ("Unexpected input data type"), unless `convert` asks for a same-kind or int-to-float cast."""
    from migx_explore.compiler import dtypes
    from migx_explore.compiler.onnx.context import param_name

    data = {k: np.asarray(v) for k, v in feed.items()}
    params = {p.param_name: p for p in program.main.params()}
    onnx_names = getattr(program, "input_names", None) or []
    by_key = {n: param_name(n) for n in onnx_names if param_name(n) in params}
    by_key.update({p: p for p in params})
    frozen = set(getattr(program, "frozen_inputs", ()))
    out: dict[str, np.ndarray] = {}
    fed_as: dict[str, str] = {}
    for k, v in data.items():
        if k not in by_key:
            if k in frozen or param_name(k) in frozen:
                continue
            raise MigxError(
                f"{where}: unknown input {k!r}; the model's inputs are {', '.join(onnx_names or params) or 'none'}"
            )
        out[by_key[k]] = v
        fed_as[by_key[k]] = k
    missing = [p for p in params if p not in out and not (onnx_names and _backend_param(p, onnx_names))]
    if missing and require_all:
        want = ", ".join(f"{m} {list(params[m].shape.lens)}" for m in missing)
        raise MigxError(f"{where}: missing input(s) {want}")
    for name, v in out.items():
        s = params[name].shape
        if s.dyn_dims is None and tuple(v.shape) != s.lens and not (v.size == 1 and s.elements() == 1):
            raise MigxError(f"{where}: input {name!r} has shape {list(v.shape)} but the program expects {list(s.lens)}")
        out[name] = _cast_or_refuse(v, dtypes.np_dtype(s.type), s.type, fed_as[name], where, convert)
    return out


def _backend_param(name: str, onnx_names: Sequence[str]) -> bool:
    """A parameter a backend pass added (an output buffer, the scratch arena) to a program that
    knows its model's inputs: the evaluator gives it zeros (compiler.ref.with_buffer_params)."""
    from migx_explore.compiler.onnx.context import param_name

    return name not in {param_name(n) for n in onnx_names}


def load_with_feed(
    model: Any,
    feed: str | os.PathLike | Feed | None = None,
    input_dims: Mapping[str, Sequence] | None = None,
    *,
    convert_inputs: bool = False,
    exact_outputs: bool = False,
) -> tuple[Program, dict[str, np.ndarray] | None]:
    """(program, feed keyed by parameter name) for a model path / name / ONNX bytes / Program and
    an optional feed (an .npz path or a dict). See the module docstring; `convert_inputs` casts a
    feed of another element type (feed_for_program). `exact_outputs` (what `run` asks for) freezes
    the inputs that an op with a data-dependent output length (NonZero, NonMaxSuppression) reads,
    so its result has ONNX's exact length instead of MIGraphX's padded maximum."""
    from .loading import load

    data, where = _as_feed(feed) if feed is not None else (None, "")
    if _is_onnx(model):
        program = _import_onnx(model, data, where, dict(input_dims or {}), convert=convert_inputs, exact=exact_outputs)
        if data is not None:
            frozen = [n for n in _graph_inputs(model) if n not in (getattr(program, "input_names", None) or [])]
            program.frozen_inputs = frozen
    else:
        program = load(model, input_dims, feed=data)
    if data is None:
        return program, None
    return program, feed_for_program(program, data, where, convert=convert_inputs)


__all__ = ["feed_for_program", "load_with_feed", "read_npz"]
