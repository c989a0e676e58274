"""simplify_algebra finders around broadcasts, concat and split (slices of one value)."""

from __future__ import annotations

from ...ir import Instruction
from ...matcher import any_arg, name, pred
from ...op import Op
from ...ops.common import norm_axis
from ...pattern_rewriter import Rule, replace_value, replace_with_op
from ..rule_helpers import all_static, move_before
from ..simplify_reshapes.concat_rules import ConcatOfSlices

BCASTS = ("broadcast", "multibroadcast")


def is_pointwise_op(ins: Instruction) -> bool:
    return pointwise_op(ins.op)


def pointwise_op(op: Op) -> bool:
    """What is_pointwise_op asks of an instruction's op (its name and traits only)."""
    return (op.has("pointwise") or op.name == "pointwise") and op.name != "layout"


class ConcatSameInput(Rule):
    """concat(x, x, ..., x) along an axis of size 1 -> multibroadcast(x)."""

    name = "find_concat_same_input"

    def pattern(self):
        return name("concat")(
            pred(
                "same_inputs",
                lambda i: len(i.inputs) > 1 and all(x is i.inputs[0] for x in i.inputs),
                "the inputs differ",
            )
        )

    def check(self, m, r):
        ins = r.root
        axis = ins.op["axis"]
        if axis < 0:  # as MIGraphX: a negative axis is left for normalize_ops to make positive first
            return "negative concat axis (not normalized)"
        if ins.inputs[0].shape.lens[axis] != 1:
            return "the repeated input is not of size 1 along the concat axis"
        return lambda: replace_with_op(m, ins, Op("multibroadcast", out_lens=ins.shape.lens), [ins.inputs[0]])


def _const_foldable(group: list[Instruction], k: int, axis: int) -> bool:
    """Concatenating the k-th inputs must not turn broadcast constants into big constants."""
    xs = [g.inputs[k] for g in group]
    if not all(x.can_eval() for x in xs) or all(x.shape.scalar_shape() for x in xs):
        return True
    return not any(axis < x.shape.ndim and x.shape.strides[axis] == 0 for x in xs)


class ConcatOp(Rule):
    """concat(op(a1, b1), op(a2, b2)) with identical pointwise or broadcast ops ->
    op(concat(a1, a2), concat(b1, b2)); runs of equal ops are merged, the rest kept."""

    name = "find_concat_op"

    def pattern(self):
        ok = pred(
            "pointwise_or_broadcast_used_once",
            lambda i: (is_pointwise_op(i) or i.name in BCASTS) and len(i.outputs) == 1,
            "not a pointwise or broadcast op used once",
        )
        return name("concat")(all_static(), any_arg()(ok))

    def check(self, m, r):
        ins = r.root
        axis = norm_axis(ins.op["axis"], ins.shape.ndim, "concat")
        runs: list[list[Instruction]] = []
        for x in ins.inputs:
            if runs and self._same(runs[-1][0], x):
                runs[-1].append(x)
            else:
                runs.append([x])
        plans = [self._merge_plan(run, axis) for run in runs]
        if not any(p is not None for p in plans):
            return "no run of two or more identical mergeable ops"

        def apply():
            args: list[Instruction] = []
            for run, p in zip(runs, plans):
                if p is None:
                    args.extend(run)
                    continue
                op, iaxis = p
                cats = [
                    m.insert_instruction(ins, Op("concat", axis=iaxis), [g.inputs[k] for g in run])
                    for k in range(len(run[0].inputs))
                ]
                args.append(m.insert_instruction(ins, op, cats, run[0].module_inputs))
            if len(args) == 1:
                replace_value(m, ins, args[0])
            else:
                replace_with_op(m, ins, ins.op, args)

        return apply

    @staticmethod
    def _same(a: Instruction, b: Instruction) -> bool:
        return (
            a.op == b.op
            and len(a.inputs) == len(b.inputs)
            and len(a.outputs) == len(b.outputs)
            and [x.name for x in a.module_inputs] == [x.name for x in b.module_inputs]
        )

    @staticmethod
    def _merge_plan(run: list[Instruction], axis: int) -> tuple[Op, int] | None:
        x = run[0]
        if len(run) < 2 or any(len(g.outputs) > 1 for g in run):
            return None
        if not (is_pointwise_op(x) or x.name in BCASTS):
            return None
        if len(x.inputs) >= 3 and sum(not i.can_eval() for i in x.inputs) > 2:
            return None
        op, iaxis = x.op, axis
        total = sum(g.shape.lens[axis] for g in run)
        out_lens = list(x.shape.lens)
        out_lens[axis] = total
        if x.name == "broadcast":
            if x.op["axis"] != axis:
                return None
            op, iaxis = x.op.with_(out_lens=out_lens), 0
        elif x.name == "multibroadcast":
            if any(g.shape.strides[axis] == 0 for g in run):
                return None
            iaxis = axis - (x.shape.ndim - x.inputs[0].shape.ndim)
            if iaxis < 0:
                return None
            op = x.op.with_(out_lens=out_lens)
        for k in range(len(x.inputs)):
            if not _const_foldable(run, k, iaxis):
                return None
            shapes = [g.inputs[k].shape for g in run]
            off = [s.lens[:iaxis] + s.lens[iaxis + 1 :] for s in shapes]
            if any(o != off[0] for o in off) or len({s.type for s in shapes}) > 1:
                return None
        return op, iaxis


class SplitConcat(ConcatOfSlices):
    """MIGraphX's find_split_concat: the same rewrite as simplify_reshapes' find_concat_of_slices."""

    name = "find_split_concat"


def get_splits(ins: Instruction) -> list[Instruction]:
    """Slice users of `ins` that tile it exactly along the same axes, in order (else [])."""
    sl = [u for u in ins.outputs if u.name == "slice"]
    if len(sl) < 2:
        return []
    axes = sl[0].op["axes"]
    if any(u.op["axes"] != axes for u in sl):
        return []
    sl.sort(key=lambda u: tuple(u.op["starts"]))
    if any(s != 0 for s in sl[0].op["starts"]):
        return []
    if any(a.op["ends"] != b.op["starts"] for a, b in zip(sl, sl[1:])):
        return []
    if any(ins.shape.lens[ax] != e for ax, e in zip(axes, sl[-1].op["ends"])):
        return []
    return sl


def _module_body(m) -> tuple:
    """A submodule's computation without its name: ops, input positions (parameters by name),
    shapes and literal values, in order."""
    pos = {ins.id: k for k, ins in enumerate(m)}
    rows = []
    for ins in m:
        lit = None
        if ins.literal is not None:
            data = ins.literal.data
            lit = (data.dtype.str, data.shape, data.tobytes())
        rows.append(
            (
                ins.op,
                tuple(pos[i.id] for i in ins.inputs),
                tuple(_module_body(x) for x in ins.module_inputs),
                ins.shape,
                lit,
            )
        )
    return tuple(rows)


def same_computation(a: Instruction, b: Instruction) -> bool:
    """Same op and, for a fused op (pointwise, ...), submodules computing the same thing (MIGraphX
    compares the modules' contents, not their names)."""
    if a.op != b.op or len(a.module_inputs) != len(b.module_inputs):
        return False
    return all(x is y or _module_body(x) == _module_body(y) for x, y in zip(a.module_inputs, b.module_inputs))


def _member_inputs(root: Instruction, members: list[Instruction]) -> dict[int, int]:
    """For each member (by id), a bitmask (bit k: members[k]) of the members it is computed from,
    transitively. Members are computed from `root`, so one walk over the instructions from root
    to the last member decides every pair: asking "does a reach b?" per pair walked the whole
    graph above b each time, which made find_splits cubic on an unrolled LSTM (a parameter sliced
    per time step, its users spread over every step)."""
    bit: dict[int, int] = {}
    for k, ins in enumerate(members):
        bit[ins.id] = bit.get(ins.id, 0) | (1 << k)
    left = set(bit)
    above: dict[int, int] = {}  # instruction id -> the members it is computed from (nonzero only)
    out: dict[int, int] = {}
    x = root.next
    while x is not None and left:
        mask = 0
        for i in x.inputs:
            mask |= above.get(i.id, 0) | bit.get(i.id, 0)
        if mask:
            above[x.id] = mask
        if x.id in left:
            out[x.id] = mask
            left.discard(x.id)
        x = x.next
    return out


def _spans(groups: list[list[Instruction]]) -> list[int]:
    """Each group's bits in the numbering _member_inputs uses for the groups' members in order."""
    spans, k = [], 0
    for g in groups:
        spans.append(((1 << len(g)) - 1) << k)
        k += len(g)
    return spans


class Splits(Rule):
    """op(slice_1(x)), op(slice_2(x)), ... over slices tiling x -> slice_i(op(x)); a binary op's
    other operands must be constants, concatenated in slice order."""

    name = "find_splits"

    def pattern(self):
        return pred("has_splits", lambda i: len(get_splits(i)) >= 2, "no slices tiling this value")(all_static())

    def check(self, m, r):
        splits = get_splits(r.root)
        groups = self._groups(r.root, splits)
        deps, spans = _member_inputs(r.root, [i for g in groups for i in g]), _spans(groups)
        if any(deps.get(b.id, 0) & (other & ~own) for h, own in zip(groups, spans) for b in h for other in spans):
            return "one group of split users depends on another"
        groups = [g for g in groups if self._fusable(g, splits)]
        if not groups:
            return "the slices do not feed matching fusable ops"
        # Fusing one group rewrites its members into slices in place, and a later group may have
        # picked one of them (a member consuming two splits): fuse only groups still as planned.
        planned = [(g, g[0].op) for g in groups]
        return lambda: [
            self._fuse(m, r.root, g, splits)
            for g, op in planned
            if all(i.alive and i.op == op and s in i.inputs for i, s in zip(g, splits))
        ]

    @staticmethod
    def _groups(root: Instruction, splits: list[Instruction]) -> list[list[Instruction]]:
        fewest = min(splits, key=lambda s: len(s.outputs))
        candidates = []
        for out in fewest.outputs:
            if out.name == "slice":
                continue
            group = []
            for s in splits:
                match = (
                    out
                    if s is fewest
                    else next((u for u in s.outputs if u not in group and same_computation(u, out)), None)
                )
                if match is None:
                    break
                group.append(match)
            if len(group) == len(splits):
                candidates.append(group)
        deps = _member_inputs(root, [i for g in candidates for i in g])
        # a group whose members compute one another cannot become one op
        return [g for g, span in zip(candidates, _spans(candidates)) if not any(deps.get(b.id, 0) & span for b in g)]

    @staticmethod
    def _fusable(group: list[Instruction], splits: list[Instruction]) -> bool:
        op = group[0]
        if op.op.has("reduce"):
            return not set(splits[0].op["axes"]) & set(op.op["axes"]) and len(op.inputs) == 1
        if not is_pointwise_op(op) or len(op.inputs) > 2:
            return False
        if op.name == "convert" and all(u.op.has("pointwise") for g in group for u in g.outputs):
            return False  # each convert folds into the pointwise op reading it; one merged convert would not
        if len(op.inputs) == 1:
            return True
        if len(splits[0].op["axes"]) != 1:
            return False
        for g, s in zip(group, splits):
            other = [x for x in g.inputs if x is not s]
            if len(other) != 1 or not other[0].can_eval():
                return False
            if g.inputs.index(s) != group[0].inputs.index(splits[0]) and not g.op.has("commutative"):
                return False
        return _const_foldable([_Aligned(g, s) for g, s in zip(group, splits)], 0, splits[0].op["axes"][0])

    @staticmethod
    def _fuse(m, x: Instruction, group: list[Instruction], splits: list[Instruction]) -> None:
        order = m.index_of()
        pos = min(group, key=lambda g: order[g.id])
        op = group[0]
        if len(op.inputs) == 1:
            c = m.insert_instruction(pos, op.op, [x], op.module_inputs)
        else:
            k = op.inputs.index(splits[0])
            data = [next(i for i in g.inputs if i is not s) for g, s in zip(group, splits)]
            move_before(m, data, pos)
            cat = m.insert_instruction(pos, Op("concat", axis=splits[0].op["axes"][0]), data)
            c = m.insert_instruction(pos, op.op, [x, cat] if k == 0 else [cat, x], op.module_inputs)
        for g, s in zip(group, splits):
            # module_inputs=(): a fused member (pointwise module) becomes a slice, which has none
            m.replace_instruction(g, s.op, [c], module_inputs=())


class _Aligned:
    """A group member seen with its constant operand as input 0 (for _const_foldable)."""

    def __init__(self, g: Instruction, s: Instruction):
        self.inputs = [next(i for i in g.inputs if i is not s)]


CONCAT_SAME_INPUT = ConcatSameInput()
CONCAT_OP = ConcatOp()
SPLIT_CONCAT = SplitConcat()
SPLITS = Splits()
