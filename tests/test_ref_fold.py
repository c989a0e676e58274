"""The reference plan folds a convolution's per-channel affine chain (an inference batch norm as
the importer writes it) into the convolution's weights (compiler/ref_fold.py): once per plan,
only where no one sees the intermediate values, and to float rounding the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import Op, Program, Shape, evaluate, ref, ref_fold

LENS = (1, 4, 6, 6)


def _program(mean=None, scale=None, conv_is_output: bool = False):
    """relu((conv(x, w) - mean) * scale + bias), the constants broadcast from [4, 1, 1]."""
    rng = np.random.default_rng(3)
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (1, 3, 6, 6)))
    w = m.add_literal(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    conv = m.add_instruction(Op("convolution", padding=(1, 1)), [x, w])

    def const(v):
        v = np.asarray(v, np.float32)
        lit = m.add_literal(v.reshape(4, 1, 1) if v.size == 4 else v)
        return m.add_instruction(Op("multibroadcast", out_lens=LENS), [lit])

    mean = rng.standard_normal(4) if mean is None else mean
    scale = rng.uniform(0.5, 2.0, 4) if scale is None else scale
    y = m.add_instruction(Op("sub"), [conv, const(mean)])
    y = m.add_instruction(Op("mul"), [const(scale), y])  # the chain's value second: mul commutes
    y = m.add_instruction(Op("add"), [y, const(rng.standard_normal(4))])
    y = m.add_instruction(Op("relu"), [y])
    m.add_return([y, conv] if conv_is_output else [y])
    return p


def _feed():
    return {"x": np.random.default_rng(4).standard_normal((1, 3, 6, 6)).astype(np.float32)}


def _fused(p: Program) -> list:
    return [st.fused for st in ref._plan(p.main)[0] if st.fused is not None]


def test_the_batch_norm_folds_into_the_convolution_once_per_plan(monkeypatch):
    p = _program()
    unfolded = evaluate(p, _feed(), hook=lambda ins, v: None)[0]  # a hook: every value, no fold
    calls = []
    original = ref_fold.ConvAffine._fold
    monkeypatch.setattr(ref_fold.ConvAffine, "_fold", lambda self, *a: calls.append(1) or original(self, *a))
    first = evaluate(p, _feed())[0]
    again = evaluate(p, _feed())[0]
    (fused,) = _fused(p)
    assert [i.name for i in fused.chain] == ["sub", "mul", "add"] and fused.folded is not None
    assert len(calls) == 1  # the folded weights are computed once, then kept in the plan
    # what runs per forward: the fused step (named by the chain's last op) and the relu
    running = [st.ins.name for st in ref._plan(p.main)[0] if not st.ins.is_literal() and not st.constant]
    assert running == ["add", "relu"]
    np.testing.assert_allclose(first, unfolded, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(first, np.zeros_like(first))
    np.testing.assert_array_equal(again, first)


def test_a_hook_sees_every_value_unfolded():
    p = _program()
    seen = []
    evaluate(p, _feed(), hook=lambda ins, v: seen.append(ins.name))
    assert seen.count("convolution") == 1 and "sub" in seen and "mul" in seen


def test_constants_that_vary_within_a_channel_run_as_written():
    mean = np.random.default_rng(5).standard_normal(LENS)  # one value per element, not per channel
    p = _program(mean=mean)
    want = evaluate(p, _feed(), hook=lambda ins, v: None)[0]
    got = evaluate(p, _feed())[0]
    (fused,) = _fused(p)
    assert fused.folded is None and fused.unfoldable
    np.testing.assert_array_equal(got, want)  # instruction by instruction: bit for bit


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_a_non_finite_scale_is_not_folded(bad):
    scale = np.array([1.0, bad, 2.0, 0.5])
    p = _program(scale=scale)
    feed = _feed()
    feed["x"][0, 0, 0, 0] = np.inf
    want = evaluate(p, feed, hook=lambda ins, v: None)[0]
    got = evaluate(p, feed)[0]
    assert _fused(p)[0].folded is None
    np.testing.assert_array_equal(got, want)


def test_a_value_someone_else_reads_is_not_folded_away():
    p = _program(conv_is_output=True)
    outs = evaluate(p, _feed())
    assert _fused(p) == []
    assert outs[1].shape == LENS
