"""CLI verbs over the pipelines: passes, trace, verify (incl. a planted bug), waterfall."""

from __future__ import annotations

import json

from migx_explore.cli import main as cli
from migx_explore.compiler import Op
from migx_explore.compiler.passes import rewrite_gelu


def test_passes_lists_every_entry_with_a_status(capsys):
    assert cli(["passes"]) == 0
    out = capsys.readouterr().out
    for name in (
        "dynamic_shapes (4 entries)",
        "required (23 entries)",
        "optimize_rewrite (22 entries)",
        "fusion (14 entries)",
        "backend (37 entries)",
    ):
        assert name in out
    # MIGraphX develop Aug 2026's 96 (gpu/migraphx_catalogue.py) plus ours: fuse_kv_append and
    # rewrite_rnn (dropped by MIGraphX, kept here), each with its DCE
    assert "100 entries:" in out and "pending" not in out
    assert "compile_miopen" in out and "disabled: no MIOpen" in out


def test_trace_writes_numbered_files_svgs_and_an_index(tmp_path, capsys):
    out_dir = tmp_path / "trace"
    assert cli(["trace", "mlp", "--out", str(out_dir), "--svg"]) == 0
    files = sorted(p.name for p in out_dir.iterdir())
    assert "000_input.txt" in files and "index.json" in files
    assert any(f.endswith(".svg") for f in files)
    index = json.loads((out_dir / "index.json").read_text())
    assert index["model"] == "mlp" and len(index["passes"]) >= 90
    noop = [p for p in index["passes"] if p["noop"]]
    assert noop and all(p["file"] is None for p in noop)
    assert "kernel launches" in capsys.readouterr().out


def test_verify_passes_on_a_model(capsys):
    assert cli(["verify", "yolo", "--no-backend"]) == 0
    assert "OK: every pass keeps the outputs within tolerance" in capsys.readouterr().out


def test_verify_names_the_pass_and_instruction_of_a_planted_bug(monkeypatch, capsys):
    def broken(self, module, ctx):  # a "rewrite" that turns every add into a sub
        changed = False
        for ins in module:
            if ins.name == "add":
                module.replace_instruction(ins, Op("sub"))
                changed = True
        return changed

    monkeypatch.setattr(rewrite_gelu.RewriteGelu, "apply_module", broken)
    assert cli(["verify", "mlp", "--no-backend", "--bisect"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: pass optimize_rewrite.rewrite_gelu breaks the tolerance" in out
    assert "first diverging instruction" in out and "sub" in out


def test_waterfall_cli_without_gpu(tmp_path, capsys):
    png, js = tmp_path / "wf.png", tmp_path / "wf.json"
    assert cli(["waterfall", "mlp", "--by", "pipeline", "--no-gpu", "--png", str(png), "--json", str(js)]) == 0
    assert png.stat().st_size > 5000
    rows = json.loads(js.read_text())["rows"]
    assert rows[0]["variant"] == "(all passes)" and {r["variant"] for r in rows[1:]} == {"-optimize_rewrite", "-fusion"}
