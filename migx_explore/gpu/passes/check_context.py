"""check_context: mark the program with the backend it was compiled for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass

from .. import kernel_cache


@dataclass(frozen=True)
class CheckContext(Pass):
    """Insert `gpu::check_context[target=...]`: the executor refuses to run a program compiled for
    another backend or architecture (target `any` when compiled with no GPU bound)."""

    name: ClassVar[str] = "check_context"

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main" or any(i.name == "gpu::check_context" for i in module):
            return False
        t = kernel_cache.current_target()
        target = f"{t.name}:{t.arch}" if t is not None else "any"
        first = next((i for i in module if not i.is_param()), None)
        module.insert_instruction(first if first is not None else module.end(), Op("gpu::check_context", target=target))
        return True
