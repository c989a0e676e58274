"""A convolution reads a float conversion of its input itself (part of lowering).

At fp16 the quantize stage converts a float32 model input to half before the first convolution;
lowered, that convert is a kernel of its own, one launch more than the float32 program. A
generated kernel loads any float type into float arithmetic, so the convolution takes the
float32 tensor instead:

* im2col + GEMM: the im2col reads float32 and writes half columns (`out_type`);
* the direct kernel: it reads float32 and the weights widened to float32 (a constant, converted
  once at compile time), and a one-line epilogue narrows the result to half (fuse_ops composes a
  bias / activation consumer after it).

Only a convert whose one user is the convolution, between float types, qualifies.
"""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.passes.fusion_helpers import new_submodule
from migx_explore.compiler.shape import Shape

from ..ops import inner_op, split_inputs

_VIEWS = ("multibroadcast", "broadcast", "reshape", "transpose", "squeeze", "unsqueeze")


def _is_float(t: str) -> bool:
    return dtypes.dtype(t).is_float


def converted_source(x: Instruction, user: Instruction) -> Instruction | None:
    """The float tensor `x` converts, when x is a lowered kernel doing only that conversion (one
    convert, between float types) and `user` is its only user; else None."""
    if x.name != "gpu::precompile_op" or list(x.outputs) != [user] or x.op["outputs"] != 1:
        return None
    inner = inner_op(x.op["op"])
    own = split_inputs(x.op, list(x.inputs))[0]
    if len(own) != 1:
        return None
    if inner.name == "pointwise" and len(x.module_inputs) == 1:
        body = [i for i in x.module_inputs[0] if not i.is_param() and not i.is_return()]
        if len(body) != 1 or body[0].name != "convert":
            return None
    elif inner.name != "convert" or x.module_inputs:
        return None
    src = own[0]
    if not (_is_float(src.shape.type) and _is_float(x.shape.type)) or src.shape.lens != x.shape.lens:
        return None
    return src


def widened_constant(m: Module, before: Instruction, w: Instruction, t: str) -> Instruction | None:
    """`w`, a literal or views of one, as type `t` through the same views; None otherwise."""
    views, src = [], w
    while src.name in _VIEWS and len(src.inputs) == 1:
        views.append(src)
        src = src.inputs[0]
    if not src.is_literal():
        return None
    out = m.add_literal(np.asarray(src.literal.data, dtype=dtypes.np_dtype(t)))
    for v in reversed(views):
        out = m.insert_instruction(before, v.op, [out])
    return out


def narrowing_epilogue(m: Module, src_type: str, out_type: str) -> Module:
    """x0 (src_type) -> convert to out_type: the direct convolution's epilogue."""
    epi = new_submodule(m.program, "main:epilogue")
    x0 = epi.add_parameter("x0", Shape.scalar(src_type))
    epi.add_return([epi.add_instruction(Op("convert", target_type=out_type), [x0])])
    return epi
