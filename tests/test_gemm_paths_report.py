"""benchmarks/gemm_paths.py's side-by-side of two kernel profiles: the runs of kernels where two
variants of one model differ line up, with their summed device time."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))

from gemm_paths import differing_spans, span_lines  # noqa: E402


def _k(name: str, us: float) -> tuple[str, float, float]:
    return (name, us, 0.0)


def test_each_convolution_lines_up_with_what_replaced_it():
    im2col = [
        _k("contiguous_kernel", 1.0),
        _k("im2col_3x3_v8_kernel", 4.0),
        _k("nvjet_sm90_hsh_64x32", 3.0),
        _k("epilogue_add_relu_kernel", 1.5),
        _k("pool_max_kernel", 2.0),
        _k("im2col_3x3_v8_kernel", 4.0),
        _k("nvjet_sm90_hsh_64x32", 3.0),
    ]
    igemm = [
        _k("contiguous_kernel", 1.2),
        _k("conv_igemm_3x3_32x64x64_add_relu_kernel", 6.0),
        _k("pool_max_kernel", 2.0),
        _k("conv_igemm_3x3_32x64x64_kernel", 5.0),
    ]
    spans = differing_spans(im2col, igemm)
    assert [([k[0] for k in a], [k[0] for k in b]) for a, b in spans] == [
        (
            ["im2col_3x3_v8_kernel", "nvjet_sm90_hsh_64x32", "epilogue_add_relu_kernel"],
            ["conv_igemm_3x3_32x64x64_add_relu_kernel"],
        ),
        (["im2col_3x3_v8_kernel", "nvjet_sm90_hsh_64x32"], ["conv_igemm_3x3_32x64x64_kernel"]),
    ]
    lines = span_lines("im2col", "igemm", spans)
    assert lines[2].startswith("| 8.5 | 6.0 |") and lines[3].startswith("| 7.0 | 5.0 |")
    assert lines[-1].startswith("| **15.5** | **11.0** |")  # same-named kernels are not counted


def test_identical_profiles_have_no_differing_run():
    ks = [_k("a_kernel", 1.0), _k("b_kernel", 2.0)]
    assert differing_spans(ks, list(ks)) == []
    assert span_lines("x", "y", [])[-1].startswith("| **0.0** | **0.0** |")
