"""gpu::fuse_mlss (MIGraphX develop Aug 2026, PR #4831): ops for AMDMLSS kernels; disabled here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.pass_infra import NotApplicable


@dataclass(frozen=True)
class FuseMlss(NotApplicable):
    name: ClassVar[str] = "fuse_mlss"
