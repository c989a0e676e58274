"""insert_pad and eliminate_pad."""

from __future__ import annotations

import pytest

from migx_explore.compiler.op import registered_ops
from migx_explore.compiler.parser import parse
from migx_explore.compiler.passes.eliminate_pad import LOWEST, EliminatePad
from migx_explore.compiler.passes.insert_pad import InsertPad
from migx_explore.compiler.printer import format_value
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text

pytestmark = pytest.mark.skipif("pad" not in registered_ops(), reason="pad op not registered")

W = "w = @literal{1, 2, 3, 4, 5, 6, 7, 8, 9} -> float_type, {1, 1, 3, 3}"
X = "x = @param:x -> float_type, {1, 1, 4, 4}"


def test_insert_pad_makes_asymmetric_conv_padding_explicit():
    check_pass(
        f"""
        {X}
        {W}
        c = convolution[padding={{0, 1, 1, 2}},stride={{1, 1}}](x,w) -> float_type, {{1, 1, 3, 5}}
        r = @return(c)
    """,
        [InsertPad(ops=("convolution",))],
        f"""
        {X}
        {W}
        p = pad[pads={{0, 0, 0, 1, 0, 0, 1, 2}}](x) -> float_type, {{1, 1, 5, 7}}
        c = convolution[padding={{0, 0, 0, 0}},stride={{1, 1}}](p,w) -> float_type, {{1, 1, 3, 5}}
        r = @return(c)
    """,
    )


def test_insert_pad_leaves_symmetric_padding_and_unlisted_ops():
    text = f"""
        {X}
        {W}
        c = convolution[padding={{1, 1, 1, 1}},stride={{1, 1}}](x,w) -> float_type, {{1, 1, 4, 4}}
        q = pooling[mode=max,padding={{0, 0, 1, 1}},stride={{1, 1}},lengths={{2, 2}}](x) -> float_type, {{1, 1, 4, 4}}
        r = @return(c,q)
    """
    check_pass(text, [InsertPad(ops=("convolution",))], text)


def test_insert_pad_for_max_pooling_pads_with_lowest():
    check_pass(
        f"""
        {X}
        q = pooling[mode=max,padding={{0, 0, 1, 1}},stride={{1, 1}},lengths={{2, 2}}](x) -> float_type, {{1, 1, 4, 4}}
        r = @return(q)
    """,
        [InsertPad()],
        f"""
        {X}
        p = pad[pads={{0, 0, 0, 0, 0, 0, 1, 1}},value={format_value(LOWEST)}](x) -> float_type, {{1, 1, 5, 5}}
        q = pooling[mode=max,padding={{0, 0, 0, 0}},stride={{1, 1}},lengths={{2, 2}}](p) -> float_type, {{1, 1, 4, 4}}
        r = @return(q)
    """,
    )


def test_eliminate_pad_folds_zero_pad_into_conv():
    check_pass(
        f"""
        {X}
        {W}
        p = pad[pads={{0, 0, 0, 1, 0, 0, 1, 2}}](x) -> float_type, {{1, 1, 5, 7}}
        c = convolution[padding={{0, 0}},stride={{1, 1}}](p,w) -> float_type, {{1, 1, 3, 5}}
        r = @return(c)
    """,
        [EliminatePad()],
        f"""
        {X}
        {W}
        p = pad[pads={{0, 0, 0, 1, 0, 0, 1, 2}}](x) -> float_type, {{1, 1, 5, 7}}
        c = convolution[padding={{0, 1, 1, 2}},stride={{1, 1}}](x,w) -> float_type, {{1, 1, 3, 5}}
        r = @return(c)
    """,
    )


@pytest.mark.parametrize(
    "pad, user",
    [
        (
            "pad[pads={0, 0, 1, 1, 0, 0, 1, 1},value=1](x) -> float_type, {1, 1, 6, 6}",
            "convolution[padding={0, 0},stride={1, 1}](p,w) -> float_type, {1, 1, 4, 4}",
        ),
        (
            "pad[pads={0, 0, 1, 1, 0, 0, 1, 1},mode=reflect](x) -> float_type, {1, 1, 6, 6}",
            "convolution[padding={0, 0},stride={1, 1}](p,w) -> float_type, {1, 1, 4, 4}",
        ),
        (
            "pad[pads={0, 0, 1, 1, 0, 0, 1, 1}](x) -> float_type, {1, 1, 6, 6}",
            "pooling[mode=max,padding={0, 0},stride={1, 1},lengths={3, 3}](p) -> float_type, {1, 1, 4, 4}",
        ),
        (
            "pad[pads={0, 0, 1, 1, 0, 0, 1, 1}](x) -> float_type, {1, 1, 6, 6}",
            "pooling[mode=average,padding={0, 0},stride={1, 1},lengths={3, 3}](p) -> float_type, {1, 1, 4, 4}",
        ),
    ],
)
def test_eliminate_pad_keeps_pads_it_cannot_fold(pad, user):
    text = f"""
        {X}
        {W}
        p = {pad}
        c = {user}
        r = @return(c)
    """
    check_pass(text, [EliminatePad()], text)


def test_insert_then_eliminate_round_trips_max_pooling():
    text = f"""
        {X}
        q = pooling[mode=max,padding={{1, 0, 0, 1}},stride={{1, 1}},lengths={{2, 2}}](x) -> float_type, {{1, 1, 4, 4}}
        r = @return(q)
    """
    p = run_on_text(text, [InsertPad(), EliminatePad()])
    q = next(i for i in p.main if i.name == "pooling")
    assert q.inputs[0].is_param() and q.op["padding"] == (1, 0, 0, 1)
    assert_same_outputs(parse(text), p)
