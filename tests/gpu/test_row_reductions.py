"""Rows held in registers (gpu/codegen/reduce_rows.py): layernorm (the op and its primitives),
add + layernorm with the scale/shift/convert epilogue, RMSNorm, softmax and a plain row sum,
over row lengths that fill a warp, part of one, several warps, odd lengths (no vectors), an
unaligned view (the run-time scalar path) and fp32 / fp16 / bf16.

On the fake backend: which kernel form the generator writes (and that nvcc builds it, where
installed); on a device: against the reference evaluator."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from migx_explore.compiler import Program, Shape, evaluate, make_op
from migx_explore.gpu.codegen.reduce_rows import RowPlan, plan_rows

DTYPES = ("float32", "float16", "bfloat16")
LENGTHS = (1, 7, 100, 128, 256, 768, 1000, 4096)


def _op(m, name, inputs, **attrs):
    return m.add_instruction(make_op(name, **attrs), list(inputs))


def _bcast(m, x, lens):
    return _op(m, "multibroadcast", [x], out_lens=list(lens))


def _scale_shift(m, y, dt, lens):
    g = m.add_parameter("g", Shape.of(dt, [lens[-1]]))
    b = m.add_parameter("b", Shape.of(dt, [lens[-1]]))
    return _op(m, "add", [_op(m, "mul", [y, _bcast(m, g, lens)]), _bcast(m, b, lens)])


def add_layernorm_convert(rows: int, n: int, dt: str) -> Program:
    """gpt2's last: add_layernorm(x, r) * g + b, converted to float32 (one kernel, epilogue)."""
    p = Program()
    m = p.main
    lens = [rows, n]
    x, r = (m.add_parameter(k, Shape.of(dt, lens)) for k in ("x", "r"))
    y = _scale_shift(m, _op(m, "add_layernorm", [x, r], epsilon=1e-5, axis=-1), dt, lens)
    m.add_return([_op(m, "convert", [y], target_type="float32")])
    return p


def layernorm_op(rows: int, n: int, dt: str) -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(dt, [rows, n]))
    m.add_return([_scale_shift(m, _op(m, "layernorm", [x], epsilon=1e-5, axis=-1), dt, [rows, n])])
    return p


def layernorm_prims(rows: int, n: int, dt: str) -> Program:
    """bert's form: residual add, mean / variance from reduce_mean, scale and shift (fuse_reduce's
    fused_reduce kernel)."""
    p = Program()
    m = p.main
    lens = [rows, n]
    x, r = (m.add_parameter(k, Shape.of(dt, lens)) for k in ("x", "r"))
    s = _op(m, "add", [x, r])
    mean = _op(m, "reduce_mean", [s], axes=[1])
    d = _op(m, "sub", [s, _bcast(m, mean, lens)])
    var = _op(m, "reduce_mean", [_op(m, "mul", [d, d])], axes=[1])
    eps = m.add_literal(np.array([1e-5], np.float32), Shape.scalar("float32"))
    eps = _op(m, "convert", [eps], target_type=dt) if dt != "float32" else eps
    den = _op(m, "sqrt", [_op(m, "add", [var, _bcast(m, eps, [rows, 1])])])
    m.add_return([_scale_shift(m, _op(m, "div", [d, _bcast(m, den, lens)]), dt, lens)])
    return p


def rmsnorm(rows: int, n: int, dt: str) -> Program:
    """llama's form: float32 mean of squares, rsqrt, back to the type, times the weight."""
    p = Program()
    m = p.main
    lens = [rows, n]
    x = m.add_parameter("x", Shape.of(dt, lens))
    w = m.add_parameter("w", Shape.of(dt, [n]))
    xf = _op(m, "convert", [x], target_type="float32") if dt != "float32" else x
    ms = _op(m, "reduce_mean", [_op(m, "mul", [xf, xf])], axes=[1])
    eps = m.add_literal(np.array([1e-6], np.float32), Shape.scalar("float32"))
    inv = _op(m, "rsqrt", [_op(m, "add", [ms, _bcast(m, eps, [rows, 1])])])
    y = _op(m, "mul", [xf, _bcast(m, inv, lens)])
    y = _op(m, "convert", [y], target_type=dt) if dt != "float32" else y
    m.add_return([_op(m, "mul", [y, _bcast(m, w, lens)])])
    return p


def softmax(rows: int, n: int, dt: str) -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(dt, [rows, n]))
    m.add_return([_op(m, "softmax", [x], axis=-1)])
    return p


def row_sum(rows: int, n: int, dt: str) -> Program:
    """A row-shaped output (lane 0 of each group stores it) beside a full one."""
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(dt, [rows, n]))
    s = _op(m, "reduce_sum", [x], axes=[1])
    return _ret(p, [s, _op(m, "reduce_max", [x], axes=[1])])


def sliced_layernorm(rows: int, n: int, dt: str) -> Program:
    """A view one element into a wider row: row starts are multiples of 8 elements but the pointer
    is not 16-byte aligned, so the kernel takes its element-wise path at run time."""
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(dt, [rows, n + 8]))
    v = _op(m, "slice", [x], axes=[1], starts=[1], ends=[n + 1])
    m.add_return([_scale_shift(m, _op(m, "layernorm", [v], epsilon=1e-5, axis=-1), dt, [rows, n])])
    return p


def _ret(p: Program, outs: list) -> Program:
    p.main.add_return(outs)
    return p


FORMS: dict[str, Callable[[int, int, str], Program]] = {
    "add_layernorm_convert": add_layernorm_convert,
    "layernorm_op": layernorm_op,
    "layernorm_prims": layernorm_prims,
    "rmsnorm": rmsnorm,
    "softmax": softmax,
    "row_sum": row_sum,
    "sliced_layernorm": sliced_layernorm,
}


def _feeds(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    import ml_dtypes

    rng = np.random.default_rng(seed)
    types = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
    out = {}
    for p in program.main.params():
        a = rng.normal(0.3, 1.0, p.shape.lens).astype(np.float32)
        out[p.param_name] = a.astype(types[p.shape.type])
    return out


def _tolerance(dt: str, n: int) -> tuple[float, float]:
    # the reference rounds each op to the type (a bf16 reference rounds the mean and variance to
    # 8 bits); the kernel keeps float between them
    return {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (8e-2, 8e-2)}[dt]


def _sources(program: Program) -> dict[str, str]:
    from tests.gpu.test_kernels_compile_offline import _sources as recorded

    return {k: src for k, (src, _) in recorded(program).items()}


# ---- generation, on the fake backend -------------------------------------------------------------
def test_plans(monkeypatch):
    from migx_explore.gpu.codegen import reduce_rows

    monkeypatch.setattr(reduce_rows, "MIN_THREADS", 64)
    monkeypatch.setattr(reduce_rows, "WARP_GROUP", 32)
    assert plan_rows(256, 128, 5, 8) == RowPlan(group=32, vec=8, nvec=1, rows=2)  # bert: a warp a row
    assert plan_rows(128, 128, 4, 8) == RowPlan(group=16, vec=8, nvec=1, rows=4)  # gpt2: two rows a warp
    assert plan_rows(7, 3, 2, 1) == RowPlan(group=8, vec=1, nvec=1, rows=8)
    assert plan_rows(1, 512, 2, 1) == RowPlan(group=1, vec=1, nvec=1, rows=64)
    assert plan_rows(512, 128, 2, 8) == RowPlan(group=32, vec=8, nvec=2, rows=2)
    big = plan_rows(4096, 2, 5, 8)  # several warps a row, within the register budget
    assert big.group > 32 and big.rows == 1 and big.elems * big.group >= 4096 and big.elems <= 25
    assert plan_rows(1 << 20, 4, 2, 8) is None  # the loop kernel takes it
    many = plan_rows(64, 1 << 16, 2, 8)  # many short rows: wider blocks
    assert many.group == 8 and many.threads == 256
    monkeypatch.setattr(reduce_rows, "WARP_GROUP", 8)  # fewer lanes, more vectors each
    assert plan_rows(256, 128, 3, 8) == RowPlan(group=8, vec=8, nvec=4, rows=8)


@pytest.mark.parametrize(
    ("form", "rows", "n", "dt", "reduce", "vector"),
    [
        ("layernorm_prims", 128, 256, "float16", "group_reduce<32>", "load_vec<8>"),
        ("add_layernorm_convert", 128, 128, "float16", "group_reduce<16>", "store_vec<8>"),
        ("rmsnorm", 64, 128, "float16", "group_reduce<16>", "load_vec<8>"),
        ("softmax", 4, 100, "bfloat16", "group_reduce<32>", "load_vec<4>"),
        ("layernorm_op", 3, 7, "float32", "group_reduce<8>", None),
        ("layernorm_op", 2, 4096, "float16", "block_reduce", "load_vec<8>"),
        ("sliced_layernorm", 5, 256, "float16", "group_reduce<32>", "load_vec<8>"),
        ("row_sum", 9, 1000, "float32", "group_reduce<32>", "load_vec<4>"),
    ],
)
def test_register_kernel_form(form, rows, n, dt, reduce, vector, tmp_path):
    from tests.gpu.test_kernels_compile_offline import NVCC, _nvcc_all
    from tests.gpu.test_kernels_compile_offline import _sources as recorded

    sources = recorded(FORMS[form](rows, n, dt))
    rowk = [s for s, _ in sources.values() if "xin0[" in s]
    assert rowk and len(rowk) == len([k for k in sources if "reduce" in k or "norm" in k]), list(sources)
    for src in rowk:
        assert reduce in src
        if reduce.startswith("group_reduce"):
            assert "block_reduce" not in src and "__shared__" not in src
        if vector is None:
            assert "load_vec" not in src and "vec_ok" not in src
        else:
            assert vector in src and "const bool vec_ok" in src
    if NVCC is not None:
        _nvcc_all(sources, tmp_path)


def test_loop_kernel_when_switched_off(monkeypatch):
    from migx_explore.gpu.codegen import reduce_rows

    monkeypatch.setattr(reduce_rows, "REGISTER_ROWS", False)
    src = "".join(_sources(layernorm_op(128, 256, "float16")).values())
    assert "block_reduce" in src and "xin0[" not in src


def test_arg_reductions_keep_the_loop_kernel():
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float16", [3, 700]))
    m.add_return([_op(m, "argmax", [_op(m, "exp", [x])], axis=1)])
    assert "xin0[" not in "".join(_sources(p).values())


# ---- numerics, on a device -----------------------------------------------------------------------
def _check(program: Program, dt: str, n: int, device) -> None:
    from migx_explore.gpu import compile_program

    feeds = _feeds(program)
    want = evaluate(program, feeds)
    rtol, atol = _tolerance(dt, n)
    with compile_program(program, backend=device) as compiled:
        assert not compiled.steps.host_ops, compiled.steps.host_ops
        for mode in ("eager", "graph"):
            for got, w in zip(compiled.run(feeds, mode=mode), want):
                np.testing.assert_allclose(
                    np.asarray(got, np.float64), np.asarray(w, np.float64), rtol=rtol, atol=atol, err_msg=mode
                )


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 37, 512])
@pytest.mark.parametrize("n", LENGTHS)
def test_fused_layernorm_shapes(n, rows, device):
    _check(add_layernorm_convert(rows, n, "float16"), "float16", n, device)


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "n"), [(1, 1), (37, 100), (128, 256), (3, 4096), (130, 1000)])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_forms_and_types(form, dt, rows, n, device):
    _check(FORMS[form](rows, n, dt), dt, n, device)


# ---- few long rows: the loop kernel with the widest block ---------------------------------------
def test_few_long_rows_get_the_widest_block():
    from migx_explore.gpu.codegen.reduce_gen import FEW_ROWS, LONG_ROW, block_size

    assert block_size(LONG_ROW, 32) == 1024  # a VAE's group norm: 32 groups of 131072
    assert block_size(LONG_ROW, FEW_ROWS + 1) == 256  # rows enough to fill the GPU keep 256 threads
    assert block_size(LONG_ROW - 1, 32) == 256 and block_size(100) == 128
    long_src = "".join(_sources(layernorm_op(32, 1 << 17, "float16")).values())
    assert "block_reduce" in long_src and "#pragma unroll 4" in long_src
    short_src = "".join(_sources(layernorm_op(32, 1 << 13, "float16")).values())
    assert "#pragma unroll 4" not in short_src


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_few_long_rows_numerics(dt, device):
    _check(layernorm_op(4, 1 << 17, dt), dt, 1 << 17, device)
    _check(layernorm_prims(4, 1 << 15, dt), dt, 1 << 15, device)  # prefuse_ops splits its statistics
    _check(row_sum(3, 40000, dt), dt, 40000, device)
