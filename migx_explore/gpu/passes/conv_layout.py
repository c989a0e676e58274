"""Which lowered buffers are written channels-last (NHWC), so that the implicit-GEMM convolution
(codegen/conv_igemm.py) reads its input without a copy: the convolution writes its own output so,
the elementwise ops, pools and channel concats between two convolutions keep the layout their
inputs share (MIGraphX's pointwise shape rule), and a 1x1 convolution (a GEMM) writes it where it
reads it or feeds an implicit-GEMM convolution. Every kernel reads any strides, so this is only
about copies: a wrong guess costs one copy, never a wrong result."""

from __future__ import annotations

from migx_explore.compiler.ir import Instruction
from migx_explore.compiler.shape import Shape

# ops whose output follows a channels-last input (any generated kernel writes through strides)
_FOLLOWING = ("pooling", "concat")
# how far feeds_implicit_gemm looks through elementwise ops and views for a convolution
_LOOKAHEAD = 4


def nhwc_strides(lens) -> list[int]:
    """Strides of an [n, c, h, w] tensor stored [n][h][w][c]."""
    n, c, h, w = lens
    return [h * w * c, 1, w * c, c]


def channels_last_shape(s: Shape) -> Shape:
    """`s` (an [n, c, h, w] buffer) stored [n][h][w][c]."""
    return Shape(s.type, list(s.lens), nhwc_strides(s.lens))


def is_channels_last(s: Shape) -> bool:
    """A packed [n, c, h, w] buffer stored [n][h][w][c]."""
    return not s.is_tuple and s.ndim == 4 and list(s.strides) == nhwc_strides(s.lens)


def _channel_minor(s: Shape) -> bool:
    """Channels innermost (a channels-last buffer or a slice of one along any axis)."""
    return s.ndim == 4 and s.strides[1] == 1 and not s.broadcasted() and all(st > 1 for st in (s.strides[2:]))


def _constant(x: Instruction) -> bool:
    """A value known at compile time: evaluable, or the lowered copy of one (a bias made
    full-size, which propagate_constant folds into a literal later)."""
    if x.name == "gpu::precompile_op" and x.op["op"] == "contiguous":
        return x.inputs[0].can_eval()
    return x.can_eval()


def _pointwise(ins: Instruction) -> bool:
    return ins.name == "pointwise" or ins.op.has("pointwise")


def followed_layout(ins: Instruction) -> Shape:
    """An elementwise op's, pool's or channel concat's output: channels-last where its full-size,
    non-constant inputs all have channels innermost; else its own shape."""
    shape = ins.shape
    if shape.is_tuple or shape.ndim != 4 or not shape.standard():
        return shape
    pointwise = _pointwise(ins)
    if not (pointwise or ins.name == "pooling" or (ins.name == "concat" and ins.op["axis"] == 1)):
        return shape
    values = [i.shape for i in ins.inputs if i.shape.ndim == 4 and not i.shape.broadcasted() and not _constant(i)]
    if pointwise:
        values = [s for s in values if list(s.lens) == list(shape.lens)]
    if not values or not all(_channel_minor(s) for s in values):
        return shape
    return channels_last_shape(shape)


def feeds_implicit_gemm(ins: Instruction) -> bool:
    """Whether `ins` reaches, through a few elementwise ops, pools, channel concats and slices
    (not a reshape: a group norm's needs a standard buffer, so channels-last would cost a copy
    there instead), a convolution that runs as the implicit-GEMM kernel."""
    todo, seen = [(u, 1) for u in ins.outputs], set()
    while todo:
        user, depth = todo.pop()
        if user.id in seen or depth > _LOOKAHEAD:
            continue
        seen.add(user.id)
        if user.name == "convolution":
            # as the convolution will see it: channels-last, if this producer writes it so
            if user.inputs[0].shape.ndim == 4 and wants_implicit_gemm(user, input_channels_last=True):
                return True
        elif _pointwise(user) or user.name in _FOLLOWING or user.name == "slice":
            todo += [(u, depth + 1) for u in user.outputs]
    return False


def wants_implicit_gemm(conv: Instruction, input_channels_last: bool | None = None) -> bool:
    """Whether the 2-D convolution `conv` runs as the implicit-GEMM kernel once its input is
    channels-last and its weight [co][r][s][c] (as lowering lays them out for it). With its
    input channels-last already (or `input_channels_last`: as it will be), even a product of few
    blocks does: an im2col would read that input across channels."""
    from .. import kernel_cache
    from ..codegen.conv_igemm import MIN_BLOCKS, implicit_gemm_wanted

    x, w = (i.shape for i in conv.inputs[:2])
    if x.ndim != 4 or w.lens[2] * w.lens[3] == 1 and all(st == 1 for st in conv.op["stride"]):
        return False  # a 1x1 stride-1 convolution is a GEMM on the buffer as it is
    arch = getattr(kernel_cache.current_target(), "arch", None)
    channels_last = is_channels_last(x) if input_channels_last is None else input_channels_last
    min_blocks = 0 if channels_last else MIN_BLOCKS
    return implicit_gemm_wanted(
        conv.op, channels_last_shape(x), channels_last_shape(w), conv.shape, arch, min_blocks=min_blocks
    )
