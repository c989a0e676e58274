"""`resize`: ONNX Resize semantics (nearest / linear / cubic, every coordinate transformation mode,
antialias, tf_crop_and_resize extrapolation) as one op, named and attributed like MIGraphX's.

Interpolation is separable, so the reference compute resamples one axis at a time: per axis it
builds an (out, taps) table of source indices and weights and does one take + weighted sum. This
mirrors onnx.reference's vectorized Resize, which the conformance suite compares against.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A

MODES = ("nearest", "linear", "cubic")
COORD_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
    "tf_half_pixel_for_nn",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_shape(op, s, m):
    x = s[0]
    sizes, scales, roi = op["sizes"], op["scales"], op["roi"]
    if sizes and len(sizes) != x.ndim:
        raise ShapeError(f"resize: sizes {sizes} needs {x.ndim} values for input {list(x.lens)}")
    if scales and len(scales) != x.ndim:
        raise ShapeError(f"resize: scales {scales} needs {x.ndim} values for input {list(x.lens)}")
    if not sizes and not scales:
        raise ShapeError("resize: needs sizes or scales")
    if scales and any(v <= 0 for v in scales):
        raise ShapeError(f"resize: scales must be positive, got {scales}")
    if roi and len(roi) != 2 * x.ndim:
        raise ShapeError(f"resize: roi {roi} needs {2 * x.ndim} values (starts then ends)")
    if op["coordinate_transformation_mode"] == "tf_crop_and_resize" and not roi:
        raise ShapeError("resize: tf_crop_and_resize needs a roi")
    lens = sizes if sizes else [int(math.floor(n * f)) for n, f in zip(x.lens, scales)]
    if x.type == "bool":
        raise ShapeError("resize: bool input is not supported")
    return Shape.of(x.type, lens)


def _source_coords(mode: str, y: np.ndarray, scale: float, n_in: int, n_out: int, roi) -> np.ndarray:
    out_w = scale * n_in  # the unrounded output width some modes use
    if mode == "align_corners":
        # The output's integer length, as ONNX Runtime and MIGraphX read the spec's length_resized
        # (onnx.reference uses scale * n_in: downsampling 4 by 0.6 maps output 1 to 2.14, not 3).
        return np.zeros_like(y) if n_out == 1 else y * (n_in - 1) / (n_out - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi
        base = np.full_like(y, (hi - lo) * (n_in - 1) / 2) if out_w == 1 else y * (hi - lo) * (n_in - 1) / (out_w - 1)
        return base + lo * (n_in - 1)
    if mode == "pytorch_half_pixel":
        # One output pixel reads source 0 (the spec's "length_resized > 1 ? ... : 0"; ONNX Runtime
        # and MIGraphX test the integer output length).
        return np.zeros_like(y) if n_out == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / out_w)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5  # half_pixel


def _coeffs(op, ratio: np.ndarray, scale: float) -> np.ndarray:
    """(out, taps) interpolation weights for the fractional positions `ratio` in (0, 1]."""
    mode = op["mode"]
    r = ratio[:, None]
    if mode == "nearest":
        whole = ratio == 1.0
        nm = op["nearest_mode"]
        right = {
            "round_prefer_floor": ratio > 0.5,
            "round_prefer_ceil": ratio >= 0.5,
            "floor": np.zeros_like(whole),
            "ceil": np.ones_like(whole),
        }[nm] | whole
        return np.stack([~right, right], axis=1).astype(np.float64)
    if op["antialias"] and scale < 1.0:
        if mode == "linear":
            start = int(math.floor(-1 / scale) + 1)
            args = (np.arange(start, start + 2 - 2 * start)[None, :] - r) * scale
            c = np.clip(1 - np.abs(args), 0, 1)
        else:
            start = int(math.floor(-2 / scale) + 1)
            c = _cubic_kernel(scale * (np.arange(start, 2 - start)[None, :] - r), op["cubic_coeff_a"])
        return c / c.sum(axis=1, keepdims=True)
    if mode == "linear":
        return np.concatenate([1 - r, r], axis=1)
    return _cubic_kernel(np.concatenate([r + 1, r, 1 - r, 2 - r], axis=1), op["cubic_coeff_a"])


def _cubic_kernel(x: np.ndarray, a: float) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def axis_taps(op, scale: float, n_in: int, n_out: int, roi) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source coords, idx, weights) for resampling one axis: `idx` and `weights` have shape
    (n_out, taps); idx is not clamped yet (out-of-range taps read the edge). The GPU code
    generator builds its tables from this too, so both resample identically."""
    ctm = op["coordinate_transformation_mode"]
    x = _source_coords(ctm, np.arange(n_out, dtype=np.float64), scale, n_in, n_out, roi)
    x_int = np.floor(x)
    ratio = np.where(x == x_int, 1.0, x - x_int)  # ONNX prefers the left pixel: ratio in (0, 1]
    c = _coeffs(op, ratio, scale)
    taps = c.shape[1]
    # The `taps` source indices nearest x (ties to the smaller index), as onnx.reference picks them.
    pad = (taps + 1) // 2
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if taps % 2 == 0:
        start = p + np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        start = p + np.where(frac <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    idx = start[:, None] + np.arange(taps)[None, :] - pad
    if op["exclude_outside"]:
        c = np.where((idx < 0) | (idx >= n_in), 0.0, c)
        tot = c.sum(axis=1, keepdims=True)
        c = c / np.where(tot == 0, 1.0, tot)
    return x, idx, c


def _resize_axis(op, data: np.ndarray, axis: int, scale: float, n_out: int, roi) -> np.ndarray:
    n_in = data.shape[axis]
    ctm = op["coordinate_transformation_mode"]
    x, idx, c = axis_taps(op, scale, n_in, n_out, roi)
    if ctm != "tf_crop_and_resize" and ((c == 0) | (c == 1)).all() and (c.sum(axis=1) == 1).all():
        # One tap of weight 1 per output (nearest): the weighted sum is a gather, in the data's type.
        pick = idx[np.arange(n_out), c.argmax(axis=1)]
        return np.take(data, np.clip(pick, 0, n_in - 1), axis=axis)
    src = np.take(data, np.clip(idx, 0, n_in - 1), axis=axis)  # clamping = edge padding
    shape = (1,) * axis + c.shape + (1,) * (data.ndim - axis - 1)
    res = (src * c.reshape(shape)).sum(axis=axis + 1)
    if ctm == "tf_crop_and_resize":
        outside = ((x < 0) | (x > n_in - 1)).reshape((1,) * axis + (n_out,) + (1,) * (data.ndim - axis - 1))
        res = np.where(outside, op["extrapolation_value"], res)
    return res


def _resize_compute(op, args, out, run):
    x = args[0]
    nd = x.ndim
    sizes = list(out.lens)
    scales = list(op["scales"]) or [o / i if i else 1.0 for o, i in zip(sizes, x.shape)]
    roi = list(op["roi"]) or [0.0] * nd + [1.0] * nd
    res = x if op["mode"] == "nearest" else x.astype(np.float64)  # nearest gathers (_resize_axis)
    for axis in range(nd):
        r = (roi[axis], roi[axis + nd])
        if math.isclose(scales[axis], 1.0) and sizes[axis] == res.shape[axis] and r == (0.0, 1.0):
            continue
        if sizes[axis] == 0 or res.shape[axis] == 0:
            res = np.zeros(res.shape[:axis] + (sizes[axis],) + res.shape[axis + 1 :])
            continue
        res = _resize_axis(op, res, axis, float(scales[axis]), sizes[axis], r)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        res = np.clip(np.round(res), info.min, info.max)
    return res.astype(x.dtype)


defop(
    "resize",
    _resize_shape,
    _resize_compute,
    attrs=[
        A("sizes", "ints", (), show=True, doc="output lens (all axes)"),
        A("scales", "floats", (), doc="per-axis scale used for coordinate mapping (empty: sizes / input lens)"),
        A("mode", "str", "nearest", choices=MODES, show=True),
        A("coordinate_transformation_mode", "str", "half_pixel", choices=COORD_MODES),
        A("nearest_mode", "str", "round_prefer_floor", choices=NEAREST_MODES),
        A("cubic_coeff_a", "float", -0.75),
        A("exclude_outside", "bool", False),
        A("extrapolation_value", "float", 0.0),
        A("antialias", "bool", False),
        A("roi", "floats", (), doc="tf_crop_and_resize region: starts for every axis, then ends"),
    ],
    nargs=1,
    doc="ONNX Resize: nearest, n-linear or cubic resampling to `sizes`.",
    gpu=GpuCode.kernel("resize"),
)
