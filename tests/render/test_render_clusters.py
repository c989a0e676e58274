"""Clusters opened and closed one at a time (render.Clusters), and hubs drawn as per-user copies
(scale.split_hubs): what the explorer's expand / collapse controls and big backend graphs rest on."""

from __future__ import annotations

import re

from migx_explore.render import Clusters, DotOptions, build_graph, diff_graph, to_dot
from migx_explore.render import style as S
from migx_explore.render.model import AUTO_EXPAND_MAX, DisplayEdge, DisplayGraph, DisplayNode
from migx_explore.render.scale import HUB_FANOUT, split_hubs


def _owners(snap) -> list[int]:
    return [r.id for r in snap.module("main").instrs if r.modules]


def _cluster_owners(g) -> set[int]:
    return {grp.owner for grp in g.groups.values() if grp.owner is not None}


def test_clusters_choice_expands_exactly_the_flipped_owners(fused_trace):
    after = fused_trace.records[0].after
    owners = _owners(after)
    assert len(owners) == 3
    first = owners[0]
    closed = build_graph(after, expand=Clusters(False))
    assert not closed.groups and {n.instr_id for n in closed.nodes if n.kind == "fused"} == set(owners)
    one = build_graph(after, expand=Clusters(False, frozenset({first})))
    assert _cluster_owners(one) == {first}
    assert {n.instr_id for n in one.nodes if n.kind == "fused"} == set(owners) - {first}
    all_but_one = build_graph(after, expand=Clusters(True, frozenset({first})))
    assert _cluster_owners(all_but_one) == set(owners) - {first}
    # "auto" decides on size: this small program is drawn with every cluster open, as "auto" does
    assert _cluster_owners(build_graph(after, expand=Clusters())) == _cluster_owners(build_graph(after)) == set(owners)


def test_with_owner_keeps_its_meaning_and_round_trips():
    c = Clusters()  # "auto" on a big program: everything collapsed
    opened = c.with_owner(7, True, AUTO_EXPAND_MAX + 1)
    assert opened == Clusters(False, frozenset({7})) and opened.expands(7) and not opened.expands(8)
    assert opened.with_owner(7, False, AUTO_EXPAND_MAX + 1) == Clusters(False)
    small = c.with_owner(7, False, 10)  # on a small program "auto" means open: closing one flips it
    assert small == Clusters(True, frozenset({7})) and not small.expands(7) and small.expands(8)
    assert Clusters(True).resolved(10**6) == Clusters(True)  # a decided default never changes


def test_an_opened_cluster_keeps_its_diff_statuses(fused_trace):
    rec = fused_trace.records[0]
    owner = _owners(rec.after)[1]
    g = diff_graph(rec.before, rec.after, rec.diff, expand=Clusters(False, frozenset({owner})), focus=None)
    group = next(grp for grp in g.groups.values() if grp.owner == owner)
    inside = [n for n in g.nodes if group.name in n.group]
    # the fused module is new in this pass: its cluster and every op drawn inside it are added
    assert group.status == S.ADDED and inside and all(n.status == S.ADDED for n in inside)
    others = [n for n in g.nodes if n.kind == "fused"]
    assert len(others) == 2 and all(n.status == S.ADDED for n in others)
    # the ops the fusion replaced are still shown as removed ghosts
    assert any(n.status == S.REMOVED for n in g.nodes if not n.group)


def test_dot_marks_the_cluster_controls(fused_trace):
    after = fused_trace.records[0].after
    owners = _owners(after)
    g = build_graph(after, expand=Clusters(False, frozenset({owners[0]})))
    dot = to_dot(g, DotOptions(cluster_controls=True))
    assert f"owner_{owners[0]}" in dot and 'label="⊟ ' in dot
    fused = [line for line in dot.splitlines() if "kind_fused" in line]
    assert len(fused) == 2 and all('label="⊞ ' in line and "double-click" in line for line in fused)
    plain = to_dot(g)  # outside the explorer the labels stay as they were
    assert "⊟" not in plain and "⊞" not in plain and f"owner_{owners[0]}" in plain


def _changed(g: DisplayGraph) -> list[str]:
    return sorted(n.name for n in g.nodes if n.status in (S.ADDED, S.REMOVED, S.CHANGED))


def _hub_graph(users: int) -> DisplayGraph:
    hub = DisplayNode("i0", "scratch\nint8 100", "@param", S.PARAM, instr_id=0, status=S.REMOVED)
    nodes, edges = [hub], []
    for k in range(1, users + 1):
        nodes.append(
            DisplayNode(f"i{k}", f"kernel {k}", "gpu::code_object", S.GPU_KERNEL, instr_id=k, status=S.CHANGED)
        )
        edges.append(DisplayEdge("i0", f"i{k}", status=S.REMOVED))
        if k > 1:
            edges.append(DisplayEdge(f"i{k - 1}", f"i{k}", status=S.UNCHANGED))
    return DisplayGraph(nodes, edges)


def test_split_hubs_draws_a_copy_beside_each_user():
    g = _hub_graph(HUB_FANOUT + 4)
    out = split_hubs(g)
    refs = [n for n in out.nodes if n.kind == "ref"]
    assert len(refs) == HUB_FANOUT + 4
    names = [n.name for n in out.nodes]
    for r in refs:  # each copy sits just before its user, names the hub and carries no status
        user = r.name.rsplit("_", 1)[1]
        assert names.index(r.name) == names.index(user) - 1
        assert r.status is None and r.category == S.REF and "scratch" in r.label and "#0" in r.label
    assert not [e for e in out.edges if e.src == "i0"]
    from_refs = [e for e in out.edges if e.src.startswith("ref_")]
    assert len(from_refs) == HUB_FANOUT + 4 and all(e.status == S.REMOVED for e in from_refs)
    # what counts as a change (the centre-on-change view) is the same as before the split
    assert _changed(out) == _changed(g)
    assert "used by" in out.by_name()["i0"].tooltip
    assert out.instruction_count() == g.instruction_count()
    at_limit = _hub_graph(HUB_FANOUT)
    assert split_hubs(at_limit) is at_limit  # not over the limit: untouched


def test_split_hub_copies_carry_no_status_class():
    g = split_hubs(_hub_graph(HUB_FANOUT + 1))
    dot = to_dot(g)
    ref_lines = [line for line in dot.splitlines() if "kind_ref" in line]
    assert len(ref_lines) == HUB_FANOUT + 1 and not any(re.search(r"st_\w+", line) for line in ref_lines)
