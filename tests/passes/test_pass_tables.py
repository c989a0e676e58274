"""Passes are found by name through explicit tables, checked against their folders: a pass module
left out of its table, a table entry in the wrong module, or machinery creeping back into a pass
folder fails here rather than making `make_pass` miss a pass."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from import_graph import IMPORTS

import migx_explore.compiler.passes as compiler_passes
import migx_explore.gpu.passes as gpu_passes
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.pass_infra import NotApplicable, Pass, make_pass, pass_registry, register
from migx_explore.compiler.pass_infra.provenance import PROVENANCE, STATUSES

ROOT = Path(__file__).resolve().parents[2]
TABLES = [
    (compiler_passes, compiler_passes.PASSES),
    (gpu_passes, gpu_passes.GPU_PASSES),
]


def _folder_entries(package) -> set[str]:
    folder = Path(package.__file__).parent
    files = {p.stem for p in folder.glob("*.py") if not p.name.startswith("_")}
    packages = {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return files | packages


@pytest.mark.parametrize("package,table", TABLES, ids=lambda x: getattr(x, "__name__", "table"))
def test_every_module_of_a_pass_folder_is_a_listed_pass_or_a_declared_helper(package, table):
    listed = {cls.__module__.removeprefix(package.__name__ + ".") for cls in table}
    entries = _folder_entries(package)
    unlisted = sorted(entries - listed - set(package.HELPERS))
    hint = "add their pass to the table, or the module to HELPERS"
    assert not unlisted, f"{package.__name__}: modules in no table ({hint}): {unlisted}"
    assert not (listed & set(package.HELPERS)), "a module is both a pass and a helper"
    assert set(package.HELPERS) <= entries, "HELPERS names a module that does not exist"


@pytest.mark.parametrize("package,table", TABLES, ids=lambda x: getattr(x, "__name__", "table"))
def test_each_listed_pass_is_registered_under_its_module_name(package, table):
    registry = pass_registry()
    for cls in table:
        name = cls.registry_name()
        assert cls.__module__ == f"{package.__name__}.{name}", f"pass {name} lives in {cls.__module__}"
        assert registry[name] is cls


def test_helpers_hold_no_registered_pass():
    registered = {c.__module__ for c in pass_registry().values()}
    for package, _ in TABLES:
        for helper in package.HELPERS:
            assert f"{package.__name__}.{helper}" not in registered


def test_defining_a_pass_registers_nothing_by_itself():
    @dataclass(frozen=True)
    class Unlisted(Pass):
        name: ClassVar[str] = "test_unlisted_pass"

    assert "test_unlisted_pass" not in pass_registry()
    with pytest.raises(MigxError, match="unknown pass 'test_unlisted_pass'"):
        make_pass("test_unlisted_pass")


def test_a_second_class_under_a_taken_name_fails_naming_both():
    @dataclass(frozen=True)
    class Impostor(Pass):
        name: ClassVar[str] = "dead_code_elimination"

    with pytest.raises(MigxError, match="taken by migx_explore.compiler.passes.dead_code_elimination"):
        register([Impostor])


def test_pass_infra_imports_no_pass_package():
    infra = "migx_explore.compiler.pass_infra"
    bad = [
        (mod, target)
        for mod, imps in IMPORTS.items()
        if mod == infra or mod.startswith(infra + ".")
        for target, _, _, _ in imps
        if target.startswith(("migx_explore.compiler.passes", "migx_explore.gpu"))
    ]
    assert not bad, f"the pass machinery must not depend on the passes it runs: {bad}"


def test_every_provenance_row_names_a_registered_pass_with_a_known_status():
    registry = pass_registry()
    stale = sorted(set(PROVENANCE) - set(registry))
    assert not stale, f"pass_infra/provenance.py has rows for passes nobody registers: {stale}"
    bad = {n: r.status for n, r in PROVENANCE.items() if r.status not in STATUSES}
    assert not bad, f"unknown statuses (valid: {', '.join(STATUSES)}): {bad}"
    for name, cls in registry.items():
        row = cls.provenance()
        if row.status != "implemented":
            assert row.note, f"pass {name} is {row.status} without a note saying why"
        if issubclass(cls, NotApplicable):
            assert row.status == "disabled", f"{name} cannot run here, so its provenance must say disabled"
