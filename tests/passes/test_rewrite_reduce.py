"""rewrite_reduce: softmax / logsoftmax expansion, fp32 softmax, mean-variance, reduce_mean."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import PassManager
from migx_explore.compiler.passes.rewrite_reduce import RewriteReduce
from migx_explore.compiler.testing import assert_same_outputs, check_pass, run_on_text


def live_names(p) -> list[str]:
    seen, stack = set(), list(p.main.output_instructions())
    while stack:
        i = stack.pop()
        if i.id not in seen:
            seen.add(i.id)
            stack.extend(i.inputs)
    return [i.name for i in p.main if i.id in seen and not i.is_builtin()]


def test_softmax_expands_with_multibroadcasts():
    check_pass(
        """
        x = @param:x -> float_type, {2, 3}
        y = softmax[axis=-1](x) -> float_type, {2, 3}
        r = @return(y)
    """,
        [RewriteReduce()],
        """
        x = @param:x -> float_type, {2, 3}
        m = reduce_max[axes={1}](x) -> float_type, {2, 1}
        mb = multibroadcast[out_lens={2, 3}](m) -> float_type, {2, 3}, {1, 0}
        s = sub(x,mb) -> float_type, {2, 3}
        e = exp(s) -> float_type, {2, 3}
        t = reduce_sum[axes={1}](e) -> float_type, {2, 1}
        tb = multibroadcast[out_lens={2, 3}](t) -> float_type, {2, 3}, {1, 0}
        y = div(e,tb) -> float_type, {2, 3}
        r = @return(y)
    """,
    )


def test_logsoftmax_is_log_of_softmax():
    text = """
        x = @param:x -> float_type, {2, 5}
        y = logsoftmax[axis=0](x) -> float_type, {2, 5}
        r = @return(y)
    """
    p = run_on_text(text, [RewriteReduce()])
    names = live_names(p)
    assert names[-1] == "log" and "softmax" not in names and "logsoftmax" not in names
    assert_same_outputs(parse(text), p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fp32, converts", [(True, 2), (False, 0)])
def test_fp16_softmax_computes_in_fp32_by_default(fp32, converts):
    text = """
        x = @param:x -> half_type, {2, 3}
        y = softmax[axis=1](x) -> half_type, {2, 3}
        r = @return(y)
    """
    p = parse(text)
    trace = PassManager().run(p, [RewriteReduce(fp32_softmax=fp32)])
    names = live_names(p)
    assert names.count("convert") == converts
    if fp32:
        assert next(i for i in p.main if i.name == "exp").shape.type == "float32"
        kids = {trace.records[i].name for i in trace.records[0].children}
        assert {
            "eliminate_convert",
            "dead_code_elimination",
            "eliminate_common_subexpression",
            "simplify_reshapes",
        } <= kids
    assert_same_outputs(parse(text), p, rtol=1e-2, atol=1e-3)


def test_reduce_mean_becomes_sum_of_scaled_input():
    check_pass(
        """
        x = @param:x -> float_type, {2, 4}
        y = reduce_mean[axes={1}](x) -> float_type, {2, 1}
        r = @return(y)
    """,
        [RewriteReduce()],
        """
        x = @param:x -> float_type, {2, 4}
        n = @literal{4} -> float_type, {1}
        nb = multibroadcast[out_lens={2, 4}](n) -> float_type, {2, 4}, {0, 0}
        d = div(x,nb) -> float_type, {2, 4}
        y = reduce_sum[axes={1}](d) -> float_type, {2, 1}
        r = @return(y)
    """,
    )


def test_int8_reduce_mean_accumulates_in_int32():
    text = """
        x = @param:x -> int8_type, {2, 6}
        y = reduce_mean[axes={1}](x) -> int8_type, {2, 1}
        r = @return(y)
    """
    p = run_on_text(text, [RewriteReduce()])
    assert live_names(p) == ["convert", "reduce_sum", "multibroadcast", "div", "convert"]
    sums = next(i for i in p.main if i.name == "reduce_sum")
    assert sums.shape.type == "int32"
    feeds = {"x": np.array([[1, 2, 3, 4, 5, 6], [-7, 100, 100, 100, 1, 1]], np.int8)}
    assert_same_outputs(parse(text), p, inputs=feeds, rtol=0, atol=0)


def test_large_fp16_mean_accumulates_in_float():
    text = """
        x = @param:x -> half_type, {1, 20000}
        y = reduce_mean[axes={1}](x) -> half_type, {1, 1}
        r = @return(y)
    """
    p = run_on_text(text, [RewriteReduce()])
    assert live_names(p)[0] == "convert" and next(i for i in p.main if i.name == "reduce_sum").shape.type == "float32"
    assert_same_outputs(parse(text), p, rtol=1e-2, atol=1e-3)


def test_mean_variance_becomes_difference_of_means():
    text = """
        x = @param:x -> float_type, {2, 4}
        two = @literal{2} -> float_type, {1}
        m = reduce_mean[axes={1}](x) -> float_type, {2, 1}
        mb = multibroadcast[out_lens={2, 4}](m) -> float_type, {2, 4}, {1, 0}
        d = sub(x,mb) -> float_type, {2, 4}
        tb = multibroadcast[out_lens={2, 4}](two) -> float_type, {2, 4}, {0, 0}
        p = pow(d,tb) -> float_type, {2, 4}
        v = reduce_mean[axes={1}](p) -> float_type, {2, 1}
        r = @return(v)
    """
    p = run_on_text(text, [RewriteReduce()])
    names = live_names(p)
    assert "pow" not in names and names[-1] == "sub"
    assert_same_outputs(parse(text), p, rtol=1e-4, atol=1e-5)
