"""eliminate_common_subexpression: instructions with the same op, inputs and submodules compute the
same value; later ones are replaced by the first. Literals with equal data merge too (MIGraphX
compares literal contents). One forward sweep suffices: users come after their inputs, so once a
duplicate is redirected its users' keys match the survivor's users when we reach them.

Beyond MIGraphX: the two inputs of a commutative op are compared as a set (add(a, b) = add(b, a)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Instruction, Module
from ..pass_infra import Pass


def _key(ins: Instruction) -> tuple | None:
    op = ins.op
    if ins.is_param() or ins.is_return() or op.has("side_effect") or op.has("not_context_free"):
        return None
    if ins.is_literal():
        return ("@literal", ins.shape, ins.literal.content_hash())
    ids = tuple(i.id for i in ins.inputs)
    if op.has("commutative") and len(ids) == 2:
        ids = tuple(sorted(ids))
    return (op, ids, tuple(m.name for m in ins.module_inputs))


@dataclass(frozen=True)
class EliminateCommonSubexpression(Pass):
    name: ClassVar[str] = "eliminate_common_subexpression"

    def apply_module(self, module: Module, ctx) -> bool:
        seen: dict[tuple, list[Instruction]] = {}
        changed = False
        for ins in module:
            if not ins.outputs:  # dead (or the un-returned output): nothing to redirect
                continue
            key = _key(ins)
            if key is None:
                continue
            same = seen.setdefault(key, [])
            survivor = next((s for s in same if s.alive and _equal(s, ins)), None)
            if survivor is None:
                same.append(ins)
                continue
            module.replace_all_uses(ins, survivor)
            changed = True
        return changed


def _equal(a: Instruction, b: Instruction) -> bool:
    # The key already matched; literals need a full content check (hashes can collide).
    return a.shape == b.shape and (not a.is_literal() or a.literal.same_as(b.literal))
