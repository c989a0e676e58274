"""Ops whose values follow dynamic shapes: `dimensions_of` and `range`.

With a dynamic input, ONNX Shape cannot become a literal at import: it is MIGraphX's
`dimensions_of{start, end}`, an int64 vector read from the runtime shape. Values computed from it
(a cache length P, positions P + arange(T)) stay ordinary ops. `range(start, limit, delta)` with
such inputs has a length known only at run time; the importer records its [min..max] length range
in `lens` (found by evaluating the inputs at both ends of the dynamic dimension), so the rest of
the dynamic module gets dynamic shapes. Once split_single_dyn_dim makes the params static, both
fold to literals (simplify_dyn_ops's dimensions_of rule, applied by passes/split_single_dyn_dim.py).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..op import GpuCode, defop
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


defop(
    "dimensions_of",
    _dimensions_of_shape,
    _dimensions_of_compute,
    attrs=[A("start", "int", 0), A("end", "int", None)],
    nargs=1,
    doc="The input's runtime dims[start:end] as int64 (ONNX Shape of a dynamic input).",
    gpu=GpuCode.host("reads runtime dims; split_single_dyn_dim folds it to a literal before the GPU pipelines"),
)


def _range_shape(op, s, mods):
    lo, hi = op["lens"]
    if hi < lo or lo < 0:
        raise ShapeError(f"range: bad length range [{lo}..{hi}]")
    t = s[0].type
    return Shape.of(t, [lo]) if lo == hi else Shape.dynamic(t, [DynDim(lo, hi)])


def _range_compute(op, a, out, run):
    start, limit, delta = (np.asarray(v).reshape(()) for v in a)
    return np.arange(start, limit, delta).astype(start.dtype)


defop(
    "range",
    _range_shape,
    _range_compute,
    attrs=[A("lens", "ints", (0, 0), show=True)],
    nargs=3,
    doc="arange(start, limit, delta) of runtime scalars; `lens` is the [min, max] length it can have.",
    gpu=GpuCode.host("a length known only at run time; split_single_dyn_dim folds static cases to literals"),
)


# --- concat_past_present ------------------------------------------------------------------------
def _cpp_shape(op, s, mods):
    new, past_len, cache = s
    axis = op["axis"]
    if new.type != cache.type or new.ndim != cache.ndim or not 0 <= axis < cache.ndim:
        raise ShapeError(f"concat_past_present: cannot write {new} into {cache} along axis {axis}")
    others_differ = any(a != b for d, (a, b) in enumerate(zip(new.lens, cache.lens)) if d != axis)
    if others_differ or new.lens[axis] > cache.lens[axis]:
        raise ShapeError(f"concat_past_present: {new} does not fit in {cache} along axis {axis}")
    if past_len.elements() != 1 or past_len.dtype.is_float:
        raise ShapeError(f"concat_past_present: past length must be one integer, got {past_len}")
    return cache


def _cpp_compute(op, a, out, run):
    new, past_len, cache = (np.asarray(v) for v in a)
    axis, p = op["axis"], int(past_len.reshape(-1)[0])
    res = cache.copy()
    if not 0 <= p <= cache.shape[axis] - new.shape[axis]:
        return res  # no room: the write is dropped, as the kernel's guard does (callers check the length)
    idx = [slice(None)] * cache.ndim
    idx[axis] = slice(p, p + new.shape[axis])
    res[tuple(idx)] = new
    return res


defop(
    "concat_past_present",
    _cpp_shape,
    _cpp_compute,
    attrs=[A("axis", "int", 2, show=True)],
    nargs=3,
    traits={"in_place"},
    doc="KV cache append: write `new` into `cache` (input 2, updated in place on the GPU) at offset "
    "past_len (input 1, a runtime integer) along `axis` (a write that does not fit is dropped); the "
    "result is the cache. Named after MIGraphX's GroupQueryAttention helper op that appends to a "
    "preallocated KV cache.",
    gpu=GpuCode.kernel("concat_past_present"),
    made_by="migx_explore.compiler.kv_cache.kv_cache_bucket",
)
