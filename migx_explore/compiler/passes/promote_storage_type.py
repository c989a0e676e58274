"""promote_storage_type (MIGraphX src/promote_storage_type.cpp, PR #5138, develop Aug 2026): on GPUs
without bf16 arithmetic, bf16 is kept as a storage type only and compute is promoted to float."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..pass_infra import NotApplicable


@dataclass(frozen=True)
class PromoteStorageType(NotApplicable):
    name: ClassVar[str] = "promote_storage_type"
