"""Scale controls: focus, chain collapse, node budget. Nothing is lost and no cycle appears."""

from __future__ import annotations

from migx_explore.compiler.snapshot import snapshot
from migx_explore.render import apply_budget, build_graph, collapse_chains, diff_graph, scale_graph, summarize
from migx_explore.render import style as S
from migx_explore.render.scale import distances
from migx_explore.render.synthetic import conv_chain


def _acyclic(g) -> bool:
    succ: dict[str, list[str]] = {n.name: [] for n in g.nodes}
    for e in g.edges:
        if e.kind != "replaced":
            succ[e.src].append(e.dst)
    state: dict[str, int] = {}
    for root in succ:
        stack = [(root, iter(succ[root]))]
        if root in state:
            continue
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return False
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
    return True


def _edges_valid(g) -> bool:
    names = {n.name for n in g.nodes}
    return all(e.src in names and e.dst in names for e in g.edges)


def test_summarize_keeps_runs_and_counts():
    g = build_graph(snapshot(conv_chain(20, residual_every=3)))
    mid = g.nodes[len(g.nodes) // 2].name
    keep = set(distances(g, [mid], 2))
    s = summarize(g, keep)
    assert s.instruction_count() == g.instruction_count()
    assert mid in {n.name for n in s.nodes}
    summaries = [n for n in s.nodes if n.kind == "summary"]
    assert 1 <= len(summaries) <= 3
    assert all(n.label.startswith("… ") and "more" in n.label for n in summaries)
    assert _acyclic(s) and _edges_valid(s)
    # Constants feeding a kept node are kept with it (no "… 1 more" for each weight).
    kept_convs = [n for n in s.nodes if n.op == "convolution"]
    lits = {e.src for e in s.edges if e.dst in {c.name for c in kept_convs}}
    assert all(s.by_name()[x].category in (S.LITERAL, S.CHAIN, S.SUMMARY, S.POINTWISE, S.PARAM) for x in lits)


def test_collapse_chains_folds_linear_runs():
    g = build_graph(snapshot(conv_chain(30)))
    c = collapse_chains(g, min_len=4)
    chains = [n for n in c.nodes if n.kind == "chain"]
    assert len(chains) == 1  # x -> one long chain -> @return
    assert len(c.nodes) == 3 and c.instruction_count() == g.instruction_count()
    assert "convolution ×30" in chains[0].label
    # Skip connections break chains into several.
    r = collapse_chains(build_graph(snapshot(conv_chain(30, residual_every=5))), min_len=4)
    assert len([n for n in r.nodes if n.kind == "chain"]) > 3 and _acyclic(r) and _edges_valid(r)


def test_chains_only_fold_unchanged_nodes(big_trace):
    rec = big_trace.records[0]
    g = diff_graph(rec.before, rec.after, rec.diff, focus=None, chains=True, budget=None)
    for n in g.nodes:
        if n.kind == "chain":
            assert n.status == S.UNCHANGED
            assert not set(n.members) & (rec.diff.added | rec.diff.removed | rec.diff.changed)
    assert len(g.nodes) < 40 and _acyclic(g) and _edges_valid(g)


def test_budget_caps_nodes():
    g = build_graph(snapshot(conv_chain(200, residual_every=4)))
    b = apply_budget(g, 100)
    assert len(b.nodes) <= 110
    assert b.instruction_count() == g.instruction_count()
    names = [n.name for n in b.nodes]
    assert names[0] == g.nodes[0].name and names[-1] == g.nodes[-1].name  # inputs and outputs stay
    assert _acyclic(b) and _edges_valid(b)
    assert apply_budget(g, 10_000) is g


def test_budget_prefers_nodes_near_seeds():
    g = build_graph(snapshot(conv_chain(200)))
    seed = g.nodes[len(g.nodes) // 2].name
    b = scale_graph(g, seeds=[seed], budget=30)
    assert seed in {n.name for n in b.nodes} and len(b.nodes) <= 35


def test_focus_names_are_stable_between_passes(big_trace):
    rec = big_trace.records[0]
    g1 = diff_graph(rec.before, rec.after, rec.diff)
    g2 = diff_graph(rec.before, rec.after, rec.diff)
    assert [n.name for n in g1.nodes] == [n.name for n in g2.nodes]


def test_budget_spends_its_places_on_compute_not_constants():
    """A lowered program lists its literal copies first; with every node a seed (a whole-program
    comparison), the budget must still keep compute nodes, the constants coming with them."""
    from migx_explore.render.model import DisplayEdge, DisplayGraph, DisplayNode

    n = 60
    nodes = [DisplayNode("x", "x", "@param", S.PARAM, status=S.CHANGED)]
    nodes += [DisplayNode(f"l{k}", "literal", "@literal", S.LITERAL, status=S.CHANGED) for k in range(n)]
    nodes += [DisplayNode(f"c{k}", "copy", "hip::hip_copy_literal", S.GPU_KERNEL, status=S.CHANGED) for k in range(n)]
    nodes += [DisplayNode(f"x{k}", "add", "add", S.POINTWISE, status=S.CHANGED) for k in range(n)]
    edges = [DisplayEdge(f"l{k}", f"c{k}") for k in range(n)] + [DisplayEdge(f"c{k}", f"x{k}") for k in range(n)]
    edges += [DisplayEdge("x" if k == 0 else f"x{k - 1}", f"x{k}") for k in range(n)]
    g = DisplayGraph(nodes, edges)
    out = apply_budget(g, 60, seeds=[m.name for m in nodes])  # ids differ everywhere: all are seeds
    kept = [m.name for m in out.nodes if m.kind != "summary"]
    assert len(out.nodes) <= 63
    compute = [name for name in kept if name.startswith("x") and name != "x"]
    assert len(compute) >= 15, kept
    assert all(f"c{name[1:]}" in kept for name in compute)  # each brings its constant inputs along
    assert _edges_valid(out) and _acyclic(out)
