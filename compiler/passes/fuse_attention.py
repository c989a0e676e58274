"""fuse_attention (disabled): attention groups are compiled by rocMLIR."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .base import NotApplicable


@dataclass(frozen=True)
class FuseAttention(NotApplicable):
    name: ClassVar[str] = "fuse_attention"
    note: ClassVar[str] = "its attention groups are compiled by rocMLIR, which migx-explore does not have"
