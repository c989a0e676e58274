"""Comparing two configurations of one session (config_compare.compare_configs): the variant is traced on
a copy of the configuration, reusing the session's cached prefix, and the user's toggles never
move."""

from __future__ import annotations

import pytest
from ir_samples import CHAIN

from migx_explore import config_compare
from migx_explore.config_compare import variant_config
from migx_explore.session import Session, SessionError

FUSE = "fusion.fuse_pointwise_reduce"


def _session() -> Session:
    return Session.from_text(CHAIN, include_backend=False, numeric=False)


def test_pass_off_changes_the_final_program_and_leaves_the_session_alone():
    s = _session()
    s.run()
    disabled, version, final = s.config.disabled_passes(), s.config.version, s.final()
    cmp = config_compare.compare_configs(s, {FUSE: False})
    assert cmp.base is final
    # with pointwise fusion off, relu/neg/exp stay separate: the final programs differ
    assert "pointwise" in s.final().text and "pointwise" not in cmp.variant.text
    assert cmp.text_diff() and not cmp.diff().is_noop
    assert cmp.labels == ("as configured (final program)", f"{FUSE} off (final program)")
    assert "instructions" in cmp.summary()
    assert s.config.disabled_passes() == disabled and s.config.version == version and s.final() is final
    assert s.trace.find(FUSE).enabled  # the session's own trace is untouched


def test_the_variant_reuses_the_prefix_and_is_cached():
    s = _session()
    s.run()
    trace = config_compare.variants(s).trace_with(s, {FUSE: False})
    fuse = s.trace.find(FUSE).index
    # records before the switched pass are the session's own (taken from its prefix cache)
    assert all(a is b for a, b in zip(trace.records[:fuse], s.trace.records[:fuse]))
    assert trace.records[fuse] is not s.trace.records[fuse] and not trace.records[fuse].enabled
    assert config_compare.variants(s).trace_with(s, {FUSE: False}) is trace  # the same configuration: no re-trace
    cmp = config_compare.compare_configs(s, {FUSE: False})
    assert cmp.variant.text == trace.final.text  # nothing to renumber: no id was drawn apart
    assert config_compare.compare_configs(s, {FUSE: False}) is cmp  # the comparison itself is kept too
    s.invalidate()
    assert config_compare.variants(s).trace_with(s, {FUSE: False}) is not trace


def test_same_point_comparison_and_switching_a_disabled_pass_on():
    s = _session()
    cmp = config_compare.compare_configs(s, {FUSE: False}, at=FUSE)
    rec = s.trace.find(FUSE)
    # switched off, the pass leaves its input as it was
    assert cmp.base is rec.after and cmp.variant.text == rec.before.text != rec.after.text
    assert cmp.labels[1] == f"{FUSE} off (after {FUSE})"
    s.disable(FUSE)
    back = config_compare.compare_configs(s, {FUSE: True})
    assert "pointwise" in back.variant.text and "pointwise" not in back.base.text


def test_bad_requests_name_the_problem():
    s = _session()
    with pytest.raises(SessionError, match="no pass or pipeline 'nope'"):
        config_compare.compare_configs(s, {"nope": False})
    with pytest.raises(SessionError, match="at least one pass"):
        config_compare.compare_configs(s, {})
    with pytest.raises(SessionError, match="no pass 'nowhere' in the trace"):
        config_compare.compare_configs(s, {FUSE: False}, at="nowhere")


def test_variant_config_is_a_copy():
    s = _session()
    cfg = variant_config(s.config, {"fusion": False})
    assert cfg is not s.config and "fusion" in cfg.disabled_passes() and "fusion" not in s.config.disabled_passes()
    assert cfg.flat()[0][3] == s.config.flat()[0][3]  # same prefix keys up to the switched pipeline


# ---- id alignment: two traces number new instructions apart; the comparison renumbers them back
def _renumbered(snap, start: int, shift: int):
    """`snap` with every id from `start` on moved up by `shift` (what a trace that parted ways at
    `start` and made a few extra instructions in between would give)."""
    from migx_explore.compiler.snapshot import InstrRecord, ModuleSnapshot, ProgramSnapshot

    def m(i: int) -> int:
        return i + shift if i >= start else i

    mods = tuple(
        ModuleSnapshot(
            ms.name,
            ms.bypass,
            tuple(
                InstrRecord(
                    m(r.id), r.op, tuple(map(m, r.inputs)), r.modules, r.shape, tuple(map(m, r.origin)), r.literal
                )
                for r in ms.instrs
            ),
        )
        for ms in snap.modules
    )
    return ProgramSnapshot(mods, snap.next_id + shift)


def test_align_ids_recovers_a_renumbered_program():
    from migx_explore.compiler.snapshot import diff
    from migx_explore.id_alignment import align_ids

    s = Session.from_model("mlp", numeric=False)
    final = s.final()
    start = s.trace.find("backend.lowering").before.next_id
    moved = _renumbered(final, start, 1000)
    assert diff(final, moved).summary() != "no change"  # by raw id everything new looks replaced
    assert diff(final, align_ids(final, moved, start)).is_noop
    assert diff(final, align_ids(final, final, start)).is_noop


def test_pass_off_comparison_names_only_what_differs():
    from migx_explore.compiler.snapshot import diff

    s = Session.from_model("mlp", numeric=False)
    # optimize_module changes nothing the rest of the pipeline keeps: switched off, the final
    # programs are the same, though every later instruction got another number in the variant
    other = config_compare.variants(s).trace_with(s, {"optimize_rewrite.optimize_module": False})
    assert not diff(s.final(), other.final).is_noop
    assert config_compare.compare_configs(s, {"optimize_rewrite.optimize_module": False}).diff().is_noop
    # pointwise fusion off: unfused kernels differ, but far fewer than by raw id
    raw = diff(s.final(), config_compare.variants(s).trace_with(s, {FUSE: False}).final)
    aligned = config_compare.compare_configs(s, {FUSE: False}).diff()
    assert 0 < len(aligned.added) + len(aligned.removed) < len(raw.added) + len(raw.removed)
