"""Compute-heavy ops: dot, convolution, pooling."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import dtypes
from ..errors import ShapeError
from ..op import GpuCode, Op, defop
from ..shape import DynDim, Shape
from .common import A, same_type


# --- dot ----------------------------------------------------------------------------------------
def _dot_shape(op, s, m):
    a, b = s
    t = same_type("dot", s)
    if a.dyn_dims is not None or b.dyn_dims is not None:
        return _dyn_dot_shape(t, a, b)
    if a.ndim < 2 or b.ndim < 2 or a.ndim != b.ndim:
        raise ShapeError(f"dot: needs inputs of equal rank >= 2, got {list(a.lens)} and {list(b.lens)}")
    if a.lens[:-2] != b.lens[:-2]:
        raise ShapeError(f"dot: batch dimensions differ: {list(a.lens)} vs {list(b.lens)}")
    if a.lens[-1] != b.lens[-2]:
        raise ShapeError(f"dot: inner dimensions differ: {list(a.lens)} x {list(b.lens)}")
    return Shape.of(t, a.lens[:-1] + (b.lens[-1],))


def _dyn_dims(x: Shape) -> tuple[DynDim, ...]:
    return x.dyn_dims if x.dyn_dims is not None else tuple(DynDim(n, n) for n in x.lens)


def _dyn_dot_shape(t: str, a: Shape, b: Shape) -> Shape:
    """Dynamic dims (e.g. a batch range) pass through; the contracted dims must be fixed and equal."""
    da, db = _dyn_dims(a), _dyn_dims(b)
    if len(da) < 2 or len(da) != len(db):
        raise ShapeError(f"dot: needs inputs of equal rank >= 2, got {a} and {b}")
    if da[:-2] != db[:-2]:
        raise ShapeError(f"dot: batch dimensions differ: {a} vs {b}")
    if not (da[-1].is_fixed and da[-1] == db[-2]):
        raise ShapeError(f"dot: inner dimensions differ or are not fixed: {a} x {b}")
    return Shape.dynamic(t, da[:-1] + db[-1:])


def _dot_compute(op, args, out, run):
    a, b = args
    if dtypes.is_low_float(a.dtype):
        return np.matmul(a.astype(np.float32), b.astype(np.float32))
    return np.matmul(a, b)


defop(
    "dot",
    _dot_shape,
    _dot_compute,
    nargs=2,
    doc="Batched matrix product a[..., m, k] x b[..., k, n]; batch dims must match (broadcast explicitly).",
    gpu=GpuCode.kernel("gemm"),
)


# --- convolution --------------------------------------------------------------------------------
def conv_params(op, nd: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """(pad_begin, pad_end, stride, dilation), validated for `nd` spatial dims."""
    pad, stride, dil = list(op["padding"]), list(op["stride"]), list(op["dilation"])
    if len(pad) == nd:
        pb, pe = pad, pad
    elif len(pad) == 2 * nd:
        pb, pe = pad[:nd], pad[nd:]
    else:
        raise ShapeError(f"{op.name}: padding {tuple(pad)} must have {nd} or {2 * nd} values")
    if len(stride) != nd or len(dil) != nd:
        raise ShapeError(f"{op.name}: stride {tuple(stride)} and dilation {tuple(dil)} need {nd} values each")
    if any(x <= 0 for x in stride + dil):
        raise ShapeError(f"{op.name}: stride and dilation must be positive")
    return pb, pe, stride, dil


def _conv_shape(op, s, m):
    x, w = s[0], s[1]
    t = same_type("convolution", s[:2])
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ShapeError(f"convolution: input {list(x.lens)} and weights {list(w.lens)} need equal rank >= 3")
    nd = x.ndim - 2
    g = op["group"]
    pb, pe, st, dl = conv_params(op, nd)
    if x.lens[1] != w.lens[1] * g:
        raise ShapeError(f"convolution: input channels {x.lens[1]} != weight channels {w.lens[1]} x group {g}")
    if w.lens[0] % g:
        raise ShapeError(f"convolution: output channels {w.lens[0]} not divisible by group {g}")
    out = [x.lens[0], w.lens[0]]
    for i in range(nd):
        eff = dl[i] * (w.lens[2 + i] - 1) + 1
        n = (x.lens[2 + i] + pb[i] + pe[i] - eff) // st[i] + 1
        if n <= 0:
            raise ShapeError(f"convolution: kernel {list(w.lens[2:])} does not fit input {list(x.lens[2:])}")
        out.append(n)
    # The output takes the data input's memory order (NHWC in, NHWC out: layout_convolution relies
    # on it). The weights' order is not consulted: constant folding may have packed them anew.
    if x.packed() and not x.standard():
        return Shape.from_permutation(t, out, x.permutation())
    return Shape.of(t, out)


def sliding_windows(x: np.ndarray, kernel, pb, pe, st, dl, pad_value=0.0) -> np.ndarray:
    """(N, C, *out_spatial, *kernel) view of x's sliding windows."""
    nd = len(kernel)
    xp = x
    if any(pb) or any(pe):  # (np.pad does the same, at 2-4x the time on these sizes)
        xp = np.full(x.shape[:2] + tuple(n + b + e for n, b, e in zip(x.shape[2:], pb, pe)), pad_value, x.dtype)
        xp[(slice(None), slice(None)) + tuple(slice(b, b + n) for n, b in zip(x.shape[2:], pb))] = x
    span = [dl[i] * (kernel[i] - 1) + 1 for i in range(nd)]
    win = sliding_window_view(xp, span, axis=tuple(range(2, 2 + nd)))
    idx = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in st) + tuple(slice(None, None, d) for d in dl)
    return win[idx]


# Columns (im2col) at most this large are built at once; a larger set is built and multiplied in
# bands of output rows, each band's columns still in cache when its product reads them (resnet18's
# 7x7 stem writes 7.4 MB of columns at once otherwise; banded, its forward takes ~3% less time)
_COLS_BYTES = 1 << 20


def _conv_compute(op, args, out, run):
    """Convolution as one matrix product per group (im2col): every output position's window,
    C/group x kernel values, is a column; each filter is a row of the weights."""
    x, w = args[0], args[1]
    nd = x.ndim - 2
    pb, pe, st, dl = conv_params(op, nd)
    g = op["group"]
    acc = np.float32 if dtypes.is_low_float(x.dtype) else None
    xa = x.astype(acc) if acc else x
    wa = w.astype(acc) if acc else w
    win = sliding_windows(xa, w.shape[2:], pb, pe, st, dl)  # N C O.. K..
    n, c = x.shape[:2]
    out_spatial = win.shape[2 : 2 + nd]
    taps = int(np.prod(w.shape[2:], dtype=np.int64))
    win = win.reshape((n, g, c // g) + win.shape[2:])  # N G C/g O.. K..
    k_axes = tuple(range(3 + nd, 3 + 2 * nd))
    cols = np.moveaxis(win, k_axes, tuple(range(3, 3 + nd)))  # N G C/g K.. O.. (a view)
    filters = wa.reshape(g, w.shape[0] // g, -1)  # G F C/g*K
    rows = (c // g) * taps  # of the column matrix
    row_positions = int(np.prod(out_spatial[1:], dtype=np.int64))  # per row of the first output axis
    band = max(1, _COLS_BYTES // max(1, n * c * taps * row_positions * xa.dtype.itemsize))
    if band >= out_spatial[0]:  # the im2col copy (none for a 1x1 convolution), one product
        return np.matmul(filters, cols.reshape(n, g, rows, -1)).reshape((n, w.shape[0]) + out_spatial)
    res = np.empty((n, g, w.shape[0] // g) + out_spatial, np.result_type(filters, cols))
    for r0 in range(0, out_spatial[0], band):
        r1 = min(r0 + band, out_spatial[0])
        part = cols[(Ellipsis, slice(r0, r1)) + (slice(None),) * (nd - 1)].reshape(n, g, rows, -1)
        res[:, :, :, r0:r1] = np.matmul(filters, part).reshape(res[:, :, :, r0:r1].shape)
    return res.reshape((n, w.shape[0]) + out_spatial)


_CONV_ATTRS = [
    A("padding", "ints", (0, 0), show=True, doc="per spatial dim, or begins then ends"),
    A("stride", "ints", (1, 1), show=True),
    A("dilation", "ints", (1, 1)),
    A("group", "int", 1),
    A("padding_mode", "int", 0),
]


def normalize_padding(op: Op, shapes) -> Op:
    """MIGraphX normalize_padding: a symmetric `padding` (one value per spatial axis) is written
    out as begin and end values, unless padding_mode computes the padding."""
    if "padding_mode" in op.attrs and op["padding_mode"] != 0:
        return op
    pad, nd = list(op["padding"]), shapes[0].ndim - 2
    return op.with_(padding=pad + pad) if nd > 0 and len(pad) == nd else op


defop(
    "convolution",
    _conv_shape,
    _conv_compute,
    attrs=_CONV_ATTRS,
    nargs=2,
    normalize=normalize_padding,
    doc="N-d convolution, NCHW-style lens; weights (K, C/group, *kernel).",
    gpu=GpuCode.kernel("convolution"),
)


# --- pooling ------------------------------------------------------------------------------------
def _pool_out(n, k, pb, pe, st, dl, ceil_mode) -> int:
    eff = dl * (k - 1) + 1
    num = n + pb + pe - eff
    if ceil_mode:
        o = -(-num // st) + 1
        # the last window must start inside the input or the begin padding (ONNX/PyTorch rule)
        if (o - 1) * st >= n + pb:
            o -= 1
        return o
    return num // st + 1


def _pool_shape(op, s, m):
    x = s[0]
    nd = x.ndim - 2
    k = list(op["lengths"])
    if len(k) != nd:
        raise ShapeError(f"pooling: lengths {tuple(k)} need {nd} values for input {list(x.lens)}")
    pb, pe, st, dl = pool_params(op, nd)
    out = list(x.lens[:2]) + [
        _pool_out(x.lens[2 + i], k[i], pb[i], pe[i], st[i], dl[i], op["ceil_mode"]) for i in range(nd)
    ]
    if any(v <= 0 for v in out[2:]):
        raise ShapeError(f"pooling: window {tuple(k)} does not fit input {list(x.lens)}")
    return Shape.of(x.type, out)


def pool_params(op, nd):
    pad = list(op["padding"]) or [0] * nd
    pb, pe = (pad, pad) if len(pad) == nd else (pad[:nd], pad[nd:])
    if len(pb) != nd or len(pe) != nd:
        raise ShapeError(f"pooling: padding {tuple(pad)} must have {nd} or {2 * nd} values")
    st = list(op["stride"]) or [1] * nd
    dl = list(op["dilations"]) or [1] * nd
    if len(st) != nd or len(dl) != nd:
        raise ShapeError(f"pooling: stride {tuple(st)} / dilations {tuple(dl)} need {nd} values")
    return pb, pe, st, dl


def _pool_compute(op, args, out, run):
    x = args[0]
    nd = x.ndim - 2
    k = list(op["lengths"])
    pb, pe, st, dl = pool_params(op, nd)
    # Extra end padding so that ceil_mode windows exist; it never counts as data.
    extra = [
        max(0, (out.lens[2 + i] - 1) * st[i] + dl[i] * (k[i] - 1) + 1 - (x.shape[2 + i] + pb[i] + pe[i]))
        for i in range(nd)
    ]
    pe2 = [pe[i] + extra[i] for i in range(nd)]
    mode = op["mode"]
    if mode == "max":  # exact in any float type; integers through float64 for the -inf padding
        xm = x if dtypes.is_float_np(x.dtype) else x.astype(np.float64)
        return _over_taps(sliding_windows(xm, k, pb, pe2, st, dl, pad_value=-np.inf), np.maximum, nd)
    xf = x.astype(np.float64)  # sums accumulate in float64
    if mode == "lpnorm":
        p = op["lp_order"]
        win = sliding_windows(np.power(np.abs(xf), p), k, pb, pe2, st, dl)
        return np.power(_over_taps(win, np.add, nd), 1.0 / p)
    total = _over_taps(sliding_windows(xf, k, pb, pe2, st, dl), np.add, nd)
    ones = np.ones((1, 1) + x.shape[2:], xf.dtype)
    if op["count_include_pad"]:
        padded = np.pad(ones, [(0, 0), (0, 0)] + list(zip(pb, pe)), constant_values=1.0)
        counted = _over_taps(sliding_windows(padded, k, [0] * nd, extra, st, dl), np.add, nd)
    else:
        counted = _over_taps(sliding_windows(ones, k, pb, pe2, st, dl), np.add, nd)
    return total / np.maximum(counted, 1)


def _over_taps(win: np.ndarray, combine: np.ufunc, nd: int) -> np.ndarray:
    """Windows (..., *kernel) reduced over their kernel taps with `combine`, one tap at a time
    (numpy's reduction over small strided trailing axes is ten times slower)."""
    taps = list(np.ndindex(win.shape[-nd:]))
    acc = np.array(win[(Ellipsis, *taps[0])])
    for t in taps[1:]:
        combine(acc, win[(Ellipsis, *t)], out=acc)
    return acc


defop(
    "pooling",
    _pool_shape,
    _pool_compute,
    attrs=[
        A("mode", "str", "average", choices=("average", "max", "lpnorm"), show=True),
        A("padding", "ints", (0, 0), show=True),
        A("stride", "ints", (1, 1), show=True),
        A("lengths", "ints", (1, 1), show=True),
        A("dilations", "ints", (1, 1)),
        A("ceil_mode", "bool", False),
        A("lp_order", "int", 2),
        A("count_include_pad", "bool", False),
    ],
    nargs=1,
    normalize=normalize_padding,
    doc="Average / max / Lp pooling over sliding windows.",
    gpu=GpuCode.kernel("pooling"),
)
