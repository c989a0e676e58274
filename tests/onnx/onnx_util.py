"""Helpers for ONNX tests: build small graphs with onnx.helper and compare our import + reference
evaluation against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from migx_explore.compiler import evaluate
from migx_explore.compiler.onnx import param_name, parse_onnx

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def vi(name: str, elem=F, dims=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, dims)


def init(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value)), name=name)


def make_model(nodes, inputs, outputs, initializers=(), opset: int = 18) -> onnx.ModelProto:
    g = helper.make_graph(list(nodes), "test", list(inputs), list(outputs), list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9 if opset >= 15 else 7
    # The checker wants a shape on graph outputs; tests leave it to ONNX shape inference.
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.output}
    for out in m.graph.output:
        if not out.type.tensor_type.HasField("shape") and out.name in inferred:
            out.type.CopyFrom(inferred[out.name].type)
        if not out.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.SetInParent()  # unknown rank is still a (dim-less) shape field
    return m


def run_ours(model, feed: dict, **kw) -> list[np.ndarray]:
    p = parse_onnx(model, **kw)
    return evaluate(p, {param_name(k): v for k, v in feed.items()})


def run_ort(model, feed: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def check_against_ort(
    model, feed: dict, rtol: float = 1e-5, atol: float = 1e-6, pipelines: bool = True, **kw
) -> list[np.ndarray]:
    """Our import + reference evaluation equals onnxruntime; then (issue 3) the target-independent
    pipelines keep those outputs within tolerance with a valid program after every pass."""
    ours = run_ours(model, feed, **kw)
    ref = run_ort(model, feed)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape, (a.shape, b.shape)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    if pipelines:
        from pipeline_check import check_pipelines

        check_pipelines(parse_onnx(model, **kw), {param_name(k): v for k, v in feed.items()})
    return ours


def op_names(program) -> list[str]:
    return [i.name for i in program.main]
