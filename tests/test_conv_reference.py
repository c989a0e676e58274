"""The reference convolution (compiler/ops/nn.py) builds its im2col columns in bands of output
rows when they would exceed _COLS_BYTES: banded or not, it computes the convolution's definition
(checked here against a direct sum over kernel taps) for 1-3 spatial dims, strides, dilations,
groups and batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from migx_explore.compiler import Op, Shape
from migx_explore.compiler.ops import nn


def _direct(x, w, pad, stride, dil, group):
    """out[n, f, o..] = sum over c, taps of x_padded[n, c, o*stride + tap*dil] w[f, c, tap]."""
    nd = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    cg, fg = x.shape[1] // group, w.shape[0] // group
    res = np.zeros((x.shape[0], w.shape[0], *out))
    for g in range(group):
        xs, ws = xp[:, g * cg : (g + 1) * cg], w[g * fg : (g + 1) * fg].astype(np.float64)
        for tap in itertools.product(*(range(n) for n in k)):
            sl = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dil, out, stride))
            res[:, g * fg : (g + 1) * fg] += np.einsum(
                "nc...,fc->nf...", xs[(slice(None), slice(None)) + sl], ws[(...,) + tap]
            )
    return res


@pytest.mark.parametrize(
    "xs, ws, pad, stride, dil, group",
    [
        ((1, 3, 17, 15), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
        ((2, 4, 16, 16), (6, 2, 3, 3), (2, 2), (2, 2), (2, 2), 2),  # batch, groups, stride, dilation
        ((1, 3, 23, 20), (4, 3, 7, 7), (3, 3), (2, 2), (1, 1), 1),  # a 7x7 stem
        ((2, 3, 30), (5, 3, 5), (2,), (1,), (1,), 1),  # 1-d
        ((1, 2, 6, 7, 8), (3, 2, 3, 3, 3), (1, 1, 1), (1, 2, 1), (1, 1, 1), 1),  # 3-d
    ],
)
def test_banded_columns_compute_the_convolution(monkeypatch, xs, ws, pad, stride, dil, group):
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    op = Op("convolution", padding=pad, stride=stride, dilation=dil, group=group)
    want = _direct(x, w, pad, stride, dil, group)
    out = Shape.of("float32", want.shape)
    whole = nn._conv_compute(op, [x, w], out, None)
    monkeypatch.setattr(nn, "_COLS_BYTES", 1)  # one output row per band
    banded = nn._conv_compute(op, [x, w], out, None)
    np.testing.assert_allclose(whole, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(banded, want, rtol=1e-4, atol=1e-4)
    assert banded.shape == want.shape and banded.dtype == np.float32
