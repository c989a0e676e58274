"""The HTML report (migx_explore.report) read back as data: the tree, per-pass stats, numerics,
rewrite summaries, the packed diffs, the reproduction record, and the CLI / trace entry points.
The page itself is checked in a real browser in tests/browser/test_report_browser.py."""

from __future__ import annotations

import hashlib
import html
import json
import re

import pytest

from migx_explore import pass_changes
from migx_explore.cli import main
from migx_explore.render import text_diff
from migx_explore.report import build_report, write_report
from migx_explore.report.graphs import unpack
from migx_explore.session import Session


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="migx-report-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def _blobs(page: str) -> dict[int, dict]:
    return {int(i): unpack(b) for i, b in re.findall(r'id="migx-blob-(\d+)">([^<]*)</script>', page)}


@pytest.fixture(scope="module")
def mlp_report():
    s = Session.from_model("mlp")
    s.disable("fuse_horizontal", "a toggle the report must show")
    page, _ = build_report(s, command="migx-explore report mlp --out x.html")
    return s, page


def test_tree_has_every_pass_with_its_state(mlp_report):
    s, page = mlp_report
    rows = _data(page)["passes"]
    assert [r["path"] for r in rows] == [r.path for r in s.trace.records]
    by_path = {r["path"]: r for r in rows}
    off = [r for r in rows if r["name"] == "fuse_horizontal"]
    assert off and all(r["status"] == "disabled" and "toggle the report" in r["reason"] for r in off)
    noop = [r for r in rows if r["noop"]]
    assert noop and not any(r["changed"] for r in noop)
    changed = [r for r in rows if r["changed"]]
    assert changed
    rec = s.trace.find(changed[0]["path"])
    before, after = s.trace.snapshots(rec)
    st = by_path[rec.path]["stats"]
    assert st["instructions"] == [before.total_instructions(), after.total_instructions()]
    assert st["added"] == len(rec.diff.added) and st["removed"] == len(rec.diff.removed)


def test_numeric_check_and_rewrite_summary_per_pass(mlp_report):
    s, page = mlp_report
    rows = {r["path"]: r for r in _data(page)["passes"]}
    for rec in s.trace.top_level():
        row = rows[rec.path]
        if rec.numeric is not None and not rec.numeric.note:
            assert row["numeric"]["state"] == ("ok" if rec.numeric.ok else "bad")
            assert row["numeric"]["text"] == rec.numeric.describe()
        elif not rec.changed:
            assert row["numeric"]["state"] == "unchanged"
    # the rows are pass_changes.rewrites' (migx_explore.rewrite_summary), labels as the explorer shows them
    for path in ("optimize_rewrite.optimize_module", "fusion.fuse_pointwise_reduce"):
        assert [r["label"] for r in rows[path]["rewrites"]] == [r.label for r in pass_changes.rewrites(s, path)]
    assert any("→" in r["label"] for r in rows["fusion.fuse_pointwise_reduce"]["rewrites"])


def test_changed_passes_carry_text_and_graph_diffs(mlp_report):
    s, page = mlp_report
    blobs = _blobs(page)
    changed = [r for r in s.trace.records if r.changed]
    assert sorted(blobs) == [r.index for r in changed]
    rec = s.trace.find("optimize_rewrite.optimize_module")
    payload = blobs[rec.index]
    assert payload["text"] == text_diff(*s.trace.snapshots(rec))
    for r in changed:  # every drawing has the variant it opens on; nested passes only that one
        gr = blobs[r.index]["graph"]
        assert gr["default"] in gr and (r.depth == 0 or {"collapsed", "expanded"} & set(gr) == {gr["default"]})
    fused = blobs[s.trace.find("fusion.fuse_pointwise_reduce").index]["graph"]
    assert fused["default"] == "expanded" and '<g id="cluster_' in fused["expanded"]["svg"]  # 23 instructions
    rw = pass_changes.rewrites(s, rec.path)
    assert [len(ids) for ids in payload["rewrite_ids"]] == [min(r.count, 200) for r in rw]
    assert payload["rewrite_ids"][0][0] == list(rw[0].instances[0].ids)
    g = payload["graph"]
    assert g["default"] in ("collapsed", "expanded") and g["collapsed"]["svg"].startswith("<svg")
    assert "st_removed" in g["collapsed"]["svg"] and "st_added" in g["collapsed"]["svg"]
    # the stops of region navigation are the explorer's change regions (pass_changes.regions), big ones
    # in parts, and every changed node drawn belongs to one of them
    regions = pass_changes.regions(s, rec.path)
    assert [i for r in payload["regions"] for i in r["ids"]] == [i for r in regions for i in r.ids]
    assert payload["regions"][0]["label"].startswith(f"region 1 of {len(regions)} · /")
    alias = g["collapsed"]["alias"]
    named = {alias.get(str(i), f"i{i}") for r in payload["regions"] for i in r["ids"]}
    drawn = set(
        re.findall(
            r'class="node [^"]*st_(?:added|removed|changed)[^"]*"[^>]*><title>([^<]+)</title>', g["collapsed"]["svg"]
        )
    )
    assert drawn and drawn <= named


def test_big_regions_are_visited_in_readable_parts():
    from migx_explore.regions import Region
    from migx_explore.report.graphs import region_pieces

    stops = region_pieces([Region(tuple(range(30)), "model.8/m.0", 30), Region((99,), "", 1)], max_ids=12)
    assert [len(p["ids"]) for p in stops] == [12, 12, 6, 1]
    assert stops[0]["label"] == "region 1 of 2 · /model.8/m.0 · 30 instructions (part 1 of 3)"
    assert stops[3]["label"] == "region 2 of 2 · / · 1 instruction"


def test_repro_records_hash_spec_precision_version_and_command(mlp_report):
    s, page = mlp_report
    from migx_explore import __version__

    sha = hashlib.sha256(s.initial.text.encode()).hexdigest()
    assert sha in page
    assert s.config.spec() in page and "fuse_horizontal" in s.config.spec()
    assert f"migx-explore {__version__}" in page
    assert "migx-explore report mlp --out x.html" in page
    assert re.search(r'rep-repro-precision"><th>precision</th><td><code>fp32<', page)


def test_page_is_self_contained(mlp_report):
    _, page = mlp_report
    # nothing to fetch: no external script, stylesheet, image or font
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="(https?:)?//', page)
    assert "@import" not in page and "url(http" not in page
    assert "DecompressionStream" in page


def test_cli_report_and_gpu_refusal(tmp_path, monkeypatch, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "mlp", "--out", str(out), "--fp16", "--no-graphs", "-q"]) == 0
    page = out.read_text()
    data = _data(page)
    assert data["graphs"] is False and data["passes"][0]["path"].startswith("quantize")
    assert "--fp16" in page and re.search(r"precision</th><td><code>fp16<", page)
    assert html.escape("Session.from_model('mlp', input_dims={}, precision='fp16')") in page  # the repro too
    assert main(["report", "mlp", "--out", str(tmp_path)]) == 2  # refused before tracing
    assert "is a folder" in capsys.readouterr().err
    monkeypatch.setenv("MIGX_GPU_BACKEND", "nonsense")
    assert main(["report", "mlp", "--out", str(tmp_path / "g.html"), "--gpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gpu: GPU timing unavailable" in err[0]
    assert not (tmp_path / "g.html").exists()


def test_report_with_timing_on_the_fake_backend(tmp_path):
    from fake_gpu import fake_gpu

    with fake_gpu():
        info = write_report(
            Session.from_model("mlp", numeric=False),
            str(tmp_path / "t.html"),
            gpu=True,
            iters=3,
            warmup=1,
            graphs=False,
        )
    page = (tmp_path / "t.html").read_text()
    assert info.gpu and re.search(r'<table class="[^"]*migx-timing-results', page)
    assert "eager (a launch per kernel)" in page and "graph capture (one launch)" in page
    assert "rep-waterfall" in page and "-fusion" in page and '<svg class="rep-waterfall-svg"' in page


def test_trace_folder_gets_an_index_page(tmp_path):
    out = tmp_path / "tr"
    assert main(["trace", "mlp", "--out", str(out), "-q"]) == 0
    page = (out / "index.html").read_text()
    data = _data(page)
    files = data["files"]
    assert files and all((out / f).exists() for names in files.values() for f in names)
    assert data["graphs"] is False


def test_explorer_recipe_menu_saves_a_report(tmp_path, monkeypatch):
    pytest.importorskip("ipywidgets")
    from migx_explore.widgets.explorer import Explorer

    monkeypatch.chdir(tmp_path)
    ex = Explorer(Session.from_model("mlp", defer_numeric=True))
    report = ex.recipe.report
    assert report.widget.layout.display == "none"  # inside the Recipe / export menu
    ex.recipe.button.value = True
    assert report.widget.layout.display is None and report.path.value == "mlp_report.html"
    report.path.value = "saved.html"
    report.button.click()
    assert ex.errors.text.strip() == ""
    assert "saved.html" in report.result.value
    rows = _data((tmp_path / "saved.html").read_text())["passes"]
    # the deferred numeric check was finished before writing: no pass left "pending"
    assert not any(r["numeric"]["state"] == "pending" for r in rows)
    assert any(r["numeric"]["state"] == "ok" for r in rows)


def test_onnx_report_records_the_file_and_feed_hashes(tmp_path):
    import numpy as np
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = tmp_path / "m.onnx"
    model.write_bytes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9).SerializeToString()
    )
    feed = tmp_path / "feed.npz"
    np.savez(feed, x=np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    out = tmp_path / "m.html"
    assert main(["report", str(model), "--inputs", str(feed), "--out", str(out), "--no-graphs", "-q"]) == 0
    page = out.read_text()
    assert hashlib.sha256(model.read_bytes()).hexdigest() in page
    assert hashlib.sha256(feed.read_bytes()).hexdigest() in page
    # the repro script loads the same file, named without the folders of the machine that made it
    assert html.escape(f"Session.from_onnx({model.name!r}") in page and str(model.parent) not in page
    rows = _data(page)["passes"]
    assert any(r["numeric"]["state"] == "ok" for r in rows)  # checked on the feed


def test_a_failing_pass_is_reported_not_raised(tmp_path):
    def broken(module):
        raise RuntimeError("planted failure")

    s = Session.from_model("mlp", numeric=False)
    s.insert_pass(broken, after="required.normalize_ops", name="broken")
    info = write_report(s, str(tmp_path / "f.html"), graphs=False)
    page = (tmp_path / "f.html").read_text()
    rows = _data(page)["passes"]
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["name"] == "broken" and "planted failure" in failed[0]["reason"]
    assert _data(page)["overview"]["error"] and info.passes == len(rows)


def test_size_budget_drops_second_drawings_of_the_biggest_passes_first():
    import random

    from migx_explore.report.graphs import fit_budget, pack

    rng = random.Random(0)

    def noise(n: int) -> str:  # incompressible, so sizes are predictable
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))

    def payload(n: int) -> dict:
        return {
            "text": "",
            "graph": {"default": "collapsed", "collapsed": {"svg": noise(n)}, "expanded": {"svg": noise(n)}},
        }

    payloads = {1: payload(20_000), 2: payload(5_000), 3: payload(1_000)}
    full = sum(len(pack(p)) for p in payloads.values())
    assert fit_budget(payloads, full) == {i: pack(p) for i, p in payloads.items()}  # fits: untouched
    blobs = fit_budget(payloads, full - 1000)
    assert sum(map(len, blobs.values())) <= full - 1000
    kept = {i: unpack(b)["graph"] for i, b in blobs.items()}
    assert "expanded" not in kept[1] and kept[1]["trimmed"] == "expanded" and "collapsed" in kept[1]
    assert "expanded" in kept[2] and "expanded" in kept[3]  # only as much as needed, biggest first


def test_an_undrawable_pass_is_said_once_and_keeps_its_text_diff(tmp_path, monkeypatch):
    from migx_explore.render import RenderError
    from migx_explore.report import graphs

    def no_graphviz(*a, **k):
        raise RenderError("graphviz `dot` not found")

    monkeypatch.setattr(graphs, "render_svg", no_graphviz)
    info = write_report(Session.from_model("mlp", numeric=False), str(tmp_path / "n.html"))
    assert len(info.undrawn) == info.drawn and "graphviz `dot` not found" in str(info)
    payload = next(iter(_blobs((tmp_path / "n.html").read_text()).values()))
    assert "graphviz" in payload["graph_error"] and payload["text"]


def test_trace_svg_index_page_has_the_graph_diffs(tmp_path):
    out = tmp_path / "tr"
    assert main(["trace", "mlp", "--out", str(out), "--svg", "-q"]) == 0
    page = (out / "index.html").read_text()
    data = _data(page)
    assert data["graphs"] is True
    assert any(f.endswith(".svg") for names in data["files"].values() for f in names)
    blobs = _blobs(page)
    assert all("graph" in p for p in blobs.values())
    # each pass is drawn once: its SVG file is the drawing the page opens on, and every linked file exists
    for index, payload in blobs.items():
        graph = payload["graph"]
        svg_name = next(f for f in data["files"][str(index)] if f.endswith(".svg"))
        assert (out / svg_name).read_text() == graph[graph["default"]]["svg"], svg_name
    linked = {f for names in data["files"].values() for f in names}
    assert all((out / f).exists() for f in linked) and (out / "000_input.svg").exists()


def test_trace_svg_with_all_draws_the_unchanged_passes_too(tmp_path):
    """--all: the page draws the changed passes; render_trace writes the others' files."""
    out = tmp_path / "tr"
    assert main(["trace", "mlp", "--out", str(out), "--svg", "--all", "-q"]) == 0
    data = _data((out / "index.html").read_text())
    svgs = [f for names in data["files"].values() for f in names if f.endswith(".svg")]
    assert len(svgs) > len(_blobs((out / "index.html").read_text()))
    assert all((out / f).exists() for f in svgs)


def test_report_draws_each_rows_first_instance_and_names_no_machine_path(tmp_path):
    """Issue 36: the report opens a big pass on its first rewrite instance (the explorer's
    drawing), and a shared report holds no absolute path of the machine that made it."""
    import onnx

    from migx_explore.models import get_model

    model = tmp_path / "deep" / "folder" / "bert.onnx"
    model.parent.mkdir(parents=True)
    onnx.save(get_model("bert_encoder"), str(model))
    s = Session.from_onnx(str(model), numeric=False)
    page, _ = build_report(s, command=f"migx-explore report {model} --out {tmp_path / 'r.html'}")
    assert str(tmp_path) not in page and "/deep/folder" not in page
    assert "onnx: bert.onnx" in page
    blobs = _blobs(page)
    low = s.trace.find("backend.lowering")
    inst = blobs[low.index]["instances"]
    assert blobs[low.index]["first_view"] == "summary" and inst
    assert inst[0]["label"].startswith("instance 1 of ") and " in " in inst[0]["where"]
    assert "st_added" in inst[0]["svg"] and "before: what the rewrite consumed" in inst[0]["svg"]
