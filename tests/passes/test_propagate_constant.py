"""propagate_constant: maximal constant subtrees fold to packed literals; memory-expanding
broadcasts (and views of them) stay; folded data is immutable and shared."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import run_passes
from migx_explore.compiler.passes.propagate_constant import PropagateConstant
from migx_explore.compiler.snapshot import snapshot
from migx_explore.compiler.testing import check_pass


def test_folds_a_constant_subtree_into_one_literal():
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = @literal{1, 2, 3} -> float_type, {3}
        b = @literal{4, 5, 6} -> float_type, {3}
        s = add(a,b) -> float_type, {3}
        n = neg(s) -> float_type, {3}
        y = mul(x,n) -> float_type, {3}
        r = @return(y)
    """,
        [PropagateConstant()],
        """
        x = @param:x -> float_type, {3}
        a = @literal{1, 2, 3} -> float_type, {3}
        b = @literal{4, 5, 6} -> float_type, {3}
        f = @literal{-5, -7, -9} -> float_type, {3}
        s = add(a,b) -> float_type, {3}
        n = neg(s) -> float_type, {3}
        y = mul(x,f) -> float_type, {3}
        r = @return(y)
    """,
    )


def test_keeps_memory_expanding_broadcast_but_folds_its_input():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        a = @literal{1, 2, 3} -> float_type, {3}
        n = neg(a) -> float_type, {3}
        b = multibroadcast[out_lens={2, 3}](n) -> float_type, {2, 3}, {0, 1}
        t = transpose[permutation={1, 0}](b) -> float_type, {3, 2}, {1, 0}
        u = transpose[permutation={1, 0}](t) -> float_type, {2, 3}, {0, 1}
        y = add(x,u) -> float_type, {2, 3}
        r = @return(y)
    """,
        [PropagateConstant()],
        """
        x = @param:x -> float_type, {2, 3}
        a = @literal{1, 2, 3} -> float_type, {3}
        f = @literal{-1, -2, -3} -> float_type, {3}
        n = neg(a) -> float_type, {3}
        b = multibroadcast[out_lens={2, 3}](f) -> float_type, {2, 3}, {0, 1}
        t = transpose[permutation={1, 0}](b) -> float_type, {3, 2}, {1, 0}
        u = transpose[permutation={1, 0}](t) -> float_type, {2, 3}, {0, 1}
        y = add(x,u) -> float_type, {2, 3}
        r = @return(y)
    """,
    )


def test_folds_a_broadcast_that_does_not_expand_memory():
    check_pass(
        """
        x = @param:x -> float_type, {1, 3}
        a = @literal{1, 2, 3} -> float_type, {3}
        b = multibroadcast[out_lens={1, 3}](a) -> float_type, {1, 3}, {0, 1}
        y = add(x,b) -> float_type, {1, 3}
        r = @return(y)
    """,
        [PropagateConstant()],
        """
        x = @param:x -> float_type, {1, 3}
        a = @literal{1, 2, 3} -> float_type, {3}
        f = @literal{1, 2, 3} -> float_type, {1, 3}
        b = multibroadcast[out_lens={1, 3}](a) -> float_type, {1, 3}, {0, 1}
        y = add(x,f) -> float_type, {1, 3}
        r = @return(y)
    """,
    )


def test_constant_module_output_without_return_is_folded_once():
    p = parse("""
        a = @literal{1, 2} -> float_type, {2}
        n = neg(a) -> float_type, {2}
    """)
    assert run_passes(p, [PropagateConstant()]).records[0].changed
    out = p.main.output_instructions()[0]
    assert out.name == "identity" and out.inputs[0].is_literal()
    np.testing.assert_array_equal(out.inputs[0].literal.data, [-1, -2])
    assert not run_passes(p, [PropagateConstant()]).records[0].changed


def test_skip_ops_and_ops_without_a_host_compute_stay():
    text = """
        x = @param:x -> float_type, {2}
        a = @literal{1, 2} -> float_type, {2}
        n = neg(a) -> float_type, {2}
        y = add(x,n) -> float_type, {2}
        r = @return(y)
    """
    check_pass(text, [PropagateConstant(skip_ops=("neg",))], text)


def test_folded_literal_is_read_only_shared_and_remembers_its_origin():
    p = parse("""
        x = @param:x -> float_type, {2}
        a = @literal{1, 2} -> float_type, {2}
        n = neg(a) -> float_type, {2}
        y = add(x,n) -> float_type, {2}
        r = @return(y)
    """)
    neg_id = next(i.id for i in p.main if i.name == "neg")
    run_passes(p, [PropagateConstant()])
    lit = next(i for i in p.main if i.name == "add").inputs[1]
    assert lit.is_literal()
    assert not lit.literal.data.flags.writeable
    assert neg_id in lit.origin
    snap = snapshot(p)
    assert snap.module().by_id[lit.id].literal is lit.literal
