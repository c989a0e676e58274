"""compile_blas (our compile_hipblaslt): plan each gpu::gemm as strided-batched BLAS calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.ir import Module
from migx_explore.compiler.pass_infra import Pass

from ..blas_epilogue import blas_epilogue
from ..blas_plan import HEURISTIC_ALGO, plan_gemm


@dataclass(frozen=True)
class CompileBlas(Pass):
    """Our equivalent of compile_hipblaslt: plans every gpu::gemm as strided-batched BLAS calls
    (cuBLAS on NVIDIA, hipBLAS on AMD) and records the plan and algorithm on the instruction,
    and which epilogue the call itself can do (bias, ReLU / GELU epilogues, beta = 1 with C)."""

    name: ClassVar[str] = "compile_blas"
    # compile mode eager (MIGraphX PR #4770's skip_benchmark): the library's first choice of
    # algorithm, none timed at finalize (timing cuBLASLt's candidates is most of a cold eager
    # finalize); recorded on the op as algo=heuristic
    skip_benchmark: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        changed = False
        for ins in list(module):
            if ins.name != "gpu::gemm":
                continue
            plan = plan_gemm(ins.inputs[0].shape, ins.inputs[1].shape, ins.inputs[-1].shape)
            if plan is None:
                raise MigxError(
                    f"compile_blas: no BLAS call fits gemm #{ins.id} "
                    f"({ins.inputs[0].shape} x {ins.inputs[1].shape} -> {ins.inputs[-1].shape})"
                )
            op = ins.op.with_(algo=HEURISTIC_ALGO if self.skip_benchmark else "default", plan=plan.describe())
            lt = blas_epilogue(ins)
            if lt is not None:  # the BLAS call can do the whole epilogue (the kernel stays as fallback)
                op = op.with_(blas_bias=lt.bias, blas_c=lt.c, blas_act=lt.act)
            if op != ins.op:
                module.replace_instruction(ins, op)
                changed = True
        return changed
