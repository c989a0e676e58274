"""fuse_concat: pointwise producers and consumer of a concat folded into fused_concat."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

FP, FC = make_pass("fuse_pointwise"), make_pass("fuse_concat")


def test_pointwise_input_and_consumer_fold_into_fused_concat():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 5}
        z = @param:z -> float_type, {2, 8}
        @3 = exp(x) -> float_type, {2, 3}
        @4 = concat[axis=1](@3, y) -> float_type, {2, 8}
        @5 = add(@4, z) -> float_type, {2, 8}
        @6 = @return(@5)
    """,
        [FP, FC],
        """
        module: "main"
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 5}
        z = @param:z -> float_type, {2, 8}
        @3 = fused_concat[axis=1](x,y,z), [main:pointwise0,concat:noop0,main:pointwise1:concat] -> float_type, {2, 8}
        @4 = @return(@3)
        module: "main:pointwise0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        @1 = exp(x0) -> float_type, {1}, {0}
        @2 = @return(@1)
        module: "concat:noop0" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        @1 = @return(x0)
        module: "main:pointwise1:concat" bypass
        x0 = @param:x0 -> float_type, {1}, {0}
        x1 = @param:x1 -> float_type, {1}, {0}
        @2 = add(x1, x0) -> float_type, {1}, {0}
        @3 = @return(@2)
    """,
    )


def test_concat_of_pointwise_pieces_without_consumer():
    text = """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 5}
        @2 = exp(x) -> float_type, {2, 3}
        @3 = neg(y) -> float_type, {2, 5}
        @4 = concat[axis=1](@2, @3) -> float_type, {2, 8}
        @5 = @return(@4)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [FP, FC])
    fc = [i for i in q.main if not i.is_builtin()]
    assert [i.name for i in fc] == ["fused_concat"]
    assert [m.name for m in fc[0].module_inputs] == ["main:pointwise0", "main:pointwise1", "concat:noop0"]
    assert_same_outputs(p, q)


def test_plain_concat_is_left_alone():
    text = """
        x = @param:x -> float_type, {2, 3}
        y = @param:y -> float_type, {2, 5}
        @2 = concat[axis=1](x, y) -> float_type, {2, 8}
        @3 = @return(@2)
    """
    q = parse(text)
    assert not run_passes(q, [FP, FC]).records[1].changed


def test_shared_pointwise_input_stays_outside():
    # exp(x) is also returned, so it is not folded: the concat reads it through a noop piece;
    # neg(x) is used once and folds (MIGraphX needs one such input to fuse at all)
    text = """
        x = @param:x -> float_type, {4, 2}
        @1 = exp(x) -> float_type, {4, 2}
        @2 = neg(x) -> float_type, {4, 2}
        @3 = concat[axis=0](@1, @2) -> float_type, {8, 2}
        @4 = sigmoid(@3) -> float_type, {8, 2}
        @5 = @return(@4, @1)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [FP, FC])
    assert sorted(i.name for i in q.main if not i.is_builtin()) == ["fused_concat", "pointwise"]
    assert_same_outputs(p, q)
    x = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    want = 1 / (1 + np.exp(-np.concatenate([np.exp(x), -x])))
    np.testing.assert_allclose(evaluate(q, {"x": x})[0], want, rtol=1e-6)
    only_shared = text.replace("concat[axis=0](@1, @2)", "concat[axis=0](@1, x)")
    # no single-use pointwise input: the sigmoid consumer still runs inside the concat's kernel
    # (at fp16 that consumer is often the convert of a float32 output)
    r, s = parse(only_shared), parse(only_shared)
    run_passes(s, [FP, FC])
    names = [i.name for i in s.main if not i.is_builtin()]
    assert names.count("fused_concat") == 1 and "concat" not in names and "sigmoid" not in names, names
    assert_same_outputs(r, s)
    no_consumer = only_shared.replace("sigmoid(@3)", "concat[axis=0](@3)")
    assert not run_passes(parse(no_consumer), [FP, FC]).records[1].changed  # nothing to fold


def test_a_shared_concat_writes_its_convert_as_a_second_output():
    """A KV cache's present at fp16: the attention reads the half concat, the float32 output its
    convert; one fused_concat writes both (one kernel, not a concat and a convert)."""
    text = """
        past = @param:past -> float_type, {1, 2, 3, 4}
        k = @param:k -> half_type, {1, 2, 1, 4}
        @2 = convert[target_type=float16](past) -> half_type, {1, 2, 3, 4}
        @3 = concat[axis=2](@2, k) -> half_type, {1, 2, 4, 4}
        @4 = convert[target_type=float32](@3) -> float_type, {1, 2, 4, 4}
        @5 = transpose[permutation={0, 1, 3, 2}](@3) -> half_type, {1, 2, 4, 4}, {32, 16, 1, 4}
        @6 = @return(@4, @5)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [FP, FC])
    names = [i.name for i in q.main if not i.is_builtin()]
    assert names.count("fused_concat") == 1 and "concat" not in names and "pointwise" not in names, names
    fc = next(i for i in q.main if i.name == "fused_concat")
    assert [s.type for s in fc.shape.sub_shapes] == ["float16", "float32"]
    assert_same_outputs(p, q)
