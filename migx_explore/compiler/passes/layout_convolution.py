"""layout_convolution (MIGraphX src/layout_convolution.cpp).

Its apply runs, as nested passes (children in the trace): preserve_output_layout,
transform_convolutions, DCE, eliminate_contiguous{contiguous}, DCE, remove_layout, DCE.

- preserve_output_layout: each 4-D module output gets `layout{its current permutation}`, so
  whatever happens inside, the module returns the layout it returned before.
- transform_convolutions: each 4-D convolution reads `layout` copies of its inputs (NHWC when
  channels_last and the convolution is not grouped, else the default order, which makes a
  transposed input standard) and is followed by `contiguous`. The convolution keeps its id; its
  output follows its inputs' memory order.
- eliminate_contiguous: drop a `contiguous` when every consumer accepts the non-standard input
  (its shape rule accepts it and the result is standard or unchanged, recursively).
- remove_layout: drop a `layout` whose input already has that memory order.

With channels_last off, layouts of already-standard inputs are removed again by remove_layout, so
only convolutions reading transposed (non-standard) inputs change, as in MIGraphX.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import MigxError
from ..ir import Instruction, Module
from ..op import Op, compute_shape
from ..pass_infra import Pass
from ..shape import Shape
from .dead_code_elimination import DeadCodeElimination

NHWC = (0, 2, 3, 1)
CONVS = ("convolution", "quant_convolution")


@dataclass(frozen=True)
class PreserveOutputLayout(Pass):
    name: ClassVar[str] = "preserve_output_layout"

    def apply_module(self, module: Module, ctx) -> bool:
        ret = module.return_instruction()
        if ret is None:
            return False
        outs = []
        for x in ret.inputs:
            if x.shape.is_tuple or x.shape.dyn_dims is not None or x.shape.ndim != 4:
                outs.append(x)
            else:
                outs.append(module.insert_instruction(ret, Op("layout", permutation=x.shape.permutation()), [x]))
        if outs == list(ret.inputs):
            return False
        module.replace_return(outs)
        return True


@dataclass(frozen=True)
class TransformConvolutions(Pass):
    name: ClassVar[str] = "transform_convolutions"
    channels_last: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for conv in list(module):
            if conv.name not in CONVS or conv.shape.dyn_dims is not None or conv.shape.ndim != 4:
                continue
            # MIGraphX keeps the default layout for group convolutions
            perm = NHWC if self.channels_last and conv.op["group"] == 1 else (0, 1, 2, 3)
            with module.program.provenance([conv]):
                c = module.insert_after(conv, Op("contiguous"), [conv])
                module.replace_all_uses(conv, c)
                args = [module.insert_instruction(conv, Op("layout", permutation=perm), [x]) for x in conv.inputs]
                module.replace_instruction(conv, inputs=args)
            changed = True
        return changed


def _accepts(user: Instruction, old: Instruction, new_shape: Shape, depth: int = 0) -> bool:
    """MIGraphX's try_compute_shape: can `user` take `new_shape` in place of `old`'s shape?"""
    if user.is_return() or user.op.has("require_std_shape") or depth > 8:
        return False
    shapes = [new_shape if i is old else i.shape for i in user.inputs]
    try:
        out = compute_shape(user.op, shapes, list(user.module_inputs))
    except MigxError:
        return False
    if out.standard() or out == user.shape:
        return True
    return bool(user.outputs) and all(_accepts(u, user, out, depth + 1) for u in user.outputs)


@dataclass(frozen=True)
class LayoutEliminateContiguous(Pass):
    """The eliminate_contiguous{"contiguous"} step of layout_convolution (the backend has its own)."""

    name: ClassVar[str] = "eliminate_contiguous"

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for c in list(module):
            if c.name != "contiguous" or not c.outputs:
                continue
            x = c.inputs[0]
            if all(_accepts(u, c, x.shape) for u in c.outputs):
                module.replace_all_uses(c, x)
                changed = True
        return changed


@dataclass(frozen=True)
class RemoveLayout(Pass):
    name: ClassVar[str] = "remove_layout"

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if ins.name != "layout":
                continue
            x = ins.inputs[0].shape
            if x.packed() and not x.is_tuple and x.permutation() == tuple(ins.op["permutation"]):
                module.replace_all_uses(ins, ins.inputs[0])
                changed = True
        return changed


@dataclass(frozen=True)
class LayoutConvolution(Pass):
    """Give 4-D convolutions NHWC inputs when channels_last, keeping module outputs' layout."""

    name: ClassVar[str] = "layout_convolution"
    channels_last: bool = False

    def apply_module(self, module: Module, ctx) -> bool:
        dce = DeadCodeElimination()
        steps = [
            PreserveOutputLayout(),
            TransformConvolutions(channels_last=self.channels_last),
            dce,
            LayoutEliminateContiguous(),
            dce,
            RemoveLayout(),
            dce,
        ]
        return ctx.run_passes(steps)
