"""gpu::lower_device_ops (MIGraphX develop Aug 2026, PR #5030); disabled here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.pass_infra import NotApplicable


@dataclass(frozen=True)
class LowerDeviceOps(NotApplicable):
    name: ClassVar[str] = "lower_device_ops"
