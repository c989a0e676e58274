"""Precision as a stage: the `quantize` pipeline that runs before the GPU target's five pipelines
(migraphx-driver's --fp16 / --bf16 / --int8 / --fp8, MIGraphX src/quantization.cpp).

    fp16, bf16: normalize_ops, optimize_module{skip q/dq}, truncate_float{half|bf16,
                keep_out_of_range}, optimize_module{skip q/dq}           (quantize_fp16 / _bf16)
    int8:       rewrite_rnn, normalize_ops, optimize_module, capture_arguments{dot, convolution},
                quantize_8bits{int8}, dead_code_elimination             (quantize_int8)
    fp8:        the same with every op but convert probed and fp8 e4m3fn (quantize_fp8)

Each entry is an ordinary pass, so the stage traces, renders, toggles and prints in a pipeline
spec like the others. simplify_qdq, eliminate_data_type and rewrite_low_precision in the later
pipelines then do the rest of the work (int8/fp8 GEMM and convolution, half-safe rewrites).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import MigxError
from .pass_infra import Pipeline, make_pass, pipeline

PRECISIONS = ("fp32", "fp16", "bf16", "int8", "fp8")
STAGE_NAME = "quantize"
_QDQ = ("quantizelinear", "dequantizelinear")


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise MigxError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    return precision


def quantize_pipeline(precision: str, calibration: Sequence[Mapping[str, Any]] = ()) -> Pipeline | None:
    """The quantize stage for `precision` (None for fp32, which needs no stage)."""
    check_precision(precision)
    if precision == "fp32":
        return None
    if precision in ("fp16", "bf16"):
        low = "float16" if precision == "fp16" else "bfloat16"
        passes = [
            make_pass("normalize_ops"),
            make_pass("optimize_module", propagate_constant_skip_ops=_QDQ),
            make_pass("truncate_float", float_type=low, keep_out_of_range=True),
            make_pass("optimize_module", propagate_constant_skip_ops=_QDQ),
        ]
        doc = f"quantize_{precision}: compute every float op in {low}; converts at the program's edges"
    else:
        target = "int8" if precision == "int8" else "float8e4m3fn"
        probed = ("dot", "convolution") if precision == "int8" else ("all",)
        passes = [
            make_pass("rewrite_rnn"),
            make_pass("normalize_ops"),
            make_pass("optimize_module"),
            make_pass("capture_arguments", ins_names=probed),
            make_pass("quantize_8bits", precision=target, calibration=tuple(calibration)),
            make_pass("dead_code_elimination"),
        ]
        doc = (
            f"quantize_{precision}: calibrate per-tensor scales on the calibration feeds, insert "
            f"quantize/dequantize pairs ({target})"
        )
    return pipeline(STAGE_NAME, passes, doc)
