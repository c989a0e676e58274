"""AMD/rocMLIR-only entries: registered, disabled in the pipelines with a reason, failing with that
reason when forced on; rewrite_rnn has nothing to unroll."""

from __future__ import annotations

import pytest

from migx_explore.compiler import parse
from migx_explore.compiler.pass_infra import PassFailed, build_pipelines, make_pass, pass_registry, run_passes
from migx_explore.gpu.pipelines import gpu_pipelines, pending_entries

DISABLED = ("fp8_ocp_to_fnuz", "fuse_ck", "fuse_mlir")
MINE = (
    "fuse_pointwise_reduce",
    "fuse_concat",
    "prefuse_ops",
    "fuse_horizontal",
    "layout_convolution",
    "simplify_qdq",
    "rewrite_quantization",
    "eliminate_data_type_for_gpu",
    "propagate_precision",
    "inline_module",
    "fuse_attention",
    "auto_contiguous",
    "split_single_dyn_dim",
    "simplify_dyn_ops",
    "rewrite_rnn",
) + DISABLED

SMALL = """
    x = @param:x -> float_type, {2}
    @1 = relu(x) -> float_type, {2}
    @2 = @return(@1)
"""


@pytest.mark.parametrize("name", DISABLED)
def test_disabled_pass_has_a_note_and_stays_off_in_the_pipelines(name):
    cls = pass_registry()[name]
    assert cls.provenance().status == "disabled" and cls.provenance().note
    entries = [e for pl in gpu_pipelines() for e in pl.entries if e.name == name]
    assert entries and not any(e.enabled for e in entries)


@pytest.mark.parametrize("name", DISABLED)
def test_force_enabled_pass_fails_with_its_reason(name):
    with pytest.raises(PassFailed, match="does not apply to migx-explore"):
        run_passes(parse(SMALL), [make_pass(name)])


def test_forcing_one_on_through_a_spec():
    pls = build_pipelines("fusion{+fuse_mlir}", gpu_pipelines())
    with pytest.raises(PassFailed, match="rocMLIR"):
        from migx_explore.compiler.pass_infra import PassManager

        PassManager().run(parse(SMALL), pls)


def test_rewrite_rnn_is_a_noop_without_recurrent_ops():
    assert pass_registry()["rewrite_rnn"].provenance().note
    assert run_passes(parse(SMALL), [make_pass("rewrite_rnn")]).records[0].noop


def test_every_pass_of_this_family_is_in_the_catalogue():
    pending = pending_entries()
    assert not [p for p in pending if p.split(".")[1] in MINE]
