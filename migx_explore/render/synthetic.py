"""Synthetic programs for render tests and benchmarks, built through the IR API (no ONNX needed).

`conv_chain(n)` is a chain of n conv + bias + relu blocks (6 instructions each, so 84 blocks are
about 500 instructions and 340 blocks about 2,000); `fuse_bias_relu` is a small hand-written
fusion that turns each block's add + relu into a `pointwise` submodule, the way fuse_pointwise
does, so diffs of a realistic rewrite can be drawn before that pass exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from migx_explore.compiler.ir import Module, Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.pass_infra import Pass
from migx_explore.compiler.shape import Shape


def conv_chain(blocks: int, channels: int = 8, size: int = 16, *, residual_every: int = 0) -> Program:
    """x -> [conv 3x3 -> + bias -> relu] * blocks -> @return. With residual_every=k, every k-th
    block also adds the block input back (a skip connection), so the graph is not a pure chain."""
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (1, channels, size, size)))
    rng = np.random.default_rng(0)
    out_lens = (1, channels, size, size)
    for b in range(blocks):
        w = m.add_literal(rng.standard_normal((channels, channels, 3, 3)).astype(np.float32))
        bias = m.add_literal(rng.standard_normal((channels,)).astype(np.float32))
        conv = m.add_instruction(Op("convolution", padding=(1, 1)), [x, w])
        bb = m.add_instruction(Op("broadcast", axis=1, out_lens=out_lens), [bias])
        y = m.add_instruction(Op("add"), [conv, bb])
        y = m.add_instruction(Op("relu"), [y])
        if residual_every and (b + 1) % residual_every == 0:
            y = m.add_instruction(Op("add"), [y, x])
        x = y
    m.add_return([x])
    return p


@dataclass(frozen=True)
class FuseBiasRelu(Pass):
    """add(x, broadcast(bias)) -> relu  ==>  pointwise[add, relu] with a submodule, like
    fuse_pointwise. `limit` fuses only the first n blocks (a local change on a big graph)."""

    name: ClassVar[str] = "render_test_fuse_bias_relu"
    limit: int = 0

    def apply_module(self, module: Module, ctx) -> bool:
        if module.name != "main":
            return False
        done = 0
        for ins in list(module):
            if ins.name != "relu" or ins.inputs[0].name != "add" or len(ins.inputs[0].outputs) != 1:
                continue
            if self.limit and done >= self.limit:
                break
            add = ins.inputs[0]
            sub = ctx.create_module(ctx.unique_module_name("pointwise"))
            a = sub.add_parameter("x0", Shape.scalar(add.inputs[0].shape.type))
            b = sub.add_parameter("x1", Shape.scalar(add.inputs[1].shape.type))
            with module.program.provenance([add, ins]):
                s = sub.add_instruction(Op("add"), [a, b])
                r = sub.add_instruction(Op("relu"), [s])
                sub.add_return([r])
                fused = module.insert_instruction(ins, Op("pointwise"), list(add.inputs), [sub])
            module.replace_all_uses(ins, fused)
            module.remove_instruction(ins)
            module.remove_instruction(add)
            done += 1
        return done > 0
