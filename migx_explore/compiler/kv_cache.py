"""kv_cache_bucket: a KV-cache decoder's dynamic program -> a static program for one shape bucket
that reads and appends to a preallocated cache in place.

split_single_dyn_dim (MIGraphX's semantics) gives one static submodule per past length P, and a
program specialised to P is right only for P: the decoder derives its positions and its causal
mask from the cache's shape. A decode loop would then compile and capture a new program at every
step. This transformation instead makes P a runtime value and the shapes static per bucket:

    past_key_0 [1, H, P, Dh] (dynamic)   ->  cache_past_key_0 [1, H, max_len, Dh]   (one buffer, kept)
                                             past_len         [1] int64            (runtime P)
    dimensions_of(past_key_0)            ->  [1, H, 0, Dh] + past_len * [0, 0, 1, 0]
    concat(past_key_0, k_new, axis=2)    ->  w = concat_past_present[axis=2](k_new, past_len, cache)
                                             slice[axes={2}, starts={0}, ends={bucket}](w)   (a view)
    dimensions_of / range over that view ->  literals (static length `bucket`)

so the attention runs over the first `bucket` cache rows with the new K/V written at rows
P..P+T-1 (no copy of the past); rows at and beyond P + T hold zeros or stale entries, and the
model's own causal mask (key index <= query position P + t) hides them. The presents are not
returned: the cache buffers hold them (`return_cache=True` returns the updated caches too, for the
reference evaluator, where values are not updated in place).

Not a pass of the five pipelines: it makes a new program per bucket from the dynamic one, which
the GPU decoder (gpu/decode.py) and the reference decoder (migx_explore/decode.py) then compile.
"""

from __future__ import annotations

import numpy as np

from .errors import MigxError
from .ir import Instruction, Program
from .op import Op
from .ops.dynamic_values import DYNAMIC_VALUE_OPS, static_form
from .passes.split_single_dyn_dim import shape_computations
from .shape import Shape

PAST_LEN = "past_len"


def cache_name(past: str) -> str:
    return f"cache_{past}"


def dynamic_pasts(program: Program) -> dict[str, int]:
    """The params with a non-fixed dim (the pasts) and that axis; one shared axis per param."""
    out = {}
    for p in program.main.params():
        dd = p.shape.dyn_dims
        loose = [k for k, d in enumerate(dd or ()) if not d.is_fixed]
        if len(loose) > 1:
            raise MigxError(f"kv_cache_bucket: param {p.param_name} has {len(loose)} dynamic dims; one is supported")
        if loose:
            out[p.param_name] = loose[0]
    if not out:
        raise MigxError(
            "kv_cache_bucket: the program has no dynamic past inputs (import it with a range for the "
            "cache length, e.g. input_dims={'P': (0, 255)})"
        )
    return out


def kv_cache_bucket(program: Program, bucket: int, max_len: int, return_cache: bool = False) -> Program:
    """A static program for cache views of length `bucket` over caches of `max_len` (see module doc)."""
    if not 0 < bucket <= max_len:
        raise MigxError(f"kv_cache_bucket: bucket {bucket} must be in 1..{max_len}")
    main = program.main
    pasts = dynamic_pasts(program)
    fold = shape_computations(main)
    out = Program()
    m = out.main
    env: dict[int, Instruction] = {}
    caches: dict[str, Instruction] = {}
    written: dict[int, Instruction] = {}  # concat id -> the in-place write (for return_cache)
    past_len = None
    probe = _BucketProbe(main, pasts, bucket, env)
    for ins in main:
        if ins.is_param():
            env[ins.id] = _bucket_param(m, ins, pasts, max_len, caches)
            if past_len is None:
                past_len = m.add_parameter(PAST_LEN, Shape.of("int64", [1]))
        elif ins.is_literal():
            env[ins.id] = m.add_literal(ins.literal)
        elif ins.is_return():
            break
        elif ins.name == "dimensions_of" and ins.inputs[0].is_param() and ins.inputs[0].param_name in pasts:
            env[ins.id] = _runtime_dims(m, ins, pasts[ins.inputs[0].param_name], past_len)
        elif ins.name == "concat" and ins.inputs[0].is_param() and ins.inputs[0].param_name in pasts:
            env[ins.id], written[ins.id] = _append(m, ins, env, caches[ins.inputs[0].param_name], past_len, bucket)
        elif any(i.is_param() and i.param_name in pasts for i in ins.inputs):
            raise MigxError(
                f"kv_cache_bucket: {ins.name} (#{ins.id}) reads past input "
                f"{next(i.param_name for i in ins.inputs if i.is_param())} other than through "
                "Shape or a Concat with the new entries"
            )
        elif _total_length_shaped(ins) and not (
            ins.name == "range" and all(env[i.id].is_literal() for i in ins.inputs)
        ):
            env[ins.id] = _at_bucket(m, ins, env, probe)
        else:
            args = [env[i.id] for i in ins.inputs]
            env[ins.id] = (
                _fold(m, ins, args)
                if ins.id in fold or ins.name in ("range", "dimensions_of")
                else m.add_instruction(ins.op, args, ins.module_inputs)
            )
    _bucket_outputs(program, out, env, written, return_cache)
    return out


def _bucket_param(m, ins: Instruction, pasts: dict[str, int], max_len: int, caches: dict[str, Instruction]):
    """A past input becomes its cache of `max_len` rows (recorded in `caches`); others stay."""
    name = ins.param_name
    if name not in pasts:
        return m.add_parameter(name, ins.shape)
    lens = [d.max for d in ins.shape.dyn_dims]
    lens[pasts[name]] = max_len
    caches[name] = m.add_parameter(cache_name(name), Shape.of(ins.shape.type, lens))
    return caches[name]


def _bucket_outputs(
    program: Program, out: Program, env: dict[int, Instruction], written: dict[int, Instruction], return_cache: bool
) -> None:
    """The outputs that are not cache appends, then (return_cache) the in-place cache writes,
    with their names."""
    outs = program.main.output_instructions()
    kept = [env[o.id] for o in outs if o.id not in written]
    if return_cache:
        kept += [written[o.id] for o in outs if o.id in written]
    m = out.main
    m.add_return(kept)
    names = getattr(program, "output_names", None) or [f"output_{k}" for k in range(len(outs))]
    out.output_names = [n for n, o in zip(names, outs) if o.id not in written]
    if return_cache:
        out.output_names += [n for n, o in zip(names, outs) if o.id in written]
    out.input_names = [p.param_name for p in m.params()]


def _total_length_shaped(ins: Instruction) -> bool:
    """A runtime-shape op whose output length follows the past length (a Range to P + T, the
    causal mask's ConstantOfShape / Expand to [.., T, P + T]): in a bucket it spans the bucket."""
    if ins.name == "range":
        lo, hi = ins.op["lens"]
        return lo != hi
    if ins.name in DYNAMIC_VALUE_OPS and ins.name != "broadcast_for_dot":
        return ins.op["output_shape"].dynamic_shape
    return False


class _BucketProbe:
    """Values of shape computations with every past at `bucket - T` rows (T: the new entries its
    Concat appends), so that P + T, the length attention runs over, is the bucket. Rows past the
    runtime P + T are hidden by the model's causal mask, as the cache's stale rows are."""

    def __init__(self, main, pasts: dict[str, int], bucket: int, env: dict[int, Instruction]):
        self.env = env  # the bucket program so far: its static shapes and literals
        self.memo: dict[int, np.ndarray] = {}
        self.lens: dict[str, list[int]] = {}
        for ins in main:
            if ins.name == "concat" and ins.inputs[0].is_param() and ins.inputs[0].param_name in pasts:
                p = ins.inputs[0]
                axis = pasts[p.param_name]
                lens = [d.max for d in p.shape.dyn_dims]
                lens[axis] = max(bucket - ins.inputs[1].shape.lens[axis], 0)
                self.lens[p.param_name] = lens

    def value(self, ins: Instruction) -> np.ndarray:
        from .ref import run_instruction

        if ins.id not in self.memo:
            done = self.env.get(ins.id)
            if ins.is_literal() or (done is not None and done.is_literal()):
                v = (ins if ins.is_literal() else done).literal.data
            elif ins.name == "dimensions_of":
                x = ins.inputs[0]
                if x.is_param() and x.param_name in self.lens:
                    lens = self.lens[x.param_name]
                elif x.id in self.env and not self.env[x.id].shape.dynamic_shape:
                    lens = list(self.env[x.id].shape.lens)  # e.g. the present: the bucket's view
                else:
                    raise MigxError(f"kv_cache_bucket: dimensions_of (#{ins.id}) of a dynamic value")
                v = np.asarray(lens[slice(ins.op["start"], ins.op["end"])], np.int64)
            elif ins.is_param() or ins.is_builtin() or ins.op.spec.compute is None:
                raise MigxError(f"kv_cache_bucket: {ins.name} (#{ins.id}) sets a shape from input data")
            else:
                v = np.asarray(run_instruction(ins, [self.value(a) for a in ins.inputs], False))
            self.memo[ins.id] = v
        return self.memo[ins.id]


def _at_bucket(m, ins: Instruction, env, probe: _BucketProbe) -> Instruction:
    if ins.name in ("range", "fill_with_dims"):
        return m.add_literal(np.asarray(probe.value(ins)))
    args = [env[i.id] for i in ins.inputs]
    values = [None] + [probe.value(i) for i in ins.inputs[1:]]
    found = static_form(ins.op, args, values)
    if found is None:
        raise MigxError(f"kv_cache_bucket: {ins.name} (#{ins.id}) has no static form in a bucket")
    op, new_args = found
    return m.add_instruction(op, [a if a is not None else m.add_literal(v) for a, v in zip(new_args, values)])


def _runtime_dims(m, ins: Instruction, axis: int, past_len: Instruction) -> Instruction:
    """dimensions_of a past: its static dims with past_len on the cache axis."""
    x = ins.inputs[0].shape
    lens = np.array([d.max for d in x.dyn_dims], np.int64)
    lens[axis] = 0
    unit = np.zeros_like(lens)
    unit[axis] = 1
    sel = slice(ins.op["start"], ins.op["end"])
    n = len(lens[sel])
    scaled = m.add_instruction(
        Op("mul"), [m.add_instruction(Op("multibroadcast", out_lens=[n]), [past_len]), m.add_literal(unit[sel])]
    )
    return m.add_instruction(Op("add"), [m.add_literal(lens[sel]), scaled])


def _append(m, ins: Instruction, env, cache: Instruction, past_len: Instruction, bucket: int):
    axis = ins.op["axis"]
    if len(ins.inputs) != 2:
        raise MigxError(f"kv_cache_bucket: concat #{ins.id} of a past must take exactly (past, new)")
    new = env[ins.inputs[1].id]
    if new.shape.lens[axis] > bucket:
        raise MigxError(f"kv_cache_bucket: {new.shape.lens[axis]} new entries do not fit a bucket of {bucket}")
    write = m.add_instruction(Op("concat_past_present", axis=axis), [new, past_len, cache])
    view = m.add_instruction(Op("slice", axes=[axis], starts=[0], ends=[bucket]), [write])
    return view, write


def _fold(m, ins: Instruction, args: list[Instruction]) -> Instruction:
    """A shape computation whose inputs became literals is a literal (else it stays an op)."""
    from .ref import run_instruction

    if not all(a.is_literal() for a in args) and not (ins.name == "dimensions_of" and not args[0].shape.dynamic_shape):
        if ins.name == "range" and ins.op["lens"][0] != ins.op["lens"][1]:
            raise MigxError(f"kv_cache_bucket: range #{ins.id} has a length that depends on the runtime past length")
        return m.add_instruction(ins.op, args, ins.module_inputs)
    if ins.name == "dimensions_of":
        return m.add_literal(np.asarray(args[0].shape.lens[slice(ins.op["start"], ins.op["end"])], np.int64))
    tmp = m.add_instruction(ins.op, args)
    value = run_instruction(tmp, [a.literal.data for a in args], False)
    m.remove_instruction(tmp)
    return m.add_literal(np.asarray(value))
