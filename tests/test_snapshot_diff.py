"""snapshot.diff indexes only the modules a pass touched (a module left alone is the same
ModuleSnapshot on both sides); its answer must be the whole-program comparison's, pass by pass,
on a trace whose passes add, fuse, inline and drop submodules."""

from __future__ import annotations

from migx_explore import models
from migx_explore.compiler.pass_infra import PassManager
from migx_explore.compiler.snapshot import diff
from migx_explore.gpu.pipelines import gpu_pipelines


def _whole_program_diff(before, after):
    a = {r.id: (m.name, r) for m in before.modules for r in m.instrs}
    b = {r.id: (m.name, r) for m in after.modules for r in m.instrs}
    common = a.keys() & b.keys()
    changed = {i for i in common if a[i][0] != b[i][0] or not a[i][1].same_content(b[i][1])}
    added, removed = b.keys() - a.keys(), a.keys() - b.keys()
    replaced: dict[int, list[int]] = {}
    for i in sorted(added):
        for o in b[i][1].origin:
            if o in removed or o in changed:
                replaced.setdefault(o, []).append(i)
    return added, removed, changed, common - changed, {k: tuple(v) for k, v in replaced.items()}


def test_diff_matches_the_whole_program_comparison_on_every_pass():
    trace = PassManager().run(models.load("yolo"), [p.copy() for p in gpu_pipelines()])
    modules_touched = 0
    for rec in trace.records:
        if rec.before is None or rec.after is None:
            continue
        d = diff(rec.before, rec.after)
        assert (d.added, d.removed, d.changed, d.unchanged, d.replaced_by) == _whole_program_diff(
            rec.before, rec.after
        ), rec.path
        modules_touched += bool(d.modules_added or d.modules_removed)
    assert modules_touched  # the trace did add and drop submodules


def test_a_pass_shares_the_snapshots_of_the_modules_it_left_alone():
    """Memory grows with what a pass changed: a module a pass did not touch is the same
    ModuleSnapshot object before and after it, even where the manager re-read every instruction
    (passes that do not promise 'no change' are snapshotted fresh)."""
    trace = PassManager().run(models.load("yolo"), [p.copy() for p in gpu_pipelines()])
    shared = copied = 0
    for rec in trace.records:
        if rec.before is None or rec.after is None:
            continue
        touched = rec.diff.added | rec.diff.removed | rec.diff.changed
        for name, mb in rec.before.by_name.items():
            ma = rec.after.by_name.get(name)
            if ma is None or touched & {r.id for r in mb.instrs} or touched & {r.id for r in ma.instrs}:
                continue
            if [r.id for r in ma.instrs] != [r.id for r in mb.instrs]:
                continue  # reordered
            shared += ma is mb
            copied += ma is not mb
    assert shared > 100 and copied * 50 < shared  # (a literal swapped for an equal one is not shared)
