"""The MIGraphX catalogue (gpu/migraphx_catalogue.py) against target.cpp's lists, our pipelines
against the catalogue, PR #4770's compile modes, and the passes new in August 2026."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.cli import main as cli
from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.shape import Shape
from migx_explore.gpu.migraphx_catalogue import catalogue, mode_catalogue, pipeline_counts
from migx_explore.gpu.pipelines import COMPILE_MODES, CompileOptions, gpu_pipelines, migraphx_entries

D = "dead_code_elimination"
# target::get_passes of MIGraphX develop ~Aug 2026 ([B] in migraphx-pipelines-2026.md), written out
# here on its own rather than derived from the catalogue module.
AUG_2026 = {
    "dynamic_shapes": ["split_single_dyn_dim", D, "simplify_dyn_ops", D],
    "required": [
        "normalize_ops", D, "eliminate_identity", D, "fp8_ocp_to_fnuz", D, "simplify_qdq",
        "rewrite_quantization", D, "gpu::eliminate_data_type_for_gpu", "rewrite_resize", D,
        "simplify_reshapes", "eliminate_identity", "eliminate_pad", D, "insert_pad", D, "inline_module",
        "rewrite_pooling", D,
    ],
    "optimize_rewrite": [
        "rewrite_convolution", D, "rewrite_gelu", "optimize_module", "layout_convolution", D,
        "fuse_horizontal", D, "gpu::prefuse_ops", D, D, "rewrite_reduce", "rewrite_topk",
        "rewrite_low_precision", "rewrite_dot", D, "promote_storage_type", D, "propagate_precision", D,
        "simplify_reshapes", D,
    ],
    "fusion": [
        "fuse_attention", D, "optimize_module", "gpu::fuse_mlss", "fuse_pointwise_reduce", D, "gpu::fuse_ck", D,
        "gpu::fuse_mlir", D, "fuse_concat", D,
    ],
    "backend": [
        "auto_contiguous", D, "gpu::lowering", "eliminate_contiguous", D, "gpu::lower_reshape", D,
        "adjust_allocation", D, "eliminate_concat", D, "gpu::compile_miopen", D, "gpu::fuse_ops", D,
        "gpu::compile_hipblaslt", D, "replace_allocate", D, "adjust_allocation", D, "gpu::lower_device_ops",
        "gpu::compile_ops", D, "promote_literals", D, "gpu::write_literals", "schedule", "memory_coloring",
        "sync_device", "preallocate_param", D, "eliminate_allocation", "check_context", "normalize_ops", D,
        "eliminate_identity",
    ],
}  # fmt: skip


def test_august_catalogue_is_target_cpp_with_96_entries():
    cat = catalogue("2026-08")
    assert len(cat) == 96
    assert pipeline_counts(cat) == {"dynamic_shapes": 4, "required": 21, "optimize_rewrite": 22, "fusion": 12, "backend": 37}
    got = {}
    for e in cat:
        got.setdefault(e.pipeline, []).append(e.name)
    assert got == AUG_2026


def test_may_catalogue_has_90_entries_and_rewrite_rnn():
    cat = catalogue("2026-05")
    assert len(cat) == 90
    names = [e.name for e in cat]
    assert "rewrite_rnn" in names and not {"rewrite_convolution", "gpu::fuse_mlss", "gpu::lower_reshape"} & set(names)


@pytest.mark.parametrize(("version", "mode", "count"), [
    ("2026-08", "eager", 79), ("2026-08", "balanced", 96), ("2026-08", "max", 96),
    ("2026-05", "eager", 72), ("2026-05", "balanced", 90), ("2026-05", "max", 90),
])  # fmt: skip
def test_our_pipelines_have_migraphx_entries_in_migraphx_order(version, mode, count):
    theirs = [(e.pipeline, e.ours) for e in mode_catalogue(version, mode)]
    ours = migraphx_entries(gpu_pipelines(CompileOptions(migraphx=version, mode=mode)), version)
    assert len(theirs) == count
    assert ours == theirs


def test_eager_mode_is_pr_4770():
    pls = {p.name: p for p in gpu_pipelines(CompileOptions(mode="eager"))}
    assert pls["optimize_rewrite"].names() == ["optimize_module", D, "rewrite_reduce", "rewrite_topk", D]
    attention = pls["fusion"].entries[0]
    assert attention.name == "fuse_attention" and not attention.enabled and "eager" in attention.reason
    ops = next(e for e in pls["backend"].entries if e.name == "compile_ops")
    assert ops.pass_.skip_benchmark and not ops.pass_.exhaustive_tune
    maxed = next(e for e in gpu_pipelines(CompileOptions(mode="max"))[-1].entries if e.name == "compile_ops")
    assert maxed.pass_.exhaustive_tune and not maxed.pass_.skip_benchmark


def test_new_passes_are_implemented_or_disabled_with_a_reason():
    pls = gpu_pipelines(CompileOptions())
    entries = {e.name: e for p in pls for e in p.entries}
    assert entries["rewrite_convolution"].enabled
    for name in ("promote_storage_type", "fuse_mlss", "lower_reshape", "lower_device_ops"):
        e = entries[name]
        assert not e.enabled and e.reason and "\n" not in e.reason, name
    # gone from MIGraphX's list in August; ours keeps unrolling recurrent ops (no RNN kernels here)
    assert entries["rewrite_rnn"].enabled


def test_convolution_layout_backend_option_through_migraphx_gpu_options():
    o = CompileOptions().with_gpu_options("{convolution_layout:channels_last}")
    assert o.convolution_layout == "channels_last" and o.channels_last
    layout = next(e for p in gpu_pipelines(o) for e in p.entries if e.name == "layout_convolution")
    assert layout.pass_.channels_last
    with pytest.raises(Exception, match="unknown option"):
        CompileOptions().with_gpu_options("{colour:blue}")
    assert CompileOptions(migraphx="2026-05", enable_nhwc=True).channels_last


def test_rewrite_convolution_turns_a_stride_1_transposed_convolution_into_a_forward_one():
    rng = np.random.default_rng(0)
    for group, pad, dil in ((1, (1, 1), (1, 1)), (2, (0, 2), (2, 1))):
        p = Program()
        m = p.main
        x = m.add_parameter("x", Shape.of("float32", (1, 4, 5, 6)))
        w = m.add_literal(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
        y = m.add_instruction(Op("convolution_backwards", padding=pad, dilation=dil, group=group), [x, w])
        m.add_return([y])
        feed = {"x": rng.standard_normal((1, 4, 5, 6)).astype(np.float32)}
        (want,) = evaluate(p, feed)
        run_passes(p, [make_pass("rewrite_convolution")])
        assert {i.op.name for i in m} >= {"convolution"} and "convolution_backwards" not in {i.op.name for i in m}
        (got,) = evaluate(p, feed)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_passes_diff_and_mode_counts_on_the_cli(capsys):
    assert cli(["passes", "--diff", "2026-05", "2026-08"]) == 0
    out = capsys.readouterr().out
    for line in (
        "- required.rewrite_rnn",
        "+ optimize_rewrite.rewrite_convolution",
        "+ optimize_rewrite.promote_storage_type",
        "+ fusion.gpu::fuse_mlss",
        "+ backend.gpu::lower_reshape",
        "+ backend.gpu::lower_device_ops",
        "~ optimize_rewrite.layout_convolution",
    ):
        assert line in out, line
    for mode, n in zip(COMPILE_MODES, (79, 96, 96)):
        assert cli(["passes", "--mode", mode]) == 0
        assert f"mode {mode}: {n} entries" in capsys.readouterr().out
