"""Every built-in model through dynamic_shapes, required, optimize_rewrite and fusion: outputs stay
within the default tolerance (MIGraphX's relative RMS) of the unoptimized program, and every pass validates."""

from __future__ import annotations

import pytest
from pipeline_check import check_pipelines

from migx_explore import models
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.models.cnn import resnet18

# yolov10n ends in TopK over 8,400 anchors (keep 300) on random weights: near-ties at the cut make
# its output discontinuous, so a pass's rounding changes which boxes come out (the verify/bisect
# work on discontinuous ops covers it); its passes are checked on yolo_e2e's smaller head.
NAMES = [n for n in models.list_models() if n not in ("resnet18", "yolov10n")]


@pytest.mark.parametrize("name", NAMES)
def test_target_independent_pipelines_keep_numerics(name):
    check_pipelines(models.load(name))


def test_resnet18_layout_keeps_numerics():
    # the full-width ResNet-18 graph at a size the reference evaluator runs quickly
    check_pipelines(parse_onnx(resnet18(size=64, width=8, classes=10)))


@pytest.mark.parametrize("name", ["yolo", "transformer"])
def test_backend_pipeline_keeps_numerics_too(name):
    check_pipelines(models.load(name), backend=True)
