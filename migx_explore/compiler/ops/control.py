"""Control ops that carry submodules: `if`, `loop` and `select_module`.

Values never cross modules in this IR, so an `if` passes what its branches use as explicit
inputs (MIGraphX lets branches read the parent's instructions directly):

    @3 = if(cond, x, w), [then_mod, else_mod] -> ...     both branches take params bound to (x, w)

`select_module` (made by split_single_dyn_dim) runs the one submodule whose parameter shapes match
the runtime inputs; its inputs are the parent's parameters sorted by name and bound to the
submodule's parameters of the same names.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import EvalError, ShapeError
from ..op import GpuCode, defop
from ..shape import DynDim, Shape
from .common import A

UNBOUNDED_LOOP_ROWS = 1 << 16  # the row range a loop without a trip count declares for its per-iteration outputs


def _outputs_shape(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


# --- if -----------------------------------------------------------------------------------------
def _if_shape(op, s, mods):
    if len(mods) != 2:
        raise ShapeError(f"if: needs a then and an else module, got {len(mods)}")
    cond = s[0]
    if cond.type != "bool" or cond.elements() != 1:
        raise ShapeError(f"if: condition must be a single bool, got {cond}")
    args = s[1:]
    outs = []
    for m in mods:
        params = m.params()
        if len(params) != len(args):
            raise ShapeError(f"if: branch {m.name} takes {len(params)} inputs, given {len(args)}")
        for p, a in zip(params, args):
            if p.shape.lens != a.lens or p.shape.type != a.type:
                raise ShapeError(f"if: branch {m.name} param {p.param_name} is {p.shape}, given {a}")
        outs.append([Shape.of(o.type, o.lens) for o in m.output_shapes()])
    if outs[0] != outs[1]:
        raise ShapeError(f"if: branches return different shapes ({mods[0].name}: {outs[0]}, {mods[1].name}: {outs[1]})")
    if not outs[0]:
        raise ShapeError("if: branches return nothing")
    return _outputs_shape(outs[0])


def _if_compute(op, args, out, run):
    then_mod, else_mod = run.ins.module_inputs
    chosen = then_mod if bool(np.asarray(args[0]).reshape(-1)[0]) else else_mod
    res = run(chosen, list(args[1:]), check_shapes=True)
    return tuple(res) if out.is_tuple else res[0]


defop(
    "if",
    _if_shape,
    _if_compute,
    nargs=(1, -1),
    doc="Run the then module if the condition holds, else the else module; the remaining inputs are "
    "bound to each branch's params in order (several returns give a tuple).",
    gpu=GpuCode.host("control flow: the host evaluates the condition and runs one branch"),
)


# --- select_module ------------------------------------------------------------------------------
def _fits(param: Shape, arg: Shape) -> bool:
    if param.type != arg.type or param.ndim != arg.ndim:
        return False
    if arg.dyn_dims is None:
        return param.lens == arg.lens
    return all(d.min <= n <= d.max for n, d in zip(param.lens, arg.dyn_dims))


def _sorted_params(m):
    return sorted(m.params(), key=lambda p: p.param_name)


def _select_shape(op, s, mods):
    out = op["output_dyn_shapes"]
    if not mods:
        raise ShapeError("select_module: needs at least one submodule")
    for m in mods:
        params = _sorted_params(m)
        if len(params) != len(s):
            raise ShapeError(f"select_module: module {m.name} takes {len(params)} inputs, given {len(s)}")
        for p, a in zip(params, s):
            if not _fits(p.shape, a):
                raise ShapeError(f"select_module: module {m.name} param {p.param_name} ({p.shape}) cannot take {a}")
    if not out.is_tuple:
        raise ShapeError("select_module: output_dyn_shapes must be a tuple shape")
    return out


def _select_compute(op, args, out, run):
    for m in run.ins.module_inputs:
        params = _sorted_params(m)
        if all(tuple(np.shape(a)) == p.shape.lens for p, a in zip(params, args)):
            feeds = {p.param_name: a for p, a in zip(params, args)}
            return tuple(run(m, feeds, check_shapes=True))
    got = ", ".join(str(tuple(np.shape(a))) for a in args)
    raise EvalError(f"select_module: no submodule takes inputs of shapes {got}")


defop(
    "select_module",
    _select_shape,
    _select_compute,
    attrs=[A("output_dyn_shapes", "shape", Shape.tuple_of([Shape.scalar("float32")]), show=True)],
    nargs=(1, -1),
    doc="Run the submodule whose parameter shapes match the inputs (parameters bound by sorted name); "
    "returns a tuple of its outputs.",
    gpu=GpuCode.host("picks the static submodule that fits the runtime shapes on the host"),
    made_by="split_single_dyn_dim",
)


# --- loop ---------------------------------------------------------------------------------------
def _loop_shape(op, s, mods):
    if len(mods) != 1:
        raise ShapeError(f"loop: needs exactly one body module, got {len(mods)}")
    body, n = mods[0], op["carried"]
    if s[0].type != "bool" or s[0].elements() != 1:
        raise ShapeError(f"loop: condition must be a single bool, got {s[0]}")
    params = body.params()
    if len(params) >= 2 and (
        params[0].shape.type != "int64"
        or params[1].shape.type != "bool"
        or params[0].shape.elements() != 1
        or params[1].shape.elements() != 1
    ):
        raise ShapeError(
            f"loop: body {body.name} must take the iteration (one int64) and the condition (one "
            f"bool) first, got {params[0].shape} and {params[1].shape}"
        )
    if len(params) != len(s) + 1:
        raise ShapeError(
            f"loop: body {body.name} takes {len(params)} inputs, given iteration, condition and {len(s) - 1} more"
        )
    for p, a in zip(params[2:], s[1:]):
        if p.shape.lens != a.lens or p.shape.type != a.type:
            raise ShapeError(f"loop: body {body.name} param {p.param_name} is {p.shape}, given {a}")
    outs = [Shape.of(o.type, o.lens) for o in body.output_shapes()]
    if len(outs) < 1 + n:
        raise ShapeError(f"loop: body {body.name} returns {len(outs)} values, needs condition + {n} carried")
    for o, a in zip(outs[1 : 1 + n], s[1 : 1 + n]):
        if o.lens != a.lens or o.type != a.type:
            raise ShapeError(f"loop: body {body.name} changes a loop-carried value from {a} to {o}")
    rows = op["max_iterations"]
    if rows < 0:  # until the condition: as many rows as iterations run, known at run time
        scans = [Shape.dynamic(o.type, [DynDim(0, UNBOUNDED_LOOP_ROWS), *o.lens]) for o in outs[1 + n :]]
    else:
        scans = [Shape.of(o.type, (rows, *o.lens)) for o in outs[1 + n :]]
    return _outputs_shape([Shape.of(a.type, a.lens) for a in s[1 : 1 + n]] + scans)


def _loop_compute(op, args, out, run):
    body, n = run.ins.module_inputs[0], op["carried"]
    cond = bool(np.asarray(args[0]).reshape(-1)[0])
    carried, rest = list(args[1 : 1 + n]), list(args[1 + n :])
    subs = out.sub_shapes if out.is_tuple else (out,)
    bounded = op["max_iterations"] >= 0
    scans = [np.zeros(sh.lens, dtype=sh.dtype.np_dtype) if bounded else [] for sh in subs[n:]]
    it_lens, cond_lens = (p.shape.lens for p in body.params()[:2])
    # No trip count: run until the condition turns false; only the work budget (every body
    # instruction spends from it) stops a loop that never ends, with an error saying so.
    for i in range(op["max_iterations"]) if bounded else itertools.count():
        if not cond:
            break
        res = run(
            body, [np.full(it_lens, i, dtype=np.int64), np.full(cond_lens, cond), *carried, *rest], check_shapes=True
        )
        cond = bool(np.asarray(res[0]).reshape(-1)[0])
        carried = list(res[1 : 1 + n])
        for buf, v in zip(scans, res[1 + n :]):
            if bounded:
                buf[i] = v
            else:
                buf.append(np.asarray(v))
    if not bounded:
        scans = [np.stack(b) if b else np.zeros((0, *sh.lens[1:]), sh.dtype.np_dtype) for b, sh in zip(scans, subs[n:])]
    vals = carried + scans
    return tuple(vals) if out.is_tuple else vals[0]


defop(
    "loop",
    _loop_shape,
    _loop_compute,
    nargs=(1, -1),
    gpu=GpuCode.host("control flow: the host runs the body module once per iteration"),
    attrs=[A("max_iterations", "int", 10, show=True), A("carried", "int", 0, show=True)],
    doc="Run the body module while its condition holds, at most max_iterations times (-1: no trip "
    "count, until the condition; per-iteration outputs then have as many rows as iterations ran). Inputs: condition, "
    "the `carried` loop-carried values, then values the body reads; the body takes (iteration, "
    "condition, carried..., reads...) and returns (condition, carried..., per-iteration outputs...). "
    "Outputs: final carried values, then per-iteration outputs stacked to max_iterations rows (rows "
    "after an early exit are zero).",
)
