"""The fusion pipeline on the built-in YOLO-style model: kernel count and numerics."""

from __future__ import annotations

from collections import Counter

import pytest

from migx_explore.compiler.pass_infra import PassManager, make_numeric_config
from migx_explore.gpu.pipelines import gpu_pipelines

models = pytest.importorskip("migx_explore.models")


def kernels(program) -> list[str]:
    """Instructions of main that would launch a kernel: not builtins, views or tuple reads."""
    return [i.name for i in program.main if not i.is_builtin() and not i.op.has("view") and i.name != "get_tuple_elem"]


def _run_through_fusion(p, numeric=None):
    pls = {pl.name: pl for pl in gpu_pipelines()}
    pm = PassManager(numeric=numeric)
    pre = pm.run(p, [pls["dynamic_shapes"], pls["required"], pls["optimize_rewrite"]])
    before_fusion = kernels(p)
    trace = pm.run(p, [pls["fusion"]], trace=pre)
    return before_fusion, trace


def test_yolo_fusion_halves_the_kernels():
    p = models.load("yolo")
    imported = kernels(p)
    before_fusion, trace = _run_through_fusion(p)
    after = kernels(p)
    assert trace.error is None
    # 91 imported -> 44: every Conv's bias + SiLU (+ residual add) epilogue is one pointwise kernel and
    # C2f concats fold their pointwise inputs. At the fusion pipeline's input the exporter's shape
    # arithmetic is already folded (86 kernels); the 19 convolutions themselves only merge with their
    # epilogues in the backend (fuse_ops), as MIGraphX without rocMLIR does.
    assert 2 * len(after) <= len(imported), (len(imported), len(after))
    assert len(after) < 0.52 * len(before_fusion)
    counts = Counter(after)
    assert counts["convolution"] == Counter(imported)["convolution"]
    assert not {"add", "mul", "sigmoid"} & set(counts)
    assert counts["fused_concat"] >= 1


@pytest.mark.slow
def test_yolo_numerics_hold_through_fusion():
    p = models.load("yolo")
    _, trace = _run_through_fusion(p, make_numeric_config(p, rtol=1e-4, atol=1e-5))
    checked = [r for r in trace.records if r.numeric is not None]
    assert checked and all(r.numeric.ok for r in checked), [(r.path, r.numeric) for r in checked if not r.numeric.ok]
    fused = trace.find("fusion.fuse_pointwise_reduce")
    assert fused.changed and len(fused.children) >= 7
