"""fuse_reduce, split_reduce and the fuse_pointwise_reduce composite."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import PassManager, make_numeric_config, make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

FP, FR = make_pass("fuse_pointwise"), make_pass("fuse_reduce")


def _kernels(p) -> list[str]:
    return [i.name for i in p.main if not i.is_builtin() and not i.op.has("view")]


def test_reduce_becomes_fused_reduce_with_named_bypass_module():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        @1 = reduce_sum[axes={-1}](x) -> float_type, {2, 1}
        @2 = @return(@1)
    """,
        [FR],
        """
        module: "main"
        x = @param:x -> float_type, {2, 3}
        @1 = fused_reduce[axes={1}](x), [main:reduce_sum0] -> float_type, {2, 1}
        @2 = @return(@1)
        module: "main:reduce_sum0" bypass
        x0 = @param:x0 -> float_type, {2, 3}
        @1 = reduce_sum[axes={1}](x0) -> float_type, {2, 1}
        @2 = @return(@1)
    """,
    )


def test_pointwise_into_reduce_keeps_the_pointwise_submodule():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        @2 = add(x, y) -> float_type, {2, 3}
        @3 = reduce_sum[axes={1}](@2) -> float_type, {2, 1}
        @4 = @return(@3)
    """,
        [FP, FR],
        """
        module: "main"
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        @2 = fused_reduce[axes={1}](x, y), [main:pointwise0:main:reduce_sum0] -> float_type, {2, 1}
        @3 = @return(@2)
        module: "main:pointwise0:main:reduce_sum0" bypass
        x0 = @param:x0 -> float_type, {2, 3}
        x1 = @param:x1 -> float_type, {2, 3}
        @2 = pointwise(x0, x1), [main:pointwise0] -> float_type, {2, 3}
        @3 = reduce_sum[axes={1}](@2) -> float_type, {2, 1}
        @4 = @return(@3)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = add(x0, x1) -> float_type, {1}, {0}
        @3 = @return(@2)
    """,
    )


def test_reduce_into_pointwise_across_a_broadcast():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        @2 = reduce_sum[axes={1}](x) -> float_type, {2, 1}
        @3 = multibroadcast[out_lens={2, 3}](@2) -> float_type, {2, 3}, {1, 0}
        @4 = add(@3, y) -> float_type, {2, 3}
        @5 = @return(@4)
    """,
        [FP, FR],
        """
        module: "main"
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        @2 = fused_reduce[axes={1}](x, y), [main:reduce_sum0:main:pointwise0] -> float_type, {2, 3}
        @3 = @return(@2)
        module: "main:reduce_sum0:main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {2, 3}
        x1 = @param:x1 -> float_type, {2, 3}
        @2 = reduce_sum[axes={1}](x0) -> float_type, {2, 1}
        @3 = multibroadcast[out_lens={2, 3}](@2) -> float_type, {2, 3}, {1, 0}
        @4 = pointwise(@3, x1), [main:pointwise0] -> float_type, {2, 3}
        @5 = @return(@4)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = add(x0, x1) -> float_type, {1}, {0}
        @3 = @return(@2)
    """,
    )


LAYERNORM = """
    x = @param:x -> float_type, {4, 16}
    g = @param:g -> float_type, {16}
    eps = @literal{1e-5} -> float_type, {1}
    @3 = reduce_mean[axes={1}](x) -> float_type, {4, 1}
    @4 = multibroadcast[out_lens={4, 16}](@3) -> float_type, {4, 16}, {1, 0}
    @5 = sqdiff(x, @4) -> float_type, {4, 16}
    @6 = reduce_mean[axes={1}](@5) -> float_type, {4, 1}
    @7 = multibroadcast[out_lens={4, 1}](eps) -> float_type, {4, 1}, {0, 0}
    @8 = add(@6, @7) -> float_type, {4, 1}
    @9 = rsqrt(@8) -> float_type, {4, 1}
    @10 = sub(x, @4) -> float_type, {4, 16}
    @11 = multibroadcast[out_lens={4, 16}](@9) -> float_type, {4, 16}, {1, 0}
    @12 = mul(@10, @11) -> float_type, {4, 16}
    @13 = multibroadcast[out_lens={4, 16}](g) -> float_type, {4, 16}, {0, 1}
    @14 = mul(@12, @13) -> float_type, {4, 16}
    @15 = @return(@14)
"""


def test_layernorm_becomes_one_fused_reduce_through_reduce_reduce_fusion():
    p, q = parse(LAYERNORM), parse(LAYERNORM)
    run_passes(q, [FP, FR])
    assert _kernels(q) == ["fused_reduce"]
    sub = next(i for i in q.main if i.name == "fused_reduce").module_inputs[0]
    assert sub.bypass and sub.name.startswith("main:reduce_mean0:main:pointwise")
    assert [i.name for i in sub if i.op.has("reduce")] == ["reduce_mean", "reduce_mean"]
    assert_same_outputs(p, q)


def test_reduce_reduce_needs_equal_axes():
    text = """
        x = @param:x -> float_type, {2, 3, 4}
        @1 = reduce_sum[axes={2}](x) -> float_type, {2, 3, 1}
        @2 = reduce_max[axes={1}](@1) -> float_type, {2, 1, 1}
        @3 = @return(@2)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [FR])
    assert _kernels(q) == ["fused_reduce", "fused_reduce"]
    assert_same_outputs(p, q)


SOFTMAX = """
    x = @param:x -> float_type, {2, 64}
    @1 = exp(x) -> float_type, {2, 64}
    @2 = reduce_sum[axes={1}](@1) -> float_type, {2, 1}
    @3 = multibroadcast[out_lens={2, 64}](@2) -> float_type, {2, 64}, {1, 0}
    @4 = div(@1, @3) -> float_type, {2, 64}
    @5 = @return(@4)
"""


def test_softmax_fuses_into_one_kernel_below_split_size():
    p, q = parse(SOFTMAX), parse(SOFTMAX)
    run_passes(q, [make_pass("fuse_pointwise_reduce")])
    assert _kernels(q) == ["fused_reduce"]
    assert_same_outputs(p, q)


def test_split_reduce_moves_the_tail_out_of_a_large_reduction():
    p, q = parse(SOFTMAX), parse(SOFTMAX)
    run_passes(q, [make_pass("fuse_pointwise_reduce", split_size=16)])
    assert _kernels(q) == ["split_fused_reduce", "pointwise"]
    split = next(i for i in q.main if i.name == "split_fused_reduce")
    assert split.op["assign"] == "assign_add" and split.op["axes"] == (1,)
    assert split.module_inputs[0].name.endswith("_split")
    # the tail (exp, divide) reads the finished sums through a broadcast
    assert next(i for i in q.main if i.name == "pointwise").inputs[1].name == "multibroadcast"
    assert_same_outputs(p, q)


def test_split_reduce_leaves_max_reductions_and_small_ones():
    text = SOFTMAX.replace("reduce_sum", "reduce_max")
    q = parse(text)
    run_passes(q, [make_pass("fuse_pointwise_reduce", split_size=16)])
    assert _kernels(q) == ["fused_reduce"]
    q = parse(SOFTMAX)
    run_passes(q, [make_pass("fuse_pointwise_reduce", split_size=64)])  # 64 elements is not more than 64
    assert _kernels(q) == ["fused_reduce"]


def test_fuse_pointwise_reduce_records_its_nested_passes_in_migraphx_order():
    p = parse(LAYERNORM)
    trace = PassManager(numeric=make_numeric_config(p)).run(p, [make_pass("fuse_pointwise_reduce")])
    top = trace.records[0]
    assert top.name == "fuse_pointwise_reduce" and top.depth == 0 and top.changed and top.numeric.ok
    kids = [trace.records[i] for i in top.children]
    names = [r.name for r in kids]
    want = [
        "fuse_pointwise",
        "fuse_reduce",
        "fuse_pointwise",
        "fuse_reduce",
        "split_reduce",
        "fuse_pointwise",
        "fuse_pointwise",
    ]
    if "optimize_module" in names:
        want.insert(1, "optimize_module")
    assert names == want
    assert all(r.depth == 1 and r.parent == top.index for r in kids)
    assert kids[0].path == "passes.fuse_pointwise_reduce/fuse_pointwise"
    assert kids[-1].path == "passes.fuse_pointwise_reduce/fuse_pointwise#4"
    assert kids[-1].options == {"enable_multi_output": True}
    assert kids[0].changed and kids[names.index("fuse_reduce")].changed


def test_fused_program_evaluates_like_numpy():
    q = parse(SOFTMAX)
    run_passes(q, [make_pass("fuse_pointwise_reduce", split_size=16)])
    x = np.linspace(-2, 2, 128, dtype=np.float32).reshape(2, 64)
    e = np.exp(x)
    np.testing.assert_allclose(evaluate(q, {"x": x})[0], e / e.sum(axis=1, keepdims=True), rtol=1e-5)
