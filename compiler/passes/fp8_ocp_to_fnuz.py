"""fp8_ocp_to_fnuz (disabled): no fp8 types here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .base import NotApplicable


@dataclass(frozen=True)
class Fp8OcpToFnuz(NotApplicable):
    name: ClassVar[str] = "fp8_ocp_to_fnuz"
    note: ClassVar[str] = ("there are no fp8 types in migx-explore, and the OCP-to-fnuz reinterpretation only "
                           "matters on gfx94x-class AMD GPUs")
