"""Quantized models built in code, the way users bring them: a small ResNet-like float model
quantized by onnxruntime.quantization.quantize_static (QDQ format, per-channel int8 weights,
uint8 or int8 activations with zero points, MinMax calibration), and QOperator-format graphs
(QLinearConv / QLinearMatMul, per-tensor and per-channel, N-D).

uint8 x int8 against ORT: onnxruntime on x86 without VNNI multiplies u8 activations by s8 weights
through pmaddubsw, which saturates each pair of products in int16 (255 * 127 * 2 > 32767; ORT's
documented u8s8 limit, the reason its quantizer has reduce_range). Where ORT is the reference,
either the weights (reduce_range) or the activations (x_bits=7) are 7-bit so no pair can saturate;
the full 8-bit range is checked against the definition in float64 (qlinear_conv_exact)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _any_shape_output(name: str, elem: int) -> onnx.ValueInfoProto:
    v = helper.make_tensor_value_info(name, elem, None)
    v.type.tensor_type.shape.SetInParent()  # unknown rank; the checker wants the field present
    return v


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
        nodes.append(
            helper.make_node(
                "Conv",
                [x, w(f"{tag}_w", cout, cin, k, k, scale=(2.0 / (cin * k * k)) ** 0.5), w(f"{tag}_b", cout, scale=0.1)],
                [f"{tag}_y"],
                kernel_shape=[k, k],
                pads=[k // 2] * 4,
                strides=[stride, stride],
            )
        )
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
    nodes.append(
        helper.make_node(
            "Gemm", ["flat", w("fc_w", classes, 16, scale=0.3), w("fc_b", classes, scale=0.1)], ["logits"], transB=1
        )
    )
    g = helper.make_graph(
        nodes,
        "resnet_like",
        [helper.make_tensor_value_info("input", F, [1, 3, hw, hw])],
        [helper.make_tensor_value_info("logits", F, [1, classes])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def image_batches(n: int, seed: int = 1, hw: int = 16) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 3, hw, hw)).astype(np.float32) for _ in range(n)]


def quantize_qdq(
    model: onnx.ModelProto,
    calibration: list,
    *,
    activation: str = "uint8",
    per_channel: bool = True,
    fmt: str = "QDQ",
    reduce_range: bool = False,
) -> onnx.ModelProto:
    """onnxruntime.quantization.quantize_static in QDQ format with MinMax calibration; activations
    uint8 (asymmetric, zero points) or int8 (ORT's default for int8 is symmetric: zero point 0
    unless ActivationSymmetric is turned off, which we do to get zero points). `calibration`: image
    arrays for the "input" of resnet_like, or whole feeds (dicts). `reduce_range`: 7-bit weights,
    which a model meant to be compared with ORT on x86 needs (the module docstring says why)."""
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
            self._it = iter([x if isinstance(x, dict) else {"input": x} for x in calibration])

        def get_next(self):
            return next(self._it, None)

    act = QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "f.onnx", Path(d) / "q.onnx"
        onnx.save(model, src)
        quantize_static(
            str(src),
            str(dst),
            Reader(),
            quant_format=getattr(QuantFormat, fmt),
            per_channel=per_channel,
            activation_type=act,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            reduce_range=reduce_range,
            extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
        )
        return onnx.load(str(dst))


def quantize_qoperator(
    model: onnx.ModelProto, calibration: list, *, activation: str = "uint8", reduce_range: bool = False
) -> onnx.ModelProto:
    """The same quantizer in QOperator format: QLinearConv, QLinearMatMul, com.microsoft QLinearAdd /
    QLinearGlobalAveragePool / QGemm / QLinearSoftmax, per-channel int8 weights."""
    return quantize_qdq(
        model, calibration, activation=activation, per_channel=True, fmt="QOperator", reduce_range=reduce_range
    )


def qlinear_matmul(
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    *,
    per_channel: bool,
    signed: bool,
    seed: int = 0,
    opset: int = 21,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One QLinearMatMul on N-D operands, B constant with a per-tensor or per-column scale and
    zero point: 1-D (length N) for a 2-D B, and for an N-D B ONNX Runtime's N-D form, one row per
    batch matrix with the second-to-last dim 1 (shape [..., 1, N]). A is a graph input."""
    rng = np.random.default_rng(seed)
    qt, npt = (TensorProto.INT8, np.int8) if signed else (TensorProto.UINT8, np.uint8)
    lo, hi = (-128, 128) if signed else (0, 256)
    n = b_shape[-1]
    b = rng.integers(lo, hi, b_shape).astype(npt)
    q_shape = ((n,) if len(b_shape) == 2 else (*b_shape[:-2], 1, n)) if per_channel else ()
    bs = rng.uniform(0.01, 0.05, q_shape).astype(np.float32)
    bz = rng.integers(lo + 100, lo + 140, q_shape).astype(npt)
    inits = [
        _init("b", b),
        _init("a_s", np.array(0.03, np.float32)),
        _init("a_z", np.array(lo + 117, npt)),
        _init("b_s", bs),
        _init("b_z", bz),
        _init("y_s", np.array(0.7, np.float32)),
        _init("y_z", np.array(lo + 131, npt)),
    ]
    node = helper.make_node("QLinearMatMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"], ["y"])
    g = helper.make_graph(
        [node],
        "qlinear_matmul",
        [helper.make_tensor_value_info("a", qt, list(a_shape))],
        [_any_shape_output("y", qt)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m, {"a": rng.integers(lo, hi, a_shape).astype(npt)}


def qlinear_conv(
    *, per_channel: bool, signed: bool, bias: bool = True, group: int = 1, seed: int = 0, x_bits: int = 8
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One QLinearConv (3x3, pad 1) with per-channel or per-tensor weight parameters; sizes the
    8-bit BLAS takes (M, N, K multiples of 4) so the GPU runs it as an int8 GEMM. `x_bits` 7 draws
    the uint8 input from [0, 128), where ORT's u8s8 path cannot saturate."""
    rng = np.random.default_rng(seed)
    qt, npt = (TensorProto.INT8, np.int8) if signed else (TensorProto.UINT8, np.uint8)
    lo, hi = (-128, 128) if signed else (0, 256)
    cin, cout, hw = 8, 8, 8
    w = rng.integers(-127, 128, (cout, cin // group, 3, 3)).astype(np.int8)
    ws = (rng.uniform(0.001, 0.01, cout) if per_channel else np.array(0.004)).astype(np.float32)
    wz = np.zeros(cout if per_channel else (), np.int8)
    inits = [
        _init("x_s", np.array(0.05, np.float32)),
        _init("x_z", np.array(lo + 113, npt)),
        _init("w", w),
        _init("w_s", ws),
        _init("w_z", wz),
        _init("y_s", np.array(0.04, np.float32)),
        _init("y_z", np.array(lo + 128, npt)),
    ]
    ins = ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z"]
    if bias:
        inits.append(_init("bias", rng.integers(-2000, 2000, cout).astype(np.int32)))
        ins.append("bias")
    node = helper.make_node("QLinearConv", ins, ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], group=group)
    g = helper.make_graph(
        [node],
        "qlinear_conv",
        [helper.make_tensor_value_info("x", qt, [1, cin, hw, hw])],
        [_any_shape_output("y", qt)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x_hi = hi if signed else 1 << x_bits
    return m, {"x": rng.integers(lo, x_hi, (1, cin, hw, hw)).astype(npt)}


def qlinear_conv_exact(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """QLinearConv of qlinear_conv's model by its definition, in float64: the sum of
    (x - x_z) * (w - w_z) plus bias, times x_s * w_s / y_s, rounded half to even, plus y_z, clamped."""
    (node,) = model.graph.node
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    group = next((a.i for a in node.attribute if a.name == "group"), 1)
    xz, ys, yz = (np.ravel(init[k]).astype(np.float64)[0] for k in ("x_z", "y_s", "y_z"))
    xf = np.pad(x.astype(np.float64) - xz, ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = init["w"].astype(np.float64) - init["w_z"].astype(np.float64).reshape(-1, 1, 1, 1)
    cout, cg, kh, kw = w.shape
    n, _, hp, wp = xf.shape
    oh, ow = hp - kh + 1, wp - kw + 1
    og = cout // group
    acc = np.zeros((n, cout, oh, ow))
    for o in range(cout):
        g = o // og
        for i in range(kh):
            for j in range(kw):
                patch = xf[:, g * cg : (g + 1) * cg, i : i + oh, j : j + ow]
                acc[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j])
    acc += init["bias"].astype(np.float64).reshape(1, -1, 1, 1)
    scale = np.ravel(init["x_s"]).astype(np.float64)[0] * init["w_s"].astype(np.float64).reshape(-1, 1, 1) / ys
    info = np.iinfo(x.dtype)
    return np.clip(np.rint(acc * scale) + yz, info.min, info.max)


def qlinear_where(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One com.microsoft.QLinearWhere on uint8 operands with different scales and zero points."""
    rng = np.random.default_rng(seed)
    u8 = TensorProto.UINT8
    inits = [
        _init("xs", np.array(0.02, np.float32)),
        _init("xz", np.array(100, np.uint8)),
        _init("ys", np.array(0.05, np.float32)),
        _init("yz", np.array(30, np.uint8)),
        _init("zs", np.array(0.04, np.float32)),
        _init("zz", np.array(90, np.uint8)),
    ]
    node = helper.make_node(
        "QLinearWhere", ["c", "x", "xs", "xz", "y", "ys", "yz", "zs", "zz"], ["q"], domain="com.microsoft"
    )
    g = helper.make_graph(
        [node],
        "qlinear_where",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, [3, 5]),
            helper.make_tensor_value_info("x", u8, [3, 5]),
            helper.make_tensor_value_info("y", u8, [3, 5]),
        ],
        [helper.make_tensor_value_info("q", u8, [3, 5])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    feeds = {
        "c": rng.random((3, 5)) < 0.5,
        "x": rng.integers(0, 256, (3, 5)).astype(np.uint8),
        "y": rng.integers(0, 256, (3, 5)).astype(np.uint8),
    }
    return m, feeds
