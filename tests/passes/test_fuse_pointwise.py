"""fuse_pointwise: submodule creation, scalar inlining, producer/consumer merging, reshape and
broadcast rewrites, multi-output fusion."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

FP = make_pass("fuse_pointwise")


def test_single_op_becomes_pointwise_with_bypass_submodule():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        @2 = add(x, y) -> float_type, {2, 3}
        @3 = @return(@2)
    """,
        [FP],
        """
        module: "main"
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        @2 = pointwise(x, y), [main:pointwise0] -> float_type, {2, 3}
        @3 = @return(@2)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = add(x0, x1) -> float_type, {1}, {0}
        @3 = @return(@2)
    """,
    )


def test_scalar_constant_is_inlined_and_chain_merges():
    # x * broadcast(2) -> relu: the scalar becomes a literal in the submodule, the two ops one kernel
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        c = @literal{2.0} -> float_type, {1}
        @2 = multibroadcast[out_lens={2, 3}](c) -> float_type, {2, 3}, {0, 0}
        @3 = mul(x, @2) -> float_type, {2, 3}
        @4 = relu(@3) -> float_type, {2, 3}
        @5 = @return(@4)
    """,
        [FP],
        """
        module: "main"
        x = @param:x -> float_type, {2, 3}
        @1 = pointwise(x), [main:pointwise0] -> float_type, {2, 3}
        @2 = @return(@1)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        @1 = @literal{2} -> float_type, {1}, {0}
        @2 = mul(x0, @1) -> float_type, {1}, {0}
        @3 = relu(@2) -> float_type, {1}, {0}
        @4 = @return(@3)
    """,
    )


BRANCHY = """
    x = @param:x -> float_type, {2, 3}
    y = @param:y -> float_type, {2, 3}
    @2 = add(x, y) -> float_type, {2, 3}
    @3 = relu(@2) -> float_type, {2, 3}
    @4 = exp(@2) -> float_type, {2, 3}
    @5 = @return(@3, @4)
"""


def test_producer_with_two_users_is_not_merged_by_default():
    p = parse(BRANCHY)
    run_passes(p, [FP])
    names = [i.name for i in p.main if not i.is_builtin()]
    assert names == ["pointwise"] * 3
    assert sorted(p.modules) == ["main", "main:pointwise0", "main:pointwise1", "main:pointwise2"]


def test_multi_output_merges_into_one_tuple_kernel():
    check_pass(
        BRANCHY,
        [make_pass("fuse_pointwise", enable_multi_output=True)],
        """
        module: "main"
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 3}
        @2 = pointwise(x, y), [main:pointwise0] -> tuple_type, {(float_type, {2, 3}), (float_type, {2, 3})}
        @3 = get_tuple_elem[index=0](@2) -> float_type, {2, 3}
        @4 = get_tuple_elem[index=1](@2) -> float_type, {2, 3}
        @5 = @return(@3, @4)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = add(x0, x1) -> float_type, {1}, {0}
        @3 = relu(@2) -> float_type, {1}, {0}
        @4 = exp(@2) -> float_type, {1}, {0}
        @5 = @return(@3, @4)
    """,
    )


def test_multi_output_keeps_a_producer_value_used_elsewhere():
    # add feeds relu (pointwise) and a dot: the fused kernel returns both add and relu
    text = """
        x = @param:x -> float_type, {3, 3}
        y = @param:y -> float_type, {3, 3}
        @2 = add(x, y) -> float_type, {3, 3}
        @3 = dot(@2, y) -> float_type, {3, 3}
        @4 = relu(@2) -> float_type, {3, 3}
        @5 = @return(@3, @4)
    """
    p = parse(text)
    q = parse(text)
    run_passes(q, [make_pass("fuse_pointwise", enable_multi_output=True)])
    assert sorted(i.name for i in q.main if not i.is_builtin()) == [
        "dot",
        "get_tuple_elem",
        "get_tuple_elem",
        "pointwise",
    ]
    assert_same_outputs(p, q)


def test_sibling_pointwise_ops_share_one_kernel():
    text = """
        x = @param:x -> float_type, {4}
        @1 = exp(x) -> float_type, {4}
        @2 = neg(x) -> float_type, {4}
        @3 = sqrt(x) -> float_type, {4}
        @4 = @return(@1, @2, @3)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [make_pass("fuse_pointwise", enable_multi_output=True)])
    assert [i.name for i in q.main if not i.is_builtin()] == ["pointwise"] + ["get_tuple_elem"] * 3
    assert_same_outputs(p, q, {"x": np.array([1.0, 2.0, 3.0, 4.0], np.float32)})


def test_reshape_between_pointwise_ops_moves_to_the_inputs():
    check_pass(
        """
        x = @param:x -> float_type, {2, 6}
        y = @param:y -> float_type, {3, 4}
        @2 = exp(x) -> float_type, {2, 6}
        @3 = reshape[dims={3, 4}](@2) -> float_type, {3, 4}
        @4 = add(@3, y) -> float_type, {3, 4}
        @5 = @return(@4)
    """,
        [FP],
        """
        module: "main"
        x = @param:x -> float_type, {2, 6}
        y = @param:y -> float_type, {3, 4}
        @2 = reshape[dims={3, 4}](x) -> float_type, {3, 4}
        @3 = pointwise(@2, y), [main:pointwise0] -> float_type, {3, 4}
        @4 = @return(@3)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = exp(x0) -> float_type, {1}, {0}
        @3 = add(@2, x1) -> float_type, {1}, {0}
        @4 = @return(@3)
    """,
    )


BCAST = """
    x = @param:x -> float_type, {2, 1}
    y = @param:y -> float_type, {2, 3}
    @2 = exp(x) -> float_type, {2, 1}
    @3 = multibroadcast[out_lens={2, 3}](@2) -> float_type, {2, 3}, {1, 0}
    @4 = add(@3, y) -> float_type, {2, 3}
    @5 = @return(@4)
"""


def test_broadcast_between_pointwise_ops_needs_enable_rewrite_broadcasts():
    p = parse(BCAST)
    run_passes(p, [FP])
    assert [i.name for i in p.main if not i.is_builtin()] == ["pointwise", "multibroadcast", "pointwise"]
    q = check_pass(
        BCAST,
        [make_pass("fuse_pointwise", enable_rewrite_broadcasts=True)],
        """
        module: "main"
        x = @param:x -> float_type, {2, 1}
        y = @param:y -> float_type, {2, 3}
        @2 = multibroadcast[out_lens={2, 3}](x) -> float_type, {2, 3}, {1, 0}
        @3 = pointwise(@2, y), [main:pointwise0] -> float_type, {2, 3}
        @4 = @return(@3)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = exp(x0) -> float_type, {1}, {0}
        @3 = add(@2, x1) -> float_type, {1}, {0}
        @4 = @return(@3)
    """,
    )
    assert q.main.sub_modules()[0].bypass


def test_unsqueeze_moves_onto_a_broadcast_input():
    # unsqueeze only adds a unit axis, which any strides take: the producer's broadcast input
    # does not keep the two ops apart (reshape and flatten still need standard inputs)
    check_pass(
        """
        x = @param:x -> float_type, {4, 1}
        y = @param:y -> float_type, {1, 4, 4}
        @2 = multibroadcast[out_lens={4, 4}](x) -> float_type, {4, 4}, {1, 0}
        @3 = exp(@2) -> float_type, {4, 4}
        @4 = unsqueeze[axes={0}](@3) -> float_type, {1, 4, 4}
        @5 = add(@4, y) -> float_type, {1, 4, 4}
        @6 = @return(@5)
    """,
        [FP],
        """
        module: "main"
        x = @param:x -> float_type, {4, 1}
        y = @param:y -> float_type, {1, 4, 4}
        @2 = multibroadcast[out_lens={4, 4}](x) -> float_type, {4, 4}, {1, 0}
        @3 = unsqueeze[axes={0}](@2) -> float_type, {1, 4, 4}, {4, 1, 0}
        @4 = pointwise(@3, y), [main:pointwise0] -> float_type, {1, 4, 4}
        @5 = @return(@4)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = exp(x0) -> float_type, {1}, {0}
        @3 = add(@2, x1) -> float_type, {1}, {0}
        @4 = @return(@3)
    """,
    )


# An attention mask: converted, broadcast to (query, key), unsqueezed to the heads' rank, used.
MASK_CHAIN = """
    m = @param:m -> int64_type, {1, 4}
    y = @param:y -> float_type, {1, 1, 4, 4}
    @2 = convert[target_type=bool](m) -> bool_type, {1, 4}
    @3 = multibroadcast[out_lens={4, 4}](@2) -> bool_type, {4, 4}, {0, 1}
    @4 = unsqueeze[axes={0, 1}](@3) -> bool_type, {1, 1, 4, 4}, {0, 0, 0, 1}
    @5 = convert[target_type=float](@4) -> float_type, {1, 1, 4, 4}
    @6 = mul(@5, y) -> float_type, {1, 1, 4, 4}
    @7 = @return(@6)
"""


def test_broadcast_then_unsqueeze_moves_as_one_chain():
    p = parse(MASK_CHAIN)
    run_passes(p, [FP])
    assert [i.name for i in p.main if not i.is_builtin()] == ["pointwise", "multibroadcast", "unsqueeze", "pointwise"]
    check_pass(
        MASK_CHAIN,
        [make_pass("fuse_pointwise", enable_rewrite_broadcasts=True)],
        """
        module: "main"
        m = @param:m -> int64_type, {1, 4}
        y = @param:y -> float_type, {1, 1, 4, 4}
        @2 = multibroadcast[out_lens={4, 4}](m) -> int64_type, {4, 4}, {0, 1}
        @3 = unsqueeze[axes={0, 1}](@2) -> int64_type, {1, 1, 4, 4}, {0, 0, 0, 1}
        @4 = pointwise(@3, y), [main:pointwise0] -> float_type, {1, 1, 4, 4}
        @5 = @return(@4)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> int64_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = convert[target_type=bool](x0) -> bool_type, {1}, {0}
        @3 = convert[target_type=float](@2) -> float_type, {1}, {0}
        @4 = mul(@3, x1) -> float_type, {1}, {0}
        @5 = @return(@4)
    """,
    )


def test_long_chain_is_one_kernel_and_numerically_equal():
    text = """
        x = @param:x -> float_type, {8, 8}
        y = @param:y -> float_type, {8, 8}
        @2 = mul(x, y) -> float_type, {8, 8}
        @3 = sigmoid(@2) -> float_type, {8, 8}
        @4 = mul(@2, @3) -> float_type, {8, 8}
        @5 = add(@4, x) -> float_type, {8, 8}
        @6 = tanh(@5) -> float_type, {8, 8}
        @7 = @return(@6)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [FP, make_pass("dead_code_elimination")])
    # mul has two users (sigmoid and the second mul) but they merge one after the other
    assert [i.name for i in q.main if not i.is_builtin()] == ["pointwise"]
    assert len(q.modules) == 2
    assert_same_outputs(p, q)
    feeds = {"x": np.ones((8, 8), np.float32), "y": np.full((8, 8), 2.0, np.float32)}
    want = np.tanh(2.0 / (1 + np.exp(-2.0)) + 1.0)  # tanh(m * sigmoid(m) + x), m = 2
    np.testing.assert_allclose(evaluate(q, feeds)[0], np.full((8, 8), want), rtol=1e-6)


def test_second_run_is_a_noop():
    p = parse(BRANCHY)
    run_passes(p, [FP])
    trace = run_passes(p, [FP])
    assert not trace.records[0].changed
