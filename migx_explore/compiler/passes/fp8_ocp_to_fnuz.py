"""fp8_ocp_to_fnuz (disabled): only AMD gfx94x-class GPUs need it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..pass_infra import NotApplicable


@dataclass(frozen=True)
class Fp8OcpToFnuz(NotApplicable):
    name: ClassVar[str] = "fp8_ocp_to_fnuz"
    note: ClassVar[str] = (
        "the fp8 types exist (float8e4m3fn and its fnuz form), but rewriting OCP fp8 into fnuz "
        "only matters on gfx94x-class AMD GPUs, which lack OCP fp8 instructions"
    )
