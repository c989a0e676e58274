"""fuse_ck (disabled): Composable Kernel is AMD-only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..pass_infra import NotApplicable


@dataclass(frozen=True)
class FuseCk(NotApplicable):
    name: ClassVar[str] = "fuse_ck"
