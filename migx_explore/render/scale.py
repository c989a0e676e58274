"""Keeping big graphs drawable: focus on a region, collapse chains, cap the node count.

dot's layout time grows much faster than linearly in nodes (and clusters), and a 2,000-node
drawing is unreadable anyway, so what a pass changed is shown with a few hops of context and the
rest folds into "… N more" summary nodes. All functions take and return DisplayGraphs.

Summaries cover runs of consecutive hidden nodes in display order (module order). Display order
is topological, so collapsing each run into one node can never create a cycle, and the same
hidden stretch gets the same summary name from one pass to the next.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable

from . import style as S
from .model import DisplayEdge, DisplayGraph, DisplayNode

CHANGED_STATUSES = frozenset({S.ADDED, S.REMOVED, S.CHANGED})
# A node feeding more users than this is drawn once, with a small copy beside each user (see
# split_hubs): its long edges spanning the whole drawing were most of dot's time.
HUB_FANOUT = 16


def changed_names(graph: DisplayGraph) -> set[str]:
    return {n.name for n in graph.nodes if n.status in CHANGED_STATUSES}


def _unit(n: DisplayNode) -> str:
    # A cluster is shown or hidden as a whole: half a fused kernel would be misleading.
    return n.group[0] if n.group else n.name


def constant_names(graph: DisplayGraph) -> set[str]:
    """Literals, and nodes computed only from literals (e.g. a broadcast bias)."""
    preds: dict[str, list[str]] = {}
    for e in graph.edges:
        if e.kind == "data":
            preds.setdefault(e.dst, []).append(e.src)
    consts: set[str] = set()
    for n in graph.nodes:  # display order is topological, so one sweep suffices
        if n.category == S.LITERAL or (
            n.category not in (S.PARAM, S.SUMMARY, S.RETURN)
            and n.name in preds
            and all(p in consts for p in preds[n.name])
        ):
            consts.add(n.name)
    return consts


def _adjacency(graph: DisplayGraph) -> dict[str, list[str]]:
    adj: dict[str, list[str]] = {n.name: [] for n in graph.nodes}
    for e in graph.edges:
        if e.src in adj and e.dst in adj:
            adj[e.src].append(e.dst)
            adj[e.dst].append(e.src)
    return adj


def distances(graph: DisplayGraph, seeds: Iterable[str], limit: int | None = None) -> dict[str, int]:
    """Undirected hop distance from the seeds. Constants and params are reached but not walked
    through: a weight or input shared by 100 nodes would otherwise pull all of them in."""
    blockers = constant_names(graph) | {n.name for n in graph.nodes if n.category == S.PARAM}
    adj = _adjacency(graph)
    dist = {s: 0 for s in seeds if s in adj}
    queue = deque(dist)
    while queue:
        u = queue.popleft()
        if (limit is not None and dist[u] >= limit) or (u in blockers and dist[u] > 0):
            continue
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def summarize(graph: DisplayGraph, keep: Collection[str]) -> DisplayGraph:
    """Show the `keep` nodes (plus whole clusters they touch, and the constants feeding them);
    replace each run of other nodes with one summary node."""
    keep_units = {_unit(n) for n in graph.nodes if n.name in keep}
    keep_units |= _constant_inputs(graph, keep_units)
    nodes: list[DisplayNode] = []
    rep: dict[str, str] = {}
    run: list[DisplayNode] = []

    def flush() -> None:
        if not run:
            return
        if len(run) == 1 and not run[0].group and run[0].kind != "summary":
            nodes.append(run[0])  # a summary standing for one node saves nothing
        else:
            nodes.append(_summary_node(run))
            for n in run:
                rep[n.name] = nodes[-1].name
        run.clear()

    for n in graph.nodes:
        if _unit(n) in keep_units:
            flush()
            nodes.append(n)
        else:
            run.append(n)
    flush()
    return reconnect(graph, nodes, rep)


def _constant_inputs(graph: DisplayGraph, units: set[str]) -> set[str]:
    consts = constant_names(graph)
    by_name = graph.by_name()
    preds: dict[str, list[str]] = {}
    for e in graph.edges:
        if e.kind == "data" and e.src in consts:
            preds.setdefault(e.dst, []).append(e.src)
    out: set[str] = set()
    stack = [n.name for n in graph.nodes if _unit(n) in units]
    while stack:
        for p in preds.get(stack.pop(), ()):
            u = _unit(by_name[p])
            if u not in units and u not in out:
                out.add(u)
                stack.append(p)
    return out


def _summary_node(run: list[DisplayNode]) -> DisplayNode:
    members = tuple(m for n in run for m in (n.members or ()))
    count = len(members) or len(run)
    ops = [n.op for n in run if n.kind != "summary"]
    label = f"… {count} more" + (f"\n{S.count_summary(ops)}" if ops else "")
    return DisplayNode(
        f"more_{run[0].name}",
        label,
        "summary",
        S.SUMMARY,
        (),
        {},
        None,
        run[0].module,
        "",
        None,
        "summary",
        members,
        f"{count} instructions not shown",
    )


def reconnect(graph: DisplayGraph, nodes: list[DisplayNode], rep: dict[str, str]) -> DisplayGraph:
    """Re-point edges at the nodes standing in for merged ones, dropping internal duplicates."""
    names = {n.name for n in nodes}
    edges: list[DisplayEdge] = []
    seen: set[tuple[str, str]] = set()
    for e in graph.edges:
        src, dst = rep.get(e.src, e.src), rep.get(e.dst, e.dst)
        if src == dst or src not in names or dst not in names:
            continue
        if src == e.src and dst == e.dst:
            edges.append(e)
            continue
        if e.kind == "replaced" or (src, dst) in seen:
            continue  # provenance into a summary says nothing; one summary edge is enough
        seen.add((src, dst))
        edges.append(DisplayEdge(src, dst, kind="summary", status=e.status if e.status == S.UNCHANGED else None))
    used = {g for n in nodes for g in n.group}
    groups = {k: v for k, v in graph.groups.items() if k in used}
    return DisplayGraph(nodes, edges, groups, graph.title)


def collapse_chains(
    graph: DisplayGraph, *, min_len: int = 4, statuses: Collection[str | None] = (None, S.UNCHANGED)
) -> DisplayGraph:
    """Fold each linear run of at least `min_len` nodes (each the only user of the one before,
    constants aside) into one node, if all have one of `statuses`."""

    def eligible(n: DisplayNode) -> bool:
        return (
            not n.group
            and n.kind in ("instr", "fused")
            and n.status in statuses
            and n.category not in (S.PARAM, S.RETURN, S.SUMMARY)
        )

    by_name = graph.by_name()
    consts = constant_names(graph)
    outs: dict[str, list[str]] = {}
    ins: dict[str, list[str]] = {}
    for e in graph.edges:
        if e.kind == "data":
            outs.setdefault(e.src, []).append(e.dst)
            ins.setdefault(e.dst, []).append(e.src)
    # A constant used by exactly one node travels with that node (weights, broadcast biases).
    attached: dict[str, str] = {}
    for n in reversed(graph.nodes):
        o = outs.get(n.name, [])
        if n.name in consts and eligible(n) and len(o) == 1:
            attached[n.name] = attached.get(o[0], o[0])
    link: dict[str, str] = {}
    for n in graph.nodes:
        o = outs.get(n.name, [])
        if n.name in attached or not eligible(n) or len(o) != 1:
            continue
        v = by_name.get(o[0])
        if v is None or not eligible(v) or v.name in attached:
            continue
        if [u for u in ins.get(v.name, []) if u not in attached] == [n.name]:
            link[n.name] = v.name
    has_pred = set(link.values())
    rep: dict[str, str] = {}
    chain_nodes: dict[str, DisplayNode] = {}
    for n in graph.nodes:
        if n.name not in link or n.name in has_pred:
            continue
        chain = [n.name]
        while chain[-1] in link:
            chain.append(link[chain[-1]])
        if len(chain) < min_len:
            continue
        cset = set(chain)
        extra = [c for c, root in attached.items() if root in cset]
        node = _chain_node([by_name[c] for c in chain], [by_name[c] for c in extra])
        chain_nodes[chain[0]] = node
        for c in chain + extra:
            rep[c] = node.name
    if not rep:
        return graph
    nodes = [chain_nodes.get(n.name, n) for n in graph.nodes if n.name not in rep or n.name in chain_nodes]
    return reconnect(graph, nodes, rep)


def _chain_node(chain: list[DisplayNode], extra: list[DisplayNode]) -> DisplayNode:
    members = tuple(m for n in chain + extra for m in n.members)
    first, last = chain[0], chain[-1]
    label = f"{len(chain)} ops: {S.count_summary(n.op for n in chain)}\n{first.op} → … → {last.op}\n{last.shape}"
    return DisplayNode(
        f"chain_{first.name}",
        label,
        "chain",
        S.CHAIN,
        (),
        {},
        None,
        first.module,
        last.shape,
        first.status,
        "chain",
        members,
        f"{len(members)} instructions, collapsed",
    )


def apply_budget(
    graph: DisplayGraph, budget: int, seeds: Collection[str] = (), hubs: int | None = HUB_FANOUT
) -> DisplayGraph:
    """Keep at most about `budget` nodes: those nearest the seeds, or without seeds the first and
    last ones (inputs and outputs); everything else goes into summary nodes. The copies that
    split_hubs(…, hubs) will add count (None: no copies will be made)."""

    def drawn(g: DisplayGraph) -> int:
        return len(g.nodes) + (hub_copies(g, hubs) if hubs is not None else 0)

    if drawn(graph) <= budget:
        return graph
    units: dict[str, list[DisplayNode]] = {}
    for n in graph.nodes:
        units.setdefault(_unit(n), []).append(n)
    order = list(units)
    # Constants come with the nodes they feed (summarize keeps them), so they never take a place
    # of their own: a lowered program lists ~200 literal copies first, and ranking them like
    # compute filled a whole-program comparison with literals and nothing else.
    consts = constant_names(graph)
    const = {u: all(n.name in consts for n in ns) for u, ns in units.items()}
    if seeds:
        dist = distances(graph, seeds)
        far = len(order) + 1
        rank = {u: (min(dist.get(n.name, far) for n in units[u]), const[u], k) for k, u in enumerate(order)}
    else:
        last = len(order) - 1
        rank = {u: (const[u], min(k, last - k), k) for k, u in enumerate(order)}
    ranked = sorted(order, key=rank.__getitem__)
    # The constants kept with each node and the summaries between kept stretches come on top of
    # what is picked here, so aim lower and shrink the aim until the result fits.
    target = budget * 0.85
    for _ in range(4):
        keep: set[str] = set()
        size = 0
        for u in ranked:
            if size + len(units[u]) > target:
                break
            keep.update(n.name for n in units[u])
            size += len(units[u])
        out = summarize(graph, keep)
        if drawn(out) <= budget * 1.05 or size == 0:
            return out
        target *= budget / drawn(out)
    return out


def hub_copies(graph: DisplayGraph, max_fanout: int = HUB_FANOUT) -> int:
    """How many copies `split_hubs` would add (a budget counts everything drawn)."""
    fanout: dict[str, int] = {}
    users: dict[str, set[str]] = {}
    for e in graph.edges:
        if e.kind != "replaced":
            fanout[e.src] = fanout.get(e.src, 0) + 1
            users.setdefault(e.src, set()).add(e.dst)
    return sum(len(users[name]) for name, k in fanout.items() if k > max_fanout)


def split_hubs(graph: DisplayGraph, max_fanout: int = HUB_FANOUT) -> DisplayGraph:
    """Give each user of a node with more than `max_fanout` users its own small copy of that node.

    Why: a node used all over the graph (the `scratch` buffer every kernel reads after
    preallocate_param, a shared weight, a summary of literals) sends edges across every rank.
    dot turns each rank an edge crosses into a virtual node and orders them all, so 150 such
    edges made one 300-node diff take 8-20 s to lay out; with copies it takes a fraction of a
    second. The copy (category `ref`, no status, so it never counts as a change) names the node
    and its id; the edge from it keeps its diff status and colour. The node itself stays where it
    was, its tooltip saying how many users it has."""
    fanout: dict[str, int] = {}
    for e in graph.edges:
        if e.kind != "replaced":
            fanout[e.src] = fanout.get(e.src, 0) + 1
    hubs = {name for name, k in fanout.items() if k > max_fanout}
    if not hubs:
        return graph
    by_name = graph.by_name()
    refs: dict[str, list[DisplayNode]] = {}  # user -> the copies drawn just before it
    made: set[str] = set()
    edges: list[DisplayEdge] = []
    for e in graph.edges:
        if e.src not in hubs or e.kind == "replaced" or e.dst not in by_name:
            edges.append(e)
            continue
        ref = f"ref_{e.src}_{e.dst}"
        if ref not in made:
            made.add(ref)
            refs.setdefault(e.dst, []).append(_ref_node(by_name[e.src], ref, by_name[e.dst].group, fanout[e.src]))
        edges.append(DisplayEdge(ref, e.dst, e.label, e.kind, e.status, e.shape))
    nodes: list[DisplayNode] = []
    for n in graph.nodes:
        nodes.extend(refs.get(n.name, ()))
        if n.name in hubs:
            n = _with_tooltip(
                n,
                f"{n.tooltip or n.label.splitlines()[0]} (used by {fanout[n.name]} nodes: a copy is drawn beside each)",
            )
        nodes.append(n)
    return DisplayGraph(nodes, edges, dict(graph.groups), graph.title)


def _ref_node(hub: DisplayNode, name: str, group: tuple[str, ...], users: int) -> DisplayNode:
    head = hub.label.splitlines()[0] if hub.label else hub.name
    tag = f" #{hub.instr_id}" if hub.instr_id is not None and f"#{hub.instr_id}" not in head else ""
    return DisplayNode(
        name,
        f"↳ {head}{tag}",
        hub.op,
        S.REF,
        group,
        {},
        None,
        hub.module,
        hub.shape,
        None,
        "ref",
        (),
        f"{hub.tooltip or head} (one of {users} users' copies)",
    )


def _with_tooltip(n: DisplayNode, tooltip: str) -> DisplayNode:
    new = object.__new__(DisplayNode)
    new.__dict__.update(n.__dict__, tooltip=tooltip)
    return new


def scale_graph(
    graph: DisplayGraph,
    *,
    seeds: Collection[str] = (),
    hops: int | None = None,
    chains: bool = False,
    min_chain: int = 4,
    chain_statuses: Collection[str | None] = (None, S.UNCHANGED),
    budget: int | None = None,
    hubs: int | None = HUB_FANOUT,
) -> DisplayGraph:
    """Focus (keep `hops` around the seeds), then collapse chains, then apply the node budget
    (counting every node drawn, the hub copies too), then split hubs (nodes with more than
    `hubs` users; None: never)."""
    if hops is not None and seeds:
        near = distances(graph, seeds, hops)
        graph = summarize(graph, set(near))
    if chains:
        graph = collapse_chains(graph, min_len=min_chain, statuses=chain_statuses)
    if budget is not None:
        names = {n.name for n in graph.nodes}
        graph = apply_budget(graph, budget, [s for s in seeds if s in names], hubs)
    if hubs is not None:
        graph = split_hubs(graph, hubs)
    return graph
