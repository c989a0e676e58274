# ruff: noqa: E501  (expected IR lines are as long as the printer makes them)
"""IR text in, backend passes, IR text out (and the same outputs from the reference evaluator,
since every GPU op has a reference compute). The expected texts show what each pass does."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import migx_explore.gpu.passes  # noqa: F401  (registers the backend passes and GPU ops)
from migx_explore.compiler import evaluate, parse, print_program
from migx_explore.compiler.pass_infra import make_pass, run_passes

CASES = {
    "lowering_pointwise": (
        """
x = @param:x -> float_type, {2, 3}, {3, 1}
y = @param:y -> float_type, {2, 3}, {3, 1}
@2 = add(x,y) -> float_type, {2, 3}, {3, 1}
@3 = @return(@2)
""",
        ["lowering"],
        """module: "main"
x = @param:x -> float_type, {2, 3}, {3, 1}
y = @param:y -> float_type, {2, 3}, {3, 1}
@2 = allocate[shape={float_type, {2, 3}, {3, 1}}]() -> float_type, {2, 3}, {3, 1}
@3 = gpu::precompile_op[op=add](x,y,@2) -> float_type, {2, 3}, {3, 1}
@4 = @return(@3)
""",
    ),
    "lowering_dot_transposed": (
        """
a = @param:a -> float_type, {4, 5}, {5, 1}
b = @param:b -> float_type, {6, 5}, {5, 1}
@2 = transpose[permutation={1, 0}](b) -> float_type, {5, 6}, {1, 5}
@3 = dot(a,@2) -> float_type, {4, 6}, {6, 1}
@4 = @return(@3)
""",
        ["lowering"],
        """module: "main"
a = @param:a -> float_type, {4, 5}, {5, 1}
b = @param:b -> float_type, {6, 5}, {5, 1}
@2 = transpose[permutation={1, 0}](b) -> float_type, {5, 6}, {1, 5}
@3 = allocate[shape={float_type, {4, 6}, {6, 1}}]() -> float_type, {4, 6}, {6, 1}
@4 = gpu::gemm(a,@2,@3) -> float_type, {4, 6}, {6, 1}
@5 = @return(@4)
""",
    ),
    "lowering_conv1x1": (
        """
x = @param:x -> float_type, {1, 8, 4, 4}, {128, 16, 4, 1}
w = @param:w -> float_type, {16, 8, 1, 1}, {8, 1, 1, 1}
@2 = convolution[padding={0, 0},stride={1, 1}](x,w) -> float_type, {1, 16, 4, 4}, {256, 16, 4, 1}
@3 = @return(@2)
""",
        ["lowering"],
        """module: "main"
x = @param:x -> float_type, {1, 8, 4, 4}, {128, 16, 4, 1}
w = @param:w -> float_type, {16, 8, 1, 1}, {8, 1, 1, 1}
@2 = reshape[dims={1, 8, 16}](x) -> float_type, {1, 8, 16}, {128, 16, 1}
@3 = reshape[dims={16, 8}](w) -> float_type, {16, 8}, {8, 1}
@4 = multibroadcast[out_lens={1, 16, 8}](@3) -> float_type, {1, 16, 8}, {0, 8, 1}
@5 = allocate[shape={float_type, {1, 16, 4, 4}, {256, 16, 4, 1}}]() -> float_type, {1, 16, 4, 4}, {256, 16, 4, 1}
@6 = gpu::gemm(@4,@2,@5) -> float_type, {1, 16, 4, 4}, {256, 16, 4, 1}
@7 = @return(@6)
""",
    ),
    "eliminate_contiguous": (
        """
x = @param:x -> float_type, {2, 3}, {3, 1}
@1 = transpose[permutation={1, 0}](x) -> float_type, {3, 2}, {1, 3}
@2 = contiguous(@1) -> float_type, {3, 2}, {2, 1}
@3 = relu(@2) -> float_type, {3, 2}, {2, 1}
@4 = @return(@3)
""",
        ["lowering", "eliminate_contiguous", "dead_code_elimination"],
        """module: "main"
x = @param:x -> float_type, {2, 3}, {3, 1}
@1 = transpose[permutation={1, 0}](x) -> float_type, {3, 2}, {1, 3}
@2 = allocate[shape={float_type, {3, 2}, {2, 1}}]() -> float_type, {3, 2}, {2, 1}
@3 = gpu::precompile_op[op=relu](@1,@2) -> float_type, {3, 2}, {2, 1}
@4 = @return(@3)
""",
    ),
    "eliminate_concat": (
        """
x = @param:x -> float_type, {2, 3}, {3, 1}
y = @param:y -> float_type, {2, 4}, {4, 1}
@2 = relu(x) -> float_type, {2, 3}, {3, 1}
@3 = neg(y) -> float_type, {2, 4}, {4, 1}
@4 = concat[axis=1](@2,@3) -> float_type, {2, 7}, {7, 1}
@5 = @return(@4)
""",
        ["lowering", "eliminate_concat", "dead_code_elimination"],
        """module: "main"
x = @param:x -> float_type, {2, 3}, {3, 1}
y = @param:y -> float_type, {2, 4}, {4, 1}
@2 = allocate[shape={float_type, {2, 7}, {7, 1}}]() -> float_type, {2, 7}, {7, 1}
@3 = slice[axes={1},starts={0},ends={3}](@2) -> float_type, {2, 3}, {7, 1}
@4 = gpu::precompile_op[op=relu](x,@3) -> float_type, {2, 3}, {7, 1}
@5 = slice[axes={1},starts={3},ends={7}](@2) -> float_type, {2, 4}, {7, 1}
@6 = gpu::precompile_op[op=neg](y,@5) -> float_type, {2, 4}, {7, 1}
@7 = gpu::concat_alias[axis=1](@2,@4,@6) -> float_type, {2, 7}, {7, 1}
@8 = @return(@7)
""",
    ),
    "fuse_ops_gemm_bias_relu": (
        """
a = @param:a -> float_type, {4, 5}, {5, 1}
b = @param:b -> float_type, {5, 6}, {6, 1}
c = @param:c -> float_type, {4, 6}, {6, 1}
@3 = dot(a,b) -> float_type, {4, 6}, {6, 1}
@4 = add(@3,c) -> float_type, {4, 6}, {6, 1}
@5 = @return(@4)
""",
        ["lowering", "fuse_ops", "dead_code_elimination", "compile_blas"],
        """module: "main"
a = @param:a -> float_type, {4, 5}, {5, 1}
b = @param:b -> float_type, {5, 6}, {6, 1}
c = @param:c -> float_type, {4, 6}, {6, 1}
@3 = allocate[shape={float_type, {4, 6}, {6, 1}}]() -> float_type, {4, 6}, {6, 1}
@4 = gpu::gemm[algo=default,plan="NN m=6 n=4 k=5 ld=6,5,6 batch=1",blas_c=0](a,b,c,@3), [main:epilogue0] -> float_type, {4, 6}, {6, 1}
@5 = @return(@4)

module: "main:epilogue0" bypass
main:epilogue0:x0 = @param:x0 -> float_type, {1}, {0}
main:epilogue0:x1 = @param:x1 -> float_type, {1}, {0}
main:epilogue0:@2 = add(main:epilogue0:x0,main:epilogue0:x1) -> float_type, {1}, {0}
main:epilogue0:@3 = @return(main:epilogue0:@2)
""",
    ),
    "allocation_to_arena": (
        """
x = @param:x -> float_type, {16}, {1}
@1 = exp(x) -> float_type, {16}, {1}
@2 = neg(@1) -> float_type, {16}, {1}
@3 = relu(@2) -> float_type, {16}, {1}
@4 = sin(@3) -> float_type, {16}, {1}
@5 = @return(@4)
""",
        ["lowering", "replace_allocate", "schedule", "memory_coloring", "preallocate_param"],
        """module: "main"
x = @param:x -> float_type, {16}, {1}
main:#output_0 = @param:main:#output_0 -> float_type, {16}, {1}
@2 = hip::hip_allocate_memory[shape={int8_type, {512}, {1}},id=scratch]() -> int8_type, {512}, {1}
@3 = load[shape={float_type, {16}, {1}},offset=0](@2) -> float_type, {16}, {1}
@4 = gpu::precompile_op[op=exp](x,@3) -> float_type, {16}, {1}
@5 = load[shape={float_type, {16}, {1}},offset=256](@2) -> float_type, {16}, {1}
@6 = gpu::precompile_op[op=neg](@4,@5) -> float_type, {16}, {1}
@7 = load[shape={float_type, {16}, {1}},offset=0](@2) -> float_type, {16}, {1}
@8 = gpu::precompile_op[op=relu](@6,@7) -> float_type, {16}, {1}
@9 = gpu::precompile_op[op=sin](@8,main:#output_0) -> float_type, {16}, {1}
@10 = @return(@9)
""",
    ),
    "literals_and_context": (
        """
x = @param:x -> float_type, {4}, {1}
@1 = @literal{1, 2, 3, 4} -> float_type, {4}, {1}
@2 = @literal{1, 2, 3, 4} -> float_type, {4}, {1}
@3 = add(x,@1) -> float_type, {4}, {1}
@4 = mul(@3,@2) -> float_type, {4}, {1}
@5 = @return(@4)
""",
        ["lowering", "promote_literals", "write_literals", "check_context", "dead_code_elimination"],
        """module: "main"
x = @param:x -> float_type, {4}, {1}
@1 = gpu::check_context[target=any]() -> int8_type, {1}, {0}
@2 = @literal{1, 2, 3, 4} -> float_type, {4}, {1}
@3 = hip::hip_copy_literal[id="main:@literal:1"](@2) -> float_type, {4}, {1}
@4 = allocate[shape={float_type, {4}, {1}}]() -> float_type, {4}, {1}
@5 = gpu::precompile_op[op=add](x,@3,@4) -> float_type, {4}, {1}
@6 = allocate[shape={float_type, {4}, {1}}]() -> float_type, {4}, {1}
@7 = gpu::precompile_op[op=mul](@5,@3,@6) -> float_type, {4}, {1}
@8 = @return(@7)
""",
    ),
    "offload_sync": (
        """
x = @param:x -> float_type, {4}, {1}
@1 = relu(x) -> float_type, {4}, {1}
@2 = @return(@1)
""",
        [
            ("lowering", {"offload_copy": True}),
            ("replace_allocate", {"offload_copy": True}),
            "sync_device",
            "eliminate_allocation",
        ],
        """module: "main"
x = @param:x -> float_type, {4}, {1}
memory = @param:memory -> int8_type, {512}, {1}
@2 = load[shape={float_type, {4}, {1}},offset=0](memory) -> float_type, {4}, {1}
@3 = hip::copy_to_gpu(x,@2) -> float_type, {4}, {1}
@4 = load[shape={float_type, {4}, {1}},offset=256](memory) -> float_type, {4}, {1}
@5 = gpu::precompile_op[op=relu](@3,@4) -> float_type, {4}, {1}
@6 = hip::copy_from_gpu(@5) -> float_type, {4}, {1}
@7 = hip::sync_stream(@6) -> float_type, {4}, {1}
@8 = @return(@7)
""",
    ),
    "compile_ops": (
        """
x = @param:x -> float_type, {2, 8}, {8, 1}
@1 = reduce_max[axes={1}](x) -> float_type, {2, 1}, {1, 1}
@2 = @return(@1)
""",
        ["lowering", "compile_ops"],
        """module: "main"
x = @param:x -> float_type, {2, 8}, {8, 1}
@1 = allocate[shape={float_type, {2, 1}, {1, 1}}]() -> float_type, {2, 1}, {1, 1}
@2 = gpu::code_object[op="reduce_max[axes={1}]",symbol_name=reduce_max_kernel,global=64,local=64,key=521eca0c45e028061911d69b](x,@1) -> float_type, {2, 1}, {1, 1}
@3 = @return(@2)
""",
    ),
}


def _norm(text: str) -> str:
    return "\n".join(x.strip() for x in textwrap.dedent(text).strip().splitlines() if x.strip())


def _zeros_for_new_params(program, feeds):
    out = dict(feeds)
    for p in program.main.params():
        out.setdefault(p.param_name, np.zeros(p.shape.lens, p.shape.dtype.np_dtype))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_backend_pass_ir(name):
    before, passes, after = CASES[name]
    original = parse(before)
    program = parse(before)
    run_passes(program, [make_pass(p) if isinstance(p, str) else make_pass(p[0], **p[1]) for p in passes])
    # The expected text may spell types as MIGraphX does (float_type); compare in the printed spelling.
    assert _norm(print_program(program, full=True)) == _norm(print_program(parse(after), full=True))
    rng = np.random.default_rng(0)
    feeds = {p.param_name: rng.standard_normal(p.shape.lens).astype(np.float32) for p in original.main.params()}
    for got, want in zip(evaluate(program, _zeros_for_new_params(program, feeds)), evaluate(original, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("tail", ["", "neg"])
def test_fused_argmin_gets_a_generated_kernel(tail):
    # fuse_reduce wraps argmin with its pointwise producer (as MIGraphX); the reduce kernel
    # generator carries the (value, index) pair instead of falling back to a host op
    post = (
        f"@4 = convert[target_type=float32](@3) -> float_type, {{3, 1}}\n@5 = {tail}(@4) -> float_type, {{3, 1}}\n"
        "@6 = @return(@5)"
        if tail
        else "@4 = @return(@3)"
    )
    text = f"""
x = @param:x -> float_type, {{3, 7}}
@1 = exp(x) -> float_type, {{3, 7}}
@2 = neg(@1) -> float_type, {{3, 7}}
@3 = argmin[axis=1](@2) -> int64_type, {{3, 1}}
{post}
"""
    original, program = parse(text), parse(text)
    run_passes(program, [make_pass(p) for p in ("fuse_pointwise", "fuse_reduce", "lowering", "compile_ops")])
    objects = [i for i in program.main if i.name == "gpu::code_object"]
    assert objects and not any(i.name == "gpu::host_op" for i in program.main)
    assert any("argmin" in i.op["symbol_name"] for i in objects)
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 7)).astype(np.float32)}
    for got, want in zip(evaluate(program, _zeros_for_new_params(program, feeds)), evaluate(original, feeds)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("mode", "algo", "tuned"), [("eager", "heuristic", False), ("balanced", "default", True)])
def test_eager_gemms_take_the_librarys_first_algorithm(monkeypatch, mode, algo, tuned):
    """Compile mode eager skips benchmarking (MIGraphX PR #4770): compile_blas marks its GEMMs
    algo=heuristic and finalize asks the BLAS for no timing; balanced times candidates."""
    from migx_explore import gpu
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime.fake import FakeBackend, FakeBlas

    asked: list[bool] = []
    real = FakeBlas.make_gemm

    def spy(self, *args, tune: bool = True, **kw):
        asked.append(tune)
        return real(self, *args, tune=tune, **kw)

    monkeypatch.setattr(FakeBlas, "make_gemm", spy)
    p = parse(
        textwrap.dedent("""
        a = @param:a -> float_type, {64, 64}
        b = @param:b -> float_type, {64, 64}
        @2 = dot(a,b) -> float_type, {64, 64}
        @3 = @return(@2)
    """)
    )
    with gpu.compile(p, CompileOptions(mode=mode), backend=FakeBackend()) as compiled:
        gemms = [i for i in compiled.program.main if i.name == "gpu::gemm"]
    assert gemms and {i.op["algo"] for i in gemms} == {algo}
    assert asked and set(asked) == {tuned}
