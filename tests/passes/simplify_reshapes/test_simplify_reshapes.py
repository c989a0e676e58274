"""simplify_reshapes: IR-text tests per finder and chain shape, numerics on every rewrite."""

from __future__ import annotations

import pytest

from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import FunctionPass
from migx_explore.compiler.passes import simplify_reshapes as sr
from migx_explore.compiler.passes.rewrite import sweep
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import assert_same_outputs, check_pass


def only(*rules):
    return FunctionPass(fn=lambda m: sweep(m, rules), label="rules")


X = "x = @param:x -> float_type, {2, 3, 4}"


@pytest.mark.parametrize(
    "op, shape",
    [
        ("reshape[dims={2, 3, 4}]", "{2, 3, 4}"),
        ("transpose[permutation={0, 1, 2}]", "{2, 3, 4}"),
        ("slice[axes={1},starts={0},ends={3}]", "{2, 3, 4}"),
        ("contiguous", "{2, 3, 4}"),
        ("convert[target_type=float]", "{2, 3, 4}"),
        ("reduce_sum[axes={}]", "{2, 3, 4}"),
        ("pad[pads={0, 0, 0, 0, 0, 0}]", "{2, 3, 4}"),
    ],
)
def test_nop_reshapes(op, shape):
    check_pass(
        f"""
        {X}
        y = {op}(x) -> float_type, {shape}
        r = @return(y)
    """,
        [only(*sr.RULES)],
        f"""
        {X}
        r = @return(x)
    """,
    )


def test_flatten_becomes_reshape():
    check_pass(
        f"""
        {X}
        y = flatten[axis=1](x) -> float_type, {{2, 12}}
        r = @return(y)
    """,
        [only(sr.Flatten())],
        f"""
        {X}
        y = reshape[dims={{2, 12}}](x) -> float_type, {{2, 12}}
        r = @return(y)
    """,
    )


def _chain(body: str, out: str, want: str | None):
    before = f"""
        {X}
        {body}
        r = @return(y)
    """
    after = (
        f"""
        {X}
        {want}
        r = @return({out})
    """
        if want is not None
        else before
    )
    check_pass(before, [only(sr.NestedShapeTransforms())], after)


def test_nested_reshapes_collapse():
    _chain(
        """
        a = reshape[dims={6, 4}](x) -> float_type, {6, 4}
        b = unsqueeze[axes={0}](a) -> float_type, {1, 6, 4}
        y = reshape[dims={3, 8}](b) -> float_type, {3, 8}
    """,
        "y",
        "y = reshape[dims={3, 8}](x) -> float_type, {3, 8}",
    )


def test_squeeze_of_unsqueeze_vanishes():
    _chain(
        """
        a = unsqueeze[axes={1}](x) -> float_type, {2, 1, 3, 4}
        y = squeeze[axes={1}](a) -> float_type, {2, 3, 4}
    """,
        "x",
        "",
    )


def test_transpose_pair_cancels():
    _chain(
        """
        a = transpose[permutation={2, 0, 1}](x) -> float_type, {4, 2, 3}, {1, 12, 4}
        y = transpose[permutation={1, 2, 0}](a) -> float_type, {2, 3, 4}
    """,
        "x",
        "",
    )


def test_transposes_compose():
    _chain(
        """
        a = transpose[permutation={1, 0, 2}](x) -> float_type, {3, 2, 4}, {4, 12, 1}
        y = transpose[permutation={0, 2, 1}](a) -> float_type, {3, 4, 2}, {4, 1, 12}
    """,
        "y",
        "y = transpose[permutation={1, 2, 0}](x) -> float_type, {3, 4, 2}, {4, 1, 12}",
    )


def test_reshape_transpose_reshape_is_one_transpose():
    # merge (2, 3) into 6, swap with 4, split 6 again: a rotation of the axes
    _chain(
        """
        a = reshape[dims={6, 4}](x) -> float_type, {6, 4}
        b = transpose[permutation={1, 0}](a) -> float_type, {4, 6}, {1, 4}
        y = reshape[dims={4, 2, 3}](b) -> float_type, {4, 2, 3}
    """,
        "y",
        "y = transpose[permutation={2, 0, 1}](x) -> float_type, {4, 2, 3}, {1, 12, 4}",
    )


def test_unsqueeze_transpose_squeeze_is_one_transpose():
    check_pass(
        """
        x = @param:x -> float_type, {3, 4}
        a = unsqueeze[axes={0}](x) -> float_type, {1, 3, 4}
        b = transpose[permutation={0, 2, 1}](a) -> float_type, {1, 4, 3}, {12, 1, 4}
        y = squeeze[axes={0}](b) -> float_type, {4, 3}, {1, 4}
        r = @return(y)
    """,
        [only(sr.NestedShapeTransforms())],
        """
        x = @param:x -> float_type, {3, 4}
        y = transpose[permutation={1, 0}](x) -> float_type, {4, 3}, {1, 4}
        r = @return(y)
    """,
    )


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
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = unsqueeze[axes={0}](x) -> float_type, {1, 3}
        y = multibroadcast[out_lens={2, 3}](a) -> float_type, {2, 3}, {0, 1}
        r = @return(y)
    """,
        [only(sr.NestedShapeTransforms())],
        """
        x = @param:x -> float_type, {3}
        y = multibroadcast[out_lens={2, 3}](x) -> float_type, {2, 3}, {0, 1}
        r = @return(y)
    """,
    )


def test_nested_broadcasts_become_one_broadcast():
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = broadcast[axis=0,out_lens={3, 4}](x) -> float_type, {3, 4}, {1, 0}
        y = multibroadcast[out_lens={2, 3, 4}](a) -> float_type, {2, 3, 4}, {0, 1, 0}
        r = @return(y)
    """,
        [only(sr.NestedShapeTransforms())],
        """
        x = @param:x -> float_type, {3}
        y = broadcast[axis=1,out_lens={2, 3, 4}](x) -> float_type, {2, 3, 4}, {0, 1, 0}
        r = @return(y)
    """,
    )


def test_a_reshape_of_a_broadcast_becomes_a_broadcast_of_a_reshape():
    """Same length, but the reshape now reads a standard tensor: no copy of the broadcast (a
    GroupNorm's per-channel scale split into groups by fuse_pointwise's common dims)."""
    check_pass(
        """
        g = @param:g -> float_type, {6, 1, 1}
        a = multibroadcast[out_lens={1, 6, 4, 4}](g) -> float_type, {1, 6, 4, 4}, {0, 1, 0, 0}
        y = reshape[dims={1, 3, 2, 4, 4}](a) -> float_type, {1, 3, 2, 4, 4}
        r = @return(y)
    """,
        [only(sr.NestedShapeTransforms())],
        """
        g = @param:g -> float_type, {6, 1, 1}
        a = reshape[dims={1, 3, 2, 1, 1}](g) -> float_type, {1, 3, 2, 1, 1}
        y = multibroadcast[out_lens={1, 3, 2, 4, 4}](a) -> float_type, {1, 3, 2, 4, 4}, {0, 2, 1, 0, 0}
        r = @return(y)
    """,
    )


def test_scalar_broadcast_chain():
    check_pass(
        """
        x = @param:x -> float_type, {1, 1}
        a = multibroadcast[out_lens={1, 4}](x) -> float_type, {1, 4}, {0, 0}
        b = transpose[permutation={1, 0}](a) -> float_type, {4, 1}, {0, 0}
        y = reshape[dims={2, 2}](b) -> float_type, {2, 2}
        r = @return(y)
    """,
        [only(sr.NestedShapeTransforms())],
        """
        x = @param:x -> float_type, {1, 1}
        y = multibroadcast[out_lens={2, 2}](x) -> float_type, {2, 2}, {0, 0}
        r = @return(y)
    """,
    )


def test_nested_slice():
    check_pass(
        f"""
        {X}
        a = slice[axes={{1, 2}},starts={{1, 0}},ends={{3, 4}}](x) -> float_type, {{2, 2, 4}}, {{12, 4, 1}}
        y = slice[axes={{0, 2}},starts={{1, 1}},ends={{2, 3}}](a) -> float_type, {{1, 2, 2}}, {{12, 4, 1}}
        r = @return(y)
    """,
        [only(sr.NestedSlice())],
        f"""
        {X}
        y = slice[axes={{0, 1, 2}},starts={{1, 1, 1}},ends={{2, 3, 3}}](x) -> float_type, {{1, 2, 2}}, {{12, 4, 1}}
        r = @return(y)
    """,
    )


def test_slice_of_concat_covering_one_input():
    # As MIGraphX's find_concat_slice: only a slice that is exactly one input folds; a slice
    # inside an input (y) stays a slice of the concat.
    check_pass(
        """
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 5}
        c = concat[axis=1](a,b) -> float_type, {2, 8}
        y = slice[axes={1},starts={4},ends={7}](c) -> float_type, {2, 3}, {8, 1}
        z = slice[axes={1},starts={3},ends={8}](c) -> float_type, {2, 5}, {8, 1}
        r = @return(y,z)
    """,
        [only(sr.ConcatSlice())],
        """
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 5}
        c = concat[axis=1](a,b) -> float_type, {2, 8}
        y = slice[axes={1},starts={4},ends={7}](c) -> float_type, {2, 3}, {8, 1}
        r = @return(y,b)
    """,
    )


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
    check_pass(
        """
        x = @param:x -> float_type, {2, 8}
        y = @param:y -> float_type, {2, 1}
        a = slice[axes={1},starts={1},ends={3}](x) -> float_type, {2, 2}, {8, 1}
        b = slice[axes={1},starts={3},ends={6}](x) -> float_type, {2, 3}, {8, 1}
        c = concat[axis=1](y,a,b) -> float_type, {2, 6}
        r = @return(c)
    """,
        [only(sr.ConcatOfSlices())],
        """
        x = @param:x -> float_type, {2, 8}
        y = @param:y -> float_type, {2, 1}
        ab = slice[axes={1},starts={1},ends={6}](x) -> float_type, {2, 5}, {8, 1}
        c = concat[axis=1](y,ab) -> float_type, {2, 6}
        r = @return(c)
    """,
    )


def test_nested_concat():
    check_pass(
        """
        a = @param:a -> float_type, {2, 1}
        b = @param:b -> float_type, {2, 2}
        c = @param:c -> float_type, {2, 3}
        ab = concat[axis=-1](a,b) -> float_type, {2, 3}
        y = concat[axis=1](ab,c) -> float_type, {2, 6}
        r = @return(y)
    """,
        [only(sr.NestedConcat())],
        """
        a = @param:a -> float_type, {2, 1}
        b = @param:b -> float_type, {2, 2}
        c = @param:c -> float_type, {2, 3}
        y = concat[axis=1](a,b,c) -> float_type, {2, 6}
        r = @return(y)
    """,
    )


def test_concat_of_transposes():
    check_pass(
        """
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 4}
        ta = transpose[permutation={1, 0}](a) -> float_type, {3, 2}, {1, 3}
        tb = transpose[permutation={1, 0}](b) -> float_type, {4, 2}, {1, 4}
        y = concat[axis=0](ta,tb) -> float_type, {7, 2}
        r = @return(y)
    """,
        [only(sr.ConcatTranspose())],
        """
        a = @param:a -> float_type, {2, 3}
        b = @param:b -> float_type, {2, 4}
        c = concat[axis=1](a,b) -> float_type, {2, 7}
        y = transpose[permutation={1, 0}](c) -> float_type, {7, 2}, {1, 7}
        r = @return(y)
    """,
    )


def test_concat_of_multibroadcasts():
    check_pass(
        """
        a = @param:a -> float_type, {3, 2}
        b = @param:b -> float_type, {3, 5}
        ba = multibroadcast[out_lens={4, 3, 2}](a) -> float_type, {4, 3, 2}, {0, 2, 1}
        bb = multibroadcast[out_lens={4, 3, 5}](b) -> float_type, {4, 3, 5}, {0, 5, 1}
        y = concat[axis=2](ba,bb) -> float_type, {4, 3, 7}
        r = @return(y)
    """,
        [only(sr.ConcatMultibroadcasts())],
        """
        a = @param:a -> float_type, {3, 2}
        b = @param:b -> float_type, {3, 5}
        c = concat[axis=1](a,b) -> float_type, {3, 7}
        y = multibroadcast[out_lens={4, 3, 7}](c) -> float_type, {4, 3, 7}, {0, 7, 1}
        r = @return(y)
    """,
    )


def test_unary_moves_before_the_broadcast():
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = abs(x) -> float_type, {3}
        b = broadcast[axis=1,out_lens={2, 3}](a) -> float_type, {2, 3}, {0, 1}
        y = exp(b) -> float_type, {2, 3}
        r = @return(y)
    """,
        [only(sr.UnaryShapeTransforms())],
        """
        x = @param:x -> float_type, {3}
        a = abs(x) -> float_type, {3}
        e = exp(a) -> float_type, {3}
        y = broadcast[axis=1,out_lens={2, 3}](e) -> float_type, {2, 3}, {0, 1}
        r = @return(y)
    """,
    )


def test_unary_stays_after_a_transform_of_a_parameter():
    text = """
        x = @param:x -> float_type, {3}
        b = broadcast[axis=1,out_lens={2, 3}](x) -> float_type, {2, 3}, {0, 1}
        y = exp(b) -> float_type, {2, 3}
        r = @return(y)
    """
    check_pass(text, [only(sr.UnaryShapeTransforms())], text)
