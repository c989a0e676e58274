"""rewrite_rnn (MIGraphX src/rewrite_rnn.cpp).

MIGraphX unrolls rnn/gru/lstm ops; our op set has none of them, so on any program we can build the
pass has nothing to rewrite. If such an op ever appears, the pass fails naming it instead of
leaving an op no backend can run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import MigxError
from ..ir import Module
from .base import Pass

RNN_OPS = ("rnn", "gru", "lstm")


@dataclass(frozen=True)
class RewriteRnn(Pass):
    """Unroll rnn/gru/lstm over time. There are no such ops in migx-explore, so this finds nothing."""

    name: ClassVar[str] = "rewrite_rnn"
    status: ClassVar[str] = "mapped"
    note: ClassVar[str] = "no rnn/gru/lstm ops in migx-explore's op set, so there is nothing to unroll"

    def apply_module(self, module: Module, ctx) -> bool:
        for ins in module:
            if ins.name in RNN_OPS:
                raise MigxError(f"rewrite_rnn: {ins.name} (#{ins.id}) in module {module.name} cannot be unrolled; "
                                "migx-explore has no recurrent-op lowering")
        return False
