"""Quantized compute ops made by simplify_qdq: int8 x int8 -> int32 `quant_dot` and
`quant_convolution` (MIGraphX names). quantizelinear / dequantizelinear live in nn_extra.py."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..op import GpuCode, defop, get_spec
from ..shape import Shape

_QUANT_TYPES = ("int8", "uint8")


def _check_types(name: str, s) -> None:
    for x in s[:2]:
        if x.type not in _QUANT_TYPES:
            raise ShapeError(f"{name}: inputs must be int8 or uint8, got {x.type}")


def _like(base: str):
    """Shape and compute of the float op `base`, with int32 output and int32 accumulation."""
    spec = get_spec(base)

    def shape(op, s, m):
        _check_types(op.name, s)
        out = spec.shape(op, s, m)
        return Shape(  # keep the base op's layout (and dynamic dims), only the type changes
            "int32", out.lens, out.strides, out.dyn_dims)

    def compute(op, args, out, run):
        return spec.compute(op, [np.asarray(a).astype(np.int32) for a in args], out, run)

    return spec, shape, compute


_dot, _dot_shape, _dot_compute = _like("dot")
defop("quant_dot", _dot_shape, _dot_compute, nargs=2,
      doc="int8 matrix product with int32 accumulation and output (a dequantizelinear rescales it).",
      gpu=GpuCode.host("int8 GEMM: no int8 BLAS path or generated kernel yet"))

_conv, _conv_shape, _conv_compute = _like("convolution")
defop("quant_convolution", _conv_shape, _conv_compute, attrs=_conv.attrs, nargs=2,
      doc="int8 convolution with int32 accumulation and output; attributes as convolution.",
      gpu=GpuCode.host("int8 convolution: no generated kernel yet"))
