"""fuse_concat (MIGraphX src/fuse_concat.cpp): fold pointwise producers and a pointwise consumer of
a `concat` into one `fused_concat{axis}` op.

    fused_concat(a.., b.., extra..), [piece_0, ..., piece_n-1, post]

Each piece module computes one concat input: the producer's pointwise submodule when that producer
is a single-use `pointwise`, else a `concat:noopN` module that returns its one param. The post
module is the consumer's pointwise body with the concat result as its last param
(`<consumer module>:concat`), or a noop module when there is no pointwise consumer.

With a pointwise consumer the concat is always fused (find_pointwise_concat_pointwise), even when
no input is pointwise (MIGraphX wants one): the consumer (at fp16 often the convert of a float32
output) then runs inside the concat kernel instead of launching after it. Without a consumer it
needs a single-use pointwise input and is fused only when at most
max(1, inputs / 4) inputs would be noop pieces (find_concat_pointwise): a concat of mostly other
ops' results gains nothing from one kernel. Unlike MIGraphX we also fuse a concat with several
users (a KV cache's `present` is returned and read by the attention): the pieces still write
straight into the one output; when one of those users is a pointwise op of the concat alone (at
fp16 the float32 `present` output's convert), the kernel writes its value as a second output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction, Module
from ..matcher import MatchResult, name
from ..op import Op
from ..pass_infra import Pass, rewriter_of
from ..pattern_rewriter import Rule
from .fusion_helpers import copy_body, drop_if_unused, new_submodule, param_name, scalar_param_shape


def _noop_module(module: Module, x: Instruction) -> Module:
    m = new_submodule(module.program, "concat:noop")
    m.add_return([m.add_parameter(param_name(0), scalar_param_shape(x.shape))])
    return m


def _foldable_piece(x: Instruction, concat: Instruction) -> bool:
    return x.name == "pointwise" and not x.shape.is_tuple and list(x.outputs) == [concat]


def _post_consumer(concat: Instruction) -> Instruction | None:
    if len(concat.outputs) != 1:
        return None
    p = concat.outputs[0]
    if p.name != "pointwise" or p.shape.is_tuple or list(p.inputs).count(concat) != 1:
        return None
    return p


def _shared_post(concat: Instruction) -> Instruction | None:
    """With several users: the one pointwise user that reads only the concat (at fp16 the
    convert of a KV cache's float32 `present` output, which the attention also reads in half)."""
    if len(concat.outputs) < 2:
        return None
    pws = [u for u in concat.outputs if u.name == "pointwise"]
    if len(pws) != 1 or pws[0].shape.is_tuple or list(pws[0].inputs) != [concat]:
        return None
    return pws[0]


def _post_module(
    module: Module, post: Instruction, concat: Instruction, keep_concat: bool = False
) -> tuple[Module, list[Instruction]]:
    """The consumer's body with params reordered: its other inputs first, the concat result last;
    with keep_concat, the module returns the concat value too (first)."""
    pm = post.module_inputs[0]
    sub = new_submodule(module.program, pm.name + ":concat", exact=True)
    extras: list[Instruction] = []
    mapping: dict[int, Instruction] = {}
    for p, x in zip(pm.params(), post.inputs):
        if x is not concat:
            mapping[p.id] = sub.add_parameter(param_name(len(extras)), p.shape)
            extras.append(x)
    cat = sub.add_parameter(param_name(len(extras)), scalar_param_shape(concat.shape))
    for p, x in zip(pm.params(), post.inputs):
        if x is concat:
            mapping[p.id] = cat
    sub.add_return(([cat] if keep_concat else []) + copy_body(pm, sub, mapping))
    return sub, extras


class ConcatPointwise(Rule):
    name = "find_pointwise_concat_pointwise"

    def pattern(self):
        return name("concat")

    def check(self, module: Module, r: MatchResult) -> str | None:
        c = r.root
        if c.shape.dyn_dims is not None:
            return "dynamic shape"
        folded = sum(_foldable_piece(x, c) for x in c.inputs)
        consumer = _post_consumer(c) or _shared_post(c)
        if not folded and consumer is None:
            return "no single-use pointwise input and no pointwise consumer"
        noops = len(c.inputs) - folded
        if consumer is None and noops > max(1, len(c.inputs) // 4):
            return f"{noops} of {len(c.inputs)} inputs are not pointwise and there is no pointwise consumer"
        return None

    def rewrite(self, module: Module, r: MatchResult, plan: None) -> None:
        c = r.root
        post = _post_consumer(c)
        pieces, inputs, dead = [], [], [c]
        for x in c.inputs:
            if _foldable_piece(x, c):
                pieces.append(x.module_inputs[0])
                inputs.extend(x.inputs)
                dead.append(x)
            else:
                pieces.append(_noop_module(module, x))
                inputs.append(x)
        shared = _shared_post(c) if post is None else None
        if shared is not None:  # one kernel writes both the concat and its consumer's value
            post_mod, _ = _post_module(module, shared, c, keep_concat=True)
            new = module.insert_instruction(c, Op("fused_concat", axis=c.op["axis"]), inputs, pieces + [post_mod])
            module.replace_all_uses(shared, module.insert_instruction(c, Op("get_tuple_elem", index=1), [new]))
            module.replace_all_uses(c, module.insert_instruction(c, Op("get_tuple_elem", index=0), [new]))
            module.remove_instructions([shared] + dead)
            drop_if_unused(module.program, shared.module_inputs)
            return
        if post is not None:
            post_mod, extras = _post_module(module, post, c)
            dead.insert(0, post)
        else:
            post_mod, extras = _noop_module(module, c), []
        root = post if post is not None else c
        new = module.insert_instruction(
            root, Op("fused_concat", axis=c.op["axis"]), inputs + extras, pieces + [post_mod]
        )
        module.replace_all_uses(root, new)
        module.remove_instructions(dead)
        if post is not None:
            drop_if_unused(module.program, post.module_inputs)


@dataclass(frozen=True)
class FuseConcat(Pass):
    """Fold pointwise producers and a pointwise consumer of each concat into a fused_concat."""

    name: ClassVar[str] = "fuse_concat"
    must_follow: ClassVar[tuple[str, ...]] = ("fuse_pointwise_reduce",)

    def apply_module(self, module: Module, ctx) -> bool:
        return rewriter_of(ctx).find_matches(module, ConcatPointwise()) > 0
