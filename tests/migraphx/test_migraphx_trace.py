"""MIGraphX compile logs of every period (tests/migraphx/migraphx_logs.py writes them from the
format notes) read into a Trace, loaded into a Session and taken through the views."""

from __future__ import annotations

import json

import pytest

import tests.migraphx.migraphx_logs as L
from migx_explore import pass_changes
from migx_explore.cli import main as cli
from migx_explore.compiler.errors import MigxError
from migx_explore.migraphx import read_log
from migx_explore.session import Session


def _read(text: str):
    return read_log(text, text=True)


@pytest.mark.parametrize("period", L.PERIODS)
def test_every_period_gives_one_record_per_pass_in_order(period):
    log = _read(L.log(period))
    assert log.kind == "trace" and not log.problems, [str(p) for p in log.problems]
    tops = [r.name for r in log.trace.top_level()]
    if period == "2018":  # no program-level print then: every block is a top-level pass
        assert tops[:2] == ["normalize_ops", "eliminate_identity"] and tops[-1] == "gpu::lowering"
    else:
        assert tops == ["normalize_ops", "eliminate_identity", "optimize_module", "normalize_ops", "gpu::lowering"]
    changed = [r.name for r in log.trace.top_level() if r.changed]
    assert changed == ["eliminate_identity", "gpu::lowering"]
    final = log.trace.final
    assert final.by_name.keys() >= ({"main"} if period == "2018" else {"main", "If_0_if", "If_0_else"})
    assert "gpu::code_object" in {r.op.name for r in final.module("main").instrs}


@pytest.mark.parametrize("period", ["rocm4.5", "rocm5.6", "develop2026"])
def test_nested_passes_sit_under_their_parent_per_module(period):
    t = _read(L.log(period)).trace
    om = t.find("optimize_rewrite.optimize_module")
    kids = t.children(om)
    # each of the 4 nested passes once per module MIGraphX visits: the branches first, main last
    assert [k.name for k in kids] == list(L.NESTED) * 3
    assert [k.options["module"] for k in kids[::4]] == ["If_0_else", "If_0_if", "main"]
    assert all(k.depth == 1 and k.parent == om.index and k.index > om.index for k in kids)
    assert kids[0].path == "optimize_rewrite.optimize_module/simplify_reshapes"
    # a nested record's snapshot is the whole program with its module joined in
    assert set(kids[0].after.by_name) == {"main", "If_0_if", "If_0_else"}
    assert not any(k.changed for k in kids)  # `?` inputs of a module printed alone are resolved


def test_pipelines_from_the_catalogue_and_pass_times():
    t = _read(L.log("develop2026", times=True)).trace
    by = {r.name: r for r in t.top_level()}
    assert by["gpu::lowering"].pipeline == "backend" and by["gpu::lowering"].options["ours"] == "lowering"
    assert by["eliminate_identity"].pipeline == "required"
    assert by["eliminate_identity"].time_s == pytest.approx(3 * 0.25e-3)  # one line per module
    assert t.find("optimize_module/simplify_reshapes").time_s == pytest.approx(0.25e-3)
    rocm55 = _read(L.log("rocm5.5")).trace  # `Pass: X completed in (s): T` after each module
    assert rocm55.find("required.eliminate_identity").time_s == pytest.approx(3 * 0.25e-3)


def test_debug_symbols_are_scopes_through_the_trace():
    t = _read(L.log("develop2026")).trace
    scopes = set(t.final.scopes.values())
    assert {"enc", "enc/layer"} <= scopes
    kernels = [r for r in t.final.module("main").instrs if r.op.name == "gpu::code_object"]
    assert kernels and all(t.final.scopes.get(r.id) == "enc/layer" for r in kernels)


def test_ids_are_stable_across_passes():
    t = _read(L.log("rocm6.0")).trace
    rec = t.find("required.eliminate_identity")
    d = rec.diff
    assert len(d.removed) == 1 and not d.added
    (gone,) = d.removed
    assert rec.before.by_id[gone][1].op.name == "identity"


def test_truncated_log_loads_what_it_holds_and_says_where_it_stops():
    text = L.log("develop2026")
    lines = text.splitlines()
    cut = next(k for k, s in enumerate(lines) if s == "Pass: gpu::lowering") + 4
    log = _read("\n".join(lines[:cut]))
    last_line = max(k + 1 for k, s in enumerate(lines[:cut]) if s.strip())
    t = log.trace
    assert [r.name for r in t.top_level()][-1] == "gpu::lowering"
    last = t.top_level()[-1]
    assert last.status == "failed" and f"line {last_line}," in last.reason
    assert t.error and "gpu::lowering" in t.error
    assert t.final is t.top_level()[-2].after  # the last complete pass
    assert any("stops at line" in n for n in log.read.notes)


def test_interleaved_lines_change_nothing_but_are_noted():
    clean = L.log("rocm7.2")
    lines = clean.splitlines()
    noisy = []
    for k, s in enumerate(lines):
        noisy.append(s)
        if k % 7 == 3:
            noisy.append("Skipped 13 configs for gpu::mlir_op")
        if k % 11 == 5:
            noisy.append("compiling kernel 3 of 9 from another thread")
        if k % 13 == 8:
            noisy.append("[2026-08-01 10:00:01]")
    a, b = _read(clean).trace, _read("\n".join(noisy)).trace
    assert [(r.path, r.changed) for r in a] == [(r.path, r.changed) for r in b]
    assert any("neither program nor trace" in n for n in _read("\n".join(noisy)).read.notes)


def test_disabled_entries_print_as_id():
    text = L.log("develop2026").replace("Pass: normalize_ops", "Pass: id")
    t = _read(text).trace
    ids = [r for r in t.top_level() if r.name == "id"]
    assert ids and all(r.status == "disabled" for r in ids)


def test_garbled_and_binary_input_never_raise(tmp_path):
    text = L.log("rocm6.0")
    for cut in range(0, len(text), max(1, len(text) // 37)):
        for variant in (text[:cut] + "\x00@@ = (((" + text[cut + 5 :], text[:cut] + "\n"):
            try:
                _read(variant)  # whatever the cut: a trace, or a one-line error for a text with nothing in it
            except MigxError as e:
                assert "no MIGraphX program" in str(e) and cut < 200
    (tmp_path / "x.mxr").write_bytes(b"\x82\xa7version\x08\x00\x00")
    with pytest.raises(MigxError, match=r"an \.mxr file.*`migraphx-driver read x\.mxr`"):
        read_log(str(tmp_path / "x.mxr"))
    (tmp_path / "x.bin").write_bytes(b"\x82\xa7version\x08\x00\x00")
    with pytest.raises(MigxError, match="binary file"):
        read_log(str(tmp_path / "x.bin"))
    (tmp_path / "empty.txt").write_text("nothing here\n")
    with pytest.raises(Exception, match="no MIGraphX program"):
        read_log(str(tmp_path / "empty.txt"))


@pytest.mark.parametrize("period", ["2018", "rocm5.5", "develop2026"])
def test_a_log_goes_through_every_view(tmp_path, period):
    path = tmp_path / "log.txt"
    text = L.log(period)
    if period == "develop2026":  # truncated too
        text = text[: int(len(text) * 0.97)]
    path.write_text(text)
    s = Session.from_migraphx(str(path))
    first = s.first_changed()
    assert first.name == "eliminate_identity" and s.diff().removed
    s.step()
    lowering = s.goto("gpu::lowering")
    if period == "develop2026":
        assert lowering.status == "failed" and "stops at line" in lowering.reason
        s.goto("eliminate_identity")
    rows = pass_changes.rewrites(s)
    assert rows
    from migx_explore.report import write_report

    write_report(s, str(tmp_path / "report.html"))
    assert "eliminate_identity" in (tmp_path / "report.html").read_text()
    out = tmp_path / "trace"
    rc = cli(["trace", str(path), "--out", str(out)])
    assert rc == (1 if period == "develop2026" else 0)  # a truncated log ends in an error record
    index = json.loads((out / "index.json").read_text())
    assert any(p["name"] == "gpu::lowering" for p in index["passes"])
    assert cli(["read", str(path)]) == 0


def test_printed_program_with_only_our_ops_runs_our_pipelines(tmp_path):
    path = tmp_path / "read.txt"
    path.write_text(
        'module: "main"\n'
        "x = @param:x -> float_type, {2, 3}, {3, 1}\n"
        "@1 = @literal{ ... } -> float_type, {2, 3}, {3, 1}\n"
        "@2 = add(x,@1) -> float_type, {2, 3}, {3, 1}\n"
        "@3 = relu(@2) -> float_type, {2, 3}, {3, 1}\n"
        "@4 = @return(@3)\n"
    )
    s = Session.from_migraphx(str(path))
    assert len(s.trace.top_level()) > 90  # our own pipelines over MIGraphX's parsed program


def test_a_pass_that_threw_ends_the_trace_with_migraphx_s_message():
    lines = L.log("develop2026").splitlines()
    cut = next(k for k, s in enumerate(lines) if s == "Pass: gpu::lowering") + 4
    text = "\n".join(lines[:cut] + ["Error gpu::lowering: unsupported operator foo", 'Dump: "/tmp/migraphx/x.mxr"'])
    t = _read(text).trace
    last = t.top_level()[-1]
    assert last.status == "failed" and "unsupported operator foo" in last.reason


def test_perf_report_lines_read_as_instructions():
    text = (
        "x = @param:x -> float_type, {2}, {1}: 0.001ms, 1%\n"
        "@1 = gpu::code_object[code_object=1,symbol_name=k,global=1,local=1,](x) -> float_type, {2}, {1}: 0.02ms, 98%\n"
        "@2 = @return(@1): 0.0001ms, 1%\n"
        "Summary:\n"
        "gpu::code_object::k: 0.02ms / 1 = 0.02ms, 98%\n"
        "Rate: 5000 inferences/sec\n"
    )
    log = _read(text)
    assert log.kind == "program" and not log.problems, [str(p) for p in log.problems]


FUSED_BODY = """module: "main"
x = @param:x -> float_type, {2}, {1}
@1 = pointwise(x), [helper] -> float_type, {2}, {1}
@2 = if(x), [br] -> [float_type, {2}, {1}]
@3 = @return(@1)

module: "helper"
x0 = @param:x0 -> float_type, {2}, {1}
@1 = relu(x0) -> float_type, {2}, {1}
@2 = @return(@1)

module: "br"
br:@0 = abs(@1) -> float_type, {2}, {1}
br:@1 = @return(br:@0)


"""


def test_blocks_of_a_pass_go_to_the_module_they_print_when_the_visiting_order_does_not_fit():
    # `helper` is a fused body MIGraphX skips, but its name does not say so: two blocks, three modules
    after = FUSED_BODY.replace("abs(@1)", "neg(@1)")
    body = lambda prog, mod: "\n".join(  # noqa: E731
        s.replace(f"{mod}:", "") for s in prog.split(f'module: "{mod}"\n')[1].split("\n\n")[0].splitlines()
    )
    br, main = body(after, "br").replace("(@1)", "(?)"), body(after, "main")
    text = FUSED_BODY + "".join(
        f"Pass: {name}\n{block}\n\n"
        for name, block in [("simplify_algebra", br), ("optimize_module", br), ("simplify_algebra", main), ("optimize_module", main)]
    ) + "Pass: optimize_module\n" + after
    t = _read(text).trace
    (rec,) = t.top_level()
    first, second = t.children(rec)
    assert (first.options["module"], second.options["module"]) == ("br", "main")
    assert "neg" in [r.op.name for r in first.after.module("br").instrs] and first.changed
    assert not second.changed  # main printed as it was
    ops = lambda m: [r.op.name for r in t.final.module(m).instrs]  # noqa: E731
    assert ops("br")[-2] == "neg" and ops("helper") == ["@param", "relu", "@return"]
    assert rec.changed and len(rec.diff.changed) + len(rec.diff.added) >= 1


def test_a_log_of_two_compiles_and_the_final_print_reads_the_longest_compile():
    one = L.log("rocm6.0")
    final = "\n".join(L.print_program("rocm6.0", L.states()[-1][1])) + "\n\n"
    short = "\n".join(one.splitlines()[:2] + L.print_program("rocm6.0", L.states()[0][1])) + "\nPass: normalize_ops\n"
    log = _read(short + "\n" + one + final)
    tops = [r.name for r in log.trace.top_level()]
    assert tops == ["normalize_ops", "eliminate_identity", "optimize_module", "normalize_ops", "gpu::lowering"]
    assert any("holds 3 program prints" in n for n in log.read.notes), log.read.notes


def test_a_time_passes_log_alone_gives_names_and_times():
    text = "Compiling ... \nnormalize_ops: 0.1ms\ndead_code_elimination: 0.02ms\ngpu::lowering: 1.5ms\nid: 0.001ms\n"
    log = _read(text)
    tops = log.trace.top_level()
    assert [r.name for r in tops] == ["normalize_ops", "dead_code_elimination", "gpu::lowering", "id"]
    assert tops[2].pipeline == "backend" and tops[2].time_s == pytest.approx(1.5e-3)
    assert tops[3].status == "disabled"
