"""gpu::lower_reshape (MIGraphX develop Aug 2026, PR #5105); disabled here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.pass_infra import NotApplicable


@dataclass(frozen=True)
class LowerReshape(NotApplicable):
    name: ClassVar[str] = "lower_reshape"
    migraphx_source: ClassVar[str] = "src/targets/gpu/lower_reshape.cpp"
    note: ClassVar[str] = (
        "our lowering keeps reshapes of standard buffers as views and compile_ops copies the rest; "
        "there is no gpu reshape op to lower"
    )
