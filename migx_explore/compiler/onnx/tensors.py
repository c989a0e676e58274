"""ONNX tensors and types -> numpy arrays and IR element types."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from .. import dtypes
from ..errors import ImportError_


def ir_type(code: int, what: str) -> str:
    """IR element type for an ONNX TensorProto.DataType code, or a clear error naming `what`."""
    t = dtypes.BY_ONNX.get(int(code))
    if t is None:
        name = (
            onnx.TensorProto.DataType.Name(int(code)) if int(code) in onnx.TensorProto.DataType.values() else str(code)
        )
        raise ImportError_(f"{what}: element type {name} is not supported (supported: {', '.join(dtypes.ALL_NAMES)})")
    return t.name


def supported_type(code: int) -> bool:
    return int(code) in dtypes.BY_ONNX


def to_array(t: onnx.TensorProto, what: str) -> np.ndarray:
    """numpy value of a TensorProto (external data must already be loaded)."""
    want = ir_type(t.data_type, what)
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 - onnx raises assorted types for corrupt tensors
        raise ImportError_(f"{what}: cannot decode tensor data ({e})") from None
    npd = dtypes.np_dtype(want)
    return arr if arr.dtype == npd else arr.astype(npd)
