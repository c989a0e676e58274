"""The kernel templates (gpu/kernels/*.hpp, filled by gpu/codegen/templates.py) render every kernel
byte for byte as the f-string generators did before the bodies moved out of Python
(tests/data/kernels/golden.json, written from main's code by tests/gpu/kernel_golden.py), and the
templates travel with the package: importlib.resources finds each one, pyproject's package data
names them, and a built wheel carries them."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from migx_explore.gpu.codegen import templates
from tests.gpu import kernel_golden

ROOT = Path(__file__).resolve().parents[2]
CASES = kernel_golden.cases()
GOLDEN = json.loads(kernel_golden.GOLDEN.read_text())
TEMPLATES = sorted(p.name for p in (ROOT / "migx_explore" / "gpu" / "kernels").glob("*.hpp") if p.name != "migx.hpp")


def test_every_golden_case_is_still_rendered():
    assert sorted(CASES) == sorted(GOLDEN)


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_sources_are_unchanged(case):
    got = kernel_golden.digest(CASES[case]())
    assert got == GOLDEN[case], (
        f"{case}: kernels whose source changed: {sorted(k for k in got if got[k] != GOLDEN[case].get(k))}"
    )


@pytest.mark.parametrize("file", TEMPLATES)
def test_templates_are_found_by_importlib(file):
    assert resources.files("migx_explore.gpu").joinpath("kernels", file).is_file()
    assert templates.sections(file), file


def test_every_template_section_is_rendered_by_a_generator():
    """A section no generator names is dead device code (or a misspelt section name)."""
    code = "\n".join(p.read_text() for p in (ROOT / "migx_explore" / "gpu" / "codegen").glob("*.py"))
    for file in TEMPLATES:
        for section in templates.sections(file):
            assert re.search(rf"['\"]{section}['\"]", code), f"{file}: section {section!r} is never rendered"


def test_a_missing_or_unknown_slot_is_refused_with_its_name():
    with pytest.raises(templates.TemplateError, match=r"slots without a value \['it'"):
        templates.render("attention_mma.hpp", "write_unsplit", y="0", store="")
    with pytest.raises(templates.TemplateError, match=r"values without a slot \['typo'\]"):
        templates.render("attention_mma.hpp", "write_unsplit", it="int", y="0", store="", typo=1)
    with pytest.raises(templates.TemplateError, match="no section 'nope'"):
        templates.render("attention_mma.hpp", "nope")
    with pytest.raises(templates.TemplateError, match="no kernel template gpu/kernels/none.hpp"):
        templates.render("none.hpp", "kernel")


def test_a_built_package_carries_and_renders_the_templates(tmp_path):
    """setuptools' build_py (what a wheel holds) from pyproject's package data; the built tree,
    imported in a fresh interpreter, renders a kernel section from its own copy."""
    import subprocess
    import sys

    egg, lib = tmp_path / "egg", tmp_path / "lib"
    egg.mkdir()
    build = [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "egg_info", "-e", str(egg)]
    r = subprocess.run([*build, "build_py", "-d", str(lib)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    built = sorted(p.name for p in (lib / "migx_explore" / "gpu" / "kernels").glob("*.hpp"))
    assert built == sorted([*TEMPLATES, "migx.hpp"])
    probe = (
        "import os, pathlib, migx_explore.gpu.codegen.templates as t; "
        "assert pathlib.Path(t.__file__).is_relative_to(os.environ['PYTHONPATH']), t.__file__; "
        "print(t.render('gemm.hpp', 'kernel', **{s: 1 for s in t.slots(t.sections('gemm.hpp')['kernel'])}))"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(lib)}, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MIGX_GLOBAL void 1_kernel(1)" in r.stdout
