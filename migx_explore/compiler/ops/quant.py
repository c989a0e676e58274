"""Quantized compute ops made by simplify_qdq: int8 x int8 -> int32 and fp8 x fp8 -> float32
`quant_dot` and `quant_convolution` (MIGraphX names), and `capture`, the calibration probe that
quantize_int8 / quantize_fp8 insert. quantizelinear / dequantizelinear live in nn_extra.py."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..op import GpuCode, defop, get_spec
from ..shape import Shape
from .common import A

_QUANT_TYPES = ("int8", "uint8", "float8e4m3fn")


def _accumulator(name: str, s) -> str:
    """int32 for 8-bit integers, float32 for fp8 (MIGraphX's quant_dot output types)."""
    for x in s[:2]:
        if x.type not in _QUANT_TYPES:
            raise ShapeError(f"{name}: inputs must be int8, uint8 or float8e4m3fn, got {x.type}")
    if len({x.type == "float8e4m3fn" for x in s[:2]}) != 1:
        raise ShapeError(f"{name}: cannot mix fp8 and integer inputs ({s[0].type}, {s[1].type})")
    return "float32" if s[0].type == "float8e4m3fn" else "int32"


def _like(base: str):
    """Shape and compute of the float op `base`, with int32 output and int32 accumulation."""
    spec = get_spec(base)

    def shape(op, s, m):
        acc = _accumulator(op.name, s)
        out = spec.shape(op, s, m)
        return Shape(  # keep the base op's layout (and dynamic dims), only the type changes
            acc, out.lens, out.strides, out.dyn_dims
        )

    def compute(op, args, out, run):
        acc = np.int32 if out.type == "int32" else np.float32
        return spec.compute(op, [np.asarray(a).astype(acc) for a in args], out, run)

    return spec, shape, compute


_dot, _dot_shape, _dot_compute = _like("dot")
defop(
    "quant_dot",
    _dot_shape,
    _dot_compute,
    nargs=2,
    doc="int8 (fp8) matrix product with int32 (float32) accumulation and output; a dequantizelinear rescales it.",
    gpu=GpuCode.kernel("quant_gemm"),
    made_by="simplify_qdq",
)

_conv, _conv_shape, _conv_compute = _like("convolution")
defop(
    "quant_convolution",
    _conv_shape,
    _conv_compute,
    attrs=_conv.attrs,
    nargs=2,
    normalize=_conv.normalize,
    doc="int8 (fp8) convolution with int32 (float32) accumulation and output; attributes as convolution.",
    gpu=GpuCode.kernel("convolution"),
    made_by="simplify_qdq",
)


defop(
    "capture",
    lambda op, s, m: s[0],
    lambda op, args, out, run: args[0],
    attrs=[A("ins_index", "int", 0, show=True)],
    nargs=1,
    doc="Calibration probe (MIGraphX op::capture): passes its input through; quantize_8bits reads the "
    "values seen here on the calibration feeds and replaces it with a quantize/dequantize pair.",
    gpu=GpuCode.host("a calibration probe: quantize_8bits replaces it before the GPU pipelines run"),
    made_by="capture_arguments",
)
