"""optimize_module (MIGraphX src/optimize_module.cpp): the composite that runs the algebraic and
reshape simplifications to a fixpoint. Every step is a nested pass run through `ctx.run_pass`, so
the trace shows each as a child of optimize_module (in MIGraphX these are the only runs of
simplify_algebra, propagate_constant, eliminate_common_subexpression and eliminate_convert)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..pass_infra import Pass
from ..pattern_rewriter import repeat_while_changes
from .dead_code_elimination import DeadCodeElimination
from .eliminate_common_subexpression import EliminateCommonSubexpression
from .eliminate_convert import EliminateConvert
from .propagate_constant import PropagateConstant
from .simplify_algebra import SimplifyAlgebra
from .simplify_reshapes import SimplifyReshapes


@dataclass(frozen=True)
class OptimizeModule(Pass):
    name: ClassVar[str] = "optimize_module"
    propagate_constant_skip_ops: tuple[str, ...] = ()

    def apply_module(self, module, ctx) -> bool:
        def run(*passes) -> bool:
            return ctx.run_passes(passes)

        def inner() -> bool:
            return run(SimplifyReshapes(), EliminateConvert(), DeadCodeElimination(), SimplifyAlgebra())

        def outer() -> bool:
            changed = repeat_while_changes(4, inner)
            return (
                run(
                    EliminateCommonSubexpression(),
                    DeadCodeElimination(),
                    PropagateConstant(skip_ops=self.propagate_constant_skip_ops),
                    DeadCodeElimination(),
                )
                or changed
            )

        return repeat_while_changes(2, outer) > 0
