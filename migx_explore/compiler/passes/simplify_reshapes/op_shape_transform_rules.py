"""find_op_shape_transform_op (MIGraphX src/simplify_reshapes.cpp, enabled by the pass's
enable_op_shape_transform_op): in

    ins(views(x_op(a, b)), c)        ins and x_op pointwise or reduce, views = reshapes/transposes/broadcasts

both ops move into one *common* index space, the finest split of axes that both sides' shapes are
groupings of, in ins's axis order; x_op's inputs are viewed into it, ins runs there, and one
reshape brings the result back. The views between two fusible ops disappear, so fuse_pointwise /
fuse_reduce see one kernel.

MIGraphX computes the common space with its shape_transform_descriptor; we use the digit (atom)
model of shape_chains, extended with broadcast atoms for the reduce case:
- x_op pointwise: the views may only regroup and reorder (no broadcast that adds elements).
- x_op a reduction: every reduced axis must come back as broadcast atoms of the same total size
  (reduce -> views -> broadcast back -> pointwise, the softmax/norm shape); a chain that only drops
  the reduced 1-axes (squeeze) runs ins in x_op's own shape instead.
Anything else is declined with the reason. One deliberate difference: a pointwise x_op that is
the only reader of a dot/convolution stays put (our backend fuses it into the GEMM as its epilogue
only when it reads the GEMM directly); no MIGraphX test case covers that shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...ir import Instruction
from ...matcher import pred
from ...op import Op
from ...ops.common import norm_axes, norm_axis
from ...pattern_rewriter import Rule, replace_value
from ..rule_helpers import all_static, auto_reshape_op, insert_ops
from .shape_chains import BROADCASTS, regroup_atoms

VIEWS = frozenset(
    {"reshape", "squeeze", "unsqueeze", "flatten", "transpose", "contiguous", "multibroadcast", "broadcast"}
)
_RESHAPES = frozenset({"reshape", "squeeze", "unsqueeze", "flatten"})
_GEMMS = frozenset({"dot", "quant_dot", "convolution", "quant_convolution"})


def is_reduce(ins: Instruction) -> bool:
    return ins.name.startswith("reduce_") or ins.name in ("argmin", "argmax")


def matches_op(ins: Instruction) -> bool:
    return is_reduce(ins) or ins.op.has("pointwise") or ins.name == "layout"


def _fusable_split(ins: Instruction) -> bool:
    """MIGraphX's fusable_split: an input is a slice whose sibling slices all feed an op like ins."""
    for s in ins.inputs:
        if s.name != "slice":
            continue
        if all(o.name != "slice" or any(u.name == ins.name for u in o.outputs) for o in s.inputs[0].outputs):
            return True
    return False


def _scalar(ins: Instruction) -> bool:
    return all(st == 0 for st in ins.shape.strides)


class _Space:
    """Atoms of x_op's (pre-reduction) shape followed through the views. An atom is [size, origin]
    with origin the source axis, or None for a broadcast atom; `axes` lists each current axis's
    atoms, `hidden` the reduced source axes a 1-long current axis stands for."""

    def __init__(self, lens: Sequence[int], reduced: Sequence[int] = ()):
        self.atoms: list[list] = []
        self.children: dict[int, tuple[int, int]] = {}
        self.groups: list[tuple[list[int], list[int]]] = []  # broadcast atoms, the reduced axes they bring back
        self.src_order: list[int] = []
        self.axes: list[list[int]] = []
        self.hidden: list[list[int]] = []
        for k, n in enumerate(lens):
            if k in reduced:
                self.axes.append([])
                self.hidden.append([k] if n != 1 else [])
            elif n == 1:
                self.axes.append([])
                self.hidden.append([])
            else:
                a = self._new(n, k)
                self.src_order.append(a)
                self.axes.append([a])
                self.hidden.append([])

    def _new(self, n: int, origin) -> int:
        self.atoms.append([n, origin])
        return len(self.atoms) - 1

    def _split(self, a: int, outer: int) -> tuple[int, int]:
        n, origin = self.atoms[a]
        hi, lo = self._new(outer, origin), self._new(n // outer, origin)
        self.children[a] = (hi, lo)
        for seq in (self.src_order, *self.axes):
            if a in seq:
                k = seq.index(a)
                seq[k : k + 1] = [hi, lo]
        return hi, lo

    def lens(self) -> list[int]:
        return [math.prod(self.atoms[a][0] for a in ax) for ax in self.axes]

    def reshape(self, dims: Sequence[int]) -> bool:
        new_axes = regroup_atoms(self.axes, dims, lambda a: self.atoms[a][0], self._split)
        if new_axes is None:
            return False
        # A reduced 1-axis stays where it sits among the digits: on the first 1-long output axis
        # with as many digits before it (MIGraphX keeps it as a subdimension there).
        hidden: list[list[int]] = [[] for _ in new_axes]
        before = 0
        for ax, hs in zip(self.axes, self.hidden):
            if hs:
                seen = 0
                for j, out in enumerate(new_axes):
                    if not out and seen == before:
                        hidden[j].extend(hs)
                        break
                    seen += len(out)
            before += len(ax)
        self.axes, self.hidden = new_axes, hidden
        return True

    def transpose(self, perm: Sequence[int]) -> None:
        self.axes = [self.axes[p] for p in perm]
        self.hidden = [self.hidden[p] for p in perm]

    def broadcast(self, out_lens: Sequence[int], axis: int | None) -> bool:
        n = len(out_lens)
        off = n - len(self.axes) if axis is None else axis
        if off < 0 or off + len(self.axes) > n:
            return False
        axes: list[list[int]] = [[] for _ in range(n)]
        hidden: list[list[int]] = [[] for _ in range(n)]
        for k, (ax, hs) in enumerate(zip(self.axes, self.hidden)):
            axes[off + k], hidden[off + k] = ax, hs
        # Runs of 1-long axes, some broadcast: together they bring back the reduced axes they hold.
        k = 0
        while k < n:
            if axes[k]:
                if math.prod(self.atoms[a][0] for a in axes[k]) != out_lens[k]:
                    return False
                k += 1
                continue
            j = k
            while j < n and not axes[j]:
                j += 1
            grown = [q for q in range(k, j) if out_lens[q] > 1]
            held = [h for q in range(k, j) for h in hidden[q]]
            if grown:
                if not held:
                    return False  # a broadcast that is not a reduced axis coming back
                group = []
                for q in grown:
                    axes[q] = [self._new(out_lens[q], None)]
                    group.append(axes[q][0])
                for q in range(k, j):
                    hidden[q] = []
                self.groups.append((group, held))
            k = j
        self.axes, self.hidden = axes, hidden
        return True

    def leaves(self, a: int) -> list[int]:
        if a not in self.children:
            return [a]
        hi, lo = self.children[a]
        return self.leaves(hi) + self.leaves(lo)

    def assign(self, group: Sequence[int], sizes: Sequence[tuple[int, int]]) -> bool:
        """Give a broadcast group's pieces the reduced axes (size, axis) they stand for, in digit
        order, splitting pieces where an axis boundary falls inside one."""
        todo = list(sizes)
        for leaf in [p for b in group for p in self.leaves(b)]:
            rest = self.atoms[leaf][0]
            piece = leaf
            while rest > 1:
                while todo and todo[0][0] == 1:
                    todo.pop(0)
                if not todo:
                    return False
                n, h = todo[0]
                if rest == n or (rest % n == 0 and rest > n):
                    if rest > n:
                        piece, nxt = self._split(piece, n)
                    else:
                        nxt = None
                    self.atoms[piece][1] = h
                    self._place(piece, h)
                    todo.pop(0)
                    rest //= n
                    piece = nxt if nxt is not None else piece
                elif n % rest == 0:
                    self.atoms[piece][1] = h
                    self._place(piece, h)
                    todo[0] = (n // rest, h)
                    rest = 1
                else:
                    return False
        return all(n == 1 for n, _ in todo)

    def _place(self, a: int, h: int) -> None:
        later = [i for i, s in enumerate(self.src_order) if self.atoms[s][1] is not None and self.atoms[s][1] > h]
        self.src_order.insert(later[0] if later else len(self.src_order), a)


def _chain(input_ins: Instruction, x: Instruction) -> list[Instruction]:
    out, y = [], input_ins
    while y is not x:
        out.append(y)
        y = y.inputs[0]
    out.reverse()
    return out


class OpShapeTransformOp(Rule):
    """ins(views(x_op)) with both ops pointwise/reduce -> both computed in one common shape."""

    name = "find_op_shape_transform_op"

    def pattern(self):
        def find(ins):
            return _find_input(ins) is not None

        return pred("pointwise_or_reduce", matches_op, "not a pointwise or reduce op")(
            all_static(), pred("views_of_op_input", find, "no input is views of a pointwise or reduce op")
        )

    def check(self, m, r):
        ins = r.root
        input_ins, x = _find_input(ins)
        if _scalar(input_ins) or _scalar(x):
            return "a scalar (all-broadcast) value"
        chain = _chain(input_ins, x)
        if all(c.name in BROADCASTS or c.name == "contiguous" for c in chain):
            return "the views are only broadcasts"
        if not is_reduce(x) and any(a.name in _GEMMS and len(a.outputs) == 1 for a in x.inputs):
            # Deliberate: our backend folds a GEMM's bias/residual adds into the BLAS call only when
            # the add reads the GEMM directly; moving the add behind a reshape would cost that.
            return f"x_op is the epilogue of a {next(a.name for a in x.inputs if a.name in _GEMMS)}"
        views = [c for c in chain if c.name != "contiguous"]
        plan = _plan_reduce(x, views) if is_reduce(x) else _plan_pointwise(x, views)
        if isinstance(plan, str):
            return plan
        common = plan["common"]
        if ("squeeze" in plan) and not ins.op.has("pointwise"):
            return f"{ins.name} would need its axes moved into the reduction's shape"
        dst_map = plan.get("dst_map")
        if dst_map and ins.name in ("argmin", "argmax"):
            if len(dst_map[norm_axis(ins.op["axis"], ins.inputs[0].shape.ndim, ins.name)]) != 1:
                return f"{ins.name} would reduce over more than one axis"
        others = [o for o in x.outputs if o is not chain[0]]
        if ins.shape.ndim == len(common) and any(matches_op(o) for o in others):
            return "already in the common shape and x_op has other fusible users"
        if others and is_reduce(x) and plan.get("reordered", True):
            return "the reduction has other users and the common shape reorders its axes"
        return lambda: _rewrite(m, ins, input_ins, x, plan, bool(others))


def _find_input(ins: Instruction):
    for inp in ins.inputs:
        if inp.name not in VIEWS:
            continue
        y = inp
        while y.name in VIEWS:
            y = y.inputs[0]
        if matches_op(y) and y.name != "layout" and not _fusable_split(y):
            return inp, y
    return None


def _plan_pointwise(x: Instruction, views: Sequence[Instruction]):
    if any(len(i.shape.lens) != x.shape.ndim or i.shape.lens != x.shape.lens for i in x.inputs if not _scalar(i)):
        return "x_op's inputs differ in shape"
    sp = _Space(x.shape.lens)
    for v in views:
        if v.name == "transpose":
            sp.transpose(v.op["permutation"])
        elif v.name in BROADCASTS:
            if v.shape.elements() != x.shape.elements():
                return "the views broadcast x_op's result (more elements)"
            if not sp.reshape(v.shape.lens):
                return "the views mix digits of different axes"
        elif not sp.reshape(v.shape.lens):
            return "the views mix digits of different axes"
    return _finish(sp, x.shape.lens, reduced=())


def _plan_reduce(x: Instruction, views: Sequence[Instruction]):
    src = x.inputs[0].shape.lens
    reduced = _reduce_axes(x)
    if any(x.shape.lens[a] != 1 for a in reduced):
        return "the reduction does not keep its axes"
    sp = _Space(src, [a for a in reduced if src[a] != 1])
    for v in views:
        if v.name == "transpose":
            sp.transpose(v.op["permutation"])
        elif v.name in BROADCASTS:
            axis = norm_axis(v.op["axis"], v.shape.ndim, "broadcast") if v.name == "broadcast" else None
            if not sp.broadcast(v.shape.lens, axis):
                return "a broadcast in the views is not a reduced axis coming back"
        elif not sp.reshape(v.shape.lens):
            return "the views mix digits of different axes"
    wanted = sorted(a for a in reduced if src[a] != 1)
    back = sorted(h for _, hs in sp.groups for h in hs)
    if not back:
        return _plan_squeeze(x, views, reduced)
    if back != wanted:
        return "the broadcasts do not bring back exactly the reduced axes"
    sizes = [(math.prod(sp.atoms[b][0] for b in g), math.prod(src[h] for h in hs)) for g, hs in sp.groups]
    if any(a != b for a, b in sizes):
        return _plan_other_size(x, views, reduced)
    # The broadcast pieces become the reduced axes' digits.
    for g, hs in sp.groups:
        if not sp.assign(g, [(src[h], h) for h in sorted(hs)]):
            return "the broadcast pieces do not line up with the reduced axes"
    plan = _finish(sp, src, reduced)
    if isinstance(plan, dict) and "axes" not in x.op.attrs and len(plan["src_map"][reduced[0]]) != 1:
        return f"{x.name} would reduce over more than one axis"
    return plan


def _reduce_axes(x: Instruction) -> list[int]:
    nd = x.inputs[0].shape.ndim
    if "axes" in x.op.attrs:
        return sorted(norm_axes(x.op["axes"], nd, x.name))
    return [norm_axis(x.op["axis"], nd, x.name)]


def _finish(sp: _Space, src_lens, reduced):
    """The plan: common lens (ins's order), the ops taking x_op's inputs there and back, and the
    axis maps for re-targeting axis attributes."""
    common, dst_map = [], []
    for ax in sp.axes:
        start = len(common)
        common.extend(sp.atoms[a][0] for a in ax) if ax else common.append(1)
        dst_map.append(list(range(start, len(common))))
    flat = [a for ax in sp.axes for a in ax]
    if sorted(flat) != sorted(sp.src_order):
        return "the views drop part of x_op's value"
    perm = [sp.src_order.index(a) for a in flat]
    src_atoms = [sp.atoms[a][0] for a in sp.src_order]
    pos = {a: k for k, ax in enumerate(sp.axes) for a in ax}
    starts = [0]
    for ax in sp.axes:
        starts.append(starts[-1] + max(1, len(ax)))
    where = {a: starts[pos[a]] + sp.axes[pos[a]].index(a) for a in flat}
    src_map = [sorted(where[a] for a in flat if sp.atoms[a][1] == k) for k in range(len(src_lens))]
    return {
        "common": common,
        "dst_map": dst_map,
        "src_map": src_map,
        "reduced": list(reduced),
        "reordered": perm != sorted(perm),
        "to_common": [auto_reshape_op(src_lens, common)]
        if perm == sorted(perm)
        else [auto_reshape_op(src_lens, src_atoms), _perm(perm), auto_reshape_op([src_atoms[p] for p in perm], common)],
        "from_common": [auto_reshape_op(common, src_lens)]
        if perm == sorted(perm)
        else [
            auto_reshape_op(common, [src_atoms[p] for p in perm]),
            _perm(_inverse(perm)),
            auto_reshape_op(src_atoms, src_lens),
        ],
    }


def _plan_squeeze(x: Instruction, views, reduced):
    """Views that only drop reduced 1-axes: ins runs in x_op's shape, the other inputs unsqueezed."""
    lens = list(x.shape.lens)
    out = list(views[-1].shape.lens)
    if len(out) >= len(lens):
        return "the views keep or add axes without broadcasting the reduced ones back"
    dropped, j = [], 0
    for k, n in enumerate(lens):
        if j < len(out) and out[j] == n and not (n == 1 and k in reduced and len(lens) - k > len(out) - j):
            j += 1
        elif n == 1 and k in reduced:
            dropped.append(k)
        else:
            return "the views do more than drop reduced 1-axes"
    if j != len(out):
        return "the views do more than drop reduced 1-axes"
    return {"squeeze": dropped, "common": lens, "reordered": False}


def _plan_other_size(x, views, reduced):
    """The reduced axes come back at another size (MIGraphX's rebase fallback): keep the views'
    reordering for x_op's input, reduce, and broadcast straight to the views' shape."""
    src = x.inputs[0].shape.lens
    if any(v.name in _RESHAPES and v.shape.ndim != x.shape.ndim for v in views):
        return "the reduced axes come back at another size through a reshape"
    perm = list(range(len(src)))
    for v in views:
        if v.name == "transpose":
            perm = [perm[p] for p in v.op["permutation"]]
        elif v.name in _RESHAPES or (v.name == "broadcast" and v.shape.ndim != len(src)):
            return "the reduced axes come back at another size through a reshape"
    if views[-1].shape.ndim != len(src):
        return "the broadcast changes the rank"
    where = {p: k for k, p in enumerate(perm)}
    return {
        "other_size": True,
        "perm": perm,
        "axes": sorted(where[a] for a in reduced),
        "common": list(views[-1].shape.lens),
    }


def _perm(p):
    return None if list(p) == list(range(len(p))) else Op("transpose", permutation=list(p))


def _inverse(p):
    inv = [0] * len(p)
    for k, v in enumerate(p):
        inv[v] = k
    return inv


def _op_in_common(ins: Instruction, axes_map) -> Op:
    if is_reduce(ins):
        if "axes" in ins.op.attrs:
            nd = ins.inputs[0].shape.ndim
            return ins.op.with_(axes=sorted(c for a in norm_axes(ins.op["axes"], nd, ins.name) for c in axes_map[a]))
        return ins.op.with_(axis=axes_map[norm_axis(ins.op["axis"], ins.inputs[0].shape.ndim, ins.name)][0])
    if ins.name == "layout":
        return ins.op.with_(permutation=[c for a in ins.op["permutation"] for c in axes_map[a]])
    return ins.op


def _rewrite(m, ins: Instruction, input_ins: Instruction, x: Instruction, plan: dict, others: bool) -> None:
    if "squeeze" in plan:
        axes = plan["squeeze"]
        args = [x if a is input_ins else m.insert_instruction(ins, Op("unsqueeze", axes=axes), [a]) for a in ins.inputs]
        y = m.insert_instruction(ins, ins.op, args, ins.module_inputs)
        replace_value(m, ins, m.insert_instruction(ins, Op("squeeze", axes=axes), [y]))
        return
    if "other_size" in plan:
        t = insert_ops(m, x, [_perm(plan["perm"])], x.inputs[0])
        red = m.insert_instruction(
            x, x.op.with_(axes=plan["axes"]) if "axes" in x.op.attrs else x.op.with_(axis=plan["axes"][0]), [t]
        )
        new_in = m.insert_instruction(ins, Op("multibroadcast", out_lens=plan["common"]), [red])
        y = m.insert_instruction(ins, ins.op, [new_in if a is input_ins else a for a in ins.inputs], ins.module_inputs)
        replace_value(m, ins, y)
        return
    common = plan["common"]

    def to_common(a):
        if _scalar(a) and a.shape.elements() == 1 and a.shape.ndim == 1:
            return m.insert_instruction(x, Op("multibroadcast", out_lens=common), [a])
        return insert_ops(m, x, plan["to_common"], a)

    new_x = m.insert_instruction(
        x, _op_in_common(x, plan["src_map"]), [to_common(a) for a in x.inputs], x.module_inputs
    )
    if others:  # x_op's other users read it back in its own shape
        back = [auto_reshape_op(new_x.shape.lens, x.shape.lens)] if is_reduce(x) else plan["from_common"]
        replace_value(m, x, insert_ops(m, x, back, new_x))
    new_in = new_x
    if new_x.shape.elements() != input_ins.shape.elements():
        new_in = m.insert_instruction(ins, Op("multibroadcast", out_lens=common), [new_x])

    def other(a):
        if _scalar(a) and a.shape.elements() == 1 and a.shape.ndim == 1:
            return m.insert_instruction(ins, Op("multibroadcast", out_lens=common), [a])
        return insert_ops(m, ins, [auto_reshape_op(a.shape.lens, common)], a)

    args = [new_in if a is input_ins else other(a) for a in ins.inputs]
    y = m.insert_instruction(ins, _op_in_common(ins, plan["dst_map"]), args, ins.module_inputs)
    replace_value(m, ins, insert_ops(m, ins, [auto_reshape_op(y.shape.lens, ins.shape.lens)], y))
