"""Issue 26 item 3: models ONNX Runtime refuses are refused, exit 2, naming the node or value
(compiler/onnx/validate.py). Each case is checked against onnxruntime where ORT decides at load."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from migx_explore.cli import main as cli
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.onnx import parse_onnx

F = TensorProto.FLOAT
vi = helper.make_tensor_value_info


def model(nodes, inputs, outputs, inits=(), opset=18) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    for out in g.output:
        out.type.tensor_type.shape.SetInParent()
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def weight(shape, name="w"):
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


def conv(**attrs):
    return model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="c1", **attrs)],
        [vi("x", F, [1, 1, 4, 4])],
        [vi("y", F, None)],
        [weight([1, 1, 3, 3])],
    )


def relu(x_dims, y_dims, y_type=F, opset=18):
    return model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, x_dims)], [vi("y", y_type, y_dims)], opset=opset
    )


def gather(index, data_input=False):
    idx = numpy_helper.from_array(np.array([index], np.int64), "i")
    node = helper.make_node("Gather", ["d", "i"], ["y"], name="g1")
    if data_input:
        return model([node], [vi("d", F, [4])], [vi("y", F, None)], [idx])
    return model([node], [], [vi("y", F, None)], [weight([4], "d"), idx])


def const(name, value):
    return numpy_helper.from_array(value, name)


def one(op, inputs, x_dims, *inits, opset=18, y_type=F):
    """A one-node model `n` reading input x (float, x_dims) and constants."""
    return model(
        [helper.make_node(op, inputs, ["y"], name="n")],
        [vi("x", F, x_dims)],
        [vi("y", y_type, None)],
        list(inits),
        opset=opset,
    )


def ort_refuses(m) -> bool:
    ort = pytest.importorskip("onnxruntime")
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any refusal
        return True
    return False


CASES = {
    # name: (model, what the message must say, does ORT refuse it at load too?)
    "conv kernel_shape -1": (
        conv(kernel_shape=[-1, -1]),
        r"node c1 \(Conv\): attribute kernel_shape is \[-1, -1\]",
        True,
    ),
    "conv kernel_shape 0": (conv(kernel_shape=[0, 0]), r"node c1 \(Conv\): attribute kernel_shape is \[0, 0\]", True),
    "conv strides 0": (conv(strides=[0, 1]), r"node c1 \(Conv\): attribute strides", None),
    "zero-size weight": (
        model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="c1")],
            [vi("x", F, [1, 1, 4, 4])],
            [vi("y", F, None)],
            [weight([0, 1, 3, 3])],
        ),
        r"node c1 \(Conv\): weight 'w' has a zero-size dimension",
        None,
    ),
    "input dim -5": (relu([1, -5], [1, 4]), r"input 'x': dimension 1 is -5", None),
    "output elem_type -1": (relu([1, 4], [1, 4], y_type=-1), r"graph output 'y' declares element type -1", True),
    "opset 1": (
        relu([1, 4], [1, 4], opset=1),
        r"node r \(Relu\): .* uses Relu-1 \(opset 1\), whose semantics changed",
        True,
    ),
    "gather out of range (constant data)": (
        gather(7),
        r"node g1 \(Gather\): index 7 is out of range .* 4 elements",
        None,
    ),
    "gather out of range (input data)": (
        gather(-5, data_input=True),
        r"node g1 \(Gather\): index -5 is out of range",
        None,
    ),
    "inputs of one type parameter with two types": (
        one("Equal", ["x", "i"], [2], const("i", np.array([1, 2], np.int64)), y_type=TensorProto.BOOL),
        r"node n \(Equal\): inputs 'x' \(float\) and 'i' \(int64\) must have one type",
        True,
    ),
    "conv kernel_shape vs weight": (
        conv(kernel_shape=[3, 7]),
        r"node c1 \(Conv\): kernel_shape \[3, 7\] does not match the weight's",
        None,
    ),
    "2-D axes": (
        one("Unsqueeze", ["x", "a"], [2], const("a", np.array([[0]], np.int64))),
        r"node n \(Unsqueeze\): input 1 \('a'\) must be 1-D",
        None,
    ),
    "infinite resize scale": (
        one("Resize", ["x", "", "s"], [1, 1, 2, 2], const("s", np.array([1, 1, np.inf, 2], np.float32))),
        r"node n \(Resize\): scales .* must be finite and positive",
        None,
    ),
    "opset-6 legacy Add": (
        one("Add", ["x", "x"], [2], opset=6),
        r"node n \(Add\): .* uses Add-6 .* changed by opset 7",
        True,
    ),
    "shape inference error": (
        model(
            [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 0])],
            [vi("x", F, [2, 3])],
            [vi("y", F, None)],
        ),
        r"perm",
        True,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_invalid_model_refused_naming_the_node(name):
    m, match, ort_too = CASES[name]
    with pytest.raises(MigxError, match=match) as e:
        parse_onnx(m)
    assert "\n" not in str(e.value)
    if ort_too:
        assert ort_refuses(m), "the case is meant to be one ONNX Runtime refuses at load"


@pytest.mark.parametrize("name", ["conv kernel_shape -1", "gather out of range (constant data)", "opset 1"])
def test_cli_exit_2_one_line(name, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(CASES[name][0], path)
    for verb in ("read", "run"):
        assert cli([verb, str(path)]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if "warning" not in ln]
        assert len(err) == 1 and err[0].startswith(f"migx-explore {verb}: error: ")


def test_a_feed_that_contradicts_declared_dims_or_rank_is_refused(tmp_path, capsys):
    path, feed = tmp_path / "m.onnx", tmp_path / "f.npz"
    onnx.save(relu([1, 4], [1, 4]), path)
    for shape in ((1, 5), (1, 4, 1)):
        np.savez(feed, x=np.ones(shape, np.float32))
        assert cli(["run", str(path), "--inputs", str(feed)]) == 2
        assert "input 'x' has " in capsys.readouterr().err


def test_valid_edges_still_import():
    assert parse_onnx(gather(-4)).main.output_shapes()[0].lens == (1,)
    assert parse_onnx(gather(3, data_input=True)).main.output_shapes()[0].lens == (1,)
    parse_onnx(relu([1, 4], [1, 4], opset=7))
    parse_onnx(relu([1, 4], [1, 4], opset=6))  # Relu-6 is what ORT implements: opset-6 models with it still load
    parse_onnx(relu([1, 4], [1, None]))  # an unknown declared dim matches anything
    parse_onnx(relu(["N", 4], ["N", 4]))
    parse_onnx(conv(kernel_shape=[3, 3], strides=[1, 1]))


def test_overriding_a_fixed_input_dim_skips_the_declared_output_check():
    prog = parse_onnx(relu([1, 4], [1, 4]), input_dims={"x": [2, 4]})
    assert prog.main.output_shapes()[0].lens == (2, 4)


def test_an_old_opset_whose_operators_did_not_change_is_read():
    """Not-1 means what Not-13 means: an opset-1 model using it is read (ONNX's own test_not_2d)."""
    from migx_explore.compiler.onnx import parse_onnx

    m = model(
        [helper.make_node("Not", ["x"], ["y"], name="n")],
        [vi("x", onnx.TensorProto.BOOL, [2, 3])],
        [vi("y", onnx.TensorProto.BOOL, [2, 3])],
        opset=1,
    )
    assert parse_onnx(m).main.output_shapes()[0].lens == (2, 3)
