"""simplify_reshapes: IR-text tests per finder and chain shape, numerics on every rewrite."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.op import registered_ops
from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes import FunctionPass
from migx_explore.compiler.passes import simplify_reshapes as sr
from migx_explore.compiler.passes.rule_pass import sweep
from migx_explore.compiler.passes.simplify_reshapes import SimplifyReshapes
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text


def only(*rules):
    return FunctionPass(fn=lambda m: sweep(m, rules), label="rules")


X = "x = @param:x -> float_type, {2, 3, 4}"


@pytest.mark.parametrize("op, shape", [
    ("reshape[dims={2, 3, 4}]", "{2, 3, 4}"),
    ("transpose[permutation={0, 1, 2}]", "{2, 3, 4}"),
    ("slice[axes={1},starts={0},ends={3}]", "{2, 3, 4}"),
    ("contiguous", "{2, 3, 4}"),
    ("convert[target_type=float]", "{2, 3, 4}"),
    ("reduce_sum[axes={}]", "{2, 3, 4}"),
    ("pad[pads={0, 0, 0, 0, 0, 0}]", "{2, 3, 4}"),
])
def test_nop_reshapes(op, shape):
    check_pass(f"""
        {X}
        y = {op}(x) -> float_type, {shape}
        r = @return(y)
    """, [only(*sr.RULES)], f"""
        {X}
        r = @return(x)
    """)


def test_flatten_becomes_reshape():
    check_pass(f"""
        {X}
        y = flatten[axis=1](x) -> float_type, {{2, 12}}
        r = @return(y)
    """, [only(sr.Flatten())], f"""
        {X}
        y = reshape[dims={{2, 12}}](x) -> float_type, {{2, 12}}
        r = @return(y)
    """)


def _chain(body: str, out: str, want: str | None):
    before = f"""
        {X}
        {body}
        r = @return(y)
    """
    after = f"""
        {X}
        {want}
        r = @return({out})
    """ if want is not None else before
    check_pass(before, [only(sr.NestedShapeTransforms())], after)


def test_nested_reshapes_collapse():
    _chain("""
        a = reshape[dims={6, 4}](x) -> float_type, {6, 4}
        b = unsqueeze[axes={0}](a) -> float_type, {1, 6, 4}
        y = reshape[dims={3, 8}](b) -> float_type, {3, 8}
    """, "y", "y = reshape[dims={3, 8}](x) -> float_type, {3, 8}")


def test_squeeze_of_unsqueeze_vanishes():
    _chain("""
        a = unsqueeze[axes={1}](x) -> float_type, {2, 1, 3, 4}
        y = squeeze[axes={1}](a) -> float_type, {2, 3, 4}
    """, "x", "")


def test_transpose_pair_cancels():
    _chain("""
        a = transpose[permutation={2, 0, 1}](x) -> float_type, {4, 2, 3}, {1, 12, 4}
        y = transpose[permutation={1, 2, 0}](a) -> float_type, {2, 3, 4}
    """, "x", "")


def test_transposes_compose():
    _chain("""
        a = transpose[permutation={1, 0, 2}](x) -> float_type, {3, 2, 4}, {4, 12, 1}
        y = transpose[permutation={0, 2, 1}](a) -> float_type, {3, 4, 2}, {4, 1, 12}
    """, "y", "y = transpose[permutation={1, 2, 0}](x) -> float_type, {3, 4, 2}, {4, 1, 12}")


def test_reshape_transpose_reshape_is_one_transpose():
    # merge (2, 3) into 6, swap with 4, split 6 again: a rotation of the axes
    _chain("""
        a = reshape[dims={6, 4}](x) -> float_type, {6, 4}
        b = transpose[permutation={1, 0}](a) -> float_type, {4, 6}, {1, 4}
        y = reshape[dims={4, 2, 3}](b) -> float_type, {4, 2, 3}
    """, "y", "y = transpose[permutation={2, 0, 1}](x) -> float_type, {4, 2, 3}, {1, 12, 4}")


def test_unsqueeze_transpose_squeeze_is_one_transpose():
    check_pass("""
        x = @param:x -> float_type, {3, 4}
        a = unsqueeze[axes={0}](x) -> float_type, {1, 3, 4}
        b = transpose[permutation={0, 2, 1}](a) -> float_type, {1, 4, 3}, {12, 1, 4}
        y = squeeze[axes={0}](b) -> float_type, {4, 3}, {1, 4}
        r = @return(y)
    """, [only(sr.NestedShapeTransforms())], """
        x = @param:x -> float_type, {3, 4}
        y = transpose[permutation={1, 0}](x) -> float_type, {4, 3}, {1, 4}
        r = @return(y)
    """)


def test_split_transpose_merge_needs_two_ops():
    # (2, 3, 4) -> split 4 into (2, 2), move one 2 first, merge the rest: transpose + reshape
    p = parse(f"""
        {X}
        a = reshape[dims={{2, 3, 2, 2}}](x) -> float_type, {{2, 3, 2, 2}}
        b = transpose[permutation={{2, 0, 1, 3}}](a) -> float_type, {{2, 2, 3, 2}}, {{2, 12, 4, 1}}
        c = reshape[dims={{4, 6}}](b) -> float_type, {{4, 6}}
        y = reshape[dims={{2, 12}}](c) -> float_type, {{2, 12}}
        r = @return(y)
    """)
    q = p.copy()
    assert sweep(q.main, [sr.NestedShapeTransforms()])
    assert [i.name for i in q.main if not i.is_builtin()] == ["reshape", "transpose", "reshape"]
    assert_same_outputs(p, q)


def test_minimal_chain_is_refused_with_reason():
    p = parse(f"""
        {X}
        a = transpose[permutation={{1, 0, 2}}](x) -> float_type, {{3, 2, 4}}, {{4, 12, 1}}
        y = reshape[dims={{6, 4}}](a) -> float_type, {{6, 4}}
        r = @return(y)
    """)
    (miss,) = [nm for nm in near_misses(p.main, sr.NestedShapeTransforms()) if nm.op == "reshape"]
    assert "already minimal" in miss.reason


def test_broadcast_chain_becomes_one_multibroadcast():
    check_pass("""
        x = @param:x -> float_type, {3}
        a = unsqueeze[axes={0}](x) -> float_type, {1, 3}
        y = multibroadcast[out_lens={2, 3}](a) -> float_type, {2, 3}, {0, 1}
        r = @return(y)
    """, [only(sr.NestedShapeTransforms())], """
        x = @param:x -> float_type, {3}
        y = multibroadcast[out_lens={2, 3}](x) -> float_type, {2, 3}, {0, 1}
        r = @return(y)
    """)


def test_nested_broadcasts_become_one_broadcast():
    check_pass("""
        x = @param:x -> float_type, {3}
        a = broadcast[axis=0,out_lens={3, 4}](x) -> float_type, {3, 4}, {1, 0}
        y = multibroadcast[out_lens={2, 3, 4}](a) -> float_type, {2, 3, 4}, {0, 1, 0}
        r = @return(y)
    """, [only(sr.NestedShapeTransforms())], """
        x = @param:x -> float_type, {3}
        y = broadcast[axis=1,out_lens={2, 3, 4}](x) -> float_type, {2, 3, 4}, {0, 1, 0}
        r = @return(y)
    """)


def test_scalar_broadcast_chain():
    check_pass("""
        x = @param:x -> float_type, {1, 1}
        a = multibroadcast[out_lens={1, 4}](x) -> float_type, {1, 4}, {0, 0}
        b = transpose[permutation={1, 0}](a) -> float_type, {4, 1}, {0, 0}
        y = reshape[dims={2, 2}](b) -> float_type, {2, 2}
        r = @return(y)
    """, [only(sr.NestedShapeTransforms())], """
        x = @param:x -> float_type, {1, 1}
        y = multibroadcast[out_lens={2, 2}](x) -> float_type, {2, 2}, {0, 0}
        r = @return(y)
    """)


def test_nested_slice():
    check_pass(f"""
        {X}
        a = slice[axes={{1, 2}},starts={{1, 0}},ends={{3, 4}}](x) -> float_type, {{2, 2, 4}}, {{12, 4, 1}}
        y = slice[axes={{0, 2}},starts={{1, 1}},ends={{2, 3}}](a) -> float_type, {{1, 2, 2}}, {{12, 4, 1}}
        r = @return(y)
    """, [only(sr.NestedSlice())], f"""
        {X}
        y = slice[axes={{0, 1, 2}},starts={{1, 1, 1}},ends={{2, 3, 3}}](x) -> float_type, {{1, 2, 2}}, {{12, 4, 1}}
        r = @return(y)
    """)


def test_slice_of_concat_covering_one_input():
    # As MIGraphX's find_concat_slice: only a slice that is exactly one input folds; a slice
    # inside an input (y) stays a slice of the concat.
    check_pass("""
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 5}
        c = concat[axis=1](a,b) -> float_type, {2, 8}
        y = slice[axes={1},starts={4},ends={7}](c) -> float_type, {2, 3}, {8, 1}
        z = slice[axes={1},starts={3},ends={8}](c) -> float_type, {2, 5}, {8, 1}
        r = @return(y,z)
    """, [only(sr.ConcatSlice())], """
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 5}
        c = concat[axis=1](a,b) -> float_type, {2, 8}
        y = slice[axes={1},starts={4},ends={7}](c) -> float_type, {2, 3}, {8, 1}
        r = @return(y,b)
    """)


def test_slice_across_concat_inputs_is_refused():
    p = parse("""
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 5}
        c = concat[axis=1](a,b) -> float_type, {2, 8}
        y = slice[axes={1},starts={2},ends={5}](c) -> float_type, {2, 3}, {8, 1}
        r = @return(y)
    """)
    (miss,) = [nm for nm in near_misses(p.main, sr.ConcatSlice()) if nm.op == "concat"]
    assert "covers exactly one input" in miss.reason


def test_concat_of_adjacent_slices():
    check_pass("""
        x = @param:x -> float_type, {2, 8}
        y = @param:y -> float_type, {2, 1}
        a = slice[axes={1},starts={1},ends={3}](x) -> float_type, {2, 2}, {8, 1}
        b = slice[axes={1},starts={3},ends={6}](x) -> float_type, {2, 3}, {8, 1}
        c = concat[axis=1](y,a,b) -> float_type, {2, 6}
        r = @return(c)
    """, [only(sr.ConcatOfSlices())], """
        x = @param:x -> float_type, {2, 8}
        y = @param:y -> float_type, {2, 1}
        ab = slice[axes={1},starts={1},ends={6}](x) -> float_type, {2, 5}, {8, 1}
        c = concat[axis=1](y,ab) -> float_type, {2, 6}
        r = @return(c)
    """)


def test_nested_concat():
    check_pass("""
        a = @param:a -> float_type, {2, 1}
        b = @param:b -> float_type, {2, 2}
        c = @param:c -> float_type, {2, 3}
        ab = concat[axis=-1](a,b) -> float_type, {2, 3}
        y = concat[axis=1](ab,c) -> float_type, {2, 6}
        r = @return(y)
    """, [only(sr.NestedConcat())], """
        a = @param:a -> float_type, {2, 1}
        b = @param:b -> float_type, {2, 2}
        c = @param:c -> float_type, {2, 3}
        y = concat[axis=1](a,b,c) -> float_type, {2, 6}
        r = @return(y)
    """)


def test_concat_of_transposes():
    check_pass("""
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 4}
        ta = transpose[permutation={1, 0}](a) -> float_type, {3, 2}, {1, 3}
        tb = transpose[permutation={1, 0}](b) -> float_type, {4, 2}, {1, 4}
        y = concat[axis=0](ta,tb) -> float_type, {7, 2}
        r = @return(y)
    """, [only(sr.ConcatTranspose())], """
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 4}
        c = concat[axis=1](a,b) -> float_type, {2, 7}
        y = transpose[permutation={1, 0}](c) -> float_type, {7, 2}, {1, 7}
        r = @return(y)
    """)


def test_concat_of_multibroadcasts():
    check_pass("""
        a = @param:a -> float_type, {3, 2}
        b = @param:b -> float_type, {3, 5}
        ba = multibroadcast[out_lens={4, 3, 2}](a) -> float_type, {4, 3, 2}, {0, 2, 1}
        bb = multibroadcast[out_lens={4, 3, 5}](b) -> float_type, {4, 3, 5}, {0, 5, 1}
        y = concat[axis=2](ba,bb) -> float_type, {4, 3, 7}
        r = @return(y)
    """, [only(sr.ConcatMultibroadcasts())], """
        a = @param:a -> float_type, {3, 2}
        b = @param:b -> float_type, {3, 5}
        c = concat[axis=1](a,b) -> float_type, {3, 7}
        y = multibroadcast[out_lens={4, 3, 7}](c) -> float_type, {4, 3, 7}, {0, 7, 1}
        r = @return(y)
    """)


def test_unary_moves_before_the_broadcast():
    check_pass("""
        x = @param:x -> float_type, {3}
        a = abs(x) -> float_type, {3}
        b = broadcast[axis=1,out_lens={2, 3}](a) -> float_type, {2, 3}, {0, 1}
        y = exp(b) -> float_type, {2, 3}
        r = @return(y)
    """, [only(sr.UnaryShapeTransforms())], """
        x = @param:x -> float_type, {3}
        a = abs(x) -> float_type, {3}
        e = exp(a) -> float_type, {3}
        y = broadcast[axis=1,out_lens={2, 3}](e) -> float_type, {2, 3}, {0, 1}
        r = @return(y)
    """)


def test_unary_stays_after_a_transform_of_a_parameter():
    text = """
        x = @param:x -> float_type, {3}
        b = broadcast[axis=1,out_lens={2, 3}](x) -> float_type, {2, 3}, {0, 1}
        y = exp(b) -> float_type, {2, 3}
        r = @return(y)
    """
    check_pass(text, [only(sr.UnaryShapeTransforms())], text)


needs_gather = pytest.mark.skipif("gather" not in registered_ops(), reason="gather op not registered")


@needs_gather
@pytest.mark.parametrize("idx, ops", [
    ([1, 2, 3], ["slice"]),
    ([0, 2, 4], ["slice", "step"]),
    ([2, 2, 2], ["slice", "multibroadcast"]),
    ([[1, 2], [3, 4]], ["slice", "reshape"]),
    ([-1], ["slice"]),
])
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


@pytest.mark.parametrize("data, indices, idx_shape, axis", [
    ("{8}", "{0, 4, 1, 5, 2, 6, 3, 7}", "{8}", 0),  # a transpose of the data read as {2, 4}
    ("{12}", "{1, 4, 7, 10, 2, 5, 8, 11}", "{8}", 0),  # transpose + slice of a window
    ("{30}", "{5, 10, 15}", "{3}", 0),  # the window runs past the end: read from a doubled copy
    ("{2, 4}", "{1, 1, 1, 2, 2, 2}", "{2, 3}", 1),  # repeated indices: a broadcast
    ("{48}", "{0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 4, 5, 6, 7, 20, 21, 22, 23, 36, 37, 38, 39}", "{24}", 0),
])
def test_gather_of_a_strided_view_becomes_views(data, indices, idx_shape, axis):
    n_idx = idx_shape.strip("{}").split(", ")
    lens = data.strip("{}").split(", ")
    out = lens[:axis] + n_idx + lens[axis + 1:]
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
    check_pass(text, [SimplifyReshapes()], """
        x = @param:x -> float_type, {2, 3, 4}
        y = relu(x) -> float_type, {2, 3, 4}
        r = @return(y)
    """)


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
            cuts = sorted(rng.choice(range(1, len(factors)), size=rng.integers(0, len(factors)), replace=False)) \
                if len(factors) > 1 else []
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
