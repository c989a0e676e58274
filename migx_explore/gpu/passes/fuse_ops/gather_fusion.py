"""Gathers into the kernels that read them (part of fuse_ops).

A transformer starts with an embedding lookup: the token ids are converted to int32
(eliminate_data_type_for_gpu), gathered from the table, then added to a position embedding or
normalized. Lowered, that is a convert kernel, a gather kernel and the consumer: three launches
where one does. Two rules, both on the lowered program:

- `drop_index_convert`: the gather kernel reads its indices in any integer type (it widens
  them to 64 bits), so an integer -> integer convert whose only readers are gathers' indices
  goes: the gathers read the convert's source.
- `fuse_gather`: a gather whose result is an own input of pointwise or reduction kernels is
  read by those kernels through the indices (the kernel op's `gathers` attribute; codegen
  gather_load.py), and the gather kernel goes. When other instructions read the gathered
  tensor too (a residual GEMM), one kernel with a body (pointwise, fused_reduce) writes it as
  an extra output, which they read instead. MIGraphX has no such fusion; it is torch.compile's
  embedding + add + norm kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from migx_explore.compiler import dtypes
from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Op
from migx_explore.compiler.passes.fusion_helpers import copy_body
from migx_explore.compiler.shape import Shape

from ...codegen import EPILOGUE_REDUCTIONS, GATHER_FAMILIES, CodegenUnsupported, generate, kernel_family
from ...codegen.reduce import synthesize
from ...ops import gather_indices, inner_op, op_text, split_inputs


def _kernel(ins: Instruction) -> bool:
    return ins.name == "gpu::precompile_op"


def _plain_gather(ins: Instruction) -> bool:
    """A lowered gather kernel with nothing fused into it."""
    return (
        _kernel(ins)
        and not ins.module_inputs
        and ins.op["outputs"] == 1
        and not ins.op["gathers"]
        and inner_op(ins.op["op"]).name == "gather"
    )


def _integer(t: str) -> bool:
    return t != "bool" and dtypes.dtype(t).is_integral


def _converted_index(x: Instruction) -> Instruction | None:
    """The integer tensor `x` converts to another integer type, when `x` is a kernel doing only
    that (a lone convert, or a pointwise body that is one)."""
    if not _kernel(x) or x.op["outputs"] != 1 or x.op["gathers"] or x.shape.is_tuple:
        return None
    own, extras, _ = split_inputs(x.op, list(x.inputs))
    if len(own) != 1 or extras:
        return None
    inner = inner_op(x.op["op"])
    if inner.name == "pointwise" and len(x.module_inputs) == 1:
        body = [i for i in x.module_inputs[0] if not i.is_param() and not i.is_return()]
        if len(body) != 1 or body[0].name != "convert" or x.module_inputs[0].output_instructions() != body:
            return None
    elif inner.name != "convert" or x.module_inputs:
        return None
    src = own[0]
    if src.shape.lens != x.shape.lens or not (_integer(src.shape.type) and _integer(x.shape.type)):
        return None
    return src


def drop_index_convert(m: Module, g: Instruction) -> bool:
    """gather(table, convert(idx)) -> gather(table, idx) where every reader of the convert is a
    gather's index (the gather kernel widens any integer index itself)."""
    if not _plain_gather(g):
        return False
    x = g.inputs[1]
    src = _converted_index(x)
    if src is None or not all(_plain_gather(u) and u.inputs[1] is x and u.inputs[0] is not x for u in x.outputs):
        return False
    for u in list(x.outputs):
        with m.program.provenance([u, x]):
            new = m.insert_instruction(u, u.op, [u.inputs[0], src, *u.inputs[2:]])
        m.replace_all_uses(u, new)
        m.remove_instruction(u)
    m.remove_instruction(x)
    return True


def _reader(c: Instruction, g: Instruction) -> bool:
    """`c` is a kernel whose generator can read its input `g` through the gather's indices:
    a pointwise or reduction kernel reading g as an own input only (not as an epilogue's)."""
    if not _kernel(c) or kernel_family(inner_op(c.op["op"]).name) not in GATHER_FAMILIES:
        return False
    own, extras, outs = split_inputs(c.op, list(c.inputs))
    return g in own and g not in extras and g not in outs


@dataclass
class _Kernel:
    """A kernel op about to be rebuilt: its op, own and epilogue inputs, module inputs."""

    op: Op
    own: list[Instruction]
    extras: list[Instruction]
    mods: list[Module]

    @staticmethod
    def of(c: Instruction) -> _Kernel:
        own, extras, _ = split_inputs(c.op, list(c.inputs))
        return _Kernel(c.op, own, extras, list(c.module_inputs))


def _with_gather(
    m: Module, c: Instruction, g: Instruction, k: _Kernel, extra_out: bool, read: _Read | None = None
) -> Instruction:
    """Kernel `k` (c's, or a rewrite of it) reading `g` through its indices, inserted before `c`
    (with g's buffer as an extra output when `extra_out`); `read`: c reads a view of g."""
    outs = split_inputs(c.op, list(c.inputs))[2]
    x_in, idx = (read.view, read.indices) if read else (g, g.inputs[1])
    table = g.inputs[0]
    axis = inner_op(g.op["op"])["axis"]
    pairs = list(k.op["gathers"])
    indices = gather_indices(c.op, list(c.inputs))
    for j, x in enumerate(k.own):
        if x is x_in:
            pairs += [j, axis]
            indices.append(idx)
    own = [table if x is x_in else x for x in k.own]
    if extra_out:
        outs = [*outs, g.inputs[-1]]
    op = k.op.with_(gathers=pairs, outputs=len(outs))
    with m.program.provenance([c, g]):
        return m.insert_instruction(c, op, [*own, *k.extras, *indices, *outs], k.mods)


@dataclass
class _Read:
    """A reader of a view of a gather: it reads the view as gather(table, indices)."""

    reader: Instruction
    view: Instruction
    index_op: Op
    indices: Instruction | None = None  # the index view, once inserted


# Views of a gather's result that are a gather themselves, with a view of the indices.
VIEW_OPS = ("multibroadcast", "reshape", "squeeze", "unsqueeze")


def _index_view(g: Instruction, v: Instruction) -> Op | None:
    """The view of g's indices that gathers v (a view of g) from g's table directly: v keeps the
    table's axes before and after the gathered one, and changes or broadcasts only the index
    axes (a decode step's position row broadcast to the batch)."""
    table, idx = g.inputs[0].shape, g.inputs[1].shape
    axis = inner_op(g.op["op"])["axis"]
    tail = table.ndim - axis - 1
    lens = v.shape.lens
    keeps = lens[:axis] == table.lens[:axis] and lens[len(lens) - tail :] == table.lens[axis + 1 :]
    if len(lens) < axis + tail or not keeps:
        return None
    mid = lens[axis : len(lens) - tail]
    if v.name == "multibroadcast":
        # right-aligned: new leading axes are index axes only when the gathered axis is the first
        if axis and len(lens) != g.shape.ndim:
            return None
        if len(mid) >= idx.ndim and all(i in (1, j) for i, j in zip(reversed(idx.lens), reversed(mid))):
            return Op("multibroadcast", out_lens=list(mid))
        return None
    if math.prod(mid) == idx.elements() and idx.standard():  # row-major: the prefix and suffix stay
        return Op("reshape", dims=list(mid))
    return None


def _view_read(g: Instruction, v: Instruction) -> _Read | None:
    """How the one reader of view `v` of g reads it through g's table, if it can."""
    if v.name not in VIEW_OPS or len(v.inputs) != 1 or len(v.outputs) != 1 or not _reader(v.outputs[0], v):
        return None
    op = _index_view(g, v)
    return _Read(v.outputs[0], v, op) if op is not None else None


def _returning_input(ctx, m: Module, c: Instruction, g: Instruction) -> _Kernel | None:
    """c as a kernel with a body that also returns its input `g`: c's own body (a copy), or a
    layernorm's synthesized one (with its epilogue) as a fused_reduce; None for other kernels."""
    inner = inner_op(c.op["op"])
    k = _Kernel.of(c)
    dst = ctx.create_module(ctx.unique_module_name(f"{m.name}:gather"))
    dst.bypass = True
    if inner.name in ("pointwise", "fused_reduce") and len(c.module_inputs) == 1:
        src = c.module_inputs[0]
        dst.bypass = src.bypass
        params = [dst.add_parameter(p.param_name, p.shape) for p in src.params()]
        outs = copy_body(src, dst, {p.id: q for p, q in zip(src.params(), params)})
        dst.add_return([*outs, params[k.own.index(g)]])
        return _Kernel(k.op, k.own, k.extras, [dst])
    if inner.name not in EPILOGUE_REDUCTIONS or len(c.module_inputs) > 1:
        m.program.remove_module(dst.name)
        return None
    # layernorm_fusion's construction: the synthesized reduction, then the epilogue (x0 = its result)
    body, axes = synthesize(inner, [x.shape for x in k.own])
    ins = k.own + k.extras
    params = [dst.add_parameter(f"x{j}", Shape.of(x.shape.type, x.shape.lens)) for j, x in enumerate(ins)]
    value = copy_body(body, dst, {p.id: params[j] for j, p in enumerate(body.params())})[0]
    if c.module_inputs:
        value = dst.add_instruction(Op("pointwise"), [value, *params[len(k.own) :]], [c.module_inputs[0]])
    dst.add_return([value, params[k.own.index(g)]])
    op = Op("gpu::precompile_op", op=op_text(Op("fused_reduce", axes=axes)), ninputs=-1, outputs=1)
    return _Kernel(op.with_(gathers=k.op["gathers"]), ins, [], [dst])


def _tuple_users(m: Module, c: Instruction, new: Instruction) -> None:
    """Readers of single-output `c` read element 0 of `new` (a tuple now)."""
    if c.shape.is_tuple:
        m.replace_all_uses(c, new)
        return
    first = m.insert_instruction(c, Op("get_tuple_elem", index=0), [new])
    m.replace_all_uses(c, first)


def _generates(m: Module, new: Instruction) -> bool:
    """Whether the generators write a kernel for `new`; if not, `new` is removed again."""
    try:
        generate(new)
    except CodegenUnsupported:
        m.remove_instruction(new)
        return False
    return True


def _fuse_everywhere(m: Module, g: Instruction, readers: list[Instruction], viewed: list[_Read]) -> bool:
    """Every user of g reads it (or its view) through the table: g goes. False (nothing changed)
    when a generator refuses one of them."""
    news: list[Instruction] = []
    for r in viewed:
        r.indices = m.insert_instruction(r.reader, r.index_op, [g.inputs[1]])
    plan = [(c, None) for c in readers] + [(r.reader, r) for r in viewed]
    for c, r in plan:
        new = _with_gather(m, c, g, _Kernel.of(c), extra_out=False, read=r)
        if not _generates(m, new):
            for n in news + [v.indices for v in viewed]:
                m.remove_instruction(n)
            return False
        news.append(new)
    for (c, r), new in zip(plan, news):
        m.replace_all_uses(c, new)
        m.remove_instruction(c)
        if r is not None:
            m.remove_instruction(r.view)
    m.remove_instruction(g)
    return True


def fuse_gather(m: Module, g: Instruction, ctx) -> bool:
    """Read gather `g` in the kernels that use it; False when it stays a kernel of its own."""
    if not _plain_gather(g) or not g.outputs:
        return False
    users = list(dict.fromkeys(g.outputs))
    readers = [u for u in users if _reader(u, g)]
    viewed = [r for r in (_view_read(g, u) for u in users if u not in readers) if r is not None]
    if len(readers) + len(viewed) == len(users):
        if _fuse_everywhere(m, g, readers, viewed):
            return True
    if not readers:
        return False
    # Others read the gathered tensor too: the first reader with a body writes it for them.
    order = m.index_of()
    for c in sorted(readers, key=lambda u: order[u.id]):
        if any(order[u.id] < order[c.id] for u in users if u is not c):
            break  # a reader before c would read the tensor before c writes it
        k = _returning_input(ctx, m, c, g)
        if k is None:
            continue
        new = _with_gather(m, c, g, k, extra_out=True)
        if not _generates(m, new):
            m.program.remove_module(k.mods[0].name)
            continue
        n_out = len(new.module_inputs[0].output_instructions())
        gathered = m.insert_instruction(c, Op("get_tuple_elem", index=n_out - 1), [new])
        _tuple_users(m, c, new)
        m.remove_instruction(c)
        m.replace_all_uses(g, gathered)
        m.remove_instruction(g)
        return True
    return False
