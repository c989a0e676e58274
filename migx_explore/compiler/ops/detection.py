"""Detection ops with data-dependent control: `nonmaxsuppression`, `roialign`, `gridsample`
(MIGraphX's names). Each has a shape rule and a numpy reference compute; there is no generated
GPU kernel for them yet, so the backend runs them as host steps (gpu::host_op).

nonmaxsuppression has a static output of the most boxes it can select,
batches x classes x min(max_output_boxes_per_class, boxes) rows of (batch, class, box); rows
past the selected ones are -1 (MIGraphX's fixed-shape form writes 0, which reads as a real
selection of box 0).
"""

from __future__ import annotations

import numpy as np

from ..errors import EvalError, ShapeError
from ..op import GpuCode, defop
from ..shape import Shape
from .common import A


# --- nonmaxsuppression --------------------------------------------------------------------------
def _nms_rows(op, boxes: Shape, scores: Shape) -> int:
    b, c, n = scores.lens
    return b * c * min(op["max_output_boxes_per_class"], n)


def _nms_shape(op, s, mods):
    boxes, scores = s[0], s[1]
    if boxes.ndim != 3 or boxes.lens[2] != 4 or scores.ndim != 3:
        raise ShapeError(
            f"nonmaxsuppression: boxes must be [batch, boxes, 4] and scores [batch, classes, boxes], "
            f"got {list(boxes.lens)} and {list(scores.lens)}"
        )
    if boxes.lens[0] != scores.lens[0] or boxes.lens[1] != scores.lens[2]:
        raise ShapeError(f"nonmaxsuppression: boxes {list(boxes.lens)} and scores {list(scores.lens)} disagree")
    return Shape.of("int64", [_nms_rows(op, boxes, scores), 3])


def _corners(b: np.ndarray, center: bool) -> np.ndarray:
    """[n, 4] -> (y1, x1, y2, x2) with y1 <= y2, x1 <= x2."""
    if center:
        xc, yc, w, h = b.T
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=1)
    y1, x1, y2, x2 = b.T
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], axis=1)


def _iou(a: np.ndarray, rest: np.ndarray) -> np.ndarray:
    ih = np.clip(np.minimum(a[2], rest[:, 2]) - np.maximum(a[0], rest[:, 0]), 0, None)
    iw = np.clip(np.minimum(a[3], rest[:, 3]) - np.maximum(a[1], rest[:, 1]), 0, None)
    inter = ih * iw
    area = (a[2] - a[0]) * (a[3] - a[1])
    areas = (rest[:, 2] - rest[:, 0]) * (rest[:, 3] - rest[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0)


def _nms_compute(op, args, out, run):
    boxes, scores = np.asarray(args[0], np.float64), np.asarray(args[1], np.float64)
    limit, iou_t, score_t = op["max_output_boxes_per_class"], op["iou_threshold"], op["score_threshold"]
    res = np.full(out.lens, -1, dtype=np.int64)
    k = 0
    for b in range(scores.shape[0]):
        corners = _corners(boxes[b], bool(op["center_point_box"]))
        for c in range(scores.shape[1]):
            s = scores[b, c]
            # Highest score first; ties keep the lower box index (a stable sort of -score).
            order = [i for i in np.argsort(-s, kind="stable") if not op["use_score_threshold"] or s[i] > score_t]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if kept and (_iou(corners[i], corners[kept]) > iou_t).any():
                    continue
                kept.append(i)
            for i in kept:
                res[k] = (b, c, i)
                k += 1
    return res


defop(
    "nonmaxsuppression",
    _nms_shape,
    _nms_compute,
    nargs=2,
    gpu=GpuCode.host("greedy suppression is sequential per class; no generated kernel yet"),
    attrs=[
        A("center_point_box", "int", 0),
        A("max_output_boxes_per_class", "int", 0, show=True),
        A("iou_threshold", "float", 0.0, show=True),
        A("score_threshold", "float", 0.0),
        A("use_score_threshold", "bool", False),
    ],
    doc="Greedy non-maximum suppression per batch and class (boxes, scores); returns (batch, class, box) "
    "rows, highest score first, padded with -1 rows to the static maximum.",
)


# --- sampling helpers ------------------------------------------------------------------------------
def _bilinear(img: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """img [C, H, W] sampled at float coords (any shape); out-of-image neighbours read 0."""
    h, w = img.shape[1:]
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    out = 0
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            wgt = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
            ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            v = img[:, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
            out = out + np.where(ok, wgt, 0) * v
    return out


# --- roialign --------------------------------------------------------------------------------------
def _roialign_shape(op, s, mods):
    x, rois, idx = s
    if x.ndim != 4 or rois.ndim != 2 or rois.lens[1] != 4 or idx.lens != (rois.lens[0],):
        raise ShapeError(
            f"roialign: expects X [N, C, H, W], rois [R, 4], batch_indices [R]; got "
            f"{list(x.lens)}, {list(rois.lens)}, {list(idx.lens)}"
        )
    return Shape.of(x.type, [rois.lens[0], x.lens[1], op["output_height"], op["output_width"]])


def _roi_samples(op, h: int, w: int, y1, x1, y2, x2):
    """Per output bin, the sample coordinates (ys [oh, gh], xs [ow, gw]) and grid size."""
    oh, ow = op["output_height"], op["output_width"]
    rh, rw = y2 - y1, x2 - x1
    if op["coordinate_transformation_mode"] == "output_half_pixel":  # legacy: rois at least 1 pixel
        rh, rw = max(rh, 1.0), max(rw, 1.0)
    bh, bw = rh / oh, rw / ow
    gh = op["sampling_ratio"] or int(np.ceil(rh / oh))
    gw = op["sampling_ratio"] or int(np.ceil(rw / ow))
    gh, gw = max(gh, 1), max(gw, 1)
    ys = y1 + np.arange(oh)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh
    xs = x1 + np.arange(ow)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw
    return ys, xs, gh, gw


def _roialign_compute(op, args, out, run):
    x, rois, idx = (np.asarray(a) for a in args)
    n, c, h, w = x.shape
    bad = np.flatnonzero((idx < 0) | (idx >= n))
    if bad.size:  # ORT refuses these; numpy would wrap a negative one onto another image
        first = int(bad[0])
        raise EvalError(f"batch_indices[{first}] = {int(idx[first])} is out of range [0, {n - 1}] (ORT refuses it)")
    res = np.zeros(out.lens, dtype=np.float64)
    shift = 0.5 if op["coordinate_transformation_mode"] == "half_pixel" else 0.0
    for r in range(rois.shape[0]):
        x1, y1, x2, y2 = (rois[r].astype(np.float64) * op["spatial_scale"]) - shift
        ys, xs, gh, gw = _roi_samples(op, h, w, y1, x1, y2, x2)
        yy = ys.reshape(-1)[:, None] * np.ones(xs.size)[None, :]
        xx = np.ones(ys.size)[:, None] * xs.reshape(-1)[None, :]
        # Samples outside [-1, size] contribute 0; inside, coordinates clamp to the image.
        valid = (yy >= -1) & (yy <= h) & (xx >= -1) & (xx <= w)
        img = x[int(idx[r])].astype(np.float64)
        yc, xc = np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)
        if op["mode"] == "avg":
            v = np.where(valid, _bilinear(img, yc, xc), 0)
            v = v.reshape(c, op["output_height"], gh, op["output_width"], gw)
            res[r] = v.mean(axis=(2, 4))
        else:  # max: the largest weighted corner contribution per sample (ONNX's definition)
            v = np.where(valid, _max_corner(img, yc, xc), 0)
            v = v.reshape(c, op["output_height"], gh, op["output_width"], gw)
            res[r] = v.max(axis=(2, 4))
    return res.astype(x.dtype)


def _max_corner(img, y, x):
    h, w = img.shape[1:]
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    best = None
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = np.minimum(y0 + dy, h - 1), np.minimum(x0 + dx, w - 1)
            wgt = (1 - np.abs(y - (y0 + dy))) * (1 - np.abs(x - (x0 + dx)))
            v = wgt * img[:, yy, xx]
            best = v if best is None else np.maximum(best, v)
    return best


defop(
    "roialign",
    _roialign_shape,
    _roialign_compute,
    nargs=3,
    gpu=GpuCode.host("no generated kernel yet (per-roi adaptive sampling grids)"),
    attrs=[
        A("coordinate_transformation_mode", "str", "half_pixel", choices=("half_pixel", "output_half_pixel")),
        A("mode", "str", "avg", choices=("avg", "max"), show=True),
        A("output_height", "int", 1, show=True),
        A("output_width", "int", 1, show=True),
        A("sampling_ratio", "int", 0),
        A("spatial_scale", "float", 1.0),
    ],
    doc="Region-of-interest align (X, rois [R, 4] as x1 y1 x2 y2, batch_indices [R]) -> [R, C, oh, ow].",
)


# --- gridsample ------------------------------------------------------------------------------------
def _gridsample_shape(op, s, mods):
    x, grid = s
    r = x.ndim - 2
    if r not in (2, 3) or grid.ndim != x.ndim or grid.lens[-1] != r or grid.lens[0] != x.lens[0]:
        raise ShapeError(
            f"gridsample: expects X [N, C, *spatial] (2 or 3 spatial dims) and grid [N, *out, "
            f"{max(r, 2)}]; got {list(x.lens)} and {list(grid.lens)}"
        )
    if op["mode"] == "cubic" and r != 2:
        raise ShapeError("gridsample: cubic mode samples 2-D images only")
    return Shape.of(x.type, [x.lens[0], x.lens[1], *grid.lens[1:-1]])


def _reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Fold coordinates into [lo, hi] by mirroring at both ends."""
    span = hi - lo
    if span <= 0:
        return np.full(v.shape, lo)
    d = np.mod(v - lo, 2 * span)
    return lo + np.where(d > span, 2 * span - d, d)


def _pad_coord(op, v: np.ndarray, size: int) -> np.ndarray:
    if op["padding_mode"] == "border":
        return np.clip(v, 0, size - 1)
    if op["padding_mode"] == "reflection":
        lo, hi = (0.0, size - 1.0) if op["align_corners"] else (-0.5, size - 0.5)
        return np.clip(_reflect(v, lo, hi), 0, size - 1)
    return v


def _pad_index(op, i: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(index to read, whether it reads a real pixel) for a cubic tap."""
    if op["padding_mode"] == "border":
        return np.clip(i, 0, size - 1), np.ones(i.shape, bool)
    if op["padding_mode"] == "reflection":
        lo, hi = (0.0, size - 1.0) if op["align_corners"] else (-0.5, size - 0.5)
        r = np.clip(np.rint(_reflect(i.astype(np.float64), lo, hi)), 0, size - 1).astype(np.int64)
        return r, np.ones(i.shape, bool)
    return np.clip(i, 0, size - 1), (i >= 0) & (i < size)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = -0.75

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _gather(img: np.ndarray, idx: list[np.ndarray], ok: np.ndarray) -> np.ndarray:
    """img [C, *spatial] read at integer indices (one array per spatial dim); 0 where not ok."""
    clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, img.shape[1:]))
    return np.where(ok, img[(slice(None), *clipped)], 0)


def _linear(img: np.ndarray, coords: list[np.ndarray]) -> np.ndarray:
    """Multilinear interpolation over 2^r corners; corners outside the image read 0."""
    lo = [np.floor(c).astype(np.int64) for c in coords]
    out = 0
    for corner in range(2 ** len(coords)):
        idx, wgt, ok = [], 1.0, True
        for d, (c, base) in enumerate(zip(coords, lo)):
            i = base + ((corner >> d) & 1)
            wgt = wgt * (1 - np.abs(c - i))
            ok = ok & (i >= 0) & (i < img.shape[1 + d])
            idx.append(i)
        out = out + wgt * _gather(img, idx, ok)
    return out


def _cubic(op, img: np.ndarray, coords: list[np.ndarray]) -> np.ndarray:
    (py, px), (h, w) = coords, img.shape[1:]
    y0, x0 = np.floor(py).astype(np.int64), np.floor(px).astype(np.int64)
    wy, wx = _cubic_weights(py - y0), _cubic_weights(px - x0)
    acc = 0
    for i in range(4):
        yi, oky = _pad_index(op, y0 - 1 + i, h)
        for j in range(4):
            xj, okx = _pad_index(op, x0 - 1 + j, w)
            acc = acc + wy[i] * wx[j] * _gather(img, [yi, xj], oky & okx)
    return acc


def _gridsample_compute(op, args, out, run):
    x, grid = np.asarray(args[0]), np.asarray(args[1]).astype(np.float64)
    sizes = x.shape[2:]
    res = np.zeros(out.lens, dtype=np.float64)
    for b in range(x.shape[0]):
        # grid's last axis lists coordinates innermost first (x, y[, z]): reverse to spatial order.
        norm = [grid[b, ..., k] for k in reversed(range(len(sizes)))]
        if op["align_corners"]:
            coords = [(g + 1) / 2 * (n - 1) for g, n in zip(norm, sizes)]
        else:
            coords = [((g + 1) * n - 1) / 2 for g, n in zip(norm, sizes)]
        img = x[b].astype(np.float64)
        if op["mode"] == "cubic":
            res[b] = _cubic(op, img, coords)
            continue
        coords = [_pad_coord(op, c, n) for c, n in zip(coords, sizes)]
        if op["mode"] == "nearest":
            idx = [np.rint(c).astype(np.int64) for c in coords]
            ok = np.logical_and.reduce([(i >= 0) & (i < n) for i, n in zip(idx, sizes)])
            res[b] = _gather(img, idx, ok)
        else:
            res[b] = _linear(img, coords)
    return res.astype(x.dtype)


defop(
    "gridsample",
    _gridsample_shape,
    _gridsample_compute,
    nargs=2,
    gpu=GpuCode.host("no generated kernel yet (data-dependent gathers with interpolation)"),
    attrs=[
        A("mode", "str", "linear", choices=("linear", "nearest", "cubic"), show=True),
        A("padding_mode", "str", "zeros", choices=("zeros", "border", "reflection"), show=True),
        A("align_corners", "bool", False),
    ],
    doc="Sample X [N, C, *spatial] (2-D or 3-D) at the normalized (x, y[, z]) locations of grid [N, *out, r].",
)
