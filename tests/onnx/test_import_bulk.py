"""What makes a 100,000-node import fast must not change what it builds: the cyclic GC pause is
undone whatever happens, and the elementwise shape rule's shortcut gives the general rule's shape."""

from __future__ import annotations

import gc

import pytest
from onnx import TensorProto, helper

from migx_explore.compiler.errors import ImportError_
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.ops.common import pointwise_shape
from migx_explore.compiler.shape import Shape


def _chain(n: int = 50):
    nodes, prev = [], "x"
    for k in range(n):
        nodes.append(helper.make_node("Relu" if k % 2 else "Sigmoid", [prev], [f"v{k}"]))
        prev = f"v{k}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("enabled", [True, False])
def test_the_gc_pause_is_undone_after_an_import_and_after_a_failed_one(enabled, monkeypatch):
    from migx_explore.compiler.onnx import importer

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        p = parse_onnx(_chain())
        assert len(list(p.main)) > 50
        assert gc.isenabled() is enabled
        seen = []

        def failing_run(self):
            seen.append(gc.isenabled())
            raise ImportError_("node n (Relu): a failure inside the import")

        monkeypatch.setattr(importer._Importer, "run", failing_run)
        with pytest.raises(ImportError_):
            parse_onnx(_chain())
        assert seen == [False]  # paused while it ran
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize(
    "shapes, out_type",
    [
        ([Shape.of("float32", [2, 3])] * 2, "float32"),
        ([Shape.of("float32", [2, 3])], "bool"),  # another output type: the general rule
        ([Shape.of("float16", [1, 4, 4, 8], [128, 1, 32, 4])] * 2, "float16"),  # NHWC kept
        ([Shape.of("float32", [2, 3]), Shape.of("float32", [2, 3], [0, 1])], "float32"),  # a broadcast bias
        ([Shape.scalar("float32")] * 2, "float32"),
    ],
)
def test_the_pointwise_shortcut_gives_what_the_general_rule_gives(shapes, out_type):
    got = pointwise_shape("add", shapes, out_type)
    dense = [s for s in shapes if not s.broadcasted() and not s.scalar_shape()]
    strides = (dense or shapes)[0].strides
    assert got == Shape.of(out_type, shapes[0].lens, strides)
