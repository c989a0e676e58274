"""Builtins (@param, @literal, @return) and meta ops (identity, allocate, get_tuple_elem)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A


def _no_shape(op, inputs, mods):
    raise ShapeError(f"{op.name} carries its own shape")


defop(
    "@param",
    _no_shape,
    attrs=[A("name", "str", "")],
    traits={"builtin"},
    nargs=0,
    doc="A module input; its shape is given when it is created.",
)
defop("@literal", _no_shape, attrs=[], traits={"builtin"}, nargs=0, doc="Constant data (immutable, shared).")


def _return_shape(op, inputs, mods):
    return Shape.tuple_of(inputs) if len(inputs) != 1 else inputs[0]


defop("@return", _return_shape, traits={"builtin"}, doc="Module outputs.")

defop(
    "identity",
    lambda op, s, m: s[0],
    lambda op, a, out, run: a[0],
    traits={"view"},
    nargs=1,
    output_alias=lambda op, s: 0,
    doc="Returns its input; removed by eliminate_identity.",
)


defop(
    "allocate",
    lambda op, s, m: op["shape"],
    lambda op, a, out, run: np.zeros(out.lens, dtypes.np_dtype(out.type)),
    attrs=[A("shape", "shape", Shape.scalar("float32"), show=True)],
    traits={"not_context_free"},
    nargs=0,
    doc="An uninitialised output buffer (the GPU lowering makes one per kernel output).",
    gpu=GpuCode.none("an output buffer: lowering turns it into hip::allocate"),
)


def _tuple_elem_shape(op, inputs, mods):
    s = inputs[0]
    if not s.is_tuple:
        raise ShapeError("get_tuple_elem: input is not a tuple")
    i = op["index"]
    if not 0 <= i < len(s.sub_shapes):
        raise ShapeError(f"get_tuple_elem: index {i} out of range for {len(s.sub_shapes)} elements")
    return s.sub_shapes[i]


defop(
    "get_tuple_elem",
    _tuple_elem_shape,
    lambda op, a, out, run: a[0][op["index"]],
    attrs=[A("index", "int", 0, show=True)],
    nargs=1,
    output_alias=lambda op, s: 0,
    doc="One element of a tuple value (multi-output fused ops).",
    gpu=GpuCode.none("picks one value of a tuple; no data moves"),
)
