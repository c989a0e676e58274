"""Data-movement ops: gather, gathernd, scatter_*, scatternd_*, pad, reverse, prefix_scan_sum, topk,
onehot. Names and attributes follow MIGraphX (src/include/migraphx/op/*.hpp) where the semantics
match; the ONNX importer maps GatherElements, Tile, NonZero, ... onto these or onto views."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A, norm_axes, norm_axis, normalizer, same_type
from .index_checks import checked_indices


def _index_type(op: str, s: Shape) -> None:
    if s.type not in ("int32", "int64", "uint32", "uint64", "int16", "int8", "uint8", "uint16"):
        raise ShapeError(f"{op}: indices must be an integer type, got {s.type}")


def _wrap(idx: np.ndarray, n) -> np.ndarray:
    """Negative indices count from the end, without a range check (OneHot defines out-of-range
    indices; every other op checks them through checked_indices)."""
    idx = idx.astype(np.int64)
    return np.where(idx < 0, idx + n, idx)


# --- gather -------------------------------------------------------------------------------------
def _gather_shape(op, s, m):
    data, ind = s
    _index_type("gather", ind)
    if data.ndim == 0:
        raise ShapeError("gather: data must have rank >= 1")
    axis = norm_axis(op["axis"], data.ndim, "gather")
    return Shape.of(data.type, data.lens[:axis] + ind.lens + data.lens[axis + 1 :])


def _gather_compute(op, args, out, run):
    data, ind = args
    axis = norm_axis(op["axis"], data.ndim, "gather")
    return np.take(data, checked_indices(ind, data.shape[axis], "gather", axis=axis), axis=axis)


defop(
    "gather",
    _gather_shape,
    _gather_compute,
    attrs=[A("axis", "int", 0, show=True)],
    nargs=2,
    normalize=normalizer(axis="axis"),
    doc="out = data indexed by `indices` along `axis` (negative ones count from the end; outside [-n, n) refused).",
    gpu=GpuCode.kernel("gather"),
)


# --- gathernd -----------------------------------------------------------------------------------
def _gathernd_shape(op, s, m):
    data, ind = s
    _index_type("gathernd", ind)
    b = op["batch_dims"]
    if ind.ndim < 1 or b < 0 or b >= min(data.ndim, ind.ndim):
        raise ShapeError(
            f"gathernd: batch_dims {b} needs data and indices of rank > {b} "
            f"(got {list(data.lens)} and {list(ind.lens)})"
        )
    k = ind.lens[-1]
    if data.lens[:b] != ind.lens[:b]:
        raise ShapeError(f"gathernd: batch dims differ: {list(data.lens[:b])} vs {list(ind.lens[:b])}")
    if b + k > data.ndim:
        raise ShapeError(f"gathernd: index tuples of length {k} exceed data rank {data.ndim} (batch_dims {b})")
    return Shape.of(data.type, ind.lens[:-1] + data.lens[b + k :])


def _gathernd_compute(op, args, out, run):
    data, ind = args
    b = op["batch_dims"]
    k = ind.shape[-1]
    nb = int(np.prod(data.shape[:b], dtype=np.int64))
    d = data.reshape((nb,) + data.shape[b:])
    i = ind.reshape(nb, -1, k)
    coords = tuple(checked_indices(i[..., j], d.shape[1 + j], "gathernd", axis=b + j) for j in range(k))
    batch = np.arange(nb).reshape(nb, 1)
    return d[(batch,) + coords].reshape(out.lens)


defop(
    "gathernd",
    _gathernd_shape,
    _gathernd_compute,
    attrs=[A("batch_dims", "int", 0)],
    nargs=2,
    doc="ONNX GatherND: the last axis of `indices` holds coordinates into data (after batch_dims).",
    gpu=GpuCode.kernel("gathernd"),
)


# --- scatter (elements) and scatternd -----------------------------------------------------------
_REDUCERS = {"none": None, "add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_shape(name):
    def shape(op, s, m):
        data, ind, upd = s
        _index_type(name, ind)
        same_type(name, [data, upd])
        norm_axis(op["axis"], data.ndim, name)
        if ind.lens != upd.lens or ind.ndim != data.ndim:
            raise ShapeError(
                f"{name}: indices {list(ind.lens)} and updates {list(upd.lens)} must have equal lens "
                f"and the rank of data {list(data.lens)}"
            )
        return Shape.of(data.type, data.lens)

    return shape


def _scatter_compute(reduction):
    def compute(op, args, out, run):
        data, ind, upd = args
        axis = norm_axis(op["axis"], data.ndim, op.name)
        res = np.array(data, copy=True)
        coords = list(np.indices(ind.shape, sparse=True))
        coords[axis] = checked_indices(ind, data.shape[axis], op.name, axis=axis)
        return _scatter_into(res, tuple(coords), upd, reduction)

    return compute


def _scatter_into(res: np.ndarray, where: tuple, upd: np.ndarray, reduction: str) -> np.ndarray:
    """Write (or reduce, with unbuffered ufunc.at so repeated indices accumulate) `upd` at `where`."""
    fn = _REDUCERS[reduction]
    if fn is None:
        res[where] = upd
    else:
        fn.at(res, where, upd)
    return res


def _scatternd_shape(name):
    def shape(op, s, m):
        data, ind, upd = s
        _index_type(name, ind)
        same_type(name, [data, upd])
        k = ind.lens[-1] if ind.ndim else 0
        if ind.ndim < 1 or k > data.ndim:
            raise ShapeError(f"{name}: indices {list(ind.lens)} must end in a coordinate length <= rank of data")
        want = ind.lens[:-1] + data.lens[k:]
        if upd.lens != want:
            raise ShapeError(f"{name}: updates must have lens {list(want)}, got {list(upd.lens)}")
        return Shape.of(data.type, data.lens)

    return shape


def _scatternd_compute(reduction):
    def compute(op, args, out, run):
        data, ind, upd = args
        k = ind.shape[-1]
        res = np.array(data, copy=True)
        where = tuple(checked_indices(ind[..., j], data.shape[j], op.name, axis=j) for j in range(k))
        return _scatter_into(res, where, upd, reduction)

    return compute


for _red in _REDUCERS:
    defop(
        f"scatter_{_red}",
        _scatter_shape(f"scatter_{_red}"),
        _scatter_compute(_red),
        attrs=[A("axis", "int", 0, show=True)],
        nargs=3,
        normalize=normalizer(axis="axis"),
        doc=f"ONNX ScatterElements with reduction '{_red}': data with `updates` written at `indices` on axis.",
        gpu=GpuCode.kernel("scatter"),
    )
    defop(
        f"scatternd_{_red}",
        _scatternd_shape(f"scatternd_{_red}"),
        _scatternd_compute(_red),
        nargs=3,
        doc=f"ONNX ScatterND with reduction '{_red}'.",
        gpu=GpuCode.kernel("scatternd"),
    )


# --- pad ----------------------------------------------------------------------------------------
def _pad_shape(op, s, m):
    x = s[0]
    pads = op["pads"]
    if len(pads) != 2 * x.ndim:
        raise ShapeError(f"pad: pads {pads} needs {2 * x.ndim} values (begins then ends) for rank {x.ndim}")
    if any(p < 0 for p in pads):
        raise ShapeError(f"pad: negative pads {pads} (slice instead)")
    nd = x.ndim
    lens = [n + pads[i] + pads[i + nd] for i, n in enumerate(x.lens)]
    # Reflect pads wider than the dim repeat the reflection (period 2n - 2), as numpy, onnx.reference
    # and MIGraphX do; ONNX Runtime refuses them.
    if op["mode"] in ("edge", "wrap", "reflect") and any(
        (pads[i] or pads[i + nd]) and n == 0 for i, n in enumerate(x.lens)
    ):
        raise ShapeError(f"pad: {op['mode']} padding of an empty dim in {list(x.lens)}")
    return Shape.of(x.type, lens)


def _pad_compute(op, args, out, run):
    x = args[0]
    nd = x.ndim
    pads = op["pads"]
    width = [(pads[i], pads[i + nd]) for i in range(nd)]
    mode = op["mode"]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=np.asarray(op["value"]).astype(x.dtype))
    return np.pad(x, width, mode=mode)


defop(
    "pad",
    _pad_shape,
    _pad_compute,
    attrs=[
        A("pads", "ints", (), show=True, doc="begins for every axis, then ends"),
        A("value", "float", 0.0),
        A("mode", "str", "constant", choices=("constant", "reflect", "edge", "wrap")),
    ],
    nargs=1,
    doc="Pad with a constant, a reflection, the edge value, or wrap around.",
    gpu=GpuCode.kernel("pad"),
)


# --- reverse ------------------------------------------------------------------------------------
def _reverse_shape(op, s, m):
    norm_axes(op["axes"], s[0].ndim, "reverse")
    return Shape.of(s[0].type, s[0].lens)


defop(
    "reverse",
    _reverse_shape,
    lambda op, a, out, run: np.flip(a[0], norm_axes(op["axes"], a[0].ndim, "reverse")),
    attrs=[A("axes", "ints", (), show=True)],
    nargs=1,
    normalize=normalizer(axes="axes"),
    doc="Reverse the element order along `axes`.",
    gpu=GpuCode.kernel("reverse"),
)


# --- prefix_scan_sum (CumSum) -------------------------------------------------------------------
def _scan_shape(op, s, m):
    norm_axis(op["axis"], s[0].ndim, "prefix_scan_sum")
    return Shape.of(s[0].type, s[0].lens)


def _scan_compute(op, args, out, run):
    x = args[0]
    axis = norm_axis(op["axis"], x.ndim, "prefix_scan_sum")
    v = np.flip(x, axis) if op["reverse"] else x
    acc = np.cumsum(v, axis=axis, dtype=x.dtype)
    if op["exclusive"]:
        acc = acc - v
    return np.flip(acc, axis) if op["reverse"] else acc


defop(
    "prefix_scan_sum",
    _scan_shape,
    _scan_compute,
    attrs=[
        A("axis", "int", 0, show=True),
        A("exclusive", "bool", False),
        A("reverse", "bool", False),
    ],
    nargs=1,
    normalize=normalizer(axis="axis"),
    doc="Cumulative sum along axis (ONNX CumSum).",
    gpu=GpuCode.kernel("prefix_scan_sum"),
)


# --- topk ---------------------------------------------------------------------------------------
def _topk_shape(op, s, m):
    x = s[0]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    k = op["k"]
    if not 0 <= k <= x.lens[axis]:
        raise ShapeError(f"topk: k={k} is out of range for axis {axis} of {list(x.lens)}")
    lens = list(x.lens)
    lens[axis] = k
    return Shape.tuple_of([Shape.of(x.type, lens), Shape.of("int64", lens)])


def _topk_compute(op, args, out, run):
    x = args[0]
    axis = norm_axis(op["axis"], x.ndim, "topk")
    # A stable sort on the (negated) key keeps the lower index first among equal values, as ONNX asks.
    key = x.astype(np.float64) if x.dtype.kind in "ub" or x.dtype.itemsize < 4 else x
    key = -key if op["largest"] else key
    if dtypes.is_float_np(key.dtype):  # NaN counts as the largest value
        key = np.where(np.isnan(key), -np.inf if op["largest"] else np.inf, key)
    idx = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(op["k"]), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


defop(
    "topk",
    _topk_shape,
    _topk_compute,
    attrs=[
        A("k", "int", 1, show=True),
        A("axis", "int", -1, show=True),
        A("largest", "bool", True),
    ],
    nargs=1,
    normalize=normalizer(axis="axis"),
    doc="The k largest (or smallest) values along axis, sorted, and their int64 indices (a tuple).",
    gpu=GpuCode.kernel("topk"),
)


# --- onehot -------------------------------------------------------------------------------------
def _onehot_shape(op, s, m):
    ind, values = s
    if ind.type == "bool":
        raise ShapeError("onehot: indices must be numeric, got bool")
    if values.elements() != 2:
        raise ShapeError(f"onehot: values must hold [off, on], got {list(values.lens)}")
    depth = op["depth"]
    if depth <= 0:
        raise ShapeError(f"onehot: depth must be positive, got {depth}")
    axis = norm_axis(op["axis"], ind.ndim + 1, "onehot")
    lens = list(ind.lens)
    lens.insert(axis, depth)
    return Shape.of(values.type, lens)


def _onehot_compute(op, args, out, run):
    ind, values = args
    depth = op["depth"]
    axis = norm_axis(op["axis"], ind.ndim + 1, "onehot")
    i = _wrap(np.trunc(ind) if dtypes.is_float_np(ind.dtype) else ind, depth)
    hot = np.expand_dims(i, axis) == np.arange(depth).reshape([-1 if d == axis else 1 for d in range(ind.ndim + 1)])
    flat = values.reshape(-1)
    return np.where(hot, flat[1], flat[0])


def _onehot_normalize(op, inputs):
    # The axis indexes the output, which has one more dim than the indices.
    return op.with_(axis=norm_axis(op["axis"], inputs[0].ndim + 1, "onehot"))


defop(
    "onehot",
    _onehot_shape,
    _onehot_compute,
    attrs=[
        A("depth", "int", 1, show=True),
        A("axis", "int", -1, show=True),
    ],
    nargs=2,
    normalize=_onehot_normalize,
    doc="One-hot encode indices with values [off, on]; out-of-range indices give all `off`.",
    gpu=GpuCode.kernel("onehot"),
)


# --- nonzero ------------------------------------------------------------------------------------
def _nonzero_shape(op, s, m):
    x = s[0]
    if x.ndim == 0:
        raise ShapeError("nonzero: input must have rank >= 1")
    return Shape.tuple_of([Shape.of("int64", [x.ndim, x.elements()]), Shape.of("int64", [1])])


def _nonzero_compute(op, args, out, run):
    x = args[0]
    found = np.nonzero(x)
    coords = np.zeros((x.ndim, x.size), np.int64)
    count = len(found[0])
    coords[:, :count] = np.asarray(found, np.int64).reshape(x.ndim, count)
    return coords, np.array([count], np.int64)


defop(
    "nonzero",
    _nonzero_shape,
    _nonzero_compute,
    nargs=1,
    gpu=GpuCode.kernel("nonzero"),
    doc="Coordinates of the non-zero elements in row-major order, as MIGraphX's nonzero: a maximum-size "
    "[rank, elements] buffer, zero after the last found element, and the count (a tuple).",
)
