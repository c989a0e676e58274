"""Input shapes for the importer: symbolic dims by name, or dims read off a feed.

An ONNX decoder names its symbolic dims (`P` for the cache length, `T` for the new tokens) and
shares them across inputs. `input_dims` may therefore name a dim_param as well as an input:

    {"P": (1, 255), "T": 1}                 every input using P gets [1..255], every T input 1
    {"past_key_0": [1, 4, 127, 32]}         one input's full dims (as before)

and `feed_input_dims` turns a feed (arrays keyed by input name) into the same mapping, checking
that a dim_param has one size across every input that uses it. `resolve_input_dims` is the single
place both end up: it returns full dims per input name, the form the importer consumes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ..errors import ImportError_
from .context import param_name

Dim = Any  # an int, or a (min, max) pair for a dynamic range


def symbolic_dims(model: onnx.ModelProto, skip: Sequence[str] = ()) -> dict[str, list[tuple[str, int]]]:
    """dim_param name -> the (input, axis) pairs that use it, in graph order."""
    out: dict[str, list[tuple[str, int]]] = {}
    for vi in _graph_inputs(model, skip):
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param and not d.HasField("dim_value"):
                out.setdefault(d.dim_param, []).append((vi.name, axis))
    return out


def _graph_inputs(model: onnx.ModelProto, skip: Sequence[str] = ()) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in model.graph.initializer} | set(skip)
    return [vi for vi in model.graph.input if vi.name not in inits and vi.type.HasField("tensor_type")]


def _users(uses: list[tuple[str, int]]) -> str:
    return ", ".join(dict.fromkeys(name for name, _ in uses))


def _as_dim(name: str, value: Any) -> Dim:
    """A named dim's value: an int, a (min, max) pair, or a one-element list of either (the CLI's
    `P=1..255` parses to [(1, 255)])."""
    v = value
    if isinstance(v, (list, tuple)) and len(v) == 1:
        v = v[0]
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(np.ndim(x) == 0 for x in v):
        return (int(v[0]), int(v[1]))
    if np.ndim(v) == 0:
        return int(v)
    raise ImportError_(f"input_dims for symbolic dim {name!r}: expected one size or a (min, max) range, got {value!r}")


def resolve_input_dims(
    model: onnx.ModelProto, input_dims: Mapping[str, Any] | None, skip: Sequence[str] = ()
) -> dict[str, list]:
    """Full dims per input name from input_dims keyed by input names and/or dim_param names.

    An input named directly keeps its dims as given; every other input that uses a named
    dim_param gets it at that axis (its fixed dims from the model, any other symbolic dim left
    for the importer's default). A name that is neither an input nor a dim_param is an error
    listing both."""
    if not input_dims:
        return {}
    inputs = {vi.name: vi for vi in _graph_inputs(model, skip)}
    syms = symbolic_dims(model, skip)
    out: dict[str, list] = {}
    named: dict[str, Dim] = {}
    for key, value in input_dims.items():
        if key in inputs:
            out[key] = list(value)
        elif key in syms:
            named[key] = _as_dim(key, value)
        else:
            unknown = [k for k in input_dims if k not in inputs and k not in syms]
            sym_text = ", ".join(f"{s!r} (used by {_users(u)})" for s, u in syms.items())
            raise ImportError_(
                f"input_dims (--input-dim) names unknown input(s) {', '.join(map(repr, unknown))}; the model's "
                f"inputs are {', '.join(map(repr, inputs)) or 'none'}; "
                + (f"its symbolic dims are {sym_text}" if sym_text else "it has no symbolic dims")
            )
    for sym, value in named.items():
        for name, axis in syms[sym]:
            if name in input_dims:
                continue  # named directly: its own dims win
            dims = out.setdefault(name, _model_dims(inputs[name]))
            dims[axis] = value
    return out


def _model_dims(vi: onnx.ValueInfoProto) -> list:
    """The model's dims for an input; symbolic ones stay None until a name or the default fills them."""
    return [int(d.dim_value) if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]


def feed_input_dims(model: onnx.ModelProto, feed: Mapping[str, Any], skip: Sequence[str] = ()) -> dict[str, list]:
    """Dims per input from a feed's arrays (keys: ONNX input names or their parameter names): the
    feed fills the symbolic dims; the model's fixed dims stay.

    A dim_param must have one size across the inputs that use it; the error names the dim, every
    input that uses it and the sizes the feed gives them."""
    inputs = _graph_inputs(model, skip)
    by_param = {param_name(vi.name): vi.name for vi in inputs}
    shapes: dict[str, tuple[int, ...]] = {}
    for key, value in feed.items():
        name = key if key in {vi.name for vi in inputs} else by_param.get(key)
        if name is not None:
            shapes[name] = tuple(int(n) for n in np.shape(value))
    for sym, uses in symbolic_dims(model, skip).items():
        sizes = {
            f"{name}[{axis}]={shapes[name][axis]}" for name, axis in uses if name in shapes and axis < len(shapes[name])
        }
        values = {s.rsplit("=", 1)[1] for s in sizes}
        if len(values) > 1:
            raise ImportError_(
                f"symbolic dim {sym!r} (used by {_users(uses)}) has different sizes in the feed: "
                f"{', '.join(sorted(sizes))}"
            )
    out = {}
    for vi in inputs:
        lens = shapes.get(vi.name)
        model = _model_dims(vi)
        if lens is None or len(lens) != len(model) or None not in model:
            continue  # fixed dims stay the model's: a feed that disagrees is reported when it is run
        out[vi.name] = [n if m is None else m for n, m in zip(lens, model)]
    return out


def importer_input_dims(
    model: onnx.ModelProto,
    input_dims: Mapping[str, Any] | None = None,
    feed: Mapping[str, Any] | None = None,
    skip: Sequence[str] = (),
) -> dict[str, list]:
    """The one place a feed and named dims become the importer's per-input dims: the feed's
    shapes first, then input_dims (by input or dim_param name) on top, so a flag overrides the feed."""
    out = feed_input_dims(model, feed, skip) if feed else {}
    out.update(resolve_input_dims(model, input_dims, skip))
    return out
