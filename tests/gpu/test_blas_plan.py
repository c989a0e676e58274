"""GEMM plans: every layout the lowering may hand to BLAS, replayed column-major on the fake
backend (exactly the cuBLAS/hipBLAS argument semantics) against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import Shape
from migx_explore.gpu.blas_plan import fold_broadcast_batch, plan_gemm, view_strides
from migx_explore.gpu.runtime.fake import FakeBackend


def _put(be, arr: np.ndarray, shape: Shape) -> int:
    ptr = be.memory.malloc(shape.bytes())
    be.view(ptr, shape)[...] = arr
    return ptr


def _transposed(lens, perm):
    """A shape with `lens` whose memory order is `perm` (outermost first)."""
    return Shape.from_permutation("float32", lens, perm)


CASES = {
    "plain": (Shape.of("float32", [4, 5]), Shape.of("float32", [5, 6]), Shape.of("float32", [4, 6])),
    "a_transposed": (_transposed([4, 5], [1, 0]), Shape.of("float32", [5, 6]), Shape.of("float32", [4, 6])),
    "b_transposed": (Shape.of("float32", [4, 5]), _transposed([5, 6], [1, 0]), Shape.of("float32", [4, 6])),
    "batched": (Shape.of("float32", [3, 4, 5]), Shape.of("float32", [3, 5, 6]), Shape.of("float32", [3, 4, 6])),
    "broadcast_a": (
        Shape.of("float32", [3, 4, 5], [0, 5, 1]),
        Shape.of("float32", [3, 5, 6]),
        Shape.of("float32", [3, 4, 6]),
    ),
    "c_reshaped": (Shape.of("float32", [2, 8, 9]), Shape.of("float32", [2, 9, 12]), Shape.of("float32", [2, 8, 3, 4])),
    "c_slice": (
        Shape.of("float32", [1, 8, 9]),
        Shape.of("float32", [1, 9, 12]),
        Shape.of("float32", [1, 8, 3, 4], [20 * 12, 12, 4, 1]),
    ),
    "two_level_batch": (
        Shape.of("float32", [2, 3, 4, 5], [0, 20, 5, 1]),
        Shape.of("float32", [2, 3, 5, 6]),
        Shape.of("float32", [2, 3, 4, 6]),
    ),
    "vector": (Shape.of("float32", [1, 7]), Shape.of("float32", [7, 1]), Shape.of("float32", [1, 1])),
    "batched_transposed": (
        _transposed([2, 4, 5], [0, 2, 1]),
        _transposed([2, 5, 6], [0, 2, 1]),
        Shape.of("float32", [2, 4, 6]),
    ),
    # a weight broadcast over the batch: one product of 2 * 3 * 4 rows
    "broadcast_b": (
        Shape.of("float32", [2, 3, 4, 5]),
        Shape.of("float32", [2, 3, 5, 6], [0, 0, 6, 1]),
        Shape.of("float32", [2, 3, 4, 6]),
    ),
    # ... but not where a's rows are a window partition (no one row stride): calls per window
    "broadcast_b_windows": (
        _transposed([2, 2, 3, 5], [0, 2, 1, 3]),
        Shape.of("float32", [2, 2, 5, 6], [0, 0, 6, 1]),
        Shape.of("float32", [2, 2, 3, 6]),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_matches_numpy(name):
    a_s, b_s, c_s = CASES[name]
    plan = plan_gemm(a_s, b_s, c_s)
    assert plan is not None, name
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_s.lens).astype(np.float32)
    b = rng.standard_normal(b_s.lens).astype(np.float32)
    be = FakeBackend()
    pa, pb = _put(be, a, a_s), _put(be, b, b_s)
    a, b = np.array(be.view(pa, a_s)), np.array(be.view(pb, b_s))  # what the buffers hold (broadcasts!)
    pc = be.memory.malloc(c_s.element_space() * 4)
    be.blas.make_gemm({"stream": be.streams.create()}, plan, pa, pb, pc, 1.0)[0]()
    got = np.array(be.view(pc, c_s)).reshape(np.matmul(a, b).shape)
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_unsupported_layout_has_no_plan():
    a = Shape.of("float32", [4, 5], [10, 2])  # neither unit row nor unit column stride
    assert plan_gemm(a, Shape.of("float32", [5, 6]), Shape.of("float32", [4, 6])) is None


def test_view_strides():
    assert view_strides((2, 3, 4), (12, 4, 1), (6, 4)) == (4, 1)
    assert view_strides((2, 3, 4), (1, 2, 6), (6, 4)) is None  # not contiguous in row-major order
    assert view_strides((8, 3, 4), (240, 12, 1), (8, 12)) is None  # slice rows 12 apart but 3x4 packed? no: 4 != 12
    assert view_strides((1, 8, 3, 4), (240, 12, 4, 1), (1, 8, 12)) == (0, 12, 1)


def test_broadcast_weight_folds_into_one_product():
    """Rows of every batch index against one weight are one GEMM: m = 24, no batch, one call."""
    a, b, c = CASES["broadcast_b"]
    plan = plan_gemm(a, b, c)
    assert (plan.m * plan.n, plan.batch, len(plan.offsets)) == (24 * 6, 1, 1), plan.describe()
    fa, fb, fc = fold_broadcast_batch([a, b, c])
    assert (fa.lens, fb.lens, fc.lens) == ((24, 5), (5, 6), (24, 6))
    # a weight that differs per batch index, or rows that no one stride walks, stay batched
    assert fold_broadcast_batch([a, Shape.of("float32", [2, 3, 5, 6]), c])[0] is a
    wa, wb, wc = CASES["broadcast_b_windows"]
    assert fold_broadcast_batch([wa, wb, wc])[0] is wa
    assert len(plan_gemm(wa, wb, wc).offsets) > 1
