"""gpu::lower_reshape (MIGraphX develop Aug 2026, PR #5105); disabled here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.pass_infra import NotApplicable


@dataclass(frozen=True)
class LowerReshape(NotApplicable):
    name: ClassVar[str] = "lower_reshape"
