"""fuse_mlir (disabled): rocMLIR kernels; the backend's fuse_ops fuses gemm/conv epilogues instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..pass_infra import NotApplicable


@dataclass(frozen=True)
class FuseMlir(NotApplicable):
    name: ClassVar[str] = "fuse_mlir"
