"""Dynamic ranges stay bounded: module sharing between snapshots, '× N like this' grouping of a
select_module's submodules, and the bucketed fallback (issue 23 item 4). Small ranges, not timed."""

from __future__ import annotations

import os
import sys

import pytest

from migx_explore.compiler.pass_infra import write_trace
from migx_explore.compiler.passes.split_single_dyn_dim import bucket_sizes
from migx_explore.like_this import group_alike, like_this_summary, range_note, split_owners, value_range
from migx_explore.loading import load_program, parse_input_dims
from migx_explore.render.model import build_graph
from migx_explore.session import Session


def _session(dims: str, buckets: str = "") -> Session:
    s = Session(load_program("gpt2_decode", parse_input_dims([dims, "T=1"])), name="decode", numeric=False)
    if buckets:
        s.config.set_options("split_single_dyn_dim", buckets=buckets)
    return s


@pytest.fixture(scope="module")
def decode8():
    s = _session("P=1..8")
    trace = s.run()
    assert s.trace.error is None, s.trace.error  # the lowered select_module once failed its shape check here
    return trace


def _split(trace):
    return trace.find("dynamic_shapes.split_single_dyn_dim")


def test_split_submodules_group_as_one_body_with_the_range_listed(decode8):
    snap = _split(decode8).after
    [(module, _owner, groups)] = split_owners(snap)
    assert module == "main" and len(groups) == 1
    g = groups[0]
    assert g.members == tuple(f"dim_{n}" for n in range(1, 9)) and g.label() == "dim_1 × 8 like this"
    # the past length is what differs: the cache params' dynamic axis runs over the range
    assert any(v.where.startswith("past_key_0 = @param") and value_range(v.values) == "1..8" for v in g.varying)
    text = "\n".join(like_this_summary(decode8.final))
    assert "8 submodules, one body" in text and "dim_1 × 8 like this" in text


def test_bodies_that_differ_in_structure_are_separate_groups(decode8):
    snap = _split(decode8).after
    # a fused pointwise body is not like a whole decode step
    fused = next(m.name for m in decode8.final.modules if "pointwise" in m.name)
    groups = group_alike(decode8.final, ["dim_1", "dim_2", fused])
    assert [g.count for g in groups] == [2, 1] and groups[1].label() == fused
    assert group_alike(snap, ["dim_3"])[0].note() == "dim_3"


def test_graph_draws_one_representative_cluster_labelled_with_the_count(decode8):
    g = build_graph(_split(decode8).after, expand=True)
    labels = [gr.label for gr in g.groups.values() if gr.label.startswith("select_module")]
    assert labels == ["select_module [dim_1 × 8 like this]"]
    drawn = {n.module for n in g.nodes}
    assert "dim_1" in drawn and not drawn & {f"dim_{n}" for n in range(2, 9)}


def test_snapshots_share_the_modules_a_pass_did_not_touch(decode8):
    nested = [
        r
        for r in decode8.records
        if r.depth > 0 and r.changed and r.path.startswith("optimize_rewrite.optimize_module")
    ]
    assert len(nested) >= 8  # one per submodule at least
    total = decode8.records[nested[0].index].after.module_count()
    for rec in nested:
        before, after = decode8.snapshots(rec)
        touched = [n for n in after.by_name if before.by_name.get(n) is not after.by_name[n]]
        assert 1 <= len(touched) < 4, (rec.path, touched)
        # only the chunks holding a touched module are new; the name index is shared
        new_chunks = sum(1 for a, b in zip(before._chunks, after._chunks) if a is not b)
        assert before._index is after._index and new_chunks <= len(touched) < total
        assert rec.diff.unchanged and not rec.diff.modules_added


def test_nested_trace_files_hold_only_the_changed_modules_of_a_large_program(decode8, tmp_path, monkeypatch):
    trace_files = sys.modules[write_trace.__module__]  # the module (the package also exports a `trace`)
    monkeypatch.setattr(trace_files, "FULL_NESTED_FILE_MODULES", 4)  # P=1..8 has 9 modules here
    files = write_trace(decode8, str(tmp_path))
    nested = [f for f in files if "optimize_module.simplify_algebra" in os.path.basename(f)]
    assert nested
    head = open(nested[0]).read().splitlines()[:2]
    assert head[1].startswith("# only the 1 of ") and "modules this nested pass changed" in head[1]
    top = [f for f in files if os.path.basename(f).endswith("_optimize_rewrite.optimize_module.txt")]
    assert top and open(top[0]).read().count('module: "dim_') == 8


def test_bucket_sizes_follow_the_decoder():
    assert bucket_sizes(1, 255, "pow2") == [16, 32, 64, 128, 255]
    assert bucket_sizes(20, 100, "pow2") == [32, 64, 100]
    assert bucket_sizes(1, 4) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="unknown buckets"):
        bucket_sizes(1, 4, "log")


def test_bucketed_trace_makes_one_submodule_per_bucket_and_says_so():
    s = _session("P=1..40", buckets="pow2")
    trace = s.run()
    assert s.trace.error is None, s.trace.error
    [(_m, _o, groups)] = split_owners(_split(trace).after)
    assert groups[0].members == ("dim_16", "dim_32", "dim_40")
    assert range_note(trace).startswith("traced as 3 buckets: 16, 32, 40 (sizes 1..40")
    assert any("traces the dynamic range as the decoder's buckets (pow2)" in w for w in s.config.warnings())
    exact = _session("P=1..3")
    assert range_note(exact.run()) == "" and not exact.config.warnings()  # an exact trace says nothing


def test_value_range():
    assert value_range(["3", "1", "2", "2"]) == "1..3"
    assert value_range(["2", "4"]) == "2, 4"
    assert value_range([str(v) for v in (1, 5, 9, 13, 17, 21)]) == "1, 5, 9, 13, 17, ... (6 values)"


def test_a_long_range_is_bucketed_by_default_and_a_short_one_is_not():
    """The explorer and `trace` trace a range of more than EXACT_SIZES_LIMIT sizes as buckets (and
    say so); a shorter range, or one the user already configured, is left as it is."""
    from migx_explore.like_this import EXACT_SIZES_LIMIT, bucket_long_ranges

    long_range = _session("P=1..255")
    note = bucket_long_ranges(long_range)
    assert "1..255" in note and str(EXACT_SIZES_LIMIT) in note
    assert any("decoder's buckets (pow2)" in w for w in long_range.config.warnings())
    assert bucket_long_ranges(long_range) == ""  # already bucketed: nothing more to do
    short = _session("P=1..8")
    assert bucket_long_ranges(short) == "" and not short.config.warnings()


def test_text_diff_prints_a_change_repeated_in_alike_submodules_once(decode8):
    """A pass that rewrites the 8 split bodies the same way: one hunk per distinct change, then
    the other bodies named; fold_alike=False gives every hunk."""
    from migx_explore.render import text_diff

    rec = decode8.find("optimize_rewrite.rewrite_reduce")  # changes only the 8 bodies (482 lines unfolded)
    folded = text_diff(rec.before, rec.after)
    full = text_diff(rec.before, rec.after, fold_alike=False)
    assert len(folded.splitlines()) < len(full.splitlines()) / 4, (len(folded.splitlines()), len(full.splitlines()))
    notes = [line for line in folded.splitlines() if line.startswith("== the same change")]
    assert notes and all("more modules like this: dim_" in n for n in notes), notes
    # every body's change is accounted for: shown, or named in a note
    shown = {line.split(":", 1)[0][1:] for line in folded.splitlines() if line[:1] in "+-" and ":@" in line}
    named = {m for n in notes for m in n.split("like this: ", 1)[1].split(", ") if m != "..."}
    assert "dim_1" in shown and named <= {f"dim_{k}" for k in range(2, 9)}
    assert sum(int(n.split(" in ", 1)[1].split(" ")[0]) for n in notes) >= 7
