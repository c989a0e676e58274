"""rewrite_rnn unrolls rnn / gru / lstm into plain ops with the same numbers as the ops' own
reference compute (itself checked against onnxruntime in tests/onnx/test_gallery.py and the node
conformance cases); uneven lengths are masked forward and refused (a near miss) in reverse."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.passes.rewrite_rnn import UnrollRecurrent
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.ref import evaluate
from migx_explore.compiler.shape import Shape

GATES = {"rnn": 1, "gru": 3, "lstm": 4}


def recurrent(
    name: str,
    direction: str = "forward",
    lens=None,
    seq: int = 4,
    batch: int = 3,
    inp: int = 2,
    hidden: int = 5,
    peepholes: bool = True,
    **attrs,
) -> Program:
    rng = np.random.default_rng(len(name) + len(direction))
    nd, g = (2 if direction == "bidirectional" else 1), GATES[name]
    p = Program()
    m = p.main

    def lit(*shape):
        return m.add_literal((rng.standard_normal(shape) * 0.5).astype(np.float32))

    x = m.add_parameter("x", Shape.of("float32", [seq, batch, inp]))
    lens = np.full(batch, seq, np.int32) if lens is None else np.asarray(lens, np.int32)
    ins = [
        x,
        lit(nd, g * hidden, inp),
        lit(nd, g * hidden, hidden),
        lit(nd, 2 * g * hidden),
        m.add_literal(lens),
        lit(nd, batch, hidden),
    ]
    if name == "lstm":
        ins += [
            lit(nd, batch, hidden),
            lit(nd, 3 * hidden) if peepholes else m.add_literal(np.zeros((nd, 3 * hidden), np.float32)),
        ]
    r = m.add_instruction(Op(name, hidden_size=hidden, direction=direction, **attrs), ins)
    outs = [m.add_instruction(Op("get_tuple_elem", index=i), [r]) for i in range(len(r.shape.sub_shapes))]
    m.add_return(outs)
    return p


def _unrolled_matches(p: Program, **opts) -> Program:
    x = np.random.default_rng(0).standard_normal(p.main.get_parameter("x").shape.lens).astype(np.float32)
    want = evaluate(p, {"x": x})
    trace = run_passes(p, [make_pass("rewrite_rnn", **opts)])
    assert not trace.records[0].noop
    assert not {"rnn", "gru", "lstm"} & {i.name for i in p.main}
    for g, w in zip(evaluate(p, {"x": x}), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return p


@pytest.mark.parametrize("name", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_unrolled_cells_match_the_reference_op(name, direction):
    p = _unrolled_matches(recurrent(name, direction))
    dots = sum(1 for i in p.main if i.name == "dot")
    dirs = 2 if direction == "bidirectional" else 1
    # x W^T once per direction over the whole sequence; per step h R^T (GRU's reset gate adds one
    # more when the reset comes first)
    assert dots == dirs + 4 * dirs * (2 if name == "gru" else 1)


@pytest.mark.parametrize(
    "attrs",
    [
        {"clip": 0.5},
        {"actv_funcs": ("hardsigmoid", "leakyrelu", "softsign"), "actv_alpha": (0.3, 0.1), "actv_beta": (0.4,)},
        {"input_forget": 1},
    ],
)
def test_lstm_activations_clip_and_coupled_gates(attrs):
    _unrolled_matches(recurrent("lstm", **attrs))


def test_gru_linear_before_reset_and_affine_activations():
    _unrolled_matches(
        recurrent(
            "gru",
            linear_before_reset=1,
            actv_funcs=("affine", "scaledtanh"),
            actv_alpha=(0.7, 1.5),
            actv_beta=(0.1, 0.5),
        )
    )


def test_uneven_forward_lengths_are_masked():
    p = _unrolled_matches(recurrent("lstm", lens=[4, 2, 1]))
    assert any(i.name == "where" for i in p.main)


def test_uneven_reverse_lengths_are_a_near_miss_and_stay():
    p = recurrent("gru", "reverse", lens=[4, 2, 1])
    reasons = [nm.reason for nm in near_misses(p.main, UnrollRecurrent())]
    assert any("reverse direction with uneven sequence lengths" in r for r in reasons), reasons
    assert run_passes(p, [make_pass("rewrite_rnn")]).records[0].noop
    assert any(i.name == "gru" for i in p.main)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_plain_lstm_direction_is_one_recurrence_op(direction):
    """No peepholes, default activations, full lengths: one input-projection GEMM and one
    recurrence op (one kernel for every step; both directions of a bidirectional layer in one
    lstm_recurrences, which writes Y, Y_h and Y_c with no concat), same numbers as the lstm op."""
    p = _unrolled_matches(recurrent("lstm", direction, peepholes=False))
    names = [i.name for i in p.main]
    assert names.count("dot") == 1
    if direction == "bidirectional":
        assert names.count("lstm_recurrences") == 1 and "lstm_recurrence" not in names
        assert "concat" not in names
    else:
        assert names.count("lstm_recurrence") == 1 and "lstm_recurrences" not in names
        assert [i.op["reverse"] for i in p.main if i.name == "lstm_recurrence"] == [int(direction == "reverse")]


def test_fuse_lstm_off_unrolls_every_step():
    p = _unrolled_matches(recurrent("lstm", peepholes=False), fuse_lstm=False)
    names = [i.name for i in p.main]
    assert "lstm_recurrence" not in names and names.count("dot") == 1 + 4


@pytest.mark.parametrize("attrs", [{"clip": 0.5}, {"input_forget": 1}, {"actv_funcs": ("hardsigmoid", "tanh", "tanh")}])
def test_lstm_the_recurrence_op_cannot_compute_is_unrolled(attrs):
    p = _unrolled_matches(recurrent("lstm", peepholes=False, **attrs))
    assert "lstm_recurrence" not in {i.name for i in p.main}


def test_recurrences_op_names_a_shape_that_does_not_fit():
    from migx_explore.compiler import Program, Shape
    from migx_explore.compiler.errors import ShapeError
    from migx_explore.compiler.op import Op

    m = Program().main
    f = "float32"
    args = [
        m.add_parameter("xw", Shape.of(f, [5, 2, 2 * 16])),  # two directions of hidden 4, side by side
        m.add_parameter("rt", Shape.of(f, [2, 4, 16])),
        m.add_parameter("bias", Shape.of(f, [2, 16])),
        m.add_parameter("h0", Shape.of(f, [2, 2, 4])),
        m.add_parameter("c0", Shape.of(f, [2, 2, 4])),
    ]
    ok = m.add_instruction(Op("lstm_recurrences"), args)
    assert [s.lens for s in ok.shape.sub_shapes] == [(5, 2, 2, 4), (2, 2, 4), (2, 2, 4)]
    bad = m.add_parameter("bias1", Shape.of(f, [1, 16]))
    with pytest.raises(ShapeError, match=r"lstm_recurrences: .*bias \[1, 16\].*1 or 2 directions of hidden 4"):
        m.add_instruction(Op("lstm_recurrences"), args[:2] + [bad] + args[3:])
    with pytest.raises(ShapeError, match=r"lstm_recurrences: expected xw"):
        m.add_instruction(Op("lstm_recurrences"), [args[0], args[2], args[2], args[3], args[4]])
