"""Adding an op is one checked contract (compiler/op.py): shape rule, reference compute, traits
from the declared set, and GPU code the gpu layer implements. This lists every op that breaks it."""

from __future__ import annotations

import numpy as np
import pytest

import migx_explore.compiler.ops  # noqa: F401  (registers the op library)
import migx_explore.gpu  # noqa: F401  (registers gpu::/hip:: ops)
from migx_explore.compiler import op as ops
from migx_explore.compiler.op import GpuCode, Op, defop, get_spec, parse_expression
from migx_explore.compiler.ops.common import pointwise_shape
from migx_explore.gpu.codegen import op_contract_problems
from migx_explore.gpu.codegen.expr import op_expr

HOW = (
    "Each op needs, in its defop (compiler/ops/*.py; `from ..op import GpuCode`): a shape rule, a "
    "reference compute, traits from compiler.op.TRAITS, and gpu= one of "
    "GpuCode.pointwise('<expr over existing ops>'), GpuCode.kernel('<family in gpu/codegen GENERATORS>'), "
    "GpuCode.host('<why>'). See README 'Extending'."
)


def test_every_op_keeps_the_contract():
    broken = {name: p for name in ops.registered_ops() if (p := op_contract_problems(name))}
    lines = [f"  {name} ({get_spec(name).origin}): {'; '.join(p)}" for name, p in sorted(broken.items())]
    assert not broken, f"{len(broken)} op(s) break the op contract. {HOW}\n" + "\n".join(lines)


def _eval_expression(tree, args):
    """A pointwise expression evaluated with the reference computes of its ops."""
    if isinstance(tree, str):
        return args[ops.input_index(tree)]
    if isinstance(tree, float):
        return tree
    name, *subs = tree
    vals = [_eval_expression(a, args) for a in subs]
    like = next(v for v in vals if isinstance(v, np.ndarray))
    vals = [v if isinstance(v, np.ndarray) else np.full_like(like, v) for v in vals]
    op = Op(name)
    return op.spec.compute(op, vals, None, None)


def test_pointwise_expressions_agree_with_the_reference_compute():
    rng = np.random.default_rng(0)
    for name in ops.registered_ops():
        spec = get_spec(name)
        if not (spec.gpu and spec.gpu.kind == "pointwise" and spec.gpu.detail):
            continue
        n = spec.nargs if isinstance(spec.nargs, int) else 1
        args = [rng.uniform(-3, 3, 64).astype(np.float32) for _ in range(n)]
        op = Op(name)
        want = spec.compute(op, args, None, None)
        got = _eval_expression(parse_expression(spec.gpu.detail), args)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name}: {spec.gpu.detail}")


def _silu_shape(op, inputs, mods):
    return pointwise_shape("demo_silu", inputs, inputs[0].type)


def _silu(op, args, out, run):
    x = args[0].astype(np.float64)
    return (x / (1.0 + np.exp(-x))).astype(args[0].dtype)


def _define_silu(compute=_silu):
    return defop(
        "demo_silu", _silu_shape, compute, traits={"pointwise"}, nargs=1, gpu=GpuCode.pointwise("mul(x, sigmoid(x))")
    )


def test_an_op_written_over_existing_ops_gets_elementwise_code():
    _define_silu()
    assert op_contract_problems("demo_silu") == []
    assert op_expr(Op("demo_silu"), ["a0"], ["float32"], "float32") == "(a0 * (1.0f / (1.0f + expf(-a0))))"


def test_registering_the_same_spec_again_is_a_no_op_and_a_different_one_names_both_places():
    first = _define_silu()
    assert _define_silu() is first  # a re-run notebook cell

    def other(op, args, out, run):
        return args[0]

    with pytest.raises(
        ValueError,
        match=r"demo_silu.*already registered \(at .*test_op_contract.py:\d+\).*"
        r"this definition \(at .*test_op_contract.py:\d+\) differs in compute",
    ):
        _define_silu(other)


def test_bad_declarations_fail_at_the_defop():
    with pytest.raises(ValueError, match="unknown trait.*elementwise"):
        defop("demo_bad", _silu_shape, _silu, traits={"elementwise"})
    with pytest.raises(ValueError, match="missing '\\)'"):
        GpuCode.pointwise("mul(x, sigmoid(x)")
    with pytest.raises(ValueError, match="needs a reason"):
        GpuCode.host("")


def test_an_op_without_gpu_code_is_reported_at_its_defop():
    with pytest.warns(UserWarning, match="demo_no_gpu declares no GPU code"):
        defop("demo_no_gpu", _silu_shape, _silu, traits={"pointwise"}, nargs=1)
    assert any("no GPU code" in p for p in op_contract_problems("demo_no_gpu"))
    ops.unregister("demo_no_gpu")  # keep the registry-wide contract test meaningful


def test_the_contract_names_what_is_missing():
    spec = ops.OpSpec("demo_undeclared", _silu_shape, None, traits=frozenset({"pointwise"}))
    problems = ops.contract_problems(spec)
    assert any("no reference compute" in p for p in problems) and any("no GPU code" in p for p in problems)
    spec = ops.OpSpec("demo_unknown_family", _silu_shape, _silu, gpu=GpuCode.kernel("warp_magic"))
    from migx_explore.gpu.codegen import gpu_code_problems

    assert "register_generator('warp_magic'" in gpu_code_problems(spec)[0]


def test_a_kernel_family_registers_once_and_again_as_the_same_generator():
    from migx_explore.gpu.codegen import GENERATORS, register_generator

    def gen(request):
        return GENERATORS["pointwise"](request)

    register_generator("demo_family", gen)
    register_generator("demo_family", gen)  # a re-run cell
    with pytest.raises(ValueError, match="demo_family.*already has a different generator"):
        register_generator("demo_family", lambda request: None)
    del GENERATORS["demo_family"]
