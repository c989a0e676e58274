"""Exportable recipe: spec, MIGRAPHX_DISABLE_PASSES and a repro script that really reproduces."""

from __future__ import annotations

import subprocess
import sys

from migx_explore.recipe import make_recipe
from migx_explore.session import Session


def test_recipe_for_toggles_round_trips_through_the_script(tmp_path):
    s = Session.from_model("mlp", include_backend=False)
    s.disable("fuse_horizontal")
    s.disable("optimize_rewrite.rewrite_gelu")
    r = make_recipe(s)
    assert r.spec == "dynamic_shapes,required,optimize_rewrite{-rewrite_gelu,-fuse_horizontal},fusion"
    assert r.disable_passes == "rewrite_gelu,fuse_horizontal"
    script = tmp_path / "repro.py"
    script.write_text(r.script)
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == s.final().text.strip()
    assert (tmp_path / "repro_trace" / "index.json").exists()


def test_recipe_caveats_for_positions_user_passes_and_eager():
    s = Session.from_model("mlp", include_backend=False)
    s.disable("required.dead_code_elimination#4")  # survives the mode change (PR #4770 rebuilds the entries)
    s.config.set_mode("eager")
    s.insert_pass(lambda m: False, after="fusion.fuse_concat", name="mine")
    r = make_recipe(s)
    assert r.spec is None and "dead_code_elimination" in r.disable_passes
    text = "\n".join(r.caveats)
    assert "every occurrence" in text and "user pass" in text and "compile mode eager" in text
    assert "insert_pass" in r.script
