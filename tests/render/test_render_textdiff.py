"""Instruction-aligned text diff: renumbered @N names are not changes."""

from __future__ import annotations

import difflib

from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import FunctionPass, PassManager
from migx_explore.compiler.snapshot import snapshot
from migx_explore.render import text_diff
from migx_explore.render.synthetic import conv_chain


def _changes(diff: str) -> tuple[list[str], list[str]]:
    lines = diff.splitlines()[2:]
    return ([x[1:] for x in lines if x.startswith("-")], [x[1:] for x in lines if x.startswith("+")])


def test_inserting_one_instruction_shows_one_line():
    p = conv_chain(3)
    conv = next(i for i in p.main if i.name == "convolution")

    def insert_neg(module):
        if module.name != "main":
            return False
        n = module.insert_after(conv, Op("neg"), [conv])
        module.insert_after(n, Op("neg"), [n])
        return True

    rec = PassManager().run(p, [FunctionPass(fn=insert_neg, label="insert")]).records[0]
    out = text_diff(rec.before, rec.after)
    removed, added = _changes(out)
    assert removed == [] and len(added) == 2 and all("neg(" in a for a in added)
    # A positional text diff would flag every later line, because their @N names shifted.
    plain = list(difflib.unified_diff(rec.before.text.splitlines(), rec.after.text.splitlines(), lineterm=""))
    assert sum(1 for x in plain if x.startswith("-") and not x.startswith("---")) > 10


def test_changed_and_removed_lines_and_headers(fused_trace):
    rec = fused_trace.records[0]
    out = text_diff(rec.before, rec.after, before_name="a.txt", after_name="b.txt")
    assert out.startswith("--- a.txt\n+++ b.txt\n@@ -")
    removed, added = _changes(out)
    assert sum("add(" in r for r in removed) == 3 and sum("relu(" in r for r in removed) == 3
    assert sum(a.startswith("@") and "pointwise(" in a for a in added) == 3
    assert any(a.startswith('module: "pointwise') for a in added)
    # Every - line is from the old printout, every + and context line from the new one.
    old, new = rec.before.text.splitlines(), rec.after.text.splitlines()
    for line in out.splitlines()[2:]:
        if line.startswith("@@"):
            continue
        assert line[1:] in (old if line[0] == "-" else new)


def test_hunk_ranges_point_into_the_printouts(fused_trace):
    rec = fused_trace.records[0]
    old = rec.before.text.splitlines()
    for line in text_diff(rec.before, rec.after, context=0).splitlines():
        if line.startswith("@@"):
            start = int(line.split()[1][1:].split(",")[0])
            assert 1 <= start <= len(old)


def test_no_change_is_empty():
    snap = snapshot(conv_chain(2))
    assert text_diff(snap, snap) == ""


def test_big_program_is_fast_enough(big_trace):
    import time

    rec = big_trace.records[0]
    t = time.perf_counter()
    out = text_diff(rec.before, rec.after)
    assert time.perf_counter() - t < 5
    removed, added = _changes(out)
    assert len(removed) == 3  # the add and relu, plus the conv whose input changed
