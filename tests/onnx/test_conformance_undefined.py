"""The conformance run compares a float -> 2/4-bit integer Cast only where the ONNX spec defines
the result ("fixed point: undefined if OOR"): the stored expectations of those elements follow
the generating ml_dtypes version, not the spec."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from migx_explore.compiler.onnx.conformance import _defined_only, undefined_elements
from tests.onnx.onnx_util import vi


def _cast(src: int, dst: int) -> onnx.ModelProto:
    g = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=dst)], "g", [vi("x", src, [5])], [vi("y", dst, [5])]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_out_of_range_elements_of_a_sub_byte_cast_are_undefined():
    x = np.array([-9, -8, 7, 8, np.nan], np.float32)
    mask = undefined_elements(_cast(TensorProto.FLOAT, TensorProto.INT4), [x])
    assert mask.tolist() == [True, False, False, True, True]
    uint = undefined_elements(_cast(TensorProto.FLOAT, TensorProto.UINT4), [x])
    assert uint.tolist() == [True, True, False, False, True]


def test_other_casts_compare_every_element():
    x = np.array([-9, -8, 7, 8, 300], np.float32)
    assert undefined_elements(_cast(TensorProto.FLOAT, TensorProto.INT8), [x]) is None
    assert undefined_elements(_cast(TensorProto.INT32, TensorProto.INT4), [x.astype(np.int32)]) is None


def test_defined_elements_still_decide():
    mask = np.array([True, False, False])
    ours = [np.array([7, 1, 2])]
    assert _defined_only([np.array([0, 1, 2])], ours, mask)[0].tolist() == [7, 1, 2]
    assert _defined_only([np.array([0, 1, 3])], ours, mask)[0].tolist() == [7, 1, 3]  # 3 != 2: still a failure
