"""compile_miopen (disabled): migx-explore has no MIOpen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.pass_infra import Pass


@dataclass(frozen=True)
class CompileMiopen(Pass):
    """Stands for MIGraphX's gpu::compile_miopen. migx-explore has no MIOpen: convolutions are
    lowered to generated kernels or im2col + BLAS GEMM instead."""

    name: ClassVar[str] = "compile_miopen"

    def apply_module(self, module: Module, ctx) -> bool:
        return False
