"""Ops whose values follow dynamic shapes: `dimensions_of` and `range`.

With a dynamic input, ONNX Shape cannot become a literal at import: it is MIGraphX's
`dimensions_of{start, end}`, an int64 vector read from the runtime shape. Values computed from it
(a cache length P, positions P + arange(T)) stay ordinary ops. `range(start, limit, delta)` with
such inputs has a length known only at run time; the importer records its [min..max] length range
in `lens` (found by evaluating the inputs at both ends of the dynamic dimension), so the rest of
the dynamic module gets dynamic shapes. Once split_single_dyn_dim makes the params static, both
fold to literals (simplify_dyn_ops's dimensions_of rule; see passes/dynamic_shapes.py).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..op import defop
from ..shape import DynDim, Shape
from .common import A


def _dims_slice(op, ndim: int) -> slice:
    end = op["end"]
    return slice(op["start"], ndim if end is None else end)


def _dimensions_of_shape(op, s, mods):
    x = s[0]
    n = len(range(*_dims_slice(op, x.ndim).indices(x.ndim)))
    return Shape.of("int64", [n])


def _dimensions_of_compute(op, a, out, run):
    x = np.asarray(a[0])
    return np.asarray(x.shape[_dims_slice(op, x.ndim)], dtype=np.int64)


defop("dimensions_of", _dimensions_of_shape, _dimensions_of_compute,
      attrs=[A("start", "int", 0), A("end", "int", None)], nargs=1,
      doc="The input's runtime dims[start:end] as int64 (ONNX Shape of a dynamic input).")


def _range_shape(op, s, mods):
    lo, hi = op["lens"]
    if hi < lo or lo < 0:
        raise ShapeError(f"range: bad length range [{lo}..{hi}]")
    t = s[0].type
    return Shape.of(t, [lo]) if lo == hi else Shape.dynamic(t, [DynDim(lo, hi)])


def _range_compute(op, a, out, run):
    start, limit, delta = (np.asarray(v).reshape(()) for v in a)
    return np.arange(start, limit, delta).astype(start.dtype)


defop("range", _range_shape, _range_compute, attrs=[A("lens", "ints", (0, 0), show=True)], nargs=3,
      doc="arange(start, limit, delta) of runtime scalars; `lens` is the [min, max] length it can have.")
