"""Order bookkeeping for a module's instructions that needs no module: use lists and a stable
topological order (compiler/ir.py's Module relinks its list from these)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from .instruction import Instruction


def drop_user(users: list[Instruction], ins: Instruction) -> None:
    """Remove `ins` from a use list (which holds each user once: every append is guarded).
    Rewrites mostly drop the newest user, at the end, so that is checked before list.remove's
    scan from the front (a long use list made removal O(n) per rewrite)."""
    if users and users[-1] is ins:
        users.pop()
        return
    with contextlib.suppress(ValueError):
        users.remove(ins)


def stable_topological_order(ins_list: Sequence[Instruction]) -> list[Instruction]:
    """`ins_list` reordered only where a use precedes its def; @return instructions last."""
    order = {ins._id: k for k, ins in enumerate(ins_list)}
    placed: set[int] = set()
    result: list[Instruction] = []
    ret = [i for i in ins_list if i.is_return()]

    def visit(root: Instruction) -> None:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node._id in placed:
                continue
            if expanded:
                placed.add(node._id)
                result.append(node)
                continue
            stack.append((node, True))
            for i in sorted(node._inputs, key=lambda x: -order.get(x._id, 0)):
                if i._id not in placed:
                    stack.append((i, False))

    for ins in ins_list:
        if not ins.is_return():
            visit(ins)
    for r in ret:
        visit(r)
    return result
