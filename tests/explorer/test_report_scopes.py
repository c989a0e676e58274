"""The report follows the explorer (issue 36, item 6): each changed pass stores the explorer's
scope tree (every level, with rewrite instances per scope) beside the instance drawings, and the
page holds no absolute path of the machine that made it, not even inside the packed drawings."""

from __future__ import annotations

import re

import pytest

from migx_explore import pass_changes
from migx_explore.cli import main
from migx_explore.instances import scope_badges
from migx_explore.report.graphs import unpack
from migx_explore.rewrite_summary import record_rewrites

onnx = pytest.importorskip("onnx")


def _scoped_model(path) -> None:
    """Two blocks named the way exporters name nodes (/block.N/Op), each a MatMul, then a
    Sigmoid, Mul and Add that the pointwise fusion folds into one kernel per block."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes, x, weights = [], "x", []
    for b in range(2):
        p = f"/block.{b}"
        weights.append(numpy_helper.from_array(np.eye(8, dtype=np.float32) * (b + 1), f"w{b}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{b}"], [f"{p}/fc"], name=f"{p}/fc/MatMul"))
        x = f"{p}/fc"
        nodes += [
            helper.make_node("Sigmoid", [x], [f"{p}/s"], name=f"{p}/act/Sigmoid"),
            helper.make_node("Mul", [x, f"{p}/s"], [f"{p}/m"], name=f"{p}/act/Mul"),
            helper.make_node("Add", [f"{p}/m", x], [f"{p}/y"], name=f"{p}/Add"),
        ]
        x = f"{p}/y"
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8])],
        initializer=weights,
    )
    path.write_bytes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9).SerializeToString()
    )


def _blobs(page: str) -> dict[int, dict]:
    return {int(i): unpack(b) for i, b in re.findall(r'id="migx-blob-(\d+)">([^<]*)</script>', page)}


def test_report_has_the_scope_tree_and_no_machine_path(tmp_path):
    folder = tmp_path / "a-folder-of-this-machine"
    folder.mkdir()
    model, out = folder / "scoped.onnx", folder / "r.html"
    _scoped_model(model)
    assert main(["report", str(model), "--out", str(out), "-q"]) == 0
    page = out.read_text()
    blobs = _blobs(page)
    assert blobs
    for text in [page, *map(repr, blobs.values())]:
        assert str(tmp_path) not in text and "a-folder-of-this-machine" not in text
    assert 'class="rep-scopes"' in page

    from migx_explore.render.scoped import scope_id
    from migx_explore.session import Session

    s = Session.from_onnx(str(model), numeric=False)
    trace = s.run()
    with_instances, seen_deep = 0, False
    for rec in trace.records:
        if rec.index not in blobs or "scopes" not in blobs[rec.index]:
            continue
        rows = blobs[rec.index]["scopes"]
        assert [r[0] for r in rows if r[1] == 0] == ["block.0", "block.1"]
        sb, sa = pass_changes.scopes(s, rec.index)
        every = {"/".join(v.split("/")[: k + 1]) for v in sa.values() if v for k in range(v.count("/") + 1)}
        assert {r[0] for r in rows} == every  # every level is stored, not only the top
        assert [r[4] for r in rows] == [scope_id(r[0]) for r in rows]  # how report.js finds a clicked group
        levels = max(r[1] for r in rows) + 1
        seen_deep |= levels > 1
        want = scope_badges(record_rewrites(trace, rec), {**sb, **sa})
        assert {r[0]: r[3] for r in rows} == {k: want.get(k, 0) for k in (r[0] for r in rows)}
        with_instances += bool(blobs[rec.index].get("instances")) and any(r[3] for r in rows)
    assert with_instances, "no pass stored both instance drawings and scope badges"
    assert seen_deep, "no pass had nested scopes to store"
