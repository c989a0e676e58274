"""The Model Explorer export (issue 42) without a browser: the JSON is what the package's own data
classes accept (graph_builder, node_data_builder, read strictly with dacite, the package's own
dependency), node ids are stable instruction ids, layers come from scopes, a pass's change is in
its styles and its mapping, overlays carry provenance and kernel times, and the CLI, the adapter
and the widget button reach it."""

from __future__ import annotations

import json
import os

import pytest

from migx_explore.compiler.errors import MigxError
from migx_explore.model_explorer import check_export_folder, export_trace, load_manifest
from migx_explore.model_explorer.overlays import kernel_times
from migx_explore.session import Session

TEXT = """
x = @param:x -> float, {4, 8}, {8, 1}
w = @param:w -> float, {4, 8}, {8, 1}
@0 = add(x,w) -> float, {4, 8}, {8, 1}
@1 = relu(@0) -> float, {4, 8}, {8, 1}
@2 = mul(@1,@1) -> float, {4, 8}, {8, 1}
@3 = @return(@2)
"""


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    s = Session.from_model("bert_encoder", numeric=False)
    folder = str(tmp_path_factory.mktemp("me") / "bert")
    return s, export_trace(s, folder)


def _collection(e):
    with open(e.collection, encoding="utf-8") as f:
        return json.load(f)


def test_json_is_what_model_explorer_reads(bert):
    dacite = pytest.importorskip("dacite")
    pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed")
    from model_explorer import graph_builder, node_data_builder

    _, e = bert
    strict = dacite.Config(strict=True)
    gc = dacite.from_dict(graph_builder.GraphCollection, _collection(e), config=strict)
    assert gc.label == "bert_encoder" and gc.graphSorting == "name_asc"
    ids = {g.id for g in gc.graphs}
    for g in gc.graphs:
        nodes = {n.id for n in g.nodes}
        for n in g.nodes:
            assert all(edge.sourceNodeId in nodes for edge in n.incomingEdges), (g.id, n.id)
            assert all(sub in ids for sub in n.subgraphIds), (g.id, n.id)
    for rel in e.node_data.values():
        with open(os.path.join(e.folder, rel), encoding="utf-8") as f:
            for gid, data in json.load(f).items():
                assert gid in ids
                dacite.from_dict(node_data_builder.GraphNodeData, data, config=strict)


def test_graphs_are_passes_with_stable_ids_and_scoped_layers(bert):
    s, e = bert
    trace = s.trace
    graphs = {g["id"]: g for g in _collection(e)["graphs"]}
    changed = [r for r in trace.top_level() if r.changed]
    assert [p.index for p in e.passes] == [r.index for r in changed]
    assert e.input_graph in graphs and e.final_graph in graphs
    p = next(p for p in e.passes if p.path == "optimize_rewrite.optimize_module")
    rec = trace.records[p.index]
    nodes = {n["id"]: n for n in graphs[p.graph]["nodes"]}
    assert set(nodes) == {str(r.id) for r in rec.after.module("main").instrs}
    # layers: torch.onnx's module paths, without the leading slash
    assert any(n["namespace"].startswith("bert/encoder/layer.0/") for n in nodes.values())
    # the pass's own change as styles, and the graph-level attributes name the pass
    added = [n for i, n in nodes.items() if int(i) in rec.diff.added]
    assert added and all(n.get("style") and {"key": "change", "value": "added"} in n["attrs"] for n in added)
    assert graphs[p.graph]["groupNodeAttributes"][""]["pass"] == rec.path
    # shapes in MIGraphX's spelling
    some = next(n for n in nodes.values() if n["label"] == "dot")
    assert some["outputsMetadata"][0]["attrs"][0]["value"].startswith("float_type, {1, ")
    # the mapping: kept ids map to themselves; what the pass removed or made maps to nothing
    with open(os.path.join(e.folder, p.mapping), encoding="utf-8") as f:
        m = json.load(f)
    before_ids = {r.id for r in rec.before.module("main").instrs}
    assert m["showDiffHighlights"] and m["disableMappingFallback"]
    assert set(m["mapping"]) == {str(i) for i in before_ids & {int(x) for x in nodes}}
    assert not any(str(i) in m["mapping"] for i in rec.diff.removed | rec.diff.added)
    assert p.layers_after and all(x.endswith("___group___") for x in p.layers_after)


def test_before_graph_of_a_pass_styles_what_it_removed(bert):
    s, e = bert
    graphs = {g["id"]: g for g in _collection(e)["graphs"]}
    p = next(p for p in e.passes if p.path == "optimize_rewrite.optimize_module")
    rec = s.trace.records[p.index]
    assert p.before == p.graph + " (before)"
    left = {n["id"]: n for n in graphs[p.before]["nodes"]}
    assert set(left) == {str(r.id) for r in rec.before.module("main").instrs}
    styled = {i for i, n in left.items() if n.get("style")}
    assert styled == {str(i) for i in rec.diff.removed}  # nothing else: not the previous pass's additions
    assert all({"key": "change", "value": "removed"} in left[i]["attrs"] for i in styled)
    assert graphs[p.before]["groupNodeAttributes"][""]["before pass"] == rec.path


# x feeds 20 instructions: more than a layer's worth of edges from one node (HUB_FANOUT)
HUB = "\n".join(
    ["x = @param:x -> float, {4}, {1}"]
    + [f"@{i} = relu(x) -> float, {{4}}, {{1}}" for i in range(20)]
    + [f"@{20 + i} = add({'@0' if i == 0 else f'@{19 + i}'},@{i + 1}) -> float, {{4}}, {{1}}" for i in range(19)]
    + ["@39 = @return(@38)", ""]
)


def test_a_value_with_many_users_gets_a_copy_in_each_layer(tmp_path):
    s = Session.from_text(HUB, numeric=False, include_backend=False)
    e = export_trace(s, str(tmp_path / "hub"))
    g = next(g for g in _collection(e)["graphs"] if g["id"] == e.input_graph)
    nodes = {n["id"]: n for n in g["nodes"]}
    x = next(n for n in g["nodes"] if n["label"] == "x")
    copies = [n for n in g["nodes"] if n["id"].startswith(x["id"] + "@")]
    assert len(copies) == len({n["namespace"] for n in g["nodes"] if n["label"] == "relu"})
    assert all(c["label"] == "↳ x" and c["namespace"] == c["id"].split("@", 1)[1] for c in copies)
    assert {"key": "users", "value": "20 (a copy stands in each layer that uses it)"} in x["attrs"]
    users = [n for n in g["nodes"] if n["label"] == "relu"]
    for n in users:  # every edge from x leaves the copy in the user's own layer
        (edge,) = n["incomingEdges"]
        assert nodes[edge["sourceNodeId"]]["namespace"] == n["namespace"] and edge["sourceNodeId"] != x["id"]
    # the copies are the same nodes in the next pass graph, so the pass's mapping keeps them
    p = e.passes[0]
    with open(os.path.join(e.folder, p.mapping), encoding="utf-8") as f:
        mapping = json.load(f)["mapping"]
    after = {n["id"] for g2 in _collection(e)["graphs"] if g2["id"] == p.graph for n in g2["nodes"]}
    assert all(mapping.get(c["id"]) == c["id"] for c in copies if c["id"] in after)


def test_a_pass_opens_from_its_own_small_collection(bert, monkeypatch):
    pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed")
    import urllib.parse

    from migx_explore.model_explorer import launch, open_in_model_explorer

    class FakeServer:
        base = "http://127.0.0.1:1"

    monkeypatch.setattr(launch, "start_server", lambda **kw: FakeServer())
    _, e = bert
    p = next(p for p in e.passes if p.path == "optimize_rewrite.optimize_module")
    h = open_in_model_explorer(e.folder, p.path, compare=True, browser=False)
    data = json.loads(urllib.parse.parse_qs(urllib.parse.urlparse(h.url).query)["data"][0])
    (model,) = data["models"]
    with open(model["url"], encoding="utf-8") as f:
        view = json.load(f)
    ids = [g["id"] for g in view["graphs"]]
    assert ids[:2] == [p.before, p.graph] and view["label"] == e.label
    whole = {g["id"]: g for g in _collection(e)["graphs"]}
    subs = {s for gid in ids for n in whole[gid]["nodes"] for s in n.get("subgraphIds", [])}
    assert set(ids) == {p.before, p.graph} | subs  # the module graphs they open, nothing else
    assert [x["selectedGraphId"] for x in data["uiState"]["paneStates"]] == [p.before, p.graph]
    assert open_in_model_explorer(e.folder, "final", browser=False).graph == e.final_graph
    every = open_in_model_explorer(e.folder, p.path, overlay="all", browser=False).url
    named = json.loads(urllib.parse.parse_qs(urllib.parse.urlparse(every).query)["data"][0])["nodeData"]
    assert [os.path.basename(x) for x in named] == [os.path.basename(x) for x in e.node_data.values()]
    with pytest.raises(MigxError, match=r"no overlay 'gpu_time_us' in this export \(it has: provenance\)"):
        open_in_model_explorer(e.folder, p.path, overlay=["provenance", "gpu_time_us"], browser=False)
    with pytest.raises(MigxError, match="no pass 'no_such_pass'"):
        open_in_model_explorer(e.folder, "no_such_pass", browser=False)


def test_fused_modules_are_subgraphs_shared_between_passes(tmp_path):
    s = Session.from_model("resnet_block", numeric=False)
    e = export_trace(s, str(tmp_path / "rb"))
    graphs = {g["id"]: g for g in _collection(e)["graphs"]}
    fused = [n for n in graphs[e.final_graph]["nodes"] if n.get("subgraphIds")]
    assert fused
    sub = graphs[fused[0]["subgraphIds"][0]]
    assert sub["nodes"] and all(n["namespace"] == "" for n in sub["nodes"])
    # a module no pass touched again is one graph, not one per pass
    owners = [g["id"] for g in graphs.values() for n in g["nodes"] if sub["id"] in n.get("subgraphIds", [])]
    assert len(owners) >= 2


def test_provenance_overlay_names_the_pass_that_made_each_instruction(bert):
    s, e = bert
    with open(os.path.join(e.folder, e.node_data["provenance"]), encoding="utf-8") as f:
        prov = json.load(f)
    p = e.passes[-1]
    rec = s.trace.records[p.index]
    made = {str(i) for i in rec.diff.added}
    assert made and all(prov[p.graph]["results"][i]["value"] == rec.index + 1 for i in made)
    assert prov[e.input_graph]["results"] and {v["value"] for v in prov[e.input_graph]["results"].values()} == {0}


def test_gpu_time_overlay_from_a_timing_result(tmp_path):
    from migx_explore.gpu.timing import KernelTime, ModeTiming, Stats, TimingResult

    s = Session.from_model("mlp", numeric=False)
    main = s.trace.final.module("main").instrs
    k = next(i for i, r in enumerate(main) if r.op.name.startswith("gpu::"))
    st = Stats(1.0, 1.0, 1.0, 1)
    eager = ModeTiming("eager", st, st, st, 1, [KernelTime(f"@{k} {main[k].op.name}", "kern", "kernel", 7.5)])
    timing = TimingResult({"eager": eager}, 1, 0)
    assert kernel_times(s.trace.final, timing) == {main[k].id: 7.5}
    e = export_trace(s, str(tmp_path / "mlp"), timing=timing)
    with open(os.path.join(e.folder, e.node_data["gpu_time_us"]), encoding="utf-8") as f:
        data = json.load(f)
    assert data[e.final_graph]["results"] == {str(main[k].id): {"value": 7.5}}


def test_numeric_error_overlay_when_checked(tmp_path):
    s = Session.from_text(TEXT, include_backend=False)  # numeric check on random inputs
    e = export_trace(s, str(tmp_path / "t"))
    with open(os.path.join(e.folder, e.node_data["numeric_error"]), encoding="utf-8") as f:
        data = json.load(f)
    p = next(p for p in e.passes if p.path.endswith("fuse_pointwise_reduce"))
    fused = next(r.id for r in s.trace.records[p.index].after.module("main").instrs if r.modules)
    # the fused kernel stands for the mul it replaced: compared with the input program's value
    assert data[p.graph]["results"][str(fused)]["value"] < 1e-5


def test_a_bare_trace_exports_too(tmp_path):
    s = Session.from_text(TEXT, include_backend=False, numeric=False)
    e = export_trace(s.trace, str(tmp_path / "t"), label="text")
    assert load_manifest(e.folder)["label"] == "text"


def test_bad_folders_say_so(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("x")
    with pytest.raises(MigxError, match="not empty"):
        check_export_folder(str(tmp_path / "full"))
    with pytest.raises(MigxError, match="parent folder does not exist"):
        check_export_folder(str(tmp_path / "no" / "such"))
    with pytest.raises(MigxError, match="not a Model Explorer export"):
        load_manifest(str(tmp_path / "full"))


def test_cli_trace_writes_the_export(tmp_path, capsys):
    from migx_explore.cli import main

    out = tmp_path / "me"
    assert main(["trace", "mlp", "--model-explorer", str(out), "-q"]) == 0
    assert "Model Explorer trace" in capsys.readouterr().out
    assert load_manifest(str(out))["passes"]
    assert main(["trace", "mlp", "--model-explorer", str(out), "-q"]) == 0  # an earlier export is replaced
    capsys.readouterr()
    assert main(["trace", "mlp", "-q"]) != 0
    assert "trace needs --out DIR (the IR files) or --model-explorer DIR" in capsys.readouterr().err


def test_adapter_converts_an_export_and_an_onnx(bert, tmp_path):
    pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed")
    from migx_explore.main import MigxExploreAdapter
    from migx_explore.models import get_model

    _, e = bert
    out = MigxExploreAdapter().convert(os.path.join(e.folder, "trace.migx"), {})
    assert out["graphCollections"][0].label == "bert_encoder"
    assert "migx" in MigxExploreAdapter.metadata.fileExts  # so a folder named out/x.migx opens too
    named = tmp_path / "bert.migx"
    import shutil

    shutil.copytree(e.folder, named)
    assert MigxExploreAdapter().convert(str(named), {})["graphCollections"][0].graphs
    import onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(get_model("mlp"), str(path))
    out = MigxExploreAdapter().convert(str(path), {})
    assert any(g["id"].endswith("final") for g in out["graphCollections"][0].graphs)


def test_missing_package_is_one_clear_line(monkeypatch):
    import importlib.util

    from migx_explore.model_explorer import launch, open_in_model_explorer

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "model_explorer" else real(n, *a))
    with pytest.raises(MigxError, match=r"not installed: pip install 'migx-explore\[model-explorer\]'"):
        open_in_model_explorer("anything")
    assert launch.unavailable_reason().startswith("Model Explorer is not installed")


def test_widget_button_opens_the_current_pass(monkeypatch):
    import urllib.parse

    pytest.importorskip("ipywidgets")
    from migx_explore.model_explorer import launch
    from migx_explore.widgets._common import ErrorBox
    from migx_explore.widgets.model_explorer_button import ModelExplorerButton

    s = Session.from_model("mlp", numeric=False)
    rec = s.last()
    calls = []

    class FakeServer:
        base = "http://127.0.0.1:1"

    monkeypatch.setattr(launch, "start_server", lambda **kw: calls.append(kw) or FakeServer())
    box = ErrorBox()
    b = ModelExplorerButton(box, lambda: s, browser=False)
    b.button.click()
    assert b.opened is not None, box.widget
    assert b.opened.graph.endswith(" " + rec.path) and b.opened.before  # an unchanged pass too
    first = b.opened.folder
    s.goto("fusion.fuse_pointwise_reduce")
    b.button.click()
    assert b.opened.graph.endswith(" fusion.fuse_pointwise_reduce") and b.opened.before != b.opened.graph
    assert b.opened.folder == first  # the same trace: its export is reused, not written again
    assert "nodeData" not in urllib.parse.unquote(b.opened.url)  # compare: the change styles alone
    b.compare.value = False
    b.button.click()
    assert "provenance.json" in urllib.parse.unquote(b.opened.url)  # one pane: every overlay
    assert "migx-me-link" in b.link._dom_classes and "Model Explorer" in b.link.value


def test_report_cli_with_gpu_on_the_fake_backend_writes_kernel_times(tmp_path, monkeypatch, capsys):
    from migx_explore.cli import main

    monkeypatch.setenv("MIGX_GPU_BACKEND", "fake")  # the recording backend: steps time as 1 µs
    out = tmp_path / "me"
    args = ["report", "mlp", "--out", str(tmp_path / "r.html"), "--gpu", "--iters", "2", "--warmup", "1"]
    assert main([*args, "--no-graphs", "--no-numeric", "--model-explorer", str(out), "-q"]) == 0
    m = load_manifest(str(out))
    with open(os.path.join(str(out), m["node_data"]["gpu_time_us"]), encoding="utf-8") as f:
        times = json.load(f)[m["final"]]["results"]
    assert times and all(v["value"] > 0 for v in times.values())
