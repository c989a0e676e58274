"""A hand-written develop-2026 MIGraphX compile of mlp (mlp_log.py) through every view: the
session's step and diff, rewrite summaries, change regions, scopes from debug symbols, the Compare
view's regions, the report, the explorer's views and its path box and upload, `read` with the
debug symbols, and `compare` against our own compile of mlp."""

from __future__ import annotations

import json

import pytest

import tests.migraphx.mlp_log as M
from migx_explore import compare_regions, pass_changes
from migx_explore.cli import main as cli
from migx_explore.compiler.errors import MigxError
from migx_explore.regions import change_regions
from migx_explore.scopes import ScopeTable
from migx_explore.session import Session


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("mlp") / "mlp_trace.txt"
    path.write_text(M.log())
    return path


def test_the_log_reads_without_problems_and_notes_what_it_skipped(log_path):
    from migx_explore.migraphx.load import LoadedLog

    s = Session.from_migraphx(str(log_path))
    log = s.state(LoadedLog).log
    assert not log.problems, [str(p) for p in log.problems]
    notes = log.summary()
    assert "2.16.0" in notes and "5 `Validate` line(s)" in notes and "compiling kernel mlir_dot" in notes
    t = s.trace
    fpr = t.find("fusion.fuse_pointwise_reduce")
    (kid,) = t.children(fpr)
    assert kid.name == "fuse_pointwise" and kid.changed and kid.time_s == pytest.approx(1.2e-3)
    assert {"main:pointwise0", "main:pointwise1"} <= set(fpr.after.by_name)
    ops = [r.op.name for r in t.final.module("main").instrs]
    assert ops.count("gpu::code_object") == 4 and "check_context::migraphx::gpu::context" in ops


def test_every_view_of_the_log(log_path, tmp_path):
    s = Session.from_migraphx(str(log_path))
    t = s.trace
    table = ScopeTable(t)
    assert {"fc1", "act1", "fc3"} <= set(table.table.values())  # `/fc1/Gemm` -> scope fc1
    stepped = 0
    for r in t.records:
        s.goto(r.index)
        if r.after is None:
            continue
        rows = pass_changes.rewrites(s)
        regions = change_regions(r.before, r.after, rows, table.table)
        assert bool(rows) == bool(regions) == r.changed or not r.changed, r.path
        stepped += 1
    assert stepped == len(t.records)
    assert compare_regions.regions_between(s, t.initial, t.final)
    from migx_explore.report import write_report

    write_report(s, str(tmp_path / "report.html"))
    assert "gpu::lowering" in (tmp_path / "report.html").read_text()


def test_the_explorer_draws_each_view_of_the_log(log_path):
    from migx_explore.widgets.explorer import Explorer
    from migx_explore.widgets.views import VIEW_CLASSES

    ex = Explorer(Session.from_migraphx(str(log_path)))
    for path in ("fusion.fuse_pointwise_reduce", "backend.gpu::lowering"):
        ex.goto(path)
        for view in VIEW_CLASSES:
            ex.views.select.value = view
    assert not ex.errors.messages, ex.errors.messages
    assert "code_object" in ex.views.text.value


def test_the_path_box_and_upload_take_the_log_and_refuse_mxr_with_a_hint(log_path, tmp_path):
    from migx_explore.widgets.explorer import Explorer

    ex = Explorer(Session.from_migraphx(str(log_path)))
    ex.picker.path.value = str(log_path)
    ex.picker.load_button.click()
    assert not ex.errors.messages and len(ex.session.trace.top_level()) == 7
    ex.picker._uploaded("trace.txt", M.log().encode("utf-16"))  # PowerShell's redirect
    ex.picker.load_button.click()
    assert not ex.errors.messages and len(ex.session.trace.top_level()) == 7
    mxr = tmp_path / "model.mxr"
    mxr.write_bytes(b"\x85\xa7version\x08")
    with pytest.raises(MigxError, match="migraphx-driver read model.mxr"):
        ex.picker._uploaded("model.mxr", mxr.read_bytes())


def test_read_prints_the_debug_symbols(log_path, capsys):
    assert cli(["read", str(log_path)]) == 0
    out = capsys.readouterr().out
    assert "symbol_name=mlir_dot_add_relu" in out and "# /act1/Relu, /fc1/Gemm" in out
    assert "@return(@9) # @output_0:out" in out


def test_trace_out_and_compare_with_our_compile(log_path, tmp_path, capsys):
    assert cli(["trace", str(log_path), "--out", str(tmp_path / "t")]) == 0
    index = json.loads((tmp_path / "t" / "index.json").read_text())
    assert [p["name"] for p in index["passes"] if p.get("changed", True)][-1] == "gpu::lowering"
    capsys.readouterr()
    assert cli(["compare", "mlp", str(log_path)]) == 0
    out = capsys.readouterr().out
    assert "first pass where they part: fusion.fuse_pointwise_reduce" in out
    assert "'mlir_dot_add_relu': 2" in out  # MIGraphX's kernels by symbol name


MLIR = """module {
  func.func @mlir_dot_add_relu(%arg0: !migraphx.shaped<1x784xf32, 784x1>) -> !migraphx.shaped<1x256xf32, 256x1> {
    %0 = migraphx.dot %arg0, %arg1 : <1x784xf32, 784x1>, <784x256xf32, 1x784> -> <1x256xf32, 256x1>
    return %0 : !migraphx.shaped<1x256xf32, 256x1>
  }
}
"""


def test_mlir_printed_by_migraphx_trace_mlir_is_skipped_not_counted_as_stray():
    from migx_explore.migraphx import read_log

    clean = read_log(M.log(), text=True)
    noisy = read_log(M.log().replace("Pass: gpu::lowering", MLIR + "Pass: gpu::lowering", 1), text=True)
    assert not noisy.problems
    assert [r.path for r in noisy.trace.records] == [r.path for r in clean.trace.records]
    assert noisy.summary() == clean.summary()  # the same single stray line (another thread's)


def test_the_explorer_shows_a_log_cut_inside_a_nested_pass(tmp_path):
    from migx_explore.widgets.explorer import Explorer
    from migx_explore.widgets.views import VIEW_CLASSES

    lines = M.log().splitlines(keepends=True)
    cut = next(k for k, s in enumerate(lines) if s.startswith("Pass: fuse_pointwise\n")) + 5
    path = tmp_path / "cut.txt"
    path.write_text("".join(lines[:cut]))
    s = Session.from_migraphx(str(path))
    failed = [r for r in s.trace.records if r.status == "failed"]  # the pass and its nested one
    assert [r.path for r in failed] == ["fusion.fuse_pointwise_reduce", "fusion.fuse_pointwise_reduce/fuse_pointwise"]
    assert all(f"stops at line {cut}" in r.reason for r in failed)
    ex = Explorer(s)
    for r in s.trace.records:
        ex.goto(r.index)
        for view in VIEW_CLASSES:
            ex.views.select.value = view
    assert not ex.errors.messages, ex.errors.messages
