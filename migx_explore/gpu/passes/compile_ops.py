"""compile_ops: generate a kernel for every gpu::precompile_op and compile them.

Each precompile_op becomes `gpu::code_object[symbol_name=..., global=..., local=...]` (the
lowered IR shows every kernel's name and launch size); GEMM epilogues get their in-place kernel
recorded on the gpu::gemm, and a small half / bf16 gpu::gemm that gemm_mma's rule picks gets a
generated tensor-core kernel computing product and epilogue in one launch (`kernel_symbol`),
which the executor launches instead of the BLAS call. An op the generators do not cover becomes a `gpu::host_op` (numpy
on the host; the executor runs it in eager mode only). Sources go to the kernel store; when a
GPU target is bound (gpu.compile and gpu.lower bind one) they compile in parallel through the disk cache,
otherwise the executor compiles them at finalize.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass

from .. import kernel_cache
from ..codegen import CodegenUnsupported, epilogue_kernel, generate
from ..codegen.gemm_mma import generated_gemm_wanted, mma_gemm_kernel
from ..ops import buffer_root


@dataclass(frozen=True)
class CompileOps(Pass):
    """MIGraphX gpu::compile_ops: one generated, compiled kernel per precompile_op."""

    name: ClassVar[str] = "compile_ops"
    exhaustive_tune: bool = False  # kept for MIGraphX parity: each op has one generated solution
    skip_benchmark: bool = False  # PR #4770's eager mode; nothing to skip here: one solution, no benchmark

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        sources = []
        changed = False
        for ins in list(module):
            if ins.name == "gpu::precompile_op":
                # the operand layout the op carries whichever way it is computed
                carried = {k: ins.op[k] for k in ("op", "ninputs", "outputs", "gathers", "workspace")}
                try:
                    ks = generate(ins)
                except CodegenUnsupported as e:  # the IR then shows gpu::host_op, and why
                    op = Op("gpu::host_op", **carried, why=f"no kernel: {e}")
                else:
                    kernel_cache.register(ks)
                    sources.append(ks)
                    launch = {"global": ks.global_size, "local": ks.local_size}
                    op = Op("gpu::code_object", **carried, symbol_name=ks.name, key=ks.key, **launch)
                new = module.insert_instruction(ins, op, list(ins.inputs), list(ins.module_inputs))
                module.replace_all_uses(ins, new)
                module.remove_instruction(ins)
                changed = True
            elif ins.name == "gpu::gemm" and not ins.op["kernel_key"] and self._generated_gemm(ins, module, sources):
                changed = True
            elif ins.name == "gpu::gemm" and ins.module_inputs and not ins.op["epilogue_key"]:
                shapes = [ins.inputs[-1].shape] + [i.shape for i in ins.inputs[2:-1]]
                ks = epilogue_kernel(ins.module_inputs[0], shapes)
                kernel_cache.register(ks)
                sources.append(ks)
                module.replace_instruction(
                    ins,
                    ins.op.with_(
                        epilogue_symbol=ks.name,
                        epilogue_key=ks.key,
                        epilogue_global=ks.global_size,
                        epilogue_local=ks.local_size,
                    ),
                )
                changed = True
        target = kernel_cache.current_target()
        if target is not None and sources:
            kernel_cache.compile_many(target.kernels, sources)
        return changed

    @staticmethod
    def _generated_gemm(ins, module: Module, sources: list) -> bool:
        """Record the generated tensor-core kernel on a gpu::gemm the rule gives it to
        (gemm_mma.generated_gemm_wanted): product and epilogue in one launch. The BLAS plan stays
        on the instruction for display; the executor launches the kernel instead."""
        shapes = [i.shape for i in ins.inputs]
        target = kernel_cache.current_target()
        if not generated_gemm_wanted(shapes, getattr(target, "arch", None)):
            return False
        epilogue = ins.module_inputs[0] if ins.module_inputs else None
        try:
            ks = mma_gemm_kernel(shapes, epilogue, ins.op["alpha"], constant_b=_is_constant(ins.inputs[1]))
        except CodegenUnsupported:
            return False
        kernel_cache.register(ks)
        sources.append(ks)
        module.replace_instruction(
            ins,
            ins.op.with_(
                kernel_symbol=ks.name, kernel_key=ks.key, kernel_global=ks.global_size, kernel_local=ks.local_size
            ),
        )
        return True


def _is_constant(ins) -> bool:
    """Whether `ins` (through views) is a literal's buffer: written once when the program loads,
    never by a kernel, so a kernel may read it before waiting for its predecessor."""
    root = buffer_root(ins)
    return root.is_literal() or root.name == "hip::hip_copy_literal"
