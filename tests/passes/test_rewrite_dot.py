"""rewrite_dot: 1x1 convolution -> dot (standard and channels-last outputs)."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes.rewrite_dot import RewriteDot
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text

W = "w = @literal{" + ", ".join(str(v) for v in np.arange(12) - 5) + "} -> float_type, {3, 4, 1, 1}"


def test_nchw_1x1_conv_becomes_batched_dot():
    check_pass(
        f"""
        x = @param:x -> float_type, {{2, 4, 3, 5}}
        {W}
        c = convolution[padding={{0, 0}},stride={{1, 1}}](x,w) -> float_type, {{2, 3, 3, 5}}
        r = @return(c)
    """,
        [RewriteDot()],
        f"""
        x = @param:x -> float_type, {{2, 4, 3, 5}}
        {W}
        s = squeeze[axes={{2, 3}}](w) -> float_type, {{3, 4}}
        a = multibroadcast[out_lens={{2, 3, 4}}](s) -> float_type, {{2, 3, 4}}, {{0, 4, 1}}
        b = reshape[dims={{2, 4, 15}}](x) -> float_type, {{2, 4, 15}}
        d = dot(a,b) -> float_type, {{2, 3, 15}}
        c = reshape[dims={{2, 3, 3, 5}}](d) -> float_type, {{2, 3, 3, 5}}
        r = @return(c)
    """,
    )


def test_channels_last_1x1_conv_keeps_its_layout():
    text = f"""
        x = @param:x -> float_type, {{1, 4, 3, 3}}, {{36, 1, 12, 4}}
        {W}
        wl = layout[permutation={{0, 2, 3, 1}}](w) -> float_type, {{3, 4, 1, 1}}, {{4, 1, 4, 4}}
        c = convolution[padding={{0, 0}},stride={{1, 1}}](x,wl) -> float_type, {{1, 3, 3, 3}}, {{27, 1, 9, 3}}
        r = @return(c)
    """
    p = run_on_text(text, [RewriteDot()])
    out = p.main.output_instructions()[0]
    assert out.name == "transpose" and out.inputs[0].name == "dot"
    assert out.shape.permutation() == (0, 2, 3, 1)
    assert_same_outputs(parse(text), p)


def test_strided_or_3x3_conv_is_kept():
    text = """
        x = @param:x -> float_type, {1, 1, 4, 4}
        w = @literal{1} -> float_type, {1, 1, 1, 1}
        v = @literal{1, 2, 3, 4, 5, 6, 7, 8, 9} -> float_type, {1, 1, 3, 3}
        c = convolution[padding={0, 0},stride={2, 2}](x,w) -> float_type, {1, 1, 2, 2}
        d = convolution[padding={0, 0},stride={1, 1}](x,v) -> float_type, {1, 1, 2, 2}
        r = @return(c,d)
    """
    check_pass(text, [RewriteDot()], text)
