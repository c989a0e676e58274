"""Pipeline entries for AMD-library and rocMLIR passes that have no counterpart here.

Each disabled pass is registered so the pipeline shows it by name with a one-line reason; the
pipelines keep it switched off. Force-enabling one makes it fail with that reason rather than
silently do nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import MigxError
from ..ir import Program
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
class FuseAttention(NotApplicable):
    name: ClassVar[str] = "fuse_attention"
    note: ClassVar[str] = "its attention groups are compiled by rocMLIR, which migx-explore does not have"


@dataclass(frozen=True)
class FuseCk(NotApplicable):
    name: ClassVar[str] = "fuse_ck"
    note: ClassVar[str] = "Composable Kernel is an AMD-only kernel library"


@dataclass(frozen=True)
class FuseMlir(NotApplicable):
    name: ClassVar[str] = "fuse_mlir"
    note: ClassVar[str] = "it builds rocMLIR kernels (gpu::mlir_op); gemm/conv epilogues are fused by the " \
                          "backend's fuse_ops instead"
