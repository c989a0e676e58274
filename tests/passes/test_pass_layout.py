"""Where pass code lives (issue 25): a pass with rule modules is a package named after the pass,
the pass in its __init__ and its rules beside it; no private helper modules hide rules away from
their pass; a compiler family's tests sit in tests/passes/<family>/."""

from __future__ import annotations

import importlib
from pathlib import Path

from migx_explore.compiler.pass_infra import pass_registry

ROOT = Path(__file__).resolve().parents[2]
PASS_DIRS = {
    "migx_explore/compiler/passes": "migx_explore.compiler.passes",
    "migx_explore/gpu/passes": "migx_explore.gpu.passes",
}


def _families() -> list[tuple[str, Path, str]]:
    return [
        (folder, p, f"{pkg}.{p.name}")
        for folder, pkg in PASS_DIRS.items()
        for p in sorted((ROOT / folder).iterdir())
        if (p / "__init__.py").is_file()
    ]


def test_no_private_helper_modules_in_pass_folders():
    hidden = [
        str(p.relative_to(ROOT))
        for folder in PASS_DIRS
        for p in (ROOT / folder).rglob("_*.py")
        if p.name != "__init__.py"
    ]
    assert not hidden, (
        f"private helper modules (put rules in the pass's package, shared helpers in a public module): {hidden}"
    )


def test_each_family_package_holds_its_pass():
    families = _families()
    assert {p.name for _, p, _ in families} >= {"simplify_algebra", "simplify_reshapes", "simplify_qdq", "fuse_ops"}
    registry = pass_registry()
    for _, path, module in families:
        cls = registry.get(path.name)
        assert cls is not None, f"{module}: package named after no registered pass"
        assert cls.__module__ == module, f"pass {path.name} is defined in {cls.__module__}, not in {module}/__init__"
        importlib.import_module(module)


def test_compiler_family_tests_sit_beside_each_other():
    for folder, path, module in _families():
        if folder != "migx_explore/compiler/passes":
            continue
        tests = ROOT / "tests" / "passes" / path.name
        assert sorted(tests.glob("test_*.py")), f"{module}: no tests in {tests.relative_to(ROOT)}"
