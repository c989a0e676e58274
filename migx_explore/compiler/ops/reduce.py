"""Reductions (reduced axes kept as size 1, as in MIGraphX), softmax, logsoftmax, argmax/argmin."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A, norm_axes, norm_axis, normalizer


def _reduce_shape(op, s, m):
    x = s[0]
    axes = norm_axes(op["axes"], x.ndim, op.name)
    lens = [1 if i in axes else n for i, n in enumerate(x.lens)]
    return Shape.of(x.type, lens)


def _acc(x: np.ndarray) -> np.ndarray:
    # Accumulate small float types in float32 (as the GPU kernels do) and everything else natively.
    return x.astype(np.float32) if dtypes.is_low_float(x.dtype) else x


def _reduce(name: str, fn, doc: str = "", made_by: str = ""):
    def compute(op, args, out, run):
        x = args[0]
        axes = norm_axes(op["axes"], x.ndim, name)
        if not axes:
            return x
        return fn(_acc(x), axis=axes, keepdims=True)

    defop(
        name,
        _reduce_shape,
        compute,
        attrs=[A("axes", "ints", (), show=True)],
        traits={"reduce"},
        nargs=1,
        normalize=normalizer(axes="axes"),
        doc=doc,
        gpu=GpuCode.kernel("reduce"),
        made_by=made_by,
    )


_reduce("reduce_sum", np.sum)
_reduce("reduce_mean", np.mean)
_reduce("reduce_max", np.max)
_reduce("reduce_min", np.min)
_reduce("reduce_prod", np.prod)
_reduce("reduce_any", np.any, made_by="ir")  # MIGraphX has them; no ONNX op maps to them
_reduce("reduce_all", np.all, made_by="ir")


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    xf = _float(x)
    e = np.exp(xf - np.max(xf, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _logsoftmax(x: np.ndarray, axis: int) -> np.ndarray:
    xf = _float(x)
    sh = xf - np.max(xf, axis=axis, keepdims=True)
    return sh - np.log(np.sum(np.exp(sh), axis=axis, keepdims=True))


def _float(x: np.ndarray) -> np.ndarray:
    # float32 and float64 as they are (the max is subtracted first, so exp cannot overflow);
    # narrower floats and integers in float32, as the GPU kernels accumulate
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)


for _name, _fn in (("softmax", _softmax), ("logsoftmax", _logsoftmax)):
    defop(
        _name,
        lambda op, s, m: Shape.of(s[0].type, s[0].lens),
        (lambda f: lambda op, a, out, run: f(a[0], norm_axis(op["axis"], a[0].ndim, op.name)))(_fn),
        attrs=[A("axis", "int", 1, show=True)],
        traits={"reduce"},
        nargs=1,
        normalize=normalizer(axis="axis"),
        gpu=GpuCode.kernel("reduce"),
    )


def _arg_shape(op, s, m):
    x = s[0]
    axis = norm_axis(op["axis"], x.ndim, op.name)
    return Shape.of("int64", [1 if i == axis else n for i, n in enumerate(x.lens)])


def _arg(fn):
    def compute(op, args, out, run):
        x = args[0]
        axis = norm_axis(op["axis"], x.ndim, op.name)
        if op["select_last_index"]:
            flipped = np.flip(x, axis=axis)
            idx = x.shape[axis] - 1 - fn(flipped, axis=axis)
        else:
            idx = fn(x, axis=axis)
        return np.expand_dims(idx, axis).astype(np.int64)

    return compute


for _name, _fn in (("argmax", np.argmax), ("argmin", np.argmin)):
    defop(
        _name,
        _arg_shape,
        _arg(_fn),
        attrs=[A("axis", "int", 0, show=True), A("select_last_index", "bool", False)],
        traits={"reduce"},
        nargs=1,
        normalize=normalizer(axis="axis"),
        gpu=GpuCode.kernel("reduce"),
    )
