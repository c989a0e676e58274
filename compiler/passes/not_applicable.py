"""Pipeline entries for AMD-library and rocMLIR passes that have no counterpart here, and
rewrite_rnn.

Each disabled pass is registered so the pipeline shows it by name with a one-line reason; the
pipelines keep it switched off. Force-enabling one makes it fail with that reason rather than
silently do nothing.

rewrite_rnn is implemented: MIGraphX unrolls rnn/gru/lstm ops; our op set has none of them, so on
any program we can build the pass has nothing to rewrite. If such an op ever appears, the pass
fails naming it instead of leaving an op no backend can run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import MigxError
from ..ir import Module, Program
from .base import Pass


@dataclass(frozen=True)
class NotApplicable(Pass):
    _abstract: ClassVar[bool] = True
    status: ClassVar[str] = "disabled"

    def apply_program(self, program: Program, ctx) -> bool:
        raise MigxError(f"{self.name} does not apply to migx-explore: {self.note}")


@dataclass(frozen=True)
class Fp8OcpToFnuz(NotApplicable):
    name: ClassVar[str] = "fp8_ocp_to_fnuz"
    note: ClassVar[str] = "there are no fp8 types in migx-explore, and the OCP-to-fnuz reinterpretation only " \
                          "matters on gfx94x-class AMD GPUs"


@dataclass(frozen=True)
class FuseCk(NotApplicable):
    name: ClassVar[str] = "fuse_ck"
    note: ClassVar[str] = "Composable Kernel is an AMD-only kernel library"


@dataclass(frozen=True)
class FuseMlir(NotApplicable):
    name: ClassVar[str] = "fuse_mlir"
    note: ClassVar[str] = "it builds rocMLIR kernels (gpu::mlir_op); gemm/conv epilogues are fused by the " \
                          "backend's fuse_ops instead"


RNN_OPS = ("rnn", "gru", "lstm")


@dataclass(frozen=True)
class RewriteRnn(Pass):
    """Unroll rnn/gru/lstm over time. There are no such ops in migx-explore, so this finds nothing."""

    name: ClassVar[str] = "rewrite_rnn"
    status: ClassVar[str] = "mapped"
    note: ClassVar[str] = "no rnn/gru/lstm ops in migx-explore's op set, so there is nothing to unroll"

    def apply_module(self, module: Module, ctx) -> bool:
        for ins in module:
            if ins.name in RNN_OPS:
                raise MigxError(f"rewrite_rnn: {ins.name} (#{ins.id}) in module {module.name} cannot be unrolled; "
                                "migx-explore has no recurrent-op lowering")
        return False
