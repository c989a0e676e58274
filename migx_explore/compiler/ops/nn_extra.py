"""More compute ops: convolution_backwards (transposed convolution, ONNX ConvTranspose), lrn,
and the quantization pair quantizelinear / dequantizelinear (MIGraphX names and semantics: scale
and zero point arrive already broadcast to the input's lens)."""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A, same_lens, same_type
from .nn import conv_params


# --- convolution_backwards ----------------------------------------------------------------------
def _deconv_shape(op, s, m):
    x, w = s
    t = same_type("convolution_backwards", s)
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ShapeError(f"convolution_backwards: input {list(x.lens)} and weights {list(w.lens)} need equal rank >= 3")
    nd = x.ndim - 2
    g = op["group"]
    pb, pe, st, dl = conv_params(op, nd)
    if g <= 0 or x.lens[1] != w.lens[0] or w.lens[0] % g:
        raise ShapeError(
            f"convolution_backwards: input channels {x.lens[1]} must equal weight dim 0 "
            f"{w.lens[0]} and divide by group {g}"
        )
    out = [x.lens[0], w.lens[1] * g]
    for i in range(nd):
        n = (x.lens[2 + i] - 1) * st[i] + dl[i] * (w.lens[2 + i] - 1) + 1 - pb[i] - pe[i]
        if n <= 0:
            raise ShapeError(
                f"convolution_backwards: padding {op['padding']} leaves no output for input "
                f"{list(x.lens)} and kernel {list(w.lens[2:])}"
            )
        out.append(n)
    return Shape.of(t, out)


def _deconv_compute(op, args, out, run):
    x, w = args
    nd = x.ndim - 2
    pb, pe, st, dl = conv_params(op, nd)
    g = op["group"]
    acc = np.float32 if dtypes.is_low_float(x.dtype) else np.result_type(x.dtype, w.dtype)
    n, c = x.shape[:2]
    cg, kg = c // g, w.shape[1]
    kernel = w.shape[2:]
    full = [(x.shape[2 + i] - 1) * st[i] + dl[i] * (kernel[i] - 1) + 1 for i in range(nd)]
    res = np.zeros((n, g, kg, *full), dtype=acc)
    xg = x.astype(acc).reshape(n, g, cg, *x.shape[2:])
    wg = w.astype(acc).reshape(g, cg, kg, *kernel)
    # Each kernel tap scatters a strided copy of (x . w[tap]) into the output: prod(kernel) einsums.
    for tap in itertools.product(*(range(k) for k in kernel)):
        contrib = np.einsum("ngc...,gck->ngk...", xg, wg[(slice(None), slice(None), slice(None)) + tap])
        where = tuple(
            slice(tap[i] * dl[i], tap[i] * dl[i] + (x.shape[2 + i] - 1) * st[i] + 1, st[i]) for i in range(nd)
        )
        res[(slice(None), slice(None), slice(None)) + where] += contrib
    res = res.reshape(n, g * kg, *full)
    crop = tuple(slice(pb[i], full[i] - pe[i]) for i in range(nd))
    return res[(slice(None), slice(None)) + crop]


defop(
    "convolution_backwards",
    _deconv_shape,
    _deconv_compute,
    attrs=[
        A(
            "padding",
            "ints",
            (0, 0),
            show=True,
            doc="cropped from the full output: per spatial dim, or begins then ends",
        ),
        A("stride", "ints", (1, 1), show=True),
        A("dilation", "ints", (1, 1)),
        A("group", "int", 1),
        A("padding_mode", "int", 0),
    ],
    nargs=2,
    doc="Transposed convolution; weights (C, K/group, *kernel) as in ONNX ConvTranspose.",
    gpu=GpuCode.kernel("convolution_backwards"),
)


# --- lrn ----------------------------------------------------------------------------------------
def _lrn_compute(op, args, out, run):
    x = args[0]
    size = op["size"]
    xf = x.astype(np.float64)
    sq = np.square(xf)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.pad(sq, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    total = sum(padded[:, k : k + x.shape[1]] for k in range(size))
    return xf / np.power(op["bias"] + op["alpha"] / size * total, op["beta"])


def _lrn_shape(op, s, m):
    if s[0].ndim < 2 or op["size"] <= 0:
        raise ShapeError(f"lrn: needs rank >= 2 and a positive size, got {list(s[0].lens)}, size {op['size']}")
    return Shape.of(s[0].type, s[0].lens)


defop(
    "lrn",
    _lrn_shape,
    _lrn_compute,
    attrs=[
        A("alpha", "float", 0.0001),
        A("beta", "float", 0.75),
        A("bias", "float", 1.0),
        A("size", "int", 1, show=True),
    ],
    nargs=1,
    doc="Local response normalization across channels (axis 1).",
    gpu=GpuCode.kernel("lrn"),
)


# --- quantizelinear / dequantizelinear ----------------------------------------------------------
def _quant_shape(op, s, m):
    x, scale = s[0], s[1]
    same_lens("quantizelinear", s)
    if not x.dtype.is_float and x.type != "int32":
        raise ShapeError(f"quantizelinear: input must be float or int32, got {x.type}")
    if not scale.dtype.is_float:
        raise ShapeError(f"quantizelinear: scale must be float, got {scale.type}")
    t = s[2].type if len(s) == 3 else op["out_type"]
    if (dtypes.dtype(t).is_float and t not in FP8_TYPES) or t == "bool":
        raise ShapeError(f"quantizelinear: output type {t} is not an integer, float8 or float4 type")
    return Shape.of(t, x.lens)


# Quantized float types (float8, float4): saturate to their finite range instead of rounding to an
# integer (e8m0 holds scales, not quantized data).
FP8_TYPES = {
    n: dtypes.float_max(n)
    for n in sorted(dtypes.LOW_PRECISION)
    if dtypes.dtype(n).is_float and n != "float8e8m0" and dtypes.BY_NAME[n].np_dtype is not None
}


def _quant_compute(op, args, out, run):
    # Divide in the inputs' own float type (float32 for float32 models), as ONNX runtimes do: a
    # float64 quotient can land on the other side of a .5 tie and round differently.
    ft = np.result_type(args[0].dtype, args[1].dtype, np.float32)
    x, scale = args[0].astype(ft), args[1].astype(ft)
    zp = args[2].astype(np.float64) if len(args) == 3 else 0.0
    if out.type in FP8_TYPES:  # ONNX saturate=1: clip to the finite range, then round to fp8
        limit = FP8_TYPES[out.type]
        return np.clip((x / scale).astype(np.float32) + np.float32(zp), -limit, limit)
    lo, hi = dtypes.int_limits(out.type)  # int4 / uint4 too
    q = np.rint(x / scale).astype(np.float64) + zp  # rint: round half to even, as ONNX asks
    return np.clip(q, lo, hi).astype(dtypes.np_dtype(out.type))


defop(
    "quantizelinear",
    _quant_shape,
    _quant_compute,
    attrs=[A("out_type", "type", "uint8")],
    nargs=(2, 3),
    doc="saturate(round(x / scale) + zero_point); output type from zero_point, else out_type.",
    gpu=GpuCode.kernel("pointwise"),
)


def _dequant_shape(op, s, m):
    same_lens("dequantizelinear", s)
    if len(s) == 3 and s[2].type != s[0].type:
        raise ShapeError(f"dequantizelinear: zero point type {s[2].type} differs from input {s[0].type}")
    if not s[1].dtype.is_float:
        raise ShapeError(f"dequantizelinear: scale must be float, got {s[1].type}")
    return Shape.of(s[1].type, s[0].lens)


def _dequant_compute(op, args, out, run):
    x = args[0].astype(np.float64)
    zp = args[2].astype(np.float64) if len(args) == 3 else 0.0
    return ((x - zp) * args[1].astype(np.float64)).astype(args[1].dtype)


defop(
    "dequantizelinear",
    _dequant_shape,
    _dequant_compute,
    nargs=(2, 3),
    doc="(x - zero_point) * scale, in the scale's type.",
    gpu=GpuCode.kernel("pointwise"),
)
