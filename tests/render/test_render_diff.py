"""Diff views: colours match the trace's added/removed/changed sets on real pass runs."""

from __future__ import annotations

from render_helpers import dot_edges, dot_nodes

from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import PassManager, make_pass
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.snapshot import diff, snapshot
from migx_explore.render import build_graph, compare_panels, diff_graph, side_by_side, to_dot
from migx_explore.render import style as S
from migx_explore.render.synthetic import FuseBiasRelu, conv_chain


def _status_sets(g):
    out = {s: set() for s in S.STATUSES}
    for n in g.nodes:
        if n.instr_id is not None:
            out[n.status].add(n.instr_id)
    return out


def _assert_matches_trace(g, d, *, drawn_returns=True):
    sets = _status_sets(g)
    # Submodule @returns have no node (their owner stands for them), so compare drawn ids only.
    drawn = {n.instr_id for n in g.nodes if n.instr_id is not None}
    assert sets[S.ADDED] == d.added & drawn
    assert sets[S.REMOVED] == d.removed & drawn
    assert sets[S.CHANGED] == d.changed & drawn
    assert sets[S.UNCHANGED] == d.unchanged & drawn
    dot = dot_nodes(to_dot(g))
    for n in g.nodes:
        assert dot[n.name]["fillcolor"] == S.STATUS_STYLE[n.status].fill
        assert f"st_{n.status}" in dot[n.name]["class"]


def test_fusion_diff_colours_match_trace(fused_trace):
    rec = fused_trace.records[0]
    d = rec.diff
    assert d.added and d.removed and d.changed
    g = diff_graph(rec.before, rec.after, d, expand=True)
    _assert_matches_trace(g, d)
    ghosts = [n for n in g.nodes if n.status == S.REMOVED]
    assert {n.op for n in ghosts} == {"add", "relu"}
    dot = dot_nodes(to_dot(g))
    assert all("dashed" in dot[n.name]["style"] for n in ghosts)


def test_collapsed_fused_node_statuses(fused_trace):
    rec = fused_trace.records[0]
    g = diff_graph(rec.before, rec.after, rec.diff, expand=False)
    fused = [n for n in g.nodes if n.kind == "fused"]
    assert len(fused) == 3 and all(n.status == S.ADDED for n in fused)
    _assert_matches_trace(g, rec.diff)


def test_ghosts_sit_where_they_were_and_link_to_replacements(fused_trace):
    rec = fused_trace.records[0]
    g = diff_graph(rec.before, rec.after, rec.diff, expand=True)
    names = [n.name for n in g.nodes]
    before_order = [n.name for n in build_graph(rec.before, expand=True).nodes]
    for ghost in (n for n in g.nodes if n.status == S.REMOVED):
        k = before_order.index(ghost.name)
        prev = next(x for x in reversed(before_order[:k]) if x in names)
        assert names.index(ghost.name) > names.index(prev)
    replaced = [e for e in g.edges if e.kind == "replaced"]
    by_name = g.by_name()
    # Each removed add/relu links to the add/relu inside the pointwise that replaced it.
    assert len(replaced) == len([n for n in g.nodes if n.status == S.REMOVED])
    for e in replaced:
        assert by_name[e.src].status == S.REMOVED and by_name[e.dst].status == S.ADDED
        assert by_name[e.src].op == by_name[e.dst].op
        assert int(by_name[e.src].instr_id) in rec.diff.replaced_by
    edges = {(a, b): attrs for a, b, attrs in dot_edges(to_dot(g))}
    e = replaced[0]
    assert edges[(e.src, e.dst)]["style"] == "dashed" and edges[(e.src, e.dst)]["constraint"] == "false"


def test_dead_code_elimination_and_identity_removal():
    p = conv_chain(2)
    m = p.main
    relu = next(i for i in m if i.name == "relu")
    ident = m.insert_after(relu, Op("identity"), [relu])
    m.replace_all_uses(relu, ident)
    m.replace_instruction(ident, inputs=[relu])
    m.add_instruction(Op("neg"), [m.get_parameter("x")])  # dead
    tr = PassManager().run(p, [make_pass("eliminate_identity"), make_pass("dead_code_elimination")])
    for rec in tr.records:
        assert rec.changed
        g = diff_graph(rec.before, rec.after, rec.diff)
        _assert_matches_trace(g, rec.diff)
        assert {n.op for n in g.nodes if n.status == S.REMOVED} == {
            "eliminate_identity": {"identity"},
            "dead_code_elimination": {"neg"},
        }[rec.name]


def test_rewired_edges_are_marked():
    p = conv_chain(1)
    m = p.main
    relu = next(i for i in m if i.name == "relu")
    sig = m.insert_after(relu, Op("sigmoid"), [relu.inputs[0]])

    def swap(module):
        if module.name != "main":
            return False
        ret = module.return_instruction()
        module.replace_return([sig])
        return ret is not None

    from migx_explore.compiler.pass_infra import FunctionPass

    tr = PassManager().run(p, [FunctionPass(fn=swap, label="swap_output")])
    rec = tr.records[0]
    g = diff_graph(rec.before, rec.after, rec.diff)
    ret = f"i{m.return_instruction().id}"
    statuses = {(e.src, e.dst): e.status for e in g.edges if e.dst == ret}
    assert statuses == {(f"i{relu.id}", ret): S.REMOVED, (f"i{sig.id}", ret): S.ADDED}


def test_side_by_side_panels(fused_trace):
    rec = fused_trace.records[0]
    g = side_by_side(rec.before, rec.after, rec.diff, expand=True)
    before = [n for n in g.nodes if n.group[0] == "cluster_b_panel"]
    after = [n for n in g.nodes if n.group[0] == "cluster_a_panel"]
    assert len(before) == len(build_graph(rec.before, expand=True).nodes)
    assert len(after) == len(build_graph(rec.after, expand=True).nodes)
    assert {n.status for n in before} == {S.REMOVED, S.CHANGED, S.UNCHANGED}
    assert {n.status for n in after} == {S.ADDED, S.CHANGED, S.UNCHANGED}
    assert all(n.name.startswith("b_") for n in before) and all(n.name.startswith("a_") for n in after)
    dot = to_dot(g)
    assert 'subgraph "cluster_b_panel"' in dot and 'subgraph "cluster_a_panel"' in dot
    # The same instruction is findable in both panels by its stable-id class.
    conv = next(n for n in before if n.op == "convolution")
    nodes = dot_nodes(dot)
    assert f"iid_{conv.instr_id}" in nodes[f"a_i{conv.instr_id}"]["class"]


def test_diff_layout_is_deterministic(fused_trace):
    rec = fused_trace.records[0]
    a = to_dot(diff_graph(rec.before, rec.after, rec.diff))
    b = to_dot(diff_graph(rec.before, rec.after, rec.diff))
    assert a == b
    assert 'ordering="out"' in a and "{rank=min;" in a and "{rank=max;" in a


def test_noop_diff_is_all_unchanged():
    snap = snapshot(conv_chain(2))
    g = diff_graph(snap, snap)
    assert {n.status for n in g.nodes} == {S.UNCHANGED}


def test_local_change_on_big_graph_is_focused(big_trace):
    rec = big_trace.records[0]
    assert rec.before.total_instructions() > 2000
    g = diff_graph(rec.before, rec.after, rec.diff)
    assert len(g.nodes) < 40
    _assert_matches_trace_subset(g, rec.diff)
    summaries = [n for n in g.nodes if n.kind in ("summary", "chain")]
    assert summaries
    # Nothing is lost: every instruction of the merged program is drawn or counted in a summary.
    total = len(rec.after.by_id.keys() | rec.before.by_id.keys())
    assert g.instruction_count() == total  # collapsed: the fused node counts its whole body


def _assert_matches_trace_subset(g, d):
    changed = d.added | d.removed | d.changed
    for n in g.nodes:
        if n.instr_id is None:
            assert not (set(n.members) & (d.removed | d.changed)), "a changed instruction was summarised"
            continue
        want = (
            S.ADDED
            if n.instr_id in d.added
            else S.REMOVED
            if n.instr_id in d.removed
            else S.CHANGED
            if n.instr_id in changed
            else S.UNCHANGED
        )
        assert n.status == want


def test_submodule_shape_lines_are_dropped():
    p = conv_chain(1)
    tr = PassManager().run(p, [FuseBiasRelu()])
    g = build_graph(tr.final, expand=True)
    inner_add = next(n for n in g.nodes if n.group and n.op == "add")
    assert inner_add.label == "add"
    assert Shape.scalar("float32").lens == (1,)


def test_nodes_keep_their_order_from_pass_to_pass():
    # dot places nodes in declaration order first; keeping the order of the nodes two
    # consecutive drawings share is what keeps the layout from jumping between passes.
    tr = PassManager().run(
        conv_chain(4), [FuseBiasRelu(limit=1), FuseBiasRelu(limit=2), make_pass("dead_code_elimination")]
    )
    orders = [
        list(dot_nodes(to_dot(diff_graph(r.before, r.after, r.diff, expand=True)))) for r in tr.records if r.changed
    ]
    assert len(orders) >= 2
    for a, b in zip(orders, orders[1:]):
        shared = set(a) & set(b)
        assert len(shared) > 10
        assert [n for n in a if n in shared] == [n for n in b if n in shared]


def test_focus_ids_centre_both_panels_on_one_change(big_trace):
    rec = big_trace.records[0]
    fused = [r.id for r in rec.after.module().instrs if r.id in rec.diff.added]
    g = side_by_side(rec.before, rec.after, rec.diff, focus_ids=fused, focus=1)
    before = [n for n in g.nodes if n.group[0] == "cluster_b_panel"]
    after = [n for n in g.nodes if n.group[0] == "cluster_a_panel"]
    # The old add+relu show on the left although only the new node was asked for.
    assert {n.op for n in before if n.status == S.REMOVED} == {"add", "relu"}
    assert any(n.status == S.ADDED for n in after)
    assert len(g.nodes) < 40
    merged = diff_graph(rec.before, rec.after, rec.diff, focus_ids=fused, focus=1)
    assert {n.op for n in merged.nodes if n.status == S.REMOVED} == {"add", "relu"}


def test_a_removed_module_no_instruction_calls_is_drawn_as_removed():
    # dead_code_elimination drops fused modules nothing calls any more; the main graph does not
    # change, so without a node of its own the diff would look like a pass that did nothing.
    p = conv_chain(1)
    orphan = p.create_module("main:pointwise_unused")
    a = orphan.add_parameter("x0", Shape.of("float32", (1,)))
    orphan.add_return([orphan.add_instruction(Op("sigmoid"), [a])])
    before = snapshot(p)
    p.remove_module("main:pointwise_unused")
    after = snapshot(p)
    d = diff(before, after)
    assert d.modules_removed == ("main:pointwise_unused",)
    g = diff_graph(before, after, d)
    marks = [n for n in g.nodes if n.status == S.REMOVED]
    assert len(marks) == 1 and "pointwise_unused" in marks[0].label and "sigmoid" in marks[0].label
    assert f"st_{S.REMOVED}" in dot_nodes(to_dot(g))[marks[0].name]["class"]
    left, right = compare_panels(before, after, d)  # before | after: on the side that had it
    assert [n.name for n in left.nodes if n.status == S.REMOVED] == [marks[0].name]
    assert not [n for n in right.nodes if n.status == S.REMOVED]
    # a module an instruction still calls is drawn through that instruction, not as a lone node
    assert not [n for n in diff_graph(before, before, diff(before, before)).nodes if n.status == S.REMOVED]
