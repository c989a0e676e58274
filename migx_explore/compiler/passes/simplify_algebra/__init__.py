"""simplify_algebra (MIGraphX src/simplify_algebra.cpp): up to 8 sweeps of the finders below, in
MIGraphX's order, each sweep followed by DCE. Simple algebraic identities are table rows in
identity_rules; the convolution/dot finders live in conv_rules, the concat/split ones in concat_rules,
those moving broadcasts / reshapes / transposes across an op in shape_rules.

find_conv_conv_1x1 (unmerged MIGraphX branch, PR #4785; conv1x1_rules) is inserted after
find_conv_add. In a full run find_conv_add first splits a bias that sits between two convolutions
(conv2(conv1(x) + b) -> conv2(conv1(x)) + conv2(b)); find_conv_conv_1x1 then folds the bias-free
pair and find_conv_broadcast_input shrinks conv2(b) to a dot. Applied on its own the rule also
folds the bias directly (new bias = W2 . b). `CONV_CONV_1X1` is the rule object for notebooks:
`matches(module, CONV_CONV_1X1)`, `near_misses(module, CONV_CONV_1X1)`.

Deliberate difference: find_split_reshape refuses what MIGraphX's version gets wrong, a one-element
slice block matched against the last reshape axis, which slices the wrong elements (MIGraphX's own
test reorder_reshape_slice_len_1 expects that program, which computes different values).

Where MIGraphX's own construction throws (an invalid program), ours refuses with a reason instead
(find_inner_broadcast tries its plan on shapes first). One extension, numerically exact:
find_conv_broadcast_input also takes a per-channel input shared by the batch.

All 32 of MIGraphX's finders are here, plus find_conv_conv_1x1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...pass_infra import Pass, rewriter_of
from ...pattern_rewriter import repeat_while_changes
from ..rewrite import sweep
from .concat_rules import (
    CONCAT_OP,
    CONCAT_SAME_INPUT,
    SPLIT_CONCAT,
    SPLITS,
)
from .conv1x1_rules import CONV_CONV_1X1, ConvConv1x1
from .conv_rules import (
    ADD_CONVS,
    CONCAT_CONV,
    CONV_ADD,
    CONV_BROADCAST_INPUT,
    CONV_DOT_HORIZ_FUSION,
    DOT_MUL,
    DOT_SLICE,
    MUL_CONV,
    MUL_DOT,
    MUL_SLICE_CONV,
)
from .identity_rules import (
    ADD_LIT_BROADCAST,
    DIV_CONST,
    DOT_ADD,
    DOUBLE_ADD_LIT_BROADCAST,
    LOG_DIV,
    LOG_EXP,
    MUL_ADD,
    NEG_UNIT_OPS,
    POW2,
    RSQRT,
    SUB_CONST,
    UNIT_OPS,
    ZERO_OPS,
    ZERO_POINT,
)
from .shape_rules import DOT_BROADCAST, INNER_BROADCAST, SPLIT_RESHAPE, SPLIT_TRANSPOSE

# MIGraphX's order (src/simplify_algebra.cpp), with find_conv_conv_1x1 after find_conv_add.
RULES = (
    CONV_BROADCAST_INPUT,
    INNER_BROADCAST,
    DOT_BROADCAST,
    DOUBLE_ADD_LIT_BROADCAST,
    ADD_LIT_BROADCAST,
    ADD_CONVS,
    CONV_DOT_HORIZ_FUSION,
    MUL_CONV,
    MUL_SLICE_CONV,
    MUL_DOT,
    DOT_SLICE,
    DOT_MUL,
    MUL_ADD,
    *UNIT_OPS,
    *NEG_UNIT_OPS,
    ZERO_POINT,
    *ZERO_OPS,
    DOT_ADD,
    CONV_ADD,
    CONV_CONV_1X1,
    DIV_CONST,
    SUB_CONST,
    RSQRT,
    LOG_EXP,
    LOG_DIV,
    CONCAT_CONV,
    CONCAT_SAME_INPUT,
    CONCAT_OP,
    SPLIT_CONCAT,
    SPLITS,
    SPLIT_RESHAPE,
    SPLIT_TRANSPOSE,
    POW2,
)


@dataclass(frozen=True)
class SimplifyAlgebra(Pass):
    name: ClassVar[str] = "simplify_algebra"

    def apply_module(self, module, ctx) -> bool:
        step = lambda: sweep(module, RULES, rewriter=rewriter_of(ctx), skip_if_quiet=True)  # noqa: E731
        return repeat_while_changes(8, step) > 0


__all__ = ["CONV_CONV_1X1", "ConvConv1x1", "RULES", "SimplifyAlgebra"]
