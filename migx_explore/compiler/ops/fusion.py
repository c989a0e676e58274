"""Ops the fusion passes create, besides `pointwise` and `fused_reduce` (fused.py):

fused_concat        concat whose inputs and consumer are pointwise submodules (fuse_concat)
split_fused_reduce  the reduction half of a large fused_reduce, spread over many workgroups
                    that accumulate into the output (`assign`: assign_add); split_reduce
layernorm           (x - mean) / sqrt(var + epsilon) over the last axis (MIGraphX gpu::prelayernorm)
add_layernorm       layernorm(a + b) (MIGraphX gpu::preadd_layernorm)
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A, norm_axes, norm_axis, pointwise_shape, same_lens, same_type


# --- fused_concat -------------------------------------------------------------------------------
def _concat_groups(op, inputs: list, mods) -> tuple[list[list], list]:
    """Split the op's inputs into one group per input module, then the post module's extras."""
    if len(mods) < 2:
        raise ShapeError(f"fused_concat: needs at least one input module and a post module, got {len(mods)}")
    groups, k = [], 0
    for m in mods[:-1]:
        n = len(m.params())
        if n == 0 or k + n > len(inputs):
            raise ShapeError(f"fused_concat: module {m.name} takes {n} inputs; only {len(inputs) - k} left")
        groups.append(inputs[k : k + n])
        k += n
    extras = inputs[k:]
    if len(extras) != len(mods[-1].params()) - 1:
        raise ShapeError(
            f"fused_concat: post module {mods[-1].name} takes {len(mods[-1].params())} params "
            f"(the concat result last), given {len(extras)} extra inputs"
        )
    return groups, extras


def _fused_concat_shape(op, s, mods):
    groups, extras = _concat_groups(op, s, mods)
    pieces = [pointwise_shape("fused_concat", g, m.output_shapes()[0].type) for g, m in zip(groups, mods)]
    same_type("fused_concat", pieces)
    nd = pieces[0].ndim
    axis = norm_axis(op["axis"], nd, "fused_concat")
    for p in pieces[1:]:
        if p.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(p.lens, pieces[0].lens)) if i != axis):
            raise ShapeError(
                f"fused_concat: piece {list(p.lens)} does not match {list(pieces[0].lens)} off axis {axis}"
            )
    lens = list(pieces[0].lens)
    lens[axis] = sum(p.lens[axis] for p in pieces)
    for e in extras:
        if list(e.lens) != lens:
            raise ShapeError(f"fused_concat: post input {list(e.lens)} differs from the concat result {lens}")
    outs = mods[-1].output_shapes()
    if not outs:
        raise ShapeError("fused_concat: the post module returns nothing")
    if len(outs) == 1:
        return Shape.of(outs[0].type, lens)
    return Shape.tuple_of([Shape.of(o.type, lens) for o in outs])  # e.g. the concat and its convert


def _fused_concat_compute(op, args, out, run):
    mods = run.ins.module_inputs
    groups, extras = _concat_groups(op, list(args), mods)
    pieces = []
    for g, m in zip(groups, mods):
        r = np.asarray(run(m, list(g), check_shapes=False)[0])
        pieces.append(np.broadcast_to(r, np.broadcast_shapes(*[np.shape(x) for x in g])))
    cat = np.concatenate(pieces, axis=norm_axis(op["axis"], pieces[0].ndim, "fused_concat"))
    res = run(mods[-1], list(extras) + [cat], check_shapes=False)
    if not out.is_tuple:
        return np.broadcast_to(np.asarray(res[0]), out.lens)
    return tuple(np.broadcast_to(np.asarray(r), o.lens) for r, o in zip(res, out.sub_shapes))


defop(
    "fused_concat",
    _fused_concat_shape,
    _fused_concat_compute,
    attrs=[A("axis", "int", 0, show=True)],
    nargs=(1, -1),
    doc="concat of pointwise pieces followed by a pointwise op: modules [piece_0 .. piece_n-1, post]; "
    "the inputs are each piece's inputs in turn, then the post module's extras (its last param "
    "is the concat result).",
    gpu=GpuCode.kernel("fused_concat"),
    made_by="fuse_concat",
)


# --- split_fused_reduce -------------------------------------------------------------------------
def _split_reduce_shape(op, s, mods):
    if len(mods) != 1:
        raise ShapeError(f"split_fused_reduce: needs exactly one submodule, got {len(mods)}")
    sub = mods[0]
    params = sub.params()
    if len(params) != len(s):
        raise ShapeError(f"split_fused_reduce: submodule {sub.name} takes {len(params)} inputs, given {len(s)}")
    for p, x in zip(params, s):
        if p.shape.lens != x.lens or p.shape.type != x.type:
            raise ShapeError(f"split_fused_reduce: input {list(x.lens)} does not match param {p.param_name}")
    norm_axes(op["axes"], s[0].ndim, "split_fused_reduce")
    outs = [Shape.of(o.type, o.lens) for o in sub.output_shapes()]
    return outs[0] if len(outs) == 1 else Shape.tuple_of(outs)


def _split_reduce_compute(op, args, out, run):
    # Each workgroup reduces a slice and `assign`s into the output; the sum is the same value.
    res = run(run.ins.module_inputs[0], list(args), check_shapes=True)
    return res[0] if len(res) == 1 else tuple(res)


defop(
    "split_fused_reduce",
    _split_reduce_shape,
    _split_reduce_compute,
    attrs=[A("axes", "ints", (), show=True), A("assign", "str", "assign_add", choices=("assign_add",), show=True)],
    traits={"reduce"},
    nargs=(1, -1),
    doc="The sum-reduction part of a large fused_reduce, split across workgroups that accumulate "
    "atomically into the output (results are reduce_sums, a tuple if several).",
    gpu=GpuCode.kernel("reduce"),
    made_by="split_reduce",
)


# --- layernorm ----------------------------------------------------------------------------------
def _layernorm(x: np.ndarray, eps: float, axis: int) -> np.ndarray:
    acc = x.astype(np.float32) if dtypes.is_low_float(x.dtype) else x
    mean = np.mean(acc, axis=axis, keepdims=True)
    d = acc - mean
    var = np.mean(d * d, axis=axis, keepdims=True)
    return (d / np.sqrt(var + np.asarray(eps, acc.dtype))).astype(x.dtype)


def _ln_shape(op, s, m):
    t = same_type(op.name, s)
    if op.name == "add_layernorm":
        same_lens(op.name, s)
    norm_axis(op["axis"], s[0].ndim, op.name)
    return Shape.of(t, s[0].lens)


_LN_ATTRS = [A("epsilon", "float", 1e-12, show=True), A("axis", "int", -1)]

defop(
    "layernorm",
    _ln_shape,
    lambda op, a, out, run: _layernorm(a[0], op["epsilon"], norm_axis(op["axis"], a[0].ndim, "layernorm")),
    attrs=_LN_ATTRS,
    nargs=1,
    doc="(x - mean) / sqrt(variance + epsilon) over `axis` (MIGraphX gpu::prelayernorm; scale and bias "
    "stay separate pointwise ops).",
    gpu=GpuCode.kernel("reduce"),
    made_by="prefuse_ops",
)
defop(
    "add_layernorm",
    _ln_shape,
    lambda op, a, out, run: _layernorm(a[0] + a[1], op["epsilon"], norm_axis(op["axis"], a[0].ndim, "add_layernorm")),
    attrs=_LN_ATTRS,
    nargs=2,
    doc="layernorm(a + b) (MIGraphX gpu::preadd_layernorm).",
    gpu=GpuCode.kernel("reduce"),
    made_by="prefuse_ops",
)
