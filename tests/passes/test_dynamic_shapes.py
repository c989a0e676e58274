"""Dynamic batch over a range: dynamic shape rules, split_single_dyn_dim, simplify_dyn_ops."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate, parse, print_program
from migx_explore.compiler.pass_infra import PassManager, make_pass, run_passes
from migx_explore.gpu.pipelines import gpu_pipelines

MLP = """
    x = @param:x -> dynamic, float_type, {[1..4], 16}
    w = @literal{ ... } -> float_type, {16, 8}
    b = @param:b -> float_type, {8}
    @3 = dot(x, w) -> dynamic, float_type, {[1..4], 8}
    @4 = multibroadcast(b, @3) -> dynamic, float_type, {[1..4], 8}
    @5 = add(@3, @4) -> dynamic, float_type, {[1..4], 8}
    @6 = relu(@5) -> dynamic, float_type, {[1..4], 8}
    @7 = @return(@6)
"""


W = np.linspace(-1, 1, 128, dtype=np.float32).reshape(16, 8)


def _mlp():
    p = parse(MLP, allow_elided=True)
    w = next(i for i in p.main if i.is_literal())
    p.main.replace_all_uses(w, p.main.add_literal(W))
    p.main.remove_instruction(w)
    return p


def _feeds(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(n)
    return {"x": rng.normal(size=(n, 16)).astype(np.float32), "b": rng.normal(size=8).astype(np.float32)}


def _numpy(p, feeds):
    return np.maximum(feeds["x"] @ W + feeds["b"], 0)


@pytest.mark.parametrize("n", [1, 4])
def test_dynamic_program_evaluates_at_each_batch(n):
    p = _mlp()
    np.testing.assert_allclose(evaluate(p, _feeds(n))[0], _numpy(p, _feeds(n)), rtol=1e-5, atol=1e-6)


def test_split_makes_one_static_submodule_per_batch_size():
    p = _mlp()
    run_passes(p, [make_pass("split_single_dyn_dim"), make_pass("dead_code_elimination")])
    assert [i.name for i in p.main if not i.is_builtin()] == ["select_module", "get_tuple_elem"]
    sel = next(i for i in p.main if i.name == "select_module")
    assert [m.name for m in sel.module_inputs] == ["dim_1", "dim_2", "dim_3", "dim_4"]
    assert [i.param_name for i in sel.inputs] == ["b", "x"]  # sorted by name
    for k, m in enumerate(sel.module_inputs, 1):
        assert all(i.shape.dyn_dims is None for i in m), m.name
        assert m.get_parameter("x").shape.lens == (k, 16)
    for n in (1, 2, 3, 4):
        np.testing.assert_allclose(evaluate(p, _feeds(n))[0], _numpy(p, _feeds(n)), rtol=1e-5, atol=1e-6)
    assert parse(print_program(p, full=True)) == p  # select_module and its shape attribute round-trip


def test_dynamic_shapes_pipeline_end_to_end():
    p = _mlp()
    dyn = [pl for pl in gpu_pipelines() if pl.name == "dynamic_shapes"]
    trace = PassManager().run(p, dyn)
    assert [r.name for r in trace.records] == [
        "split_single_dyn_dim",
        "dead_code_elimination",
        "simplify_dyn_ops",
        "dead_code_elimination",
    ]
    subs = [m for m in p.modules.values() if m.name != "main"]
    assert len(subs) == 4
    # simplify_dyn_ops made the two-input broadcast static in every submodule
    assert all(i.name != "multibroadcast" or len(i.inputs) == 1 for m in subs for i in m)
    for n in (1, 4):
        np.testing.assert_allclose(evaluate(p, _feeds(n))[0], _numpy(p, _feeds(n)), rtol=1e-5, atol=1e-6)


def test_split_runs_once_and_skips_static_or_multi_range_programs():
    p = _mlp()
    run_passes(p, [make_pass("split_single_dyn_dim")])
    assert not run_passes(p, [make_pass("split_single_dyn_dim")]).records[0].changed
    static = parse("""
        x = @param:x -> float_type, {2, 3}
        @1 = relu(x) -> float_type, {2, 3}
        @2 = @return(@1)
    """)
    assert not run_passes(static, [make_pass("split_single_dyn_dim")]).records[0].changed
    two = parse("""
        x = @param:x -> dynamic, float_type, {[1..4], [2..3]}
        @1 = relu(x) -> dynamic, float_type, {[1..4], [2..3]}
        @2 = @return(@1)
    """)
    assert not run_passes(two, [make_pass("split_single_dyn_dim")]).records[0].changed


def test_select_module_output_shape_becomes_static_when_the_range_does_not_reach_the_output():
    p = parse(
        """
        x = @param:x -> dynamic, float_type, {[2..3], 4}
        @1 = reduce_sum[axes={0}](x) -> float_type, {1, 4}
        @2 = @return(@1)
    """.replace("reduce_sum[axes={0}](x) -> float_type, {1, 4}", "relu(x) -> dynamic, float_type, {[2..3], 4}")
    )
    run_passes(p, [make_pass("split_single_dyn_dim")])
    sel = next(i for i in p.main if i.name == "select_module")
    assert sel.shape.sub_shapes[0].dyn_dims is not None  # it does depend on the batch here
    assert not run_passes(p, [make_pass("simplify_dyn_ops")]).records[0].changed


def test_simplify_dyn_ops_must_follow_split_single_dyn_dim():
    from migx_explore.compiler.pass_infra import check_order, pipeline

    bad = pipeline("p", [make_pass("simplify_dyn_ops"), make_pass("split_single_dyn_dim")])
    assert [w.constraint for w in check_order([bad])] == ["must_follow"]
    assert check_order(gpu_pipelines()) == []


def test_whole_gpu_pipeline_lowers_select_module_over_a_range():
    # The lowered select_module (a gpu::host_op around it) keeps its dynamic inputs: its shape
    # rule once saw only the range's ends as static shapes and refused every other submodule.
    p = _mlp()
    PassManager().run(p, gpu_pipelines())
    host = [i for i in p.main if i.name == "gpu::host_op" and "select_module" in str(i.op["op"])]
    assert len(host) == 1 and any(i.shape.dynamic_shape for i in host[0].inputs)
    assert len(host[0].module_inputs) == 4
    assert host[0].shape.is_tuple  # one output, still read through get_tuple_elem
