"""The single-pass radix-select top-k (gpu/codegen/topk.py, issue 28): which slices take it, and,
on a device, values and indices exactly as the reference (ties by lower index, NaN as the
largest value tying with +inf, -0 equal to +0)."""

from __future__ import annotations

import ml_dtypes
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


def test_yolov10n_sized_topk_is_one_launch_and_longer_slices_split_into_ones_that_fit(monkeypatch):
    """k = 300 over 8,400 anchors keeps its keys in shared memory: one launch, no split; over
    24,000 (80 classes x 300) rewrite_topk splits it into 8 x 3,000 and a final 2,400."""
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    from migx_explore.gpu.runtime.fake import FakeBackend

    for n, want in ((8400, [[1, 8400]]), (24000, [[1, 8, 3000], [1, 2400]])):
        with compile_program(_topk_program("float32", [1, n], 300, 1, True), backend=FakeBackend()) as compiled:
            infos = [i for i in compiled.steps.info if i.kernel.startswith("topk")]
            assert [i.kernel for i in infos] == ["topk_radix_largest_kernel"] * len(want), infos
    assert "keys_s" in _kernel("float32", [1, 8400], 300, 1).source
    assert "keys_s" in _kernel("float16", [1, 8, 3000], 300, 2).source


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


def _feeds(t: str, lens: list[int], step: float, uniform: bool, seed: int = 3) -> dict:
    """Scores on a grid of `step` (many equal values); uniform: in [0, 1) like sigmoid class
    scores, whose keys share their top bits (the radix passes' worst case)."""
    rng = np.random.default_rng(seed)
    x = rng.random(lens) if uniform else rng.standard_normal(lens)
    x = np.round(x / step) * step
    return {"x": x.astype({"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}.get(t, np.float32))}


SPECIAL = np.array([[np.nan, np.inf, -0.0, 0.0, np.nan, -np.inf, 3.0, 3.0] * 4] * 2)
CASES = {
    "k300_of_8400": ("float32", [2, 8400], 300, 1, True, None, 1.0),
    "k300_of_2100_three_slices": ("float32", [1, 3, 2100], 300, 2, True, None, 1.0),
    "ties_half": ("float16", [3, 2000], 300, 1, True, None, 0.05),  # values rounded: ties abound
    "ties_smallest_axis0": ("float32", [1500, 2], 257, 0, False, None, 0.02),
    "nan_inf_zero_largest": ("float32", [2, 1000], 40, 1, True, SPECIAL, 0.01),
    "nan_inf_zero_smallest": ("float32", [2, 1000], 40, 1, False, SPECIAL, 0.01),
    "bf16_smallest": ("bfloat16", [2, 3000], 100, 1, False, None, 0.01),
    "k2048_two_sorted_a_thread": ("float32", [2, 6000], 2048, 1, True, None, 1e-3),
    "k1500_keys_from_global": ("float32", [10000], 1500, 0, False, None, 1e-3),  # 40 KB of keys: no room
    "all_equal": ("float16", [1, 4000], 300, 1, True, None, 100.0),  # every key the same: index order
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_radix_topk_matches_the_reference_exactly(case, device):
    t, lens, k, axis, largest, special, step = CASES[case]
    program = _topk_program(t, lens, k, axis, largest, special)
    feeds = _feeds(t, lens, step, uniform=False)
    _check(program, feeds, case, device)


def _check(program, feeds: dict, case: str, device) -> None:
    want_v, want_i = evaluate(program, feeds)
    with compile_program(program, backend=device) as compiled:
        kernels = [i.kernel for i in compiled.steps.info]
        assert any(n.startswith("topk_radix") for n in kernels), kernels
        got_v, got_i = compiled.run(feeds, mode="graph")
    np.testing.assert_array_equal(got_i, want_i, err_msg=case)
    np.testing.assert_array_equal(np.asarray(got_v, np.float64), np.asarray(want_v, np.float64), err_msg=case)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2100, 8400, 33600, 100000])
@pytest.mark.parametrize("k", [1, 10, 100, 300])
@pytest.mark.parametrize("t", ["float32", "float16"])
def test_issue28_sizes_match_the_reference(n, k, t, device):
    """Issue 28's grid: sigmoid-like scores in [0, 1) on a grid of 1e-4 (ties among 8,400 or more),
    batch 1; 33,600 and 100,000 go through rewrite_topk's split and gathernd."""
    program = _topk_program(t, [1, n], k, 1, True)
    _check(program, _feeds(t, [1, n], 1e-4, uniform=True, seed=n + k), f"{t} n={n} k={k}", device)
