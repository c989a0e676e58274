"""The published conformance table (docs/migraphx_conformance.md and the JSON `passes` reads) is
regenerated from the case files whenever they change."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("migraphx_conformance", ROOT / "scripts" / "migraphx_conformance.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_published_table_is_current():
    assert _script().main(["--check"]) == 0, "run python scripts/migraphx_conformance.py"


def test_pass_info_reports_conformance():
    from migx_explore.compiler.pass_infra import pass_registry
    from migx_explore.compiler.pass_infra.conformance import conformance_summary

    info = pass_registry()["simplify_algebra"].info()
    assert info["migraphx_source"] == "src/simplify_algebra.cpp"
    c = info["conformance"]
    assert c["cases"] == c["MATCH"] + c["EQUIV"] + c["DIFF"] > 0
    assert conformance_summary("simplify_algebra") == f"MIGraphX tests: {c['MATCH'] + c['EQUIV']}/{c['cases']}"
    assert pass_registry()["prefuse_ops"].info()["migraphx_source"] == "src/targets/gpu/prefuse_ops.cpp"
