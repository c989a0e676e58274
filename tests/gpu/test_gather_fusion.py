# ruff: noqa: E501  (expected IR lines are as long as the printer makes them)
"""fuse_ops' gather fusion (gpu/passes/fuse_ops/gather_fusion.py, codegen gather_load.py): an
embedding lookup's index convert and gather kernel disappear into the kernel that reads the
gathered rows (issue 28: gpt2 32 -> 30 launches, bert 37 -> 34, llama 43 -> 41 at fp16). IR text
for the rule, then numerics on the fake backend (negative indices included), where the generators
refuse (the gather stays a kernel) and the generated sources; tests/gpu/
test_kernels_compile_offline.py compiles `gather_programs()` with nvcc, and the `gpu` test runs
them on a device."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import migx_explore.gpu.passes  # noqa: F401  (registers the backend passes and GPU ops)
from migx_explore.compiler import evaluate, parse, print_program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.gpu import compile as gpu_compile
from migx_explore.gpu import lower
from migx_explore.gpu.ops import gather_indices
from migx_explore.gpu.pipelines import CompileOptions, gpu_pipelines

EMBED_ADD = """
ids = @param:ids -> int64_type, {2, 3}
table = @param:table -> float_type, {10, 4}
pos = @param:pos -> float_type, {2, 3, 4}
@3 = convert[target_type=int32](ids) -> int32_type, {2, 3}
@4 = gather[axis=0](table,@3) -> float_type, {2, 3, 4}
@5 = add(@4,pos) -> float_type, {2, 3, 4}
@6 = @return(@5)
"""

EMBED_ADD_FUSED = """module: "main"
ids = @param:ids -> int64_type, {2, 3}, {3, 1}
table = @param:table -> float_type, {10, 4}, {4, 1}
pos = @param:pos -> float_type, {2, 3, 4}, {12, 4, 1}
@3 = allocate[shape={float_type, {2, 3, 4}, {12, 4, 1}}]() -> float_type, {2, 3, 4}, {12, 4, 1}
@4 = gpu::precompile_op[op=add,gathers={0, 0}](table,pos,ids,@3) -> float_type, {2, 3, 4}, {12, 4, 1}
@5 = @return(@4)
"""

# Programs whose gathers fuse, in the shapes the exports have: (name, text, what must hold of the
# compiled kernels). The index types and negative indices are the feeds' business (_feeds).
GPT2_LIKE = """
ids = @param:ids -> int64_type, {1, 8}
wte = @param:wte -> {t}, {50, 32}
wpe = @param:wpe -> {t}, {1, 8, 32}
w = @param:w -> {t}, {32, 32}
@4 = gather[axis=0](wte,ids) -> {t}, {1, 8, 32}
@5 = add(@4,wpe) -> {t}, {1, 8, 32}
@6 = reduce_mean[axes={2}](@5) -> {t}, {1, 8, 1}
@7 = multibroadcast[out_lens={1, 8, 32}](@6) -> {t}, {1, 8, 32}, {0, 1, 0}
@8 = sub(@5,@7) -> {t}, {1, 8, 32}
@9 = mul(@8,@8) -> {t}, {1, 8, 32}
@10 = reduce_mean[axes={2}](@9) -> {t}, {1, 8, 1}
@11 = rsqrt(@10) -> {t}, {1, 8, 1}
@12 = multibroadcast[out_lens={1, 8, 32}](@11) -> {t}, {1, 8, 32}, {0, 1, 0}
@13 = mul(@8,@12) -> {t}, {1, 8, 32}
@14 = reshape[dims={8, 32}](@13) -> {t}, {8, 32}
@15 = dot(@14,w) -> {t}, {8, 32}
@16 = reshape[dims={1, 8, 32}](@15) -> {t}, {1, 8, 32}
@17 = add(@16,@5) -> {t}, {1, 8, 32}
@18 = @return(@17)
"""

# RMSNorm of the embedding, whose rows the residual add after the GEMM reads too: the norm
# kernel writes them as a second output.
LLAMA_LIKE = """
ids = @param:ids -> int64_type, {1, 8}
wte = @param:wte -> {t}, {50, 32}
w = @param:w -> {t}, {32, 32}
@3 = gather[axis=0](wte,ids) -> {t}, {1, 8, 32}
@4 = mul(@3,@3) -> {t}, {1, 8, 32}
@5 = reduce_mean[axes={2}](@4) -> {t}, {1, 8, 1}
@6 = rsqrt(@5) -> {t}, {1, 8, 1}
@7 = multibroadcast[out_lens={1, 8, 32}](@6) -> {t}, {1, 8, 32}, {0, 1, 0}
@8 = mul(@3,@7) -> {t}, {1, 8, 32}
@9 = reshape[dims={8, 32}](@8) -> {t}, {8, 32}
@10 = dot(@9,w) -> {t}, {8, 32}
@11 = reshape[dims={1, 8, 32}](@10) -> {t}, {1, 8, 32}
@12 = add(@11,@3) -> {t}, {1, 8, 32}
@13 = @return(@12)
"""

# A pointwise reader and a GEMM operand: the pointwise kernel writes the rows for the GEMM.
POINTWISE_AND_GEMM = """
ids = @param:ids -> int64_type, {1, 8}
wte = @param:wte -> {t}, {50, 32}
w = @param:w -> {t}, {32, 32}
pos = @param:pos -> {t}, {1, 8, 32}
@4 = gather[axis=0](wte,ids) -> {t}, {1, 8, 32}
@5 = add(@4,pos) -> {t}, {1, 8, 32}
@6 = reshape[dims={8, 32}](@4) -> {t}, {8, 32}
@7 = dot(@6,w) -> {t}, {8, 32}
@8 = @return(@7,@5)
"""

# A decode step's position row, broadcast to the batch before the add, and a reshaped lookup:
# read through a view of the indices (multibroadcast, reshape).
VIEWED = """
ids = @param:ids -> int64_type, {2, 3}
pos = @param:pos -> int32_type, {1}
wte = @param:wte -> {t}, {50, 32}
wpe = @param:wpe -> {t}, {16, 32}
@4 = gather[axis=0](wte,ids) -> {t}, {2, 3, 32}
@5 = reshape[dims={6, 32}](@4) -> {t}, {6, 32}
@6 = gather[axis=0](wpe,pos) -> {t}, {1, 32}
@7 = multibroadcast[out_lens={6, 32}](@6) -> {t}, {6, 32}, {0, 1}
@8 = add(@5,@7) -> {t}, {6, 32}
@9 = @return(@8)
"""

# Not an embedding: a gather along a middle axis with 2-D indices, into a pointwise consumer.
MIDDLE_AXIS = """
x = @param:x -> {t}, {3, 7, 5}
ids = @param:ids -> int32_type, {2, 2}
y = @param:y -> {t}, {3, 2, 2, 5}
@3 = gather[axis=1](x,ids) -> {t}, {3, 2, 2, 5}
@4 = mul(@3,y) -> {t}, {3, 2, 2, 5}
@5 = @return(@4)
"""

# The indices vary along the reduced axis: the reduction kernel cannot take the gather.
ALONG_REDUCED = """
x = @param:x -> {t}, {4, 9}
ids = @param:ids -> int32_type, {6}
@2 = gather[axis=1](x,ids) -> {t}, {4, 6}
@3 = softmax[axis=1](@2) -> {t}, {4, 6}
@4 = @return(@3)
"""

PROGRAMS = {
    "gpt2_like": GPT2_LIKE,
    "llama_like": LLAMA_LIKE,
    "pointwise_and_gemm": POINTWISE_AND_GEMM,
    "viewed": VIEWED,
    "middle_axis": MIDDLE_AXIS,
}


def gather_programs(dtype: str = "float_type"):
    """(name, program) of each fusing program at `dtype`: what the offline compile test builds."""
    return [(name, parse(text.replace("{t}", dtype))) for name, text in PROGRAMS.items()]


def _feeds(program, seed: int = 0) -> dict[str, np.ndarray]:
    """Random feeds; indices cover the whole axis, negative ones included (they wrap)."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in program.main.params():
        s = p.shape
        if s.type.startswith("int"):
            out[p.param_name] = rng.integers(-7, 7, size=s.lens).astype(s.dtype.np_dtype)
        else:
            out[p.param_name] = rng.standard_normal(s.lens).astype(s.dtype.np_dtype)
    return out


def _root(x):
    """The instruction a chain of views reads."""
    while x.name in ("multibroadcast", "reshape", "squeeze", "unsqueeze"):
        x = x.inputs[0]
    return x


def _kernel_names(c) -> list[str]:
    return [i.kernel for i in c.steps.info if i.kind == "kernel"]


def test_embedding_add_is_one_kernel_reading_the_table():
    program = parse(EMBED_ADD)
    run_passes(program, [make_pass(p) for p in ("lowering", "fuse_ops", "dead_code_elimination")])
    assert print_program(program, full=True) == print_program(parse(EMBED_ADD_FUSED), full=True)
    feeds = _feeds(parse(EMBED_ADD))
    np.testing.assert_array_equal(evaluate(program, feeds)[0], evaluate(parse(EMBED_ADD), feeds)[0])


def test_index_convert_with_another_reader_stays():
    text = EMBED_ADD.replace("@6 = @return(@5)", "@6 = @return(@5,@3)")
    program = parse(text)
    run_passes(program, [make_pass(p) for p in ("lowering", "fuse_ops", "dead_code_elimination")])
    kernels = [i for i in program.main if i.name == "gpu::precompile_op"]
    assert [k.op["op"].split("[")[0] for k in kernels] == ["convert", "add"], print_program(program)
    assert kernels[1].op["gathers"] == (0, 0) and kernels[1].inputs[2] is kernels[0]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_fused_gather_numerics_on_fake(name, precision, fake):
    program = dict(gather_programs())[name]
    feeds = _feeds(program)
    want = evaluate(program, feeds)
    with gpu_compile(program, CompileOptions(precision=precision), backend=fake) as c:
        assert "gather_kernel" not in _kernel_names(c), _kernel_names(c)
        fused = [i for i in c.program.main if i.name == "gpu::code_object" and i.op["gathers"]]
        # the indices are read as fed (no convert kernel before them); at fp16 a float32 table
        # param is still narrowed by a kernel (an export's table is a literal, narrowed at compile)
        assert fused and all(_root(x).is_param() for i in fused for x in gather_indices(i.op, list(i.inputs)))
        tol = 1e-6 if precision == "fp32" else 3e-2
        for mode in ("eager", "graph"):
            for got, w in zip(c.run(feeds, mode=mode), want):
                np.testing.assert_allclose(got, w, rtol=tol, atol=tol)


def test_llama_like_norm_writes_the_embedding_for_the_residual(fake):
    with gpu_compile(parse(LLAMA_LIKE.replace("{t}", "float_type")), backend=fake) as c:
        norm = [i for i in c.program.main if i.name == "gpu::code_object" and i.op["gathers"]]
        assert len(norm) == 1 and norm[0].op["outputs"] == 2, print_program(c.program)
        gemm = next(i for i in c.program.main if i.name == "gpu::gemm")
        assert any(x.name == "get_tuple_elem" and x.inputs[0] is norm[0] for x in gemm.inputs)


def test_pointwise_reader_writes_the_rows_for_the_gemm(fake):
    with gpu_compile(parse(POINTWISE_AND_GEMM.replace("{t}", "float_type")), backend=fake) as c:
        assert _kernel_names(c) == ["add_kernel"], _kernel_names(c)  # and the GEMM
        add = next(i for i in c.program.main if i.name == "gpu::code_object")
        assert add.op["outputs"] == 2 and add.op["gathers"] == (0, 0)


def test_viewed_gathers_read_through_index_views(fake):
    with gpu_compile(parse(VIEWED.replace("{t}", "float_type")), backend=fake) as c:
        assert _kernel_names(c) == ["add_kernel"], _kernel_names(c)
        add = next(i for i in c.program.main if i.name == "gpu::code_object")
        assert add.op["gathers"] == (0, 0, 1, 0)
        assert [x.name for x in gather_indices(add.op, list(add.inputs))] == ["reshape", "multibroadcast"]


# Broadcast to a new leading axis with the gathered axis not first: the table's leading axis
# would move, so the view is not a gather of the table (the gather stays a kernel).
SHIFTED = """
x = @param:x -> float_type, {5, 4}
ids = @param:ids -> int32_type, {1}
y = @param:y -> float_type, {3, 5, 1}
@3 = gather[axis=1](x,ids) -> float_type, {5, 1}
@4 = multibroadcast[out_lens={3, 5, 1}](@3) -> float_type, {3, 5, 1}, {0, 1, 0}
@5 = add(@4,y) -> float_type, {3, 5, 1}
@6 = @return(@5)
"""


def test_broadcast_that_moves_table_axes_is_not_read_through(fake):
    program = parse(SHIFTED)
    feeds = _feeds(program)
    with gpu_compile(program, backend=fake) as c:
        assert "gather_kernel" in _kernel_names(c), _kernel_names(c)
        np.testing.assert_allclose(c.run(feeds)[0], evaluate(program, feeds)[0], rtol=1e-6, atol=1e-6)


def test_gather_along_the_reduced_axis_stays_a_kernel(fake):
    program = parse(ALONG_REDUCED.replace("{t}", "float_type"))
    feeds = _feeds(program)
    with gpu_compile(program, backend=fake) as c:
        assert "gather_kernel" in _kernel_names(c)
        assert not any(i.op["gathers"] for i in c.program.main if i.name == "gpu::code_object")
        np.testing.assert_allclose(c.run(feeds)[0], evaluate(program, feeds)[0], rtol=1e-6, atol=1e-6)


def test_generated_loads_read_through_the_indices(fake):
    """The sources: the index is read once a row in a reduction (the row's base moves), per
    element in a pointwise kernel; negative indices wrap by the table's length."""
    from migx_explore.gpu.codegen import generate

    for name, program in gather_programs("half_type"):
        lowered = lower(program, backend=fake)
        fused = [i for i in lowered.main if i.name == "gpu::code_object" and i.op["gathers"]]
        assert fused, name
        for ins in fused:
            # code_object keeps the precompile_op's attributes: generate reads the same ones
            src = generate(ins).source
            n = ins.inputs[ins.op["gathers"][0]].shape.lens[ins.op["gathers"][1]]
            assert f"+= {n};" in src, (name, src)
            if "fused_reduce" in ins.op["op"] or "layernorm" in ins.op["op"]:
                assert "const int base0 = (int)g0 * " in src, src


def test_paired_half_loads_share_their_index():
    """Half data two elements a thread (pointwise_vec.py): a gathered table's pair is one 32-bit
    word at one index; indices that differ within a pair keep the element-wise loop."""
    from migx_explore.compiler.shape import Shape
    from migx_explore.gpu.codegen.pointwise import pointwise_kernel

    half = [Shape.of("float16", (50, 32)), Shape.of("float16", (1, 8, 32)), Shape.of("int64", (1, 8))]
    src = pointwise_kernel(Op("add"), [*half, Shape.of("float16", (1, 8, 32))], 1, None, ((0, 0),)).source
    assert "const unsigned w0 = *(const unsigned*)(p0 + c1 + (int)g0 * 32);" in src, src
    # gathered along the last axis: each element has its own index, so no pairs
    last = [Shape.of("float16", (8, 50)), Shape.of("float16", (8, 32)), Shape.of("int64", (32,))]
    src = pointwise_kernel(Op("add"), [*last, Shape.of("float16", (8, 32))], 1, None, ((0, 1),)).source
    assert "unsigned" not in src and "long long g0 = (long long)p2[c1];" in src, src


def test_gather_fusion_in_the_pass_trace(fake):
    """The explorer's view: fuse_ops' record removes the gather, and its diff
    draws (DOT) with the fused kernel."""
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.render import diff_graph, render_svg, text_diff, to_dot

    program = parse(GPT2_LIKE.replace("{t}", "float_type"))
    trace = PassManager(validate=True).run(program, gpu_pipelines(CompileOptions()))
    rec = trace.find("fuse_ops")
    before, after = trace.snapshots(rec)
    assert "gather[axis=0]" in before.text and "gathers={0, 0}" in after.text
    assert 'op="gather[axis=0]"' not in after.text
    # fed ids keep 64 bits (no narrowing convert: issue 40), so the gather reads them as fed, and
    # so does the fused kernel
    assert "](wte,ids," in before.text
    fused = next(line for line in after.text.splitlines() if "gathers={0, 0}" in line)
    assert "(wte,wpe,ids," in fused, fused
    diff = text_diff(before, after)
    assert any("gathers={0, 0}" in line for line in diff.splitlines() if line.startswith("+"))
    graph = diff_graph(before, after, rec.diff, expand=True)
    assert "gathers" in to_dot(graph)
    if shutil.which("dot"):  # the explorer's drawing of the pass
        assert render_svg(graph).lstrip().startswith("<svg")


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_fused_gather_numerics_on_device(name, precision, device):
    program = dict(gather_programs())[name]
    feeds = _feeds(program)
    want = evaluate(program, feeds)
    tol = 1e-4 if precision == "fp32" else 3e-2  # the BLAS sums in another order than numpy
    with gpu_compile(program, CompileOptions(precision=precision), backend=device) as c:
        assert any(i.op["gathers"] for i in c.program.main if i.name == "gpu::code_object")
        for mode in ("eager", "graph"):
            for got, w in zip(c.run(feeds, mode=mode), want):
                np.testing.assert_allclose(got, w, rtol=tol, atol=tol)
