"""fuse_mlir (disabled): rocMLIR kernels; the backend's fuse_ops fuses gemm/conv epilogues instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..pass_infra import NotApplicable


@dataclass(frozen=True)
class FuseMlir(NotApplicable):
    name: ClassVar[str] = "fuse_mlir"
    note: ClassVar[str] = (
        "it builds rocMLIR kernels (gpu::mlir_op); gemm/conv epilogues are fused by the backend's fuse_ops instead"
    )
