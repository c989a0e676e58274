"""simplify_reshapes (MIGraphX src/simplify_reshapes.cpp; fields depth, enable_op_shape_transform_op,
enable_gather_rewrite).

Order as in MIGraphX: find_gather_scalar, then find_gather when enabled (gather_rules), then up to
`depth` sweeps of MIGraphX's 17 finders in its order, each sweep followed by DCE: find_nop_reshapes,
find_flatten (view_rules), find_reshape_cont (move_rules), find_slice_shape_transforms (slice_rules),
find_nested_shape_transforms (view_rules, through shape_chains), find_concat_slice,
find_concat_transpose (concat_rules), find_concat_reshape (move_rules), find_concat_multibroadcasts,
find_nested_slice, find_nested_concat (concat_rules), find_transpose_slice, find_slice_transpose
(move_rules), find_unary_shape_transforms (view_rules), find_reshape_dot, find_mul_add_shape_op_dot
(move_rules) and, when enabled, find_op_shape_transform_op (op_shape_transform_rules). One extra:
find_concat_of_slices (concat_rules; MIGraphX does it in simplify_algebra's find_split_concat; here
it merges any adjacent run). The tables below are the order; each rule lives in its module.

Where we differ in form: MIGraphX normalises view chains through its shape_transform_descriptor;
we use an exact digit (atom) model, so a chain can come out as different but equal views (the
conformance table's EQUIV cases). find_transpose_slice writes a reshape where MIGraphX writes
unsqueeze with `steps`. Still different in decision (conformance DIFF): a gather whose index is a
1-element broadcast ({1}, strides {0}) keeps the axis in our gather op, MIGraphX's drops it.
Deliberately different (no MIGraphX test covers them): find_reshape_dot leaves a 2-D dot on a plain
2-D weight as a 2-D GEMM, and find_op_shape_transform_op leaves a pointwise op that is the only
reader of a dot/convolution next to it; both keep the GEMM + bias (+ residual) shape our backend
folds into one BLAS call (tests/gpu/test_transformer_fusions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...pass_infra import Pass, rewriter_of
from ...pattern_rewriter import repeat_while_changes
from ..rewrite import sweep
from .concat_rules import (
    ConcatMultibroadcasts,
    ConcatOfSlices,
    ConcatSlice,
    ConcatTranspose,
    NestedConcat,
    NestedSlice,
)
from .gather_rules import GatherScalar, GatherView
from .move_rules import (
    ConcatReshape,
    MulAddShapeOpDot,
    ReshapeCont,
    ReshapeDot,
    SliceTranspose,
    TransposeSlice,
)
from .op_shape_transform_rules import OpShapeTransformOp
from .slice_rules import SliceShapeTransforms
from .view_rules import Flatten, NestedShapeTransforms, NopReshapes, UnaryShapeTransforms

GATHER_SCALAR = (GatherScalar(),)
GATHER = (GatherView(),)
# MIGraphX's order (find_matches applies the first rule that takes an instruction).
RULES = (
    NopReshapes(),
    Flatten(),
    ReshapeCont(),
    SliceShapeTransforms(),
    NestedShapeTransforms(),
    ConcatSlice(),
    ConcatTranspose(),
    ConcatReshape(),
    ConcatMultibroadcasts(),
    NestedSlice(),
    NestedConcat(),
    TransposeSlice(),
    SliceTranspose(),
    UnaryShapeTransforms(),
    ReshapeDot(),
    MulAddShapeOpDot(),
    ConcatOfSlices(),
)


@dataclass(frozen=True)
class SimplifyReshapes(Pass):
    name: ClassVar[str] = "simplify_reshapes"
    depth: int = 4
    enable_op_shape_transform_op: bool = False
    enable_gather_rewrite: bool = False

    def apply_module(self, module, ctx) -> bool:
        changed = sweep(module, GATHER_SCALAR, rewriter=rewriter_of(ctx), skip_if_quiet=True)
        if self.enable_gather_rewrite:
            changed = sweep(module, GATHER, with_dce=False, rewriter=rewriter_of(ctx)) or changed
        rules = RULES + (OpShapeTransformOp(),) if self.enable_op_shape_transform_op else RULES
        quiet = rules is RULES  # a fresh tuple per run would never be found quiet again
        step = lambda: sweep(module, rules, rewriter=rewriter_of(ctx), skip_if_quiet=quiet)  # noqa: E731
        return repeat_while_changes(self.depth, step) > 0 or changed
