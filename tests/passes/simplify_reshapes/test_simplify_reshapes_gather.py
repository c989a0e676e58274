"""simplify_reshapes: the gather finders (strided views), a whole-pass clean-up and random view
chains (split from test_simplify_reshapes.py, which holds the per-finder IR-text tests)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.op import registered_ops
from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes import simplify_reshapes as sr
from migx_explore.compiler.passes.rewrite import sweep
from migx_explore.compiler.passes.simplify_reshapes import SimplifyReshapes
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text

needs_gather = pytest.mark.skipif("gather" not in registered_ops(), reason="gather op not registered")


@needs_gather
@pytest.mark.parametrize(
    "idx, ops",
    [
        ([1, 2, 3], ["slice"]),
        ([0, 2, 4], ["slice", "step"]),
        ([2, 2, 2], ["slice", "multibroadcast"]),
        ([[1, 2], [3, 4]], ["slice", "reshape"]),
        ([-1], ["slice"]),
    ],
)
def test_gather_with_arithmetic_indices(idx, ops):
    ind = np.asarray(idx)
    lens = ", ".join(map(str, ind.shape))
    vals = ", ".join(map(str, ind.reshape(-1)))
    out = ", ".join(map(str, (2, *ind.shape)))
    text = f"""
        x = @param:x -> float_type, {{2, 6}}
        i = @literal{{{vals}}} -> int64_type, {{{lens}}}
        y = gather[axis=1](x,i) -> float_type, {{{out}}}
        r = @return(y)
    """
    p = run_on_text(text, [SimplifyReshapes(enable_gather_rewrite=True)])
    assert [i.name for i in p.main if not i.is_builtin()] == ops
    assert_same_outputs(parse(text), p)


@needs_gather
def test_gather_rewrite_is_off_by_default_and_refuses_shuffles():
    text = """
        x = @param:x -> float_type, {2, 6}
        i = @literal{3, 1, 2} -> int64_type, {3}
        y = gather[axis=1](x,i) -> float_type, {2, 3}
        r = @return(y)
    """
    check_pass(text, [SimplifyReshapes(enable_gather_rewrite=True)], text)
    (miss,) = [nm for nm in near_misses(parse(text).main, sr.GatherView()) if nm.op == "gather"]
    assert "do not read a strided view" in miss.reason
    p = run_on_text(text.replace("{3, 1, 2}", "{1, 2, 3}"), [SimplifyReshapes()])
    assert any(i.name == "gather" for i in p.main)


@pytest.mark.parametrize(
    "data, indices, idx_shape, axis",
    [
        ("{8}", "{0, 4, 1, 5, 2, 6, 3, 7}", "{8}", 0),  # a transpose of the data read as {2, 4}
        ("{12}", "{1, 4, 7, 10, 2, 5, 8, 11}", "{8}", 0),  # transpose + slice of a window
        ("{30}", "{5, 10, 15}", "{3}", 0),  # the window runs past the end: read from a doubled copy
        ("{2, 4}", "{1, 1, 1, 2, 2, 2}", "{2, 3}", 1),  # repeated indices: a broadcast
        ("{48}", "{0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 4, 5, 6, 7, 20, 21, 22, 23, 36, 37, 38, 39}", "{24}", 0),
    ],
)
def test_gather_of_a_strided_view_becomes_views(data, indices, idx_shape, axis):
    n_idx = idx_shape.strip("{}").split(", ")
    lens = data.strip("{}").split(", ")
    out = lens[:axis] + n_idx + lens[axis + 1 :]
    text = f"""
        x = @param:x -> float_type, {data}
        i = @literal{indices} -> int64_type, {idx_shape}
        y = gather[axis={axis}](x,i) -> float_type, {{{", ".join(out)}}}
        r = @return(y)
    """
    original = parse(text)
    p = run_on_text(text, [SimplifyReshapes(enable_gather_rewrite=True)])
    assert not any(i.name == "gather" for i in p.main)
    assert_same_outputs(original, p)


def test_strided_view_decision_follows_migraphx():
    from migx_explore.compiler.passes.simplify_reshapes.gather_rules import strided_view, view_ops

    assert strided_view([0, 4, 1, 5, 2, 6, 3, 7]) == ([4, 2], [1, 4])
    assert strided_view([1, 0]) is None  # an offset below the first
    assert strided_view([0, 1, 2, 4]) is None  # runs of different lengths
    assert view_ops([3, 1], [2, 3], 30, 0) is None  # strides that do not nest


def test_full_pass_cleans_a_reshape_heavy_graph():
    text = """
        x = @param:x -> float_type, {2, 3, 4}
        a = flatten[axis=1](x) -> float_type, {2, 12}
        b = reshape[dims={2, 3, 4}](a) -> float_type, {2, 3, 4}
        t = transpose[permutation={0, 2, 1}](b) -> float_type, {2, 4, 3}, {12, 1, 4}
        u = transpose[permutation={0, 2, 1}](t) -> float_type, {2, 3, 4}
        s1 = slice[axes={2},starts={0},ends={2}](u) -> float_type, {2, 3, 2}, {12, 4, 1}
        s2 = slice[axes={2},starts={2},ends={4}](u) -> float_type, {2, 3, 2}, {12, 4, 1}
        c = concat[axis=2](s1,s2) -> float_type, {2, 3, 4}
        y = relu(c) -> float_type, {2, 3, 4}
        r = @return(y)
    """
    check_pass(
        text,
        [SimplifyReshapes()],
        """
        x = @param:x -> float_type, {2, 3, 4}
        y = relu(x) -> float_type, {2, 3, 4}
        r = @return(y)
    """,
    )


def _random_chain(rng) -> tuple:
    from migx_explore.compiler.ir import Program
    from migx_explore.compiler.op import Op
    from migx_explore.compiler.shape import Shape

    lens = [int(v) for v in rng.choice([1, 2, 3, 4, 6], size=rng.integers(1, 4))]
    p = Program()
    m = p.main
    y = m.add_parameter("x", Shape.of("float32", lens))
    for _ in range(rng.integers(2, 6)):
        cur = list(y.shape.lens)
        kind = rng.choice(["reshape", "transpose", "unsqueeze", "squeeze"])
        if kind == "transpose":
            op = Op("transpose", permutation=[int(v) for v in rng.permutation(len(cur))])
        elif kind == "unsqueeze":
            op = Op("unsqueeze", axes=[int(rng.integers(0, len(cur) + 1))])
        elif kind == "squeeze" and 1 in cur:
            op = Op("squeeze", axes=[cur.index(1)])
        else:
            factors = [f for n in cur for f in _primes(n)]
            rng.shuffle(factors)
            cuts = (
                sorted(rng.choice(range(1, len(factors)), size=rng.integers(0, len(factors)), replace=False))
                if len(factors) > 1
                else []
            )
            dims = [int(np.prod(g)) for g in np.split(np.array(factors, dtype=int), cuts)] if factors else [1]
            op = Op("reshape", dims=dims)
        y = m.add_instruction(op, [y])
    m.add_return([y])
    return p


def _primes(n: int) -> list[int]:
    out, d = [], 2
    while n > 1:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    return out


@pytest.mark.parametrize("seed", range(60))
def test_random_view_chains_stay_equal_and_never_grow(seed):
    p = _random_chain(np.random.default_rng(seed))
    q = p.copy()
    sweep(q.main, [sr.NestedShapeTransforms()])
    q.validate()
    count = [sum(1 for i in prog.main if not i.is_builtin() and i.outputs) for prog in (p, q)]
    assert count[1] <= count[0]
    assert_same_outputs(p, q, rtol=0, atol=0)


def _strided_view_by_segments(offsets):
    """MIGraphX make_strided_view as written there: one segment object per offset, grouped
    level by level (the reference the array form of gather_rules.strided_view must agree with)."""

    def find(segs, i, end):
        if end - i == 1:
            return segs[i], i + 1
        b0, stride = segs[i][0], segs[i + 1][0] - segs[i][0]
        if stride < 0:
            return segs[i], i + 1
        j = i
        while j + 1 < end and segs[j + 1][0] - segs[j][0] == stride:
            j += 1
        return (b0, stride, j + 1 - i), j + 1

    segs = [(int(x) - int(offsets[0]), 1, 1) for x in offsets]
    lens, strides = [], []
    while True:
        first, it = find(segs, 0, len(segs))
        grouped = [first]
        while it != len(segs):
            if len(segs) - it < first[2]:
                return None
            seg, nxt = find(segs, it, it + first[2])
            if nxt != it + first[2]:
                return None
            grouped.append(seg)
            it = nxt
        b0, stride, count = grouped[0]
        if stride < 0 or any(s[0] < 0 for s in grouped) or any(s[1:] != (stride, count) for s in grouped):
            return None
        lens.append(count)
        strides.append(stride)
        segs = grouped
        if len(segs) <= 1:
            break
    lens.reverse()
    strides.reverse()
    if 1 not in strides:
        lens, strides = lens + [1], strides + [1]
    return lens, strides


def test_strided_view_on_arrays_agrees_with_the_segment_grouping():
    import numpy as np

    from migx_explore.compiler.passes.simplify_reshapes.gather_rules import strided_view

    rng = np.random.default_rng(0)
    cases = [[0], [3, 3], [0, 0, 1, 1], [2, 1], [0, 2, 4, 1, 3, 5]]
    for _ in range(300):
        lens = rng.integers(1, 4, rng.integers(1, 4))
        flat = np.arange(int(np.prod(lens)) * 2).reshape(*lens, 2)[..., 0]  # a strided view of a bigger tensor
        view = np.transpose(flat, rng.permutation(flat.ndim)).reshape(-1) + int(rng.integers(0, 5))
        if rng.random() < 0.3:
            view = np.repeat(view, int(rng.integers(1, 3)))  # broadcast-like repeats
        if rng.random() < 0.3 and view.size > 1:
            view[rng.integers(0, view.size)] += int(rng.integers(-2, 3))  # break it
        cases.append(view.tolist())
    for offsets in cases:
        assert strided_view(offsets) == _strided_view_by_segments(offsets), offsets


def test_resize_sized_gather_decides_on_arrays():
    """The nearest-neighbour upsample of a 640x640 detector's P5 map: ~400k gathered offsets (the
    segment-per-offset grouping took seconds per call; the decision is unchanged)."""
    import numpy as np

    from migx_explore.compiler.passes.simplify_reshapes.gather_rules import flat_gather_offsets, strided_view

    idx = np.repeat(np.arange(20), 2)
    offsets = flat_gather_offsets([1, 256, 20, 40], idx, 2)
    assert strided_view(offsets) == ([5120, 2, 40], [40, 0, 1])  # rows read twice, each 40 wide
    small = flat_gather_offsets([1, 4, 20, 40], idx, 2)
    assert strided_view(small) == _strided_view_by_segments(small) == ([80, 2, 40], [40, 0, 1])
