"""NonMaxSuppression, RoiAlign and GridSample -> the detection ops (ops/detection.py). Their
scalar operands (NMS's box limit and thresholds) must be known at import, as MIGraphX's
static-shape form needs them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from .context import NodeContext
    from .registry import Args, Result


def _scalar(ctx, args, i: int, what: str, default):
    if len(args) <= i or args[i] is None:
        return default
    v = ctx.need_const(args[i], what).reshape(-1)
    return v[0] if v.size else default  # ORT reads an empty operand as absent


@register("NonMaxSuppression")
def parse_nms(ctx: NodeContext, args: Args) -> Result:
    boxes, scores = args[0], args[1]
    limit = int(_scalar(ctx, args, 2, "max_output_boxes_per_class", 0))
    iou = float(_scalar(ctx, args, 3, "iou_threshold", 0.0))
    score = _scalar(ctx, args, 4, "score_threshold", None)
    if not 0.0 <= iou <= 1.0:  # NaN fails this too; ORT refuses the same
        raise ctx.error(f"iou_threshold must be in [0, 1], got {iou}")
    limit = max(0, min(limit, scores.shape.lens[2]))
    nms = ctx.add(
        "nonmaxsuppression",
        [boxes, scores],
        center_point_box=int(ctx.attr("center_point_box", 0)),
        max_output_boxes_per_class=limit,
        iou_threshold=iou,
        score_threshold=float(score) if score is not None else 0.0,
        use_score_threshold=score is not None,
    )
    if ctx.need_exact(boxes, "boxes") is None or ctx.need_exact(scores, "scores") is None:
        return nms  # MIGraphX's fixed-size form: rows past the selected ones are -1
    rows = ctx.need_const(nms, "selected_indices")
    return ctx.literal(rows[(rows >= 0).all(axis=1)])  # ONNX's exact result: the selected rows only


@register("RoiAlign")
def parse_roialign(ctx: NodeContext, args: Args) -> Result:
    x, rois, idx = args
    default_mode = "half_pixel" if ctx.opset >= 16 else "output_half_pixel"
    return ctx.add(
        "roialign",
        [x, ctx.convert(rois, x.shape.type), ctx.convert(idx, "int64")],
        coordinate_transformation_mode=ctx.attr("coordinate_transformation_mode", default_mode),
        mode=ctx.attr_choice("mode", ("avg", "max"), "avg"),
        output_height=int(ctx.attr("output_height", 1)),
        output_width=int(ctx.attr("output_width", 1)),
        sampling_ratio=int(ctx.attr("sampling_ratio", 0)),
        spatial_scale=float(ctx.attr("spatial_scale", 1.0)),
    )


@register("GridSample")
def parse_gridsample(ctx: NodeContext, args: Args) -> Result:
    x, grid = args
    mode = ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return ctx.add(
        "gridsample",
        [x, ctx.convert(grid, x.shape.type)],
        mode=mode,
        padding_mode=ctx.attr_choice("padding_mode", ("zeros", "border", "reflection"), "zeros"),
        align_corners=bool(ctx.attr("align_corners", 0)),
    )
