"""Quantized models built in code, the way users bring them: a small ResNet-like float model
quantized by onnxruntime.quantization.quantize_static (QDQ format, per-channel int8 weights,
uint8 or int8 activations with zero points, MinMax calibration), and QOperator-format graphs
(QLinearConv / QLinearMatMul, per-tensor and per-channel, N-D)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _init(name: str, a: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(a), name)


def resnet_like(seed: int = 0, *, classes: int = 10, hw: int = 16) -> onnx.ModelProto:
    """conv-relu stem, two residual blocks (conv-relu-conv + skip, relu), global average pool,
    flatten, Gemm. The ReLUs after convs are the ones ORT's quantizer folds into the uint8 clamp."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def w(name: str, *shape: int, scale: float) -> str:
        inits.append(_init(name, (rng.standard_normal(shape) * scale).astype(np.float32)))
        return name

    def conv(x: str, cin: int, cout: int, tag: str, k: int = 3, stride: int = 1) -> str:
        nodes.append(helper.make_node(
            "Conv", [x, w(f"{tag}_w", cout, cin, k, k, scale=(2.0 / (cin * k * k)) ** 0.5),
                     w(f"{tag}_b", cout, scale=0.1)], [f"{tag}_y"],
            kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride]))
        return f"{tag}_y"

    def relu(x: str) -> str:
        nodes.append(helper.make_node("Relu", [x], [f"{x}_relu"]))
        return f"{x}_relu"

    x = relu(conv("input", 3, 8, "stem"))
    for i, (cin, cout, stride) in enumerate([(8, 8, 1), (8, 16, 2)]):
        y = relu(conv(x, cin, cout, f"b{i}c1", stride=stride))
        y = conv(y, cout, cout, f"b{i}c2")
        skip = x if (cin == cout and stride == 1) else conv(x, cin, cout, f"b{i}sk", k=1, stride=stride)
        nodes.append(helper.make_node("Add", [y, skip], [f"b{i}_sum"]))
        x = relu(f"b{i}_sum")
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
    nodes.append(helper.make_node("Gemm", ["flat", w("fc_w", classes, 16, scale=0.3), w("fc_b", classes, scale=0.1)],
                                  ["logits"], transB=1))
    g = helper.make_graph(nodes, "resnet_like", [helper.make_tensor_value_info("input", F, [1, 3, hw, hw])],
                          [helper.make_tensor_value_info("logits", F, [1, classes])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def image_batches(n: int, seed: int = 1, hw: int = 16) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 3, hw, hw)).astype(np.float32) for _ in range(n)]


def quantize_qdq(model: onnx.ModelProto, calibration: list[np.ndarray], *, activation: str = "uint8",
                 per_channel: bool = True) -> onnx.ModelProto:
    """onnxruntime.quantization.quantize_static in QDQ format with MinMax calibration; activations
    uint8 (asymmetric, zero points) or int8 (ORT's default for int8 is symmetric: zero point 0
    unless ActivationSymmetric is turned off, which we do to get zero points)."""
    import tempfile
    from pathlib import Path

    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter([{"input": x} for x in calibration])

        def get_next(self):
            return next(self._it, None)

    act = QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "f.onnx", Path(d) / "q.onnx"
        onnx.save(model, src)
        quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                        activation_type=act, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax,
                        extra_options={"ActivationSymmetric": False, "WeightSymmetric": True})
        return onnx.load(str(dst))
