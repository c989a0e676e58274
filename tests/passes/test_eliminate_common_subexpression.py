"""eliminate_common_subexpression."""

from __future__ import annotations

from migx_explore.compiler.passes.eliminate_common_subexpression import EliminateCommonSubexpression
from migx_explore.compiler.testing import check_pass


def test_merges_identical_chains():
    check_pass(
        """
        x = @param:x -> float_type, {3}
        a = exp(x) -> float_type, {3}
        b = exp(x) -> float_type, {3}
        c = neg(a) -> float_type, {3}
        d = neg(b) -> float_type, {3}
        y = add(c,d) -> float_type, {3}
        r = @return(y)
    """,
        [EliminateCommonSubexpression()],
        """
        x = @param:x -> float_type, {3}
        a = exp(x) -> float_type, {3}
        b = exp(x) -> float_type, {3}
        c = neg(a) -> float_type, {3}
        d = neg(a) -> float_type, {3}
        y = add(c,c) -> float_type, {3}
        r = @return(y)
    """,
    )


def test_merges_equal_literals_and_commuted_inputs():
    check_pass(
        """
        x = @param:x -> float_type, {2}
        a = @literal{1, 2} -> float_type, {2}
        b = @literal{1, 2} -> float_type, {2}
        p = add(x,a) -> float_type, {2}
        q = add(b,x) -> float_type, {2}
        r = @return(p,q)
    """,
        [EliminateCommonSubexpression()],
        """
        x = @param:x -> float_type, {2}
        a = @literal{1, 2} -> float_type, {2}
        b = @literal{1, 2} -> float_type, {2}
        p = add(x,a) -> float_type, {2}
        q = add(a,x) -> float_type, {2}
        r = @return(p,p)
    """,
    )


def test_keeps_different_attributes_order_sensitive_ops_and_literals():
    text = """
        x = @param:x -> float_type, {2}
        y = @param:y -> float_type, {2}
        a = @literal{1, 2} -> float_type, {2}
        b = @literal{1, 3} -> float_type, {2}
        p = sub(x,y) -> float_type, {2}
        q = sub(y,x) -> float_type, {2}
        s = add(p,a) -> float_type, {2}
        t = add(q,b) -> float_type, {2}
        u = leaky_relu[alpha=0.1](s) -> float_type, {2}
        v = leaky_relu[alpha=0.2](s) -> float_type, {2}
        r = @return(t,u,v)
    """
    check_pass(text, [EliminateCommonSubexpression()], text)
