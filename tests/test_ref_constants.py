"""The reference evaluator keeps the values of constant instructions in a module's plan
(compiler/ref.py): computed once, read-only, small ones only, never a module output."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import Op, Program, Shape, evaluate, ref


def _program(big: int = 4):
    """x * rsqrt(c + 1) + b with c, b literals; plus a `big`-element constant reduced to x's shape."""
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (2, 4)))
    c = m.add_literal(np.full((4,), 3.0, np.float32))
    one = m.add_literal(np.ones((4,), np.float32))
    scale = m.add_instruction(Op("rsqrt"), [m.add_instruction(Op("add"), [c, one])])
    wide = m.add_instruction(Op("multibroadcast", out_lens=(2, 4)), [scale])
    big_lit = m.add_literal(np.ones((big, 4), np.float32))
    big_sum = m.add_instruction(Op("add"), [big_lit, big_lit])  # owns big x 16 bytes
    reduced = m.add_instruction(Op("reduce_max", axes=(0,)), [big_sum])
    out = m.add_instruction(Op("mul"), [x, wide])
    out = m.add_instruction(Op("add"), [out, m.add_instruction(Op("multibroadcast", out_lens=(2, 4)), [reduced])])
    m.add_return([out, scale])
    return p, {"scale": scale.id, "wide": wide.id, "big_sum": big_sum.id, "reduced": reduced.id, "out": out.id}


def _steps(p: Program) -> dict[int, ref._Step]:
    return {st.id: st for st in ref._plan(p.main)[0]}


def test_constant_values_are_computed_once_and_kept_read_only(monkeypatch):
    p, ids = _program()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = x * 0.5 + 2.0
    np.testing.assert_allclose(evaluate(p, {"x": x})[0], want)
    steps = _steps(p)
    assert steps[ids["wide"]].value is not None and not steps[ids["wide"]].value.flags.writeable
    assert steps[ids["reduced"]].value is not None
    assert steps[ids["out"]].value is None  # depends on x

    calls = []
    original = ref.run_instruction
    monkeypatch.setattr(ref, "run_instruction", lambda ins, *a, **k: calls.append(ins.name) or original(ins, *a, **k))
    np.testing.assert_allclose(evaluate(p, {"x": x + 1})[0], want + 0.5)
    assert "rsqrt" in calls  # `scale` is an output: recomputed, a fresh array for the caller
    assert "multibroadcast" not in calls and "reduce_max" not in calls and calls.count("add") == 1


def test_outputs_and_large_constants_are_not_kept():
    p, ids = _program(big=ref._KEEP_BYTES // 16 + 1)
    outs = evaluate(p, {"x": np.zeros((2, 4), np.float32)})
    steps = _steps(p)
    assert steps[ids["scale"]].value is None and outs[1].flags.writeable
    assert steps[ids["big_sum"]].value is None  # owns more than _KEEP_BYTES
    assert steps[ids["reduced"]].value is not None  # small, though computed from a large one


def test_an_edit_drops_the_kept_values():
    p, ids = _program()
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(evaluate(p, {"x": x})[0], x * 0.5 + 2.0)
    m = p.main
    add = next(i for i in m if i.name == "add" and all(a.is_literal() for a in i.inputs) and i.shape.lens == (4,))
    eight = m.add_literal(np.full((4,), 8.0, np.float32))
    m.replace_instruction(add, inputs=[eight, add.inputs[1]])  # c: 3 -> 8, so the scale is 1/3
    np.testing.assert_allclose(evaluate(p, {"x": x})[0], x / 3 + 2.0, rtol=1e-6)
