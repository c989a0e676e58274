"""fuse_horizontal: sibling axis-0 gathers with equal row shapes become one gather."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.passes import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs

FH = make_pass("fuse_horizontal")

TWO_TABLES = """
    t1 = @param:t1 -> float_type, {10, 4}
    t2 = @param:t2 -> float_type, {6, 4}
    i1 = @param:i1 -> int64_type, {2, 3}
    i2 = @param:i2 -> int64_type, {5}
    @4 = gather[axis=0](t1, i1) -> float_type, {2, 3, 4}
    @5 = gather[axis=0](t2, i2) -> float_type, {5, 4}
    @6 = @return(@4, @5)
"""


def test_two_embedding_lookups_become_one_gather():
    p, q = parse(TWO_TABLES), parse(TWO_TABLES)
    run_passes(q, [FH, make_pass("dead_code_elimination")])
    names = [i.name for i in q.main if not i.is_builtin()]
    assert names.count("gather") == 1 and names.count("slice") == 2
    g = next(i for i in q.main if i.name == "gather")
    assert g.inputs[0].name == "concat" and list(g.shape.lens) == [11, 4]
    rng = np.random.default_rng(0)
    feeds = {"t1": rng.normal(size=(10, 4)).astype(np.float32), "t2": rng.normal(size=(6, 4)).astype(np.float32),
             "i1": np.array([[0, 9, -1], [3, -10, 4]]), "i2": np.array([5, 0, -6, -1, 2])}
    assert_same_outputs(p, q, feeds)


def test_constant_indices_are_offset_at_compile_time():
    text = """
        t1 = @param:t1 -> float_type, {3, 2}
        t2 = @param:t2 -> float_type, {4, 2}
        i1 = @literal{0, 2} -> int32_type, {2}
        i2 = @literal{-1, 1} -> int32_type, {2}
        @4 = gather[axis=0](t1, i1) -> float_type, {2, 2}
        @5 = gather[axis=0](t2, i2) -> float_type, {2, 2}
        @6 = add(@4, @5) -> float_type, {2, 2}
        @7 = @return(@6)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [FH, make_pass("dead_code_elimination")])
    assert not any(i.name in ("mod", "add") and i.shape.type == "int32" for i in q.main)
    t1 = np.arange(6, dtype=np.float32).reshape(3, 2)
    t2 = np.arange(8, dtype=np.float32).reshape(4, 2) * 10
    np.testing.assert_array_equal(evaluate(q, {"t1": t1, "t2": t2})[0], t1[[0, 2]] + t2[[3, 1]])
    assert_same_outputs(p, q)


def test_dependent_or_mismatched_gathers_are_not_fused():
    text = """
        t1 = @param:t1 -> float_type, {10, 4}
        t2 = @param:t2 -> float_type, {6, 3}
        i1 = @param:i1 -> int64_type, {2}
        @3 = gather[axis=0](t1, i1) -> float_type, {2, 4}
        @4 = gather[axis=0](t2, i1) -> float_type, {2, 3}
        @5 = gather[axis=1](t1, i1) -> float_type, {10, 2}
        @6 = @return(@3, @4, @5)
    """
    assert not run_passes(parse(text), [FH]).records[0].changed


def test_shared_table_is_concatenated_once():
    text = """
        t = @param:t -> float_type, {5, 2}
        a = @param:a -> int64_type, {3}
        b = @param:b -> int64_type, {2}
        @3 = gather[axis=0](t, a) -> float_type, {3, 2}
        @4 = gather[axis=0](t, b) -> float_type, {2, 2}
        @5 = @return(@3, @4)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [FH, make_pass("dead_code_elimination")])
    assert [i.name for i in q.main].count("concat") == 1  # indices only
    assert_same_outputs(p, q, {"t": np.arange(10, dtype=np.float32).reshape(5, 2), "a": np.array([0, 4, -1]),
                               "b": np.array([-5, 2])})
