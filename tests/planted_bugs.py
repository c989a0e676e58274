"""Ten planted bugs, each a user pass that looks like an ordinary rewrite but changes the meaning of
a value, with a small program it applies to. Numeric bisect must name the pass and the
replacement it made (tests/explorer/test_planted_bugs.py on the CPU; tests/gpu/test_gpu_bisect.py
runs them through the backend on a GPU).

Each bug records, when it runs, the id of the instruction it broke (`culprit`: the new value,
or the instruction changed in place) and the id of the value that one claims to equal (`replaced`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from migx_explore.compiler import Op, Program, Shape
from migx_explore.compiler.ir import Instruction, Module


@dataclass
class PlantedBug:
    name: str
    build: Callable[[], Program]
    rewrite: Callable[[Module, dict], None]  # (module, ids) -> None; fills ids["culprit"], ids["replaced"]
    after: str = "required.normalize_ops"
    ids: dict = field(default_factory=dict)

    def as_pass(self) -> Callable[[Module], bool]:
        def planted(module: Module) -> bool:
            if module.name != "main":
                return False
            self.rewrite(module, self.ids)
            return True

        planted.__name__ = self.name
        return planted


def _f32(*lens: int) -> Shape:
    return Shape.of("float32", lens)


def _rng_lit(m: Module, *lens: int, seed: int = 1, lo: float = -1.0) -> Instruction:
    return m.add_literal(np.random.default_rng(seed).uniform(lo, 1, lens).astype(np.float32))


def _find(m: Module, op: str, k: int = 0) -> Instruction:
    return [i for i in m if i.name == op][k]


def _replace(m: Module, old: Instruction, op: Op, inputs, ids: dict) -> Instruction:
    new = m.insert_instruction(old, op, inputs)
    m.replace_all_uses(old, new)
    ids.update(culprit=new.id, replaced=old.id)
    return new


# 1. off-by-one slice ------------------------------------------------------------------------------
def _slice_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(4, 8))
    s = m.add_instruction(Op("slice", axes=[1], starts=[2], ends=[6]), [x])
    m.add_return([m.add_instruction(Op("relu"), [s])])
    return p


def _slice_bug(m: Module, ids: dict) -> None:
    s = _find(m, "slice")
    start = s.op["starts"][0] - 1  # the bug: "ends are exclusive, so subtract one" applied to starts
    _replace(m, s, Op("slice", axes=[1], starts=[start], ends=[start + 4]), [s.inputs[0]], ids)


# 2. wrong transpose permutation (composition order swapped) --------------------------------------
def _transpose_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(3, 3, 3))
    t1 = m.add_instruction(Op("transpose", permutation=[1, 0, 2]), [x])
    t2 = m.add_instruction(Op("transpose", permutation=[0, 2, 1]), [t1])
    m.add_return([m.add_instruction(Op("relu"), [t2])])
    return p


def _transpose_bug(m: Module, ids: dict) -> None:
    t1, t2 = _find(m, "transpose", 0), _find(m, "transpose", 1)
    p1, p2 = t1.op["permutation"], t2.op["permutation"]
    wrong = [p2[p1[k]] for k in range(3)]  # right: [p1[p2[k]] ...]
    _replace(m, t2, Op("transpose", permutation=wrong), [t1.inputs[0]], ids)


# 3. dropped bias (dot + bias "fused" into the dot) -----------------------------------------------
def _bias_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(2, 8))
    d = m.add_instruction(Op("dot"), [x, _rng_lit(m, 8, 4)])
    b = m.add_instruction(Op("broadcast", axis=1, out_lens=[2, 4]), [_rng_lit(m, 4, seed=2)])
    a = m.add_instruction(Op("add"), [d, b])
    m.add_return([m.add_instruction(Op("tanh"), [a])])
    return p


def _bias_bug(m: Module, ids: dict) -> None:
    a = _find(m, "add")
    d = a.inputs[0]
    m.replace_all_uses(a, d)  # "the gemm adds the bias" - but it was never passed to it
    ids.update(culprit=d.id, replaced=a.id)


# 4. wrong layernorm epsilon ----------------------------------------------------------------------
def _layernorm_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(2, 16))
    mean = m.add_instruction(Op("reduce_mean", axes=[1]), [x])
    c = m.add_instruction(Op("sub"), [x, m.add_instruction(Op("multibroadcast", out_lens=[2, 16]), [mean])])
    var = m.add_instruction(Op("reduce_mean", axes=[1]), [m.add_instruction(Op("mul"), [c, c])])
    eps = m.add_literal(np.full((2, 1), 1e-5, np.float32))
    sd = m.add_instruction(Op("sqrt"), [m.add_instruction(Op("add"), [var, eps])])
    y = m.add_instruction(Op("div"), [c, m.add_instruction(Op("multibroadcast", out_lens=[2, 16]), [sd])])
    m.add_return([y])
    return p


def _layernorm_bug(m: Module, ids: dict) -> None:
    div = _find(m, "div")
    x = m.params()[0]
    _replace(m, div, Op("layernorm", epsilon=1e-2, axis=-1), [x], ids)  # read the wrong literal


# 5. wrong reduce axis (reduce_mean rewritten as a scaled reduce_sum over the other square axis) ------
def _reduce_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(2, 3, 3))
    r = m.add_instruction(Op("reduce_mean", axes=[1]), [x])
    m.add_return([m.add_instruction(Op("exp"), [r])])
    return p


def _reduce_bug(m: Module, ids: dict) -> None:
    r = _find(m, "reduce_mean")
    x = r.inputs[0]
    s = m.insert_instruction(r, Op("reduce_sum", axes=[2]), [x])  # the bug: axis 2, not 1
    third = m.insert_instruction(r, Op("multibroadcast", out_lens=[2, 3, 1]), [m.add_literal(np.float32(1 / 3))])
    scaled = m.insert_instruction(r, Op("mul"), [s, third])
    _replace(m, r, Op("reshape", dims=[2, 1, 3]), [scaled], ids)


# 6. swapped concat order ------------------------------------------------------------------------
def _concat_prog() -> Program:
    p = Program()
    m = p.main
    a = m.add_instruction(Op("relu"), [m.add_parameter("x", _f32(2, 3))])
    b = m.add_instruction(Op("neg"), [m.add_parameter("y", _f32(2, 3))])
    c = m.add_instruction(Op("concat", axis=1), [a, b])
    m.add_return([m.add_instruction(Op("exp"), [c])])
    return p


def _concat_bug(m: Module, ids: dict) -> None:
    c = _find(m, "concat")
    _replace(m, c, Op("concat", axis=1), list(reversed(c.inputs)), ids)


# 7. sign flip in a constant fold -------------------------------------------------------------------
def _fold_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(2, 4))
    m1 = m.add_instruction(Op("mul"), [x, _rng_lit(m, 2, 4, seed=3, lo=0.5)])
    m2 = m.add_instruction(Op("mul"), [m1, _rng_lit(m, 2, 4, seed=4, lo=0.5)])
    m.add_return([m.add_instruction(Op("sigmoid"), [m2])])
    return p


def _fold_bug(m: Module, ids: dict) -> None:
    m1, m2 = _find(m, "mul", 0), _find(m, "mul", 1)
    folded = -(m1.inputs[1].literal.data * m2.inputs[1].literal.data)  # the bug: a stray minus
    lit = m.add_literal(folded.astype(np.float32), before=m2)
    _replace(m, m2, Op("mul"), [m1.inputs[0], lit], ids)


# 8. wrong broadcast axis (changed in place) --------------------------------------------------------
def _broadcast_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(2, 3, 3))
    b = m.add_instruction(Op("broadcast", axis=1, out_lens=[2, 3, 3]), [_rng_lit(m, 3, seed=5)])
    m.add_return([m.add_instruction(Op("add"), [x, b])])
    return p


def _broadcast_bug(m: Module, ids: dict) -> None:
    b = _find(m, "broadcast")
    m.replace_instruction(b, Op("broadcast", axis=2, out_lens=list(b.op["out_lens"])))
    ids.update(culprit=b.id, replaced=b.id)


# 9. stale literal (constant propagation writes the value from before the update) -------------------
def _literal_prog() -> Program:
    p = Program()
    m = p.main
    x = m.add_parameter("x", _f32(2, 4))
    k = m.add_instruction(Op("add"), [_rng_lit(m, 2, 4, seed=6), _rng_lit(m, 2, 4, seed=7)])
    m.add_return([m.add_instruction(Op("mul"), [x, k])])
    return p


def _literal_bug(m: Module, ids: dict) -> None:
    k = _find(m, "add")
    stale = m.add_literal(k.inputs[0].literal.data, before=k)  # the first operand, not the sum
    m.replace_all_uses(k, stale)
    ids.update(culprit=stale.id, replaced=k.id)


# 10. int overflow (arithmetic "narrowed" to int16) -------------------------------------------------
def _overflow_prog() -> Program:
    p = Program()
    m = p.main
    ids_in = m.add_parameter("ids", Shape.of("int32", [8]))
    scale = m.add_literal(np.full(8, 100_000, np.int32))
    prod = m.add_instruction(Op("mul"), [ids_in, scale])
    m.add_return([m.add_instruction(Op("convert", target_type="float32"), [prod])])
    return p


def _overflow_bug(m: Module, ids: dict) -> None:
    prod = _find(m, "mul")
    a16, b16 = (m.insert_instruction(prod, Op("convert", target_type="int16"), [i]) for i in prod.inputs)
    narrow = m.insert_instruction(prod, Op("mul"), [a16, b16])
    _replace(m, prod, Op("convert", target_type="int32"), [narrow], ids)


def planted_bugs() -> list[PlantedBug]:
    return [
        PlantedBug("off_by_one_slice", _slice_prog, _slice_bug),
        PlantedBug("wrong_transpose_permutation", _transpose_prog, _transpose_bug),
        PlantedBug("dropped_bias", _bias_prog, _bias_bug, after="required.simplify_reshapes"),
        PlantedBug("wrong_layernorm_epsilon", _layernorm_prog, _layernorm_bug),
        PlantedBug("wrong_reduce_axis", _reduce_prog, _reduce_bug, after="required.rewrite_pooling"),
        PlantedBug("swapped_concat_order", _concat_prog, _concat_bug),
        PlantedBug("sign_flip_in_fold", _fold_prog, _fold_bug, after="required.inline_module"),
        PlantedBug("wrong_broadcast_axis", _broadcast_prog, _broadcast_bug),
        PlantedBug("stale_literal", _literal_prog, _literal_bug),
        PlantedBug("int_overflow", _overflow_prog, _overflow_bug, after="required.eliminate_data_type_for_gpu"),
    ]
