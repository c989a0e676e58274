"""Rewrite summaries (migx_explore/rewrite_summary.py): a pass's change grouped into `{from} -> {to} x n`
rows whose instances hold every instruction the pass touched, in Session and trace's index.json."""

from __future__ import annotations

import json

import pytest

from migx_explore import pass_changes
from migx_explore.cli import main as cli
from migx_explore.compiler import parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.rewrite_summary import record_rewrites
from migx_explore.session import Session, SessionError

# Two SiLU-style chains: fuse_pointwise folds each add/sigmoid/mul into one pointwise op.
TWO_SILU = """
x = @param:x -> float_type, {8, 8}
y = @param:y -> float_type, {8, 8}
@1 = add(x, y) -> float_type, {8, 8}
@2 = sigmoid(@1) -> float_type, {8, 8}
@3 = mul(@1, @2) -> float_type, {8, 8}
@4 = dot(@3, y) -> float_type, {8, 8}
@5 = add(@4, y) -> float_type, {8, 8}
@6 = sigmoid(@5) -> float_type, {8, 8}
@7 = mul(@5, @6) -> float_type, {8, 8}
@8 = @return(@7)
"""


def _rows(text: str, pass_name: str):
    trace = run_passes(parse(text), [make_pass(pass_name)])
    rec = trace.records[0]
    assert rec.changed
    return trace, rec, record_rewrites(trace, rec)


def _touched(rec) -> set[int]:
    d = rec.diff
    return set(d.added | d.removed | d.changed)


def test_fused_chains_are_one_row_with_each_instance():
    trace, rec, rows = _rows(TWO_SILU, "fuse_pointwise")
    fused = [r for r in rows if r.kind == "rewrite"]
    assert len(fused) == 1, [r.label for r in rows]
    row = fused[0]
    assert row.before == ("add", "sigmoid", "mul") and row.after == ("pointwise",)
    assert row.count == 2 and row.label == "{add, sigmoid, mul} → pointwise × 2"
    before, after = trace.snapshots(rec)
    for inst in row.instances:
        assert sorted(before.by_id[i][1].op.name for i in inst.before) == ["add", "mul", "sigmoid"]
        assert [after.by_id[i][1].op.name for i in inst.after] == ["pointwise"]
    assert row.as_json() == {"from": ["add", "sigmoid", "mul"], "to": ["pointwise"], "count": 2, "kind": "rewrite"}


def test_every_touched_instruction_is_in_exactly_one_row():
    trace, rec, rows = _rows(TWO_SILU, "fuse_pointwise")
    seen = [i for r in rows for i in r.ids]
    top = {
        i
        for i in _touched(rec)
        if (trace.snapshots(rec)[1].by_id.get(i) or trace.snapshots(rec)[0].by_id[i])[0] == "main"
    }
    assert len(seen) == len(set(seen))
    assert top <= set(seen)


def test_a_removed_op_is_a_removed_row_and_its_users_are_rewired():
    _, _, rows = _rows(
        """
        x = @param:x -> float_type, {2, 3}
        @1 = identity(x) -> float_type, {2, 3}
        @2 = relu(@1) -> float_type, {2, 3}
        @3 = identity(@2) -> float_type, {2, 3}
        @4 = @return(@3)
    """,
        "eliminate_identity",
    )
    labels = [r.label for r in rows]
    assert labels[0] == "identity removed × 2"
    assert rows[-1].kind == "rewired" and rows[-1].before == ("relu", "@return")


def test_session_rewrites_default_to_the_current_pass_and_name_a_bad_path():
    s = Session.from_text(TWO_SILU, include_backend=False, numeric=False)
    s.run()
    rows = pass_changes.rewrites(s, "fuse_pointwise_reduce")
    assert any(r.after == ("pointwise",) and set(r.before) == {"add", "sigmoid", "mul"} for r in rows)
    s.goto("fusion.fuse_pointwise_reduce")
    assert [r.label for r in pass_changes.rewrites(s)] == [r.label for r in rows]
    with pytest.raises(SessionError, match="no pass 'nope'"):
        pass_changes.rewrites(s, "nope")


def test_trace_index_has_rewrites_for_every_changed_pass(tmp_path, capsys):
    out = tmp_path / "t"
    assert cli(["trace", "mlp", "--out", str(out)]) == 0
    index = json.loads((out / "index.json").read_text())
    changed = [p for p in index["passes"] if p["changed"]]
    assert changed and all(p["rewrites"] for p in changed)
    assert all("rewrites" not in p for p in index["passes"] if not p["changed"])
    lowering = next(p for p in changed if p["name"] == "lowering")
    assert any(r["from"] == ["dot"] and "gpu::gemm" in r["to"] for r in lowering["rewrites"])
    assert all(set(r) == {"from", "to", "count", "kind"} for r in lowering["rewrites"])


@pytest.mark.slow
def test_lowering_of_an_800_instruction_model_is_at_most_30_rows():
    s = Session.from_model("yolov8", numeric=False)
    trace = s.run()
    assert trace.initial.total_instructions() >= 700
    for rec in trace.top_level():
        if not rec.changed:
            continue
        rows = record_rewrites(trace, rec)
        assert rows, rec.path
        assert len(set(i for r in rows for i in r.ids)) == sum(len(r.ids) for r in rows), rec.path
    rows = pass_changes.rewrites(s, "lowering")
    assert len(rows) <= 30, [r.label for r in rows]
    assert rows[0].count >= 50  # the common rewrites group into few large rows
