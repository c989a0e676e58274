"""fp8_ocp_to_fnuz (disabled): only AMD gfx94x-class GPUs need it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..pass_infra import NotApplicable


@dataclass(frozen=True)
class Fp8OcpToFnuz(NotApplicable):
    name: ClassVar[str] = "fp8_ocp_to_fnuz"
