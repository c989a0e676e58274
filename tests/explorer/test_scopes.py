"""Scopes: the importer reads node-name paths and dynamo metadata_props; every instruction keeps a
scope through every pass (created ones through their origin); unnamed models get graph-derived
groups, never one flat graph."""

from __future__ import annotations

from collections import Counter

import pytest
from onnx import TensorProto, helper

from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.onnx.scopes import node_scope
from migx_explore.scopes import ScopeTable, common_scope
from migx_explore.session import Session


def _node(name: str = "", **props: str):
    n = helper.make_node("Relu", ["x"], ["y"], name=name)
    for k, v in props.items():
        n.metadata_props.add(key=k, value=v)
    return n


@pytest.mark.parametrize(
    "name, scope",
    [
        ("/model.8/m.0/cv1/conv/Conv", "model.8/m.0/cv1/conv"),
        ("/bert/encoder/layer.0/attention/self/MatMul", "bert/encoder/layer.0/attention/self"),
        ("/model/layers.2/mlp/down_proj/MatMul", "model/layers.2/mlp/down_proj"),
        ("/Relu", ""),
        ("conv_12", ""),
        ("", ""),
    ],
)
def test_scope_from_the_node_name_path(name, scope):
    assert node_scope(_node(name)) == scope


def test_scope_from_dynamo_metadata_props():
    scopes = "['', 'model', 'model.layers.2', 'model.layers.2.mlp', 'model.layers.2.mlp.down_proj', 'linear_7']"
    assert (
        node_scope(_node("node_MatMul_3", **{"pkg.torch.onnx.name_scopes": scopes})) == "model/layers.2/mlp/down_proj"
    )
    ns = "model: M/layers.2: Layer/mlp: MLP/down_proj: Linear/linear: aten.linear"
    assert node_scope(_node("node_MatMul_3", namespace=ns)) == "model/layers.2/mlp/down_proj"
    assert node_scope(_node("/a/b/Relu", **{"pkg.torch.onnx.name_scopes": "not a list ["})) == ""


def test_common_scope_is_by_parts():
    assert common_scope(["model.8/m.0/cv1", "model.8/m.0/cv2"]) == "model.8/m.0"
    assert common_scope(["model.1/x", "model.10/x"]) == ""


def _two_scope_program():
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="/blk.0/add/Add"),
        helper.make_node("Sigmoid", ["a"], ["b"], name="/blk.0/act/Sigmoid"),
        helper.make_node("Mul", ["a", "b"], ["c"], name="/blk.0/act/Mul"),
        helper.make_node("MatMul", ["c", "x"], ["d"], name="/blk.1/fc/MatMul"),
    ]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [8, 8])], [vi("d", TensorProto.FLOAT, [8, 8])])
    return parse_onnx(helper.make_model(g).SerializeToString())


def test_scopes_survive_every_pass_and_a_fused_op_takes_the_common_prefix():
    s = Session(_two_scope_program(), numeric=False)
    trace = s.run()
    table = ScopeTable(trace)
    rec = trace.find("fuse_pointwise_reduce")
    after = trace.snapshots(rec)[1]
    scopes = table.scopes_of(after, rec)
    fused = [r for r in after.module("main").instrs if r.op.name == "pointwise"]
    assert len(fused) == 1 and scopes[fused[0].id] == "blk.0"
    final = table.scopes_of(trace.final, trace.top_level()[-1])
    assert set(final.values()) >= {"blk.0", "blk.1/fc"}
    gemm = [r for r in trace.final.module("main").instrs if r.op.name == "gpu::gemm"]
    assert gemm and scopes_all(final, gemm) == {"blk.1/fc"}


def scopes_all(scopes, recs):
    return {scopes[r.id] for r in recs}


@pytest.mark.parametrize(
    "model, top", [("bert_encoder", "bert/encoder/layer.3"), ("llama_decoder", "model/layers.3/mlp")]
)
def test_scoped_built_in_models_carry_their_module_paths(model, top):
    s = Session.from_model(model, numeric=False)
    table = ScopeTable(s.trace)
    assert not table.derived
    scopes = Counter(table.scopes_of(s.trace.initial).values())
    assert any(k.startswith(top) for k in scopes)
    assert scopes.get("", 0) == 0  # weights and constants sit with their users


def test_a_model_without_names_gets_graph_derived_groups():
    s = Session.from_model("unet_unnamed", numeric=False)
    table = ScopeTable(s.trace)
    assert table.derived
    groups = Counter(table.scopes_of(s.trace.initial).values())
    assert len(groups) >= 8 and max(groups.values()) < s.trace.initial.total_instructions() / 4
