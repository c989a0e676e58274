"""sync_device: wait for the stream before results come back through copy_from_gpu."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from migx_explore.compiler.ir import Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass


@dataclass(frozen=True)
class SyncDevice(Pass):
    """Insert `hip::sync_stream` before @return when results come back through
    hip::copy_from_gpu (offload_copy), so the host reads finished data."""

    name: ClassVar[str] = "sync_device"

    def apply_module(self, module: Module, ctx) -> bool:
        ret = module.return_instruction() if module.name == "main" else None
        if ret is None or not any(v.name == "hip::copy_from_gpu" for v in ret.inputs):
            return False
        if any(v.name == "hip::sync_stream" for v in ret.inputs):
            return False
        sync = module.insert_instruction(ret, Op("hip::sync_stream"), list(ret.inputs))
        module.replace_instruction(ret, inputs=[sync] + list(ret.inputs[1:]))
        return True
