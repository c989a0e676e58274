"""Control flow: If and Loop become ops carrying submodules (the explorer draws them as nested
clusters and the reference evaluator steps into them); Scan is unrolled at import.

Values never cross modules in this IR, so the outer values a body reads (ONNX lets subgraphs
use any name in scope) become explicit inputs bound to extra params of the submodule, in the
same order for every branch. Outer values known at import time (initializers, folded
constants) are copied into the submodule as literals instead, so shape-like operands inside a
body (a Reshape's shape) stay constant.

- If with a constant condition imports only the chosen branch, inline (MIGraphX's parse_if does
  the same).
- Loop needs its trip count at import (an input fed at run time raises ConstantInputRequired);
  scan outputs have that many rows, and rows past an early exit are zeros (MIGraphX pads the
  same way). Without a trip count it runs until its condition turns false, as ONNX Runtime does
  (MIGraphX stops at max_loop_iterations, 10 by default; we do not: only the work budget bounds
  it, with an error naming the loop), and its scan outputs have as many rows as iterations ran. A body that needs its
  iteration number as a constant (a Slice at `i`) is unrolled at import instead, with the same
  semantics (a `where` keeps values once the condition turns false).
- Scan's sequence length is a static dim, so the body is imported once per step (opset 8's
  batched form: once per step and batch entry): plain ops, nothing left to run on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx

from ..errors import MigxError
from ..ir import Instruction, Module
from ..op import Op
from ..shape import Shape
from .context import ConstantInputRequired, param_name
from .registry import register
from .tensors import to_array

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result

MAX_SCAN_ROWS = 1 << 16  # per-iteration outputs are stacked to the trip count: keep that allocatable
MAX_UNROLL = 256  # a body that needs its iteration number as a constant is unrolled up to this many times


def outer_names(graph: onnx.GraphProto) -> list[str]:
    """Names a graph (or any subgraph nested in it) reads but does not define, in first-use order."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    out: dict[str, None] = {}
    for node in graph.node:
        for n in node.input:
            if n and n not in defined:
                out[n] = None
        for a in node.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for g in subs:
                for n in outer_names(g):
                    if n not in defined:
                        out[n] = None
        defined.update(o for o in node.output if o)
    for o in graph.output:
        if o.name not in defined:
            out[o.name] = None
    return list(out)


def _graph_attr(ctx: NodeContext, key: str) -> onnx.GraphProto:
    a = ctx.attrs.get(key)
    if a is None or a.type != onnx.AttributeProto.GRAPH:
        raise ctx.bad_attr(key, "a graph attribute is required")
    return a.g


def _unique(taken: set[str], name: str) -> str:
    base, k = param_name(name), 0
    out = base
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


def _bind_initializers(ctx: NodeContext, module: Module, graph: onnx.GraphProto, env: dict) -> None:
    for t in graph.initializer:
        env[t.name] = module.add_literal(to_array(t, f"node {ctx.name} subgraph initializer {t.name!r}"))


def captured_inputs(ctx: NodeContext, graphs: list[onnx.GraphProto]) -> list[str]:
    """Outer names the graphs read whose values are not constants (they become module inputs)."""
    names: dict[str, None] = {}
    for g in graphs:
        for n in outer_names(g):
            if n not in ctx.env:
                raise ctx.error(f"subgraph {g.name!r} reads {n!r}, which is not defined in scope")
            if ctx.const(ctx.env[n]) is None:
                names[n] = None
    return list(names)


def import_body(
    ctx: NodeContext, graph: onnx.GraphProto, prefix: str, formal: list[tuple[str, Shape]], captured: list[str]
) -> Module:
    """A submodule for `graph`: params for its formal inputs, then for the captured outer values."""
    program = ctx.module.program
    module = program.create_module(program.unique_module_name(prefix))
    env: dict[str, Instruction] = {}
    taken: set[str] = set()
    for name, shape in formal:
        env[name] = module.add_parameter(_unique(taken, name), shape)
    for name in captured:
        outer = ctx.env[name]
        env[name] = module.add_parameter(_unique(taken, name), Shape.of(outer.shape.type, outer.shape.lens))
    for name in outer_names(graph):  # constants: copied in as literals
        if name not in env:
            env[name] = module.add_literal(np.asarray(ctx.const(ctx.env[name])))
    _bind_initializers(ctx, module, graph, env)
    order = ctx.importer.subgraph_order(graph, set(env))
    ctx.importer.import_nodes(module, order, env, ctx.opset)
    module.add_return([env[o.name] for o in graph.output])
    return module


def _with_modules(ctx: NodeContext, op: Op, inputs: list[Instruction], mods: list[Module]) -> list[Instruction]:
    try:
        ins = ctx.module.add_instruction(op, inputs, mods)
    except MigxError as e:
        raise ctx.error(str(e)) from None
    if not ins.shape.is_tuple:
        return [ins]
    return [ctx.add("get_tuple_elem", [ins], index=i) for i in range(len(ins.shape.sub_shapes))]


def _inline(ctx: NodeContext, graph: onnx.GraphProto, bindings: dict[str, Instruction]) -> list[Instruction]:
    """Import `graph` into the current module (names in scope visible, its own names local)."""
    env = dict(ctx.env)
    env.update(bindings)
    _bind_initializers(ctx, ctx.module, graph, env)
    ctx.importer.import_nodes(ctx.module, ctx.importer.subgraph_order(graph, set(env)), env, ctx.opset)
    return [env[o.name] for o in graph.output]


def _formal(ctx: NodeContext, vi: onnx.ValueInfoProto, like: Instruction | None) -> tuple[str, Shape]:
    if like is not None:
        return vi.name, Shape.of(like.shape.type, like.shape.lens)
    raise ctx.error(f"body input {vi.name!r} has no value to take its shape from")


@register("If")
def parse_if(ctx: NodeContext, args: Args) -> Result:
    then_g, else_g = _graph_attr(ctx, "then_branch"), _graph_attr(ctx, "else_branch")
    cond = ctx.const(args[0])
    if cond is not None:
        return _inline(ctx, then_g if bool(np.asarray(cond).reshape(-1)[0]) else else_g, {})
    captured = captured_inputs(ctx, [then_g, else_g])
    then_m = import_body(ctx, then_g, "if_then", [], captured)
    else_m = import_body(ctx, else_g, "if_else", [], captured)
    c = args[0]
    if c.shape.type != "bool":
        c = ctx.convert(c, "bool")
    return _with_modules(ctx, Op("if"), [c, *(ctx.env[n] for n in captured)], [then_m, else_m])


@register("Loop")
def parse_loop(ctx: NodeContext, args: Args) -> Result:
    body = _graph_attr(ctx, "body")
    trip, cond = (args + [None, None])[:2]
    carried = list(args[2:])
    if trip is None:
        max_iter = -1  # until the condition (the loop op's "no trip count"; the work budget bounds it)
    else:
        max_iter = int(ctx.need_const(trip, "M").reshape(-1)[0])
        max_iter = max(0, min(max_iter, np.iinfo(np.int32).max))
    if cond is None:
        cond = ctx.literal(np.array([True]))
    if any(c is None for c in carried):
        raise ctx.error("every loop-carried input must be given")
    if len(body.input) != 2 + len(carried):
        raise ctx.error(f"body takes {len(body.input)} inputs, expected 2 + {len(carried)} loop-carried")
    if len(body.output) > 1 + len(carried) and max_iter > MAX_SCAN_ROWS:
        raise ctx.error(f"trip count {max_iter} with per-iteration outputs would stack more than {MAX_SCAN_ROWS} rows")
    cond = ctx.add("reshape", [ctx.convert(cond, "bool")], dims=[1])
    captured = captured_inputs(ctx, [body])
    # The iteration number and condition keep the body's declared rank (a scalar, usually).
    formal = [
        (body.input[0].name, Shape.of("int64", _lens(body.input[0]))),
        (body.input[1].name, Shape.of("bool", _lens(body.input[1]))),
    ]
    formal += [_formal(ctx, vi, c) for vi, c in zip(body.input[2:], carried)]
    program = ctx.module.program
    before = set(program.modules)
    try:
        mod = import_body(ctx, body, "loop_body", formal, captured)
    except ConstantInputRequired as e:
        # The body needs the iteration number as a constant (a Slice at `i`, say): unroll instead.
        for name in set(program.modules) - before:
            program.remove_module(name)
        if param_name(body.input[0].name) not in e.params or not 0 <= max_iter <= MAX_UNROLL:
            raise
        return _unroll_loop(ctx, body, max_iter, cond, carried)
    op = Op("loop", max_iterations=max_iter, carried=len(carried))
    return _with_modules(ctx, op, [cond, *carried, *(ctx.env[n] for n in captured)], [mod])


def _unroll_loop(
    ctx: NodeContext, body: onnx.GraphProto, max_iter: int, cond: Instruction, carried: list[Instruction]
) -> list[Instruction]:
    """The loop op's semantics, one body copy per iteration: after the condition turns false the
    carried values stop changing and per-iteration outputs are zeros."""
    n = len(carried)
    active = cond
    scans: list[list[Instruction]] = []
    for i in range(max_iter):
        if ctx.const(active) is not None and not bool(ctx.const(active).reshape(-1)[0]):
            break
        bind = {
            body.input[0].name: ctx.literal(np.array(i, np.int64)),
            body.input[1].name: ctx.add("reshape", [active], dims=list(_lens(body.input[1]))),
        }
        bind.update({vi.name: c for vi, c in zip(body.input[2:], carried)})
        outs = _inline(ctx, body, bind)
        new, ys = outs[1 : 1 + n], outs[1 + n :]
        always = ctx.const(active) is not None  # constant and true here
        carried = new if always else [_where(ctx, active, a, b) for a, b in zip(new, carried)]
        scans.append(ys if always else [_where(ctx, active, y, ctx.scalar_like(0, y)) for y in ys])
        step = ctx.add("reshape", [ctx.convert(outs[0], "bool")], dims=[1])
        active = ctx.add("logical_and", [active, step])
    n_scan = len(body.output) - 1 - n
    if not scans and n_scan:
        raise ctx.error("the loop runs no iteration, so its per-iteration outputs have no shape")
    stacked = []
    for j in range(n_scan):
        rows = [ctx.add("unsqueeze", [s[j]], axes=[0]) for s in scans]
        zero = ctx.scalar_like(0, rows[0])
        rows += [zero] * (max_iter - len(rows))  # iterations the constant condition skipped
        stacked.append(rows[0] if len(rows) == 1 else ctx.add("concat", rows, axis=0))
    return carried + stacked


def _lens(vi: onnx.ValueInfoProto) -> list[int]:
    """A loop body's iteration / condition input: rank 0 unless it declares one element ([1])."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return []
    return [int(d.dim_value) or 1 for d in tt.shape.dim]


def _where(ctx: NodeContext, cond: Instruction, a: Instruction, b: Instruction) -> Instruction:
    return ctx.add("where", [ctx.broadcast_to(ctx.add("reshape", [cond], dims=[1] * a.shape.ndim or [1]), a), a, b])


def _unroll_scan(
    ctx: NodeContext,
    body: onnx.GraphProto,
    states: list,
    xs: list,
    in_axes: list[int],
    in_dirs: list[int],
    out_axes: list[int],
    out_dirs: list[int],
) -> list[Instruction]:
    """Import the body once per step; returns the final states then the stacked scan outputs."""
    in_axes = [a + x.shape.ndim if a < 0 else a for a, x in zip(in_axes, xs)]
    lengths = {x.shape.lens[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise ctx.error(f"scan inputs have different sequence lengths {sorted(lengths)}")
    steps = lengths.pop()
    if steps == 0:
        raise ctx.error("scan over an empty sequence is not supported")
    per_step: list[list[Instruction]] = [[] for _ in out_axes]
    for t in range(steps):
        bind = {vi.name: s for vi, s in zip(body.input, states)}
        for vi, x, axis, rev in zip(body.input[len(states) :], xs, in_axes, in_dirs):
            k = steps - 1 - t if rev else t
            piece = ctx.add("slice", [x], axes=[axis], starts=[k], ends=[k + 1])
            bind[vi.name] = ctx.add("squeeze", [piece], axes=[axis])
        outs = _inline(ctx, body, bind)
        states = outs[: len(states)]
        for j, y in enumerate(outs[len(states) :]):
            per_step[j].append(y)
    results = list(states)
    for j, ys in enumerate(per_step):
        if out_dirs[j]:
            ys = ys[::-1]
        axis = out_axes[j] + ys[0].shape.ndim + 1 if out_axes[j] < 0 else out_axes[j]
        parts = [ctx.add("unsqueeze", [y], axes=[axis]) for y in ys]
        results.append(parts[0] if len(parts) == 1 else ctx.add("concat", parts, axis=axis))
    return results


def _stack(ctx: NodeContext, values: list[Instruction]) -> Instruction:
    parts = [ctx.add("unsqueeze", [v], axes=[0]) for v in values]
    return parts[0] if len(parts) == 1 else ctx.add("concat", parts, axis=0)


def _scan_v8(ctx: NodeContext, args: Args, body: onnx.GraphProto, n_scan: int) -> Result:
    """Opset 8: a leading batch axis on every input and output, scanning axis 1; each batch entry
    runs the body on its own (sequence_lens must be the full length)."""
    lens, rest = args[0], list(args[1:])
    states, xs = rest[: len(rest) - n_scan], rest[len(rest) - n_scan :]
    if lens is not None:
        full = xs[0].shape.lens[1]
        if any(v != full for v in ctx.const_ints(lens, "sequence_lens")):
            raise ctx.error("sequence_lens shorter than the sequence are not supported")
    n_out = len(body.output) - len(states)
    dirs = [int(d) for d in ctx.attr("directions", [0] * n_scan)]
    per_batch = []
    for b in range(xs[0].shape.lens[0]):

        def row(v, b=b):
            return ctx.add("squeeze", [ctx.add("slice", [v], axes=[0], starts=[b], ends=[b + 1])], axes=[0])

        per_batch.append(
            _unroll_scan(
                ctx, body, [row(s) for s in states], [row(x) for x in xs], [0] * n_scan, dirs, [0] * n_out, [0] * n_out
            )
        )
    return [_stack(ctx, list(vals)) for vals in zip(*per_batch)]


@register("Scan")
def parse_scan(ctx: NodeContext, args: Args) -> Result:
    body = _graph_attr(ctx, "body")
    n_scan = int(ctx.attr("num_scan_inputs"))
    if ctx.opset < 9:
        return _scan_v8(ctx, args, body, n_scan)
    states, xs = list(args[: len(args) - n_scan]), list(args[len(args) - n_scan :])
    n_out = len(body.output) - len(states)
    return _unroll_scan(
        ctx,
        body,
        states,
        xs,
        [int(a) for a in ctx.attr("scan_input_axes", [0] * n_scan)],
        [int(d) for d in ctx.attr("scan_input_directions", [0] * n_scan)],
        [int(a) for a in ctx.attr("scan_output_axes", [0] * n_out)],
        [int(d) for d in ctx.attr("scan_output_directions", [0] * n_out)],
    )
