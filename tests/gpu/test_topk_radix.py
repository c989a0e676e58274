"""The single-pass radix-select top-k (gpu/codegen/topk.py, issue 28): which slices take it, and,
on a device, values and indices exactly as the reference (ties by lower index, NaN as the
largest value tying with +inf, -0 equal to +0)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import Program, evaluate, make_op
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program
from migx_explore.gpu.codegen.indexing import topk_kernel


def _kernel(t: str, lens: list[int], k: int, axis: int, largest: bool = True):
    out = list(lens)
    out[axis] = k
    shapes = [Shape(t, lens), Shape(t, out), Shape("int64", out)]
    return topk_kernel(Op("topk", k=k, axis=axis, largest=largest), shapes)


def test_long_float_slices_take_one_radix_block_each():
    ks = _kernel("float32", [1, 4, 2100], 300, 2)  # YOLOv10n's first stage
    assert ks.name == "topk_radix_largest_kernel" and ks.global_size == 4 * ks.local_size
    assert _kernel("float16", [2400, 2], 300, 0, largest=False).name == "topk_radix_smallest_kernel"


def test_keys_live_in_shared_memory_when_they_fit():
    assert "keys_s" in _kernel("float32", [1, 4, 2100], 300, 2).source  # every pass reads shared memory
    assert "keys_s" not in _kernel("float32", [1, 24000], 300, 1).source  # 94 KiB: recomputed from global


def test_short_slices_integers_and_huge_k_keep_the_rank_kernel():
    assert _kernel("float32", [4, 300], 7, 1).name == "topk_largest_kernel"
    assert _kernel("int32", [2, 4000], 10, 1).name == "topk_largest_kernel"
    assert _kernel("float32", [1, 9000], 4000, 1).name == "topk_largest_kernel"


def _topk_program(t: str, lens: list[int], k: int, axis: int, largest: bool, special: np.ndarray | None = None):
    """Values and indices of topk(x), x optionally followed (along axis) by a constant block."""
    p = Program()
    m = p.main

    def op(name, inputs, **attrs):
        return m.add_instruction(make_op(name, **attrs), list(inputs))

    x = m.add_parameter("x", Shape.of(t, lens))
    if special is not None:
        x = op("concat", [x, m.add_literal(special.astype(np.float16 if t == "float16" else np.float32))], axis=axis)
    tk = op("topk", [x], k=k, axis=axis, largest=largest)
    m.add_return([op("get_tuple_elem", [tk], index=0), op("get_tuple_elem", [tk], index=1)])
    return p


SPECIAL = np.array([[np.nan, np.inf, -0.0, 0.0, np.nan, -np.inf, 3.0, 3.0] * 4] * 2)
CASES = {
    "k300_of_8400": ("float32", [2, 8400], 300, 1, True, None, 1.0),
    "k300_of_2100_three_slices": ("float32", [1, 3, 2100], 300, 2, True, None, 1.0),
    "ties_half": ("float16", [3, 2000], 300, 1, True, None, 0.05),  # values rounded: ties abound
    "ties_smallest_axis0": ("float32", [1500, 2], 257, 0, False, None, 0.02),
    "nan_inf_zero_largest": ("float32", [2, 1000], 40, 1, True, SPECIAL, 0.01),
    "nan_inf_zero_smallest": ("float32", [2, 1000], 40, 1, False, SPECIAL, 0.01),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_radix_topk_matches_the_reference_exactly(case, device):
    t, lens, k, axis, largest, special, step = CASES[case]
    program = _topk_program(t, lens, k, axis, largest, special)
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal(lens) / step) * step  # a coarse grid: many equal values
    feeds = {"x": x.astype(np.float16 if t == "float16" else np.float32)}
    want_v, want_i = evaluate(program, feeds)
    with compile_program(program, backend=device) as compiled:
        kernels = [i.kernel for i in compiled.steps.info]
        assert any(n.startswith("topk_radix") for n in kernels), kernels
        got_v, got_i = compiled.run(feeds, mode="graph")
    np.testing.assert_array_equal(got_i, want_i, err_msg=case)
    np.testing.assert_array_equal(got_v, want_v, err_msg=case)
