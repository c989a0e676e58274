"""fuse_pointwise_reduce (MIGraphX src/fuse_pointwise_reduce.cpp): the composite of fuse_pointwise,
fuse_reduce and split_reduce."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..pass_infra import Pass, make_pass, pass_registry
from .fuse_pointwise import FusePointwise
from .fuse_reduce import FuseReduce
from .split_reduce import SplitReduce


@dataclass(frozen=True)
class FusePointwiseReduce(Pass):
    """MIGraphX's composite: fuse_pointwise, optimize_module, fuse_reduce, fuse_pointwise (with
    reshape rewrites), fuse_reduce, split_reduce, fuse_pointwise (with broadcast rewrites) and a
    multi-output fuse_pointwise, each a nested pass (a child in the trace)."""

    name: ClassVar[str] = "fuse_pointwise_reduce"
    split_size: int = 65280
    enable_multi_output: bool = True  # MIGRAPHX_DISABLE_MULTI_OUTPUT_FUSION turns it off

    def steps(self) -> list[Pass]:
        out: list[Pass] = [FusePointwise(enable_rewrite_reshapes=False)]
        if "optimize_module" in pass_registry():
            out.append(make_pass("optimize_module"))
        out += [
            FuseReduce(enable_rewrite_reshapes=False),
            FusePointwise(enable_rewrite_reshapes=True),
            FuseReduce(enable_rewrite_reshapes=True),
            SplitReduce(split_size=self.split_size),
            FusePointwise(enable_rewrite_broadcasts=True),
        ]
        if self.enable_multi_output:
            out.append(FusePointwise(enable_multi_output=True))
        return out

    def apply_module(self, module: Module, ctx) -> bool:
        return ctx.run_passes(self.steps())
