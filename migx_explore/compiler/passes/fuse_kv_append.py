"""fuse_kv_append: a decode step's KV-cache appends move into its attention group.

kv_cache_bucket (compiler/kv_cache.py) appends each step's new K and V rows to the caches with
`concat_past_present` and the attention reads a view of the appended cache:

    k' = concat_past_present(k_new, past_len, cache_k)     (in place)
    v' = concat_past_present(v_new, past_len, cache_v)
    a  = group[tag=attention](q, transpose(slice(k')), masks..., slice(v'))

On the GPU that is three launches per layer, two of them copying one row each. With one query
row per head (a decode step) this pass makes them one group whose submodule holds the appends
and the views as well:

    g = group[tag=kv_attention](q, masks..., k_new, v_new, past_len, cache_k, cache_v)
        -> (attention, cache_k', cache_v');   a = get_tuple_elem[index=0](g)

The group's result keeps the updated caches as its 2nd and 3rd elements (the buffers are the
cache inputs, updated in place, as concat_past_present's result is its cache), so the reference
evaluator computes exactly what the three instructions did. The GPU kernel
(gpu/codegen/attention_decode.py) writes the new rows into the caches and, while attending, takes
key rows past_len.. from k_new / v_new instead of reading them back.

Applies only where the appended caches feed nothing but this attention, through views, and the
query has one row (a prefill's many rows keep the separate appends and the flash kernel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction, Module
from ..op import Op
from ..pass_infra import Pass
from .fusion_helpers import SubmoduleInputs, copy_body, new_submodule

KV_ATTENTION_TAG = "kv_attention"
_VIEWS = ("slice", "transpose", "reshape", "squeeze", "unsqueeze")


def _view_chain(x: Instruction) -> tuple[list[Instruction], Instruction | None]:
    """The views from an attention input down to a concat_past_present (outermost first), or None."""
    chain = []
    while x.name in _VIEWS and len(x.inputs) == 1:
        chain.append(x)
        x = x.inputs[0]
    return chain, (x if x.name == "concat_past_present" else None)


def kv_append_match(group: Instruction) -> str | tuple[int, int, list, list, Instruction, Instruction]:
    """(K input index, V input index, K views, V views, K append, V append), or why not."""
    if group.name != "group" or group.op["tag"] != "attention" or len(group.module_inputs) != 1:
        return "not an attention group"
    sub = group.module_inputs[0]
    params = {p.id: k for k, p in enumerate(sub.params())}
    dots = [i for i in sub if i.name == "dot"]
    if len(dots) != 2 or dots[0].inputs[0].id not in params:
        return "not a plain Q·Kᵀ … ·V group"
    q = group.inputs[params[dots[0].inputs[0].id]]
    if q.shape.ndim < 2 or q.shape.lens[-2] != 1:
        return "more than one query row (the appends stay separate for the flash kernel)"
    kp, vp = dots[0].inputs[1], dots[1].inputs[1]
    if kp.id not in params or vp.id not in params:
        return "K or V is computed inside the group"
    ki, vi = params[kp.id], params[vp.id]
    (kviews, kc), (vviews, vc) = _view_chain(group.inputs[ki]), _view_chain(group.inputs[vi])
    if kc is None or vc is None or kc is vc:
        return "K and V are not views of two KV-cache appends"
    if kc.inputs[1] is not vc.inputs[1]:
        return "the K and V appends take different past lengths"
    for c, views in ((kc, kviews), (vc, vviews)):
        for a, b in zip([c, *views[::-1]], [*views[::-1], group]):
            if list(a.outputs) != [b]:
                return f"{a.name} #{a.id} has another user"
    return ki, vi, kviews, vviews, kc, vc


def fuse_kv_append(module: Module, group: Instruction, plan) -> Instruction:
    ki, vi, kviews, vviews, kc, vc = plan
    old = group.module_inputs[0]
    sub = new_submodule(module.program, "kv_attn")
    binder = SubmoduleInputs(sub)
    arg = binder.bind
    old_params = old.params()
    keep = [(p, group.inputs[k]) for k, p in enumerate(old_params) if k not in (ki, vi)]
    bound = {p.id: arg(x) for p, x in keep}
    appends = []
    for c, views, k in ((kc, kviews, ki), (vc, vviews, vi)):
        new, past, cache = c.inputs
        value = sub.add_instruction(c.op, [arg(new), arg(past), arg(cache)])
        appends.append(value)
        for v in views[::-1]:
            value = sub.add_instruction(v.op, [value])
        bound[old_params[k].id] = value
    (attn,) = copy_body(old, sub, bound)
    sub.add_return([attn, *appends])
    with module.program.provenance([group, kc, vc, *kviews, *vviews]):
        fused = module.insert_instruction(group, Op("group", tag=KV_ATTENTION_TAG), binder.inputs, [sub])
        first = module.insert_instruction(group, Op("get_tuple_elem", index=0), [fused])
    module.replace_all_uses(group, first)
    module.remove_instructions([group, *kviews, *vviews, kc, vc])
    return fused


@dataclass(frozen=True)
class FuseKvAppend(Pass):
    """Move a decode step's two KV-cache appends (concat_past_present) and the cache views into its
    single-query attention group: group[tag=kv_attention] returns (attention, cache_k', cache_v'),
    one GPU kernel instead of three launches per layer."""

    name: ClassVar[str] = "fuse_kv_append"

    def apply_module(self, module: Module, ctx) -> bool:
        changed = False
        for ins in list(module):
            if ins.name != "group":
                continue
            plan = kv_append_match(ins)
            if isinstance(plan, str):
                continue
            fuse_kv_append(module, ins, plan)
            changed = True
        return changed
