"""The single-launch radix-select top-k (gpu/codegen/topk.py, issue 28): which slices take it, one
block or spread over several per slice (the lowering's ticket and candidate buffers), and, on a
device, values and indices exactly as the reference (ties by lower index, NaN as the largest
value tying with +inf, -0 equal to +0), eager and in graph replays with new inputs."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from migx_explore.compiler import Program, evaluate, make_op
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape
from migx_explore.gpu import compile_program
from migx_explore.gpu.codegen.indexing import topk_kernel
from migx_explore.gpu.codegen.topk import radix_plan, topk_workspace


def _kernel(t: str, lens: list[int], k: int, axis: int, largest: bool = True, workspace: bool = False):
    out = list(lens)
    out[axis] = k
    op = Op("topk", k=k, axis=axis, largest=largest)
    extra = list(topk_workspace(op, Shape(t, lens)) or ()) if workspace else []
    shapes = [Shape(t, lens), *extra, Shape(t, out), Shape("int64", out)]
    return topk_kernel(op, shapes)


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


def test_long_slices_spread_over_blocks_with_a_ticket_and_candidates():
    """8,400 keys: five blocks of 1,680 a slice, each writing its survivors (up to 512) to the workspace, the
    last one merging; without the workspace (no lowering) the same op is one block per slice."""
    plan = radix_plan(8400, 300)
    assert (plan.parts, plan.chunk, plan.keys_shared) == (5, 1680, True)
    assert radix_plan(2100, 300).parts == 1 and radix_plan(8400, 300, spread=False).parts == 1
    ticket, cand = topk_workspace(Op("topk", k=300, axis=1, largest=True), Shape("float32", [2, 8400]))
    assert (ticket.type, list(ticket.lens), cand.type, list(cand.lens)) == ("uint32", [2], "uint64", [2 * 5 * 512])
    ks = _kernel("float32", [2, 8400], 300, 1, workspace=True)
    assert ks.name == "topk_radix_spread_largest_kernel" and ks.global_size == 2 * 5 * ks.local_size
    assert "atomicAdd(&ticket[slice], 1u) == 4u" in ks.source and "ticket[slice] = 0u" in ks.source
    assert _kernel("float32", [2, 8400], 300, 1).name == "topk_radix_largest_kernel"
    assert topk_workspace(Op("topk", k=300, axis=1, largest=True), Shape("int32", [1, 8400])) is None


def test_lowering_gives_a_spread_topk_a_zero_ticket_literal_and_an_arena_workspace(monkeypatch):
    """The lowered IR: the kernel's inputs are x, a uint32 zero literal (the ticket), a load from
    the scratch arena (the candidates), then the two outputs; workspace=2 says the two middle
    inputs are scratch, not an epilogue's. One block per slice needs none of them."""
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    from migx_explore.gpu import lower
    from migx_explore.gpu.runtime.fake import FakeBackend

    text = str(lower(_topk_program("float16", [2, 8400], 300, 1, True), backend=FakeBackend()))
    ticket = re.search(r"(@\d+) = hip::hip_copy_literal\[[^]]*\]\((@\d+)\) -> uint32, \{2\}", text)
    ws = re.search(r"(@\d+) = load\[shape=\{uint64, \{5120\}, \{1\}\},offset=\d+\]\(@\d+\)", text)
    assert ticket and ws, text
    assert re.search(r"@\d+ = @literal\{0, 0\} -> uint32, \{2\}", text), text
    call = re.search(
        r"gpu::code_object\[op=\"topk\[k=300,axis=1\]\",ninputs=1,outputs=2,workspace=2,"
        r"symbol_name=topk_radix_spread_largest_kernel,[^]]*\]\(x,(@\d+),(@\d+),",
        text,
    )
    assert call and call.groups() == (ticket.group(1), ws.group(1)), text
    small = str(lower(_topk_program("float16", [2, 2100], 300, 1, True), backend=FakeBackend()))
    assert "workspace=" not in small and "topk_radix_largest_kernel" in small


def test_spread_topk_runs_on_the_fake_backend_eager_and_in_graph_replays(monkeypatch):
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    from migx_explore.gpu.runtime.fake import FakeBackend

    program = _topk_program("float32", [2, 8400], 300, 1, True)
    with compile_program(program, backend=FakeBackend()) as compiled:
        for seed, mode in ((1, "eager"), (2, "graph"), (3, "graph")):
            feeds = _feeds("float32", [2, 8400], 1e-4, uniform=True, seed=seed)
            want_v, want_i = evaluate(program, feeds)
            got_v, got_i = compiled.run(feeds, mode=mode)
            np.testing.assert_array_equal(got_i, want_i)


def test_yolov10n_sized_topk_is_one_launch_and_so_are_longer_slices_that_fit(monkeypatch):
    """k = 300 over 8,400 anchors and over 24,000 (80 classes x 300) are each one spread launch
    (rewrite_topk keeps them whole); k = 2,048 over 24,000 does not fit and is split."""
    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")
    from migx_explore.gpu.runtime.fake import FakeBackend

    for n, k, want in (
        (8400, 300, ["topk_radix_spread_largest_kernel"]),
        (24000, 300, ["topk_radix_spread_largest_kernel"]),
        (24000, 2048, ["topk_radix_largest_kernel"] * 2),
    ):
        with compile_program(_topk_program("float32", [1, n], k, 1, True), backend=FakeBackend()) as compiled:
            infos = [i.kernel for i in compiled.steps.info if i.kernel.startswith("topk")]
            assert infos == want, (n, k, infos)
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
    # spread over several blocks a slice (a ticket and a candidate workspace per slice)
    "spread_ties_half_batch3": ("float16", [3, 9000], 300, 1, True, None, 0.05),
    "spread_all_equal": ("float32", [2, 8400], 300, 1, False, None, 100.0),
    "spread_nan_inf_zero": ("float32", [2, 8000], 100, 1, True, SPECIAL, 0.01),
    "spread_nan_inf_zero_smallest": ("float32", [2, 8000], 100, 1, False, SPECIAL, 0.01),
    "spread_bf16_axis0_strided": ("bfloat16", [20000, 3], 300, 0, True, None, 0.01),
    "spread_k600_bitonic": ("float32", [2, 30000], 600, 1, True, None, 1e-3),
    "spread_k1_batch4": ("float16", [4, 50000], 1, 1, False, None, 1e-3),
    "spread_ragged_last_block": ("float32", [2, 8401], 300, 1, True, None, 1e-3),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_radix_topk_matches_the_reference_exactly(case, device):
    t, lens, k, axis, largest, special, step = CASES[case]
    program = _topk_program(t, lens, k, axis, largest, special)
    _check(program, [_feeds(t, lens, step, uniform=False, seed=s) for s in (3, 4, 5)], case, device)


def _check(program, feeds_list: list[dict], case: str, device, radix: bool = True) -> None:
    """Eager on the first inputs, then graph replays on each of the others (a spread kernel's
    ticket must be back at 0 after every launch)."""
    with compile_program(program, backend=device) as compiled:
        kernels = [i.kernel for i in compiled.steps.info]
        assert not radix or any(n.startswith("topk_radix") for n in kernels), kernels
        for j, feeds in enumerate(feeds_list):
            want_v, want_i = evaluate(program, feeds)
            got_v, got_i = compiled.run(feeds, mode="eager" if j == 0 and len(feeds_list) > 1 else "graph")
            np.testing.assert_array_equal(got_i, want_i, err_msg=f"{case} run {j}")
            np.testing.assert_array_equal(
                np.asarray(got_v, np.float64), np.asarray(want_v, np.float64), err_msg=f"{case} run {j}"
            )


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 7, 300, 2100, 8400, 33600, 100000])
@pytest.mark.parametrize("k", [1, 10, 300])
@pytest.mark.parametrize("t", ["float32", "float16"])
def test_issue28_sizes_match_the_reference(n, k, t, device):
    """Issue 28's grid: sigmoid-like scores in [0, 1) on a grid of 1e-4 (ties among 8,400 or more),
    batch 1 (batch 2 at the longest); eager, then two graph replays with new inputs."""
    if k > n:
        pytest.skip("k > n")
    lens = [2 if n == 100000 else 1, n]
    program = _topk_program(t, lens, k, 1, True)
    feeds = [_feeds(t, lens, 1e-4, uniform=True, seed=n + k + s) for s in (0, 1, 2)]
    _check(program, feeds, f"{t} n={n} k={k}", device, radix=n >= 512)
