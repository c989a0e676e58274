"""Ours beside theirs (migraphx/compare.py): our trace of a model, printed the way MIGraphX's
MIGRAPHX_TRACE_COMPILE prints a compile, agrees with itself pass by pass; a pass MIGraphX ran
differently is named as the first where they part."""

from __future__ import annotations

from migx_explore.cli import main as cli
from migx_explore.gpu.migraphx_catalogue import catalogue
from migx_explore.migraphx import read_log
from migx_explore.migraphx.compare import compare
from migx_explore.session import Session

THEIR_NAME = {e.ours: e.name for e in catalogue()}  # lowering -> gpu::lowering


def as_migraphx_log(trace, *, skip_change: str = "") -> str:
    """`trace` as a HEAD-format compile log: the input program, then per pass `Pass: <name()>`, the
    main module alone, and the whole program. skip_change: a pass that, in this log, changed nothing."""
    out = [trace.initial.text, ""]
    prev = trace.initial
    for r in trace.top_level():
        after = r.after if r.after is not None else prev
        if r.name == skip_change:
            after = prev
        name = THEIR_NAME.get(r.name, r.name) if r.enabled else "id"
        main = after.module("main").text.split("\n", 1)[1]
        out += [f"Pass: {name}", main, f"Pass: {name}", after.text, ""]
        prev = after
    return "\n".join(out)


def _ours():
    return Session.from_model("mlp", numeric=False).run()


def test_our_compile_printed_as_migraphx_agrees_pass_by_pass():
    ours = _ours()
    theirs = read_log(as_migraphx_log(ours), text=True)
    assert not theirs.problems, [str(p) for p in theirs.problems]
    c = compare(ours, theirs.trace)
    assert c.first_parting is None, c.report()
    paired = [p for p in c.pairs if p.ours is not None and p.theirs is not None]
    assert len(paired) >= 90
    lowering = next(p for p in paired if p.name == "lowering")
    assert lowering.theirs.name == "gpu::lowering" and lowering.ours_delta == lowering.theirs_delta
    assert lowering.ours_instructions == lowering.theirs_instructions
    last = paired[-1]
    assert last.ours_kernels == last.theirs_kernels and last.ours_kernels
    assert "the two agree on every pass" in c.report()


def test_the_first_pass_where_they_part_is_named(tmp_path, capsys):
    ours = _ours()
    text = as_migraphx_log(ours, skip_change="rewrite_reduce")
    c = compare(ours, read_log(text, text=True).trace)
    part = c.first_parting
    assert part is not None and part.name == "rewrite_reduce"
    assert part.ours_delta and not part.theirs_delta
    assert "first pass where they part: optimize_rewrite.rewrite_reduce" in c.report()
    log = tmp_path / "log.txt"
    log.write_text(text)
    assert cli(["compare", "mlp", str(log)]) == 0
    out = capsys.readouterr().out
    assert "first pass where they part: optimize_rewrite.rewrite_reduce" in out
