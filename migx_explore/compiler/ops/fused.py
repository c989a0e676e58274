"""Ops that carry a submodule: `pointwise` (a fused elementwise kernel), `fused_reduce` and `group`.

A pointwise submodule has scalar-shaped params x0, x1, ... (bound to the op's inputs in order) and
ends in @return; it is evaluated on whole tensors, since every op inside is elementwise. A
fused_reduce submodule has params with the real input shapes and contains reduce ops. A `group`
submodule (MIGraphX op::group) is any subgraph kept together for one kernel, its `tag` saying
which kind (fuse_attention makes `group[tag=attention]`); its params have the input lens.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A, norm_axes, pointwise_shape


def _single_module(op_name: str, mods) -> object:
    if len(mods) != 1:
        raise ShapeError(f"{op_name}: needs exactly one submodule, got {len(mods)}")
    return mods[0]


def _pointwise_shape(op, s, mods):
    sub = _single_module("pointwise", mods)
    # Fusion builds params as the body's leading run; counting that run keeps a shape check O(inputs)
    # while a long chain grows one body (the full scan is only for the error case).
    n, ins = 0, sub.first
    while ins is not None and ins.is_param():
        n, ins = n + 1, ins.next
    params = sub.params() if n != len(s) else None
    if params is not None and len(params) != len(s):
        raise ShapeError(f"pointwise: submodule {sub.name} takes {len(params)} inputs, given {len(s)}")
    outs = sub.output_shapes()
    if not outs:
        raise ShapeError(f"pointwise: submodule {sub.name} has no outputs")
    shapes = [pointwise_shape("pointwise", s, o.type) for o in outs]
    return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


def _fit(r: np.ndarray, lens: tuple[int, ...]) -> np.ndarray:
    """The body's result at the op's lens: scalar params are {1}-shaped, so a rank-0 output comes
    back with one element in a 1-D array (reshape), and constants come back unbroadcast."""
    if r.ndim > len(lens) and r.size == int(np.prod(lens)):
        return r.reshape(lens)
    return np.broadcast_to(r, lens)


def _pointwise_compute(op, args, out, run):
    sub = run.ins.module_inputs[0]
    res = run(sub, list(args), check_shapes=False)
    subs = out.sub_shapes if out.is_tuple else (out,)
    vals = [_fit(np.asarray(r), sh.lens) for r, sh in zip(res, subs)]
    return tuple(vals) if out.is_tuple else vals[0]


defop(
    "pointwise",
    _pointwise_shape,
    _pointwise_compute,
    nargs=(1, -1),
    doc="A fused elementwise kernel; its body is the submodule (multiple returns give a tuple).",
    gpu=GpuCode.kernel("pointwise"),
    made_by="fuse_pointwise",
)


def _fused_reduce_shape(op, s, mods):
    sub = _single_module("fused_reduce", mods)
    params = sub.params()
    if len(params) != len(s):
        raise ShapeError(f"fused_reduce: submodule {sub.name} takes {len(params)} inputs, given {len(s)}")
    for p, x in zip(params, s):
        if p.shape.lens != x.lens or p.shape.type != x.type:
            raise ShapeError(
                f"fused_reduce: input {list(x.lens)} does not match submodule param {p.param_name}: {p.shape}"
            )
    outs = [Shape.of(o.type, o.lens) for o in sub.output_shapes()]
    # Inputs may have lower rank (a broadcast inside the submodule widens them), so the reduced
    # axes are checked against the rank of what the submodule produces.
    norm_axes(op["axes"], max(o.ndim for o in outs), "fused_reduce")
    return outs[0] if len(outs) == 1 else Shape.tuple_of(outs)


def _fused_reduce_compute(op, args, out, run):
    sub = run.ins.module_inputs[0]
    res = run(sub, list(args), check_shapes=True)
    return res[0] if len(res) == 1 else tuple(res)


defop(
    "fused_reduce",
    _fused_reduce_shape,
    _fused_reduce_compute,
    attrs=[A("axes", "ints", (), show=True)],
    traits={"reduce"},
    nargs=(1, -1),
    doc="A reduction fused with elementwise producers/consumers; body in the submodule.",
    gpu=GpuCode.kernel("reduce"),
    made_by="fuse_reduce",
)


def _group_shape(op, s, mods):
    sub = _single_module("group", mods)
    params = sub.params()
    if len(params) != len(s):
        raise ShapeError(f"group: submodule {sub.name} takes {len(params)} inputs, given {len(s)}")
    for p, x in zip(params, s):
        if p.shape.lens != x.lens or p.shape.type != x.type:
            raise ShapeError(
                f"group: input {x.type}{list(x.lens)} does not match submodule param {p.param_name}: {p.shape}"
            )
    outs = [Shape.of(o.type, o.lens) for o in sub.output_shapes()]
    if not outs:
        raise ShapeError(f"group: submodule {sub.name} has no outputs")
    return outs[0] if len(outs) == 1 else Shape.tuple_of(outs)


defop(
    "group",
    _group_shape,
    _fused_reduce_compute,
    attrs=[A("tag", "str", "", show=True)],
    nargs=(1, -1),
    doc="A subgraph compiled as one kernel (MIGraphX op::group); `tag` names its kind, e.g. attention.",
    gpu=GpuCode.kernel("attention"),
    made_by="fuse_attention",
)
