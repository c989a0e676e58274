"""fuse_horizontal: four or more sibling axis-0 gathers from constant 2-D tables of one row width
become one gather (MIGraphX's gather_horizontal_fusion rules)."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs

FH = make_pass("fuse_horizontal")


def _tables(rows: list[int], width: int = 4) -> str:
    return "\n".join(
        f"t{k} = @literal{{{', '.join(str(v) for v in range(r * width))}}} -> float_type, {{{r}, {width}}}"
        for k, r in enumerate(rows)
    )


FOUR_LOOKUPS = (
    _tables([10, 6, 3, 5])
    + """
    i0 = @param:i0 -> int64_type, {2, 3}
    i1 = @param:i1 -> int64_type, {5, 3}
    i2 = @param:i2 -> int64_type, {1, 3}
    i3 = @param:i3 -> int64_type, {2, 3}
    @8 = gather[axis=0](t0, i0) -> float_type, {2, 3, 4}
    @9 = gather[axis=0](t1, i1) -> float_type, {5, 3, 4}
    @10 = gather[axis=0](t2, i2) -> float_type, {1, 3, 4}
    @11 = gather[axis=0](t3, i3) -> float_type, {2, 3, 4}
    @12 = @return(@8, @9, @10, @11)
"""
)


def test_four_embedding_lookups_become_one_gather_negative_indices_kept():
    p, q = parse(FOUR_LOOKUPS), parse(FOUR_LOOKUPS)
    run_passes(q, [FH, make_pass("dead_code_elimination")])
    names = [i.name for i in q.main if not i.is_builtin()]
    assert names.count("gather") == 1 and names.count("slice") == 4 and "reshape" not in names
    g = next(i for i in q.main if i.name == "gather")
    assert g.inputs[0].name == "concat" and list(g.shape.lens) == [10, 3, 4]
    feeds = {
        "i0": np.array([[0, 9, -1], [3, -10, 4]]),
        "i1": np.array([[5, 0, -6]] * 5),
        "i2": np.array([[-3, 2, -1]]),
        "i3": np.array([[4, -5, 0], [1, 2, 3]]),
    }
    assert_same_outputs(p, q, feeds)  # a negative index still reads its own table (MIGraphX's would not)


def test_constant_indices_are_offset_at_compile_time():
    text = (
        _tables([3, 4, 2, 3], 2)
        + """
        i = @literal{0, 2} -> int32_type, {2}
        j = @literal{-1, 1} -> int32_type, {2}
        @6 = gather[axis=0](t0, i) -> float_type, {2, 2}
        @7 = gather[axis=0](t1, j) -> float_type, {2, 2}
        @8 = gather[axis=0](t2, j) -> float_type, {2, 2}
        @9 = gather[axis=0](t3, i) -> float_type, {2, 2}
        @10 = @return(@6, @7, @8, @9)
    """
    )
    p, q = parse(text), parse(text)
    run_passes(q, [FH, make_pass("dead_code_elimination")])
    assert not any(i.name in ("mod", "add") and i.shape.type == "int32" for i in q.main)
    assert [i.name for i in q.main].count("gather") == 1
    t1 = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_array_equal(evaluate(q, {})[1], t1[[3, 1]])
    assert_same_outputs(p, q)


def test_left_alone_as_in_migraphx():
    three = (
        _tables([10, 6, 3])
        + """
        i = @param:i -> int64_type, {2}
        @4 = gather[axis=0](t0, i) -> float_type, {2, 4}
        @5 = gather[axis=0](t1, i) -> float_type, {2, 4}
        @6 = gather[axis=0](t2, i) -> float_type, {2, 4}
        @7 = @return(@4, @5, @6)
    """
    )
    assert not run_passes(parse(three), [FH]).records[0].changed  # fewer than four
    params = """
        t0 = @param:t0 -> float_type, {10, 4}
        t1 = @param:t1 -> float_type, {6, 4}
        t2 = @param:t2 -> float_type, {3, 4}
        t3 = @param:t3 -> float_type, {5, 4}
        i = @param:i -> int64_type, {2}
        @5 = gather[axis=0](t0, i) -> float_type, {2, 4}
        @6 = gather[axis=0](t1, i) -> float_type, {2, 4}
        @7 = gather[axis=0](t2, i) -> float_type, {2, 4}
        @8 = gather[axis=0](t3, i) -> float_type, {2, 4}
        @9 = @return(@5, @6, @7, @8)
    """
    assert not run_passes(parse(params), [FH]).records[0].changed  # tables not constant
    dependent = (
        _tables([10, 10, 10, 10])
        + """
        i = @param:i -> int64_type, {2}
        @5 = gather[axis=0](t0, i) -> float_type, {2, 4}
        @6 = gather[axis=0](t1, i) -> float_type, {2, 4}
        @7 = gather[axis=0](t2, i) -> float_type, {2, 4}
        @8 = convert[target_type=int64_type](@7) -> int64_type, {2, 4}
        @9 = gather[axis=0](t3, @8) -> float_type, {2, 4, 4}
        @10 = @return(@5, @6, @9)
    """
    )
    assert not run_passes(parse(dependent), [FH]).records[0].changed  # only three are independent


def test_shared_table_is_concatenated_once():
    text = (
        _tables([5, 3], 2)
        + """
        a = @param:a -> int64_type, {3}
        b = @param:b -> int64_type, {2}
        @4 = gather[axis=0](t0, a) -> float_type, {3, 2}
        @5 = gather[axis=0](t0, b) -> float_type, {2, 2}
        @6 = gather[axis=0](t1, a) -> float_type, {3, 2}
        @7 = gather[axis=0](t1, b) -> float_type, {2, 2}
        @8 = @return(@4, @5, @6, @7)
    """
    )
    p, q = parse(text), parse(text)
    run_passes(q, [FH, make_pass("dead_code_elimination")])
    concat = [i for i in q.main if i.name == "concat"]
    assert len(concat) == 2 and list(concat[0].shape.lens) == [8, 2]  # tables: 5 + 3 rows, not 16
    assert_same_outputs(p, q, {"a": np.array([0, 2, -1]), "b": np.array([-3, 1])})
