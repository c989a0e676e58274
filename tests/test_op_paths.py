"""Every registered op has every piece of its path (docs/adding_an_op.md): importer (an ONNX handler
or the pass that makes it), shape rule, reference compute, GPU code or kernel. gpu/op_paths.py
finds them; a missing one is named with what to add."""

from __future__ import annotations

import pytest

import migx_explore.compiler.ops  # noqa: F401  (registers the op library)
from migx_explore.compiler import op as ops
from migx_explore.compiler.op import GpuCode, defop
from migx_explore.compiler.ops.common import pointwise_shape
from migx_explore.gpu import op_paths
from migx_explore.gpu.codegen import GENERATORS, register_generator


def test_every_registered_op_has_every_piece():
    incomplete = op_paths.incomplete_ops()
    report = "\n".join(
        f"  {p.name} ({p.declared_at}): " + "; ".join(f"{piece}: {why}" for piece, why in p.missing.items())
        for p in incomplete
    )
    assert not incomplete, f"{len(incomplete)} op(s) miss a piece of their path (docs/adding_an_op.md):\n" + report


def _shape(op, inputs, mods):
    return pointwise_shape(op.name, inputs, inputs[0].type)


def _square(op, args, out, run):
    return args[0] * args[0]


@pytest.fixture
def scratch_ops():
    names: list[str] = []
    yield names
    for n in names:
        ops.unregister(n)


def test_a_half_declared_op_is_reported_naming_each_missing_piece(scratch_ops):
    scratch_ops.append("demo_half")
    with pytest.warns(UserWarning, match="declares no GPU code"):
        defop("demo_half", _shape, None, nargs=1)
    path = op_paths.op_path("demo_half")
    assert set(path.missing) == {"importer", "reference", "gpu"}
    assert "ctx.add('demo_half'" in path.missing["importer"] and "made_by" in path.missing["importer"]
    assert "no reference compute" in path.missing["reference"]
    assert "GpuCode" in path.missing["gpu"]
    assert path.found["shape"].startswith("tests/test_op_paths.py:")
    assert "MISSING" in path.describe() and "demo_half" in path.describe()


def test_an_op_declared_in_one_place_with_its_own_kernel_is_complete(scratch_ops):
    """One defop (made by IR text here) and one generator registered beside it: nothing else."""
    scratch_ops.append("demo_square")
    register_generator("demo_square_family", GENERATORS["pointwise"])
    try:
        defop("demo_square", _shape, _square, nargs=1, made_by="ir", gpu=GpuCode.kernel("demo_square_family"))
        path = op_paths.op_path("demo_square")
        assert path.missing == {}
        assert path.found["importer"] == "made by ir"
        assert "demo_square_family" in path.found["gpu"]
    finally:
        GENERATORS.pop("demo_square_family")
    assert "names no generator" in op_paths.op_path("demo_square").missing["gpu"]


def test_made_by_must_name_a_pass_or_a_function(scratch_ops):
    scratch_ops += ["demo_typo", "demo_fn"]
    defop("demo_typo", _shape, _square, nargs=1, made_by="fuse_pointwse", gpu=GpuCode.host("a demo"))
    problem = op_paths.op_path("demo_typo").missing["importer"]
    assert "not a registered pass" in problem and "fuse_pointwise" in problem
    defop(
        "demo_fn",
        _shape,
        _square,
        nargs=1,
        made_by="migx_explore.compiler.kv_cache.kv_cache_bucket",
        gpu=GpuCode.host("a demo"),
    )
    assert "importer" not in op_paths.op_path("demo_fn").missing
    ops.unregister("demo_fn")
    defop(
        "demo_fn",
        _shape,
        _square,
        nargs=1,
        made_by="migx_explore.compiler.kv_cache.no_such_function",
        gpu=GpuCode.host("a demo"),
    )
    assert "names no importable function" in op_paths.op_path("demo_fn").missing["importer"]


def test_the_importer_is_found_in_the_handlers_source():
    assert op_paths.op_path("relu").found["importer"].startswith("ONNX handler at compiler/onnx/parse_")
    # CumSum's handler, which returns it, not Multinomial's (earlier in the folder), which uses it.
    assert (
        op_paths.op_path("prefix_scan_sum")
        .found["importer"]
        .startswith("ONNX handler at compiler/onnx/parse_reduce.py:")
    )
    # built by an f-string: scatter_{reduction}
    assert 'f"scatter_...' in op_paths.op_path("scatter_add").found["importer"]
    # `group` is also an ONNX attribute name (ctx.attr("group")): that is no handler emitting the op
    assert op_paths.op_path("group").found["importer"] == "made by fuse_attention"
    assert op_paths.op_path("@param").found["importer"].startswith("none needed")


def test_the_command_line_prints_an_ops_path(capsys):
    assert op_paths.main(["nonzero"]) == 0
    out = capsys.readouterr().out
    assert "nonzero_kernel" in out and "compiler/ops/data.py" in out and "parse_data.py" in out
    assert "MISSING" not in out


def test_the_registry_wide_check_covers_the_projects_ops_only(scratch_ops):
    """An op a notebook cell or a test defines is checked on request, not by the registry-wide test
    (which would otherwise depend on which tests ran first in the process)."""
    scratch_ops.append("demo_outside")
    defop("demo_outside", _shape, _square, nargs=1, gpu=GpuCode.host("a demo"))
    assert "demo_outside" not in op_paths.project_ops() and "relu" in op_paths.project_ops()
    assert [p.name for p in op_paths.incomplete_ops(["demo_outside", "relu"])] == ["demo_outside"]
