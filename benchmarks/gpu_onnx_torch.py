"""A small ONNX -> PyTorch converter for the benchmark: the same network, run by PyTorch.

Nodes are interpreted with torch.nn.functional calls in graph order; initializers become CUDA
tensors once. Everything that does not depend on the graph inputs (Shape-of-static-shape chains,
Constant, their arithmetic) is folded at build time, so forward() launches only real work and can
be captured in a CUDA graph. Covers the ops of the built-in and benchmark models.
"""

from __future__ import annotations

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


def _attrs(node) -> dict:
    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _pads(p, nd):
    return (list(p[:nd]), list(p[nd:])) if p else ([0] * nd, [0] * nd)


def _conv(x, w, b=None, *, strides=None, pads=None, dilations=None, group=1, **_):
    nd = x.dim() - 2
    pb, pe = _pads(pads, nd)
    if pb != pe:
        x = F.pad(x, [v for i in reversed(range(nd)) for v in (pb[i], pe[i])])
        pb = [0] * nd
    return F.conv2d(x, w, b, stride=strides or 1, padding=pb, dilation=dilations or 1, groups=group)


def _maxpool(x, *, kernel_shape, strides=None, pads=None, ceil_mode=0, dilations=None, **_):
    pb, pe = _pads(pads, len(kernel_shape))
    if pb != pe:
        x = F.pad(x, [v for i in reversed(range(len(pb))) for v in (pb[i], pe[i])], value=float("-inf"))
        pb = [0] * len(kernel_shape)
    return F.max_pool2d(x, kernel_shape, strides or kernel_shape, pb, dilations or 1, bool(ceil_mode))


def _gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0, **_):
    y = alpha * ((a.t() if transA else a) @ (b.t() if transB else b))
    return y if c is None else y + beta * c


def _reshape(x, shape, allowzero=0, **_):
    dims = [int(d) for d in shape.tolist()]
    dims = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(dims)]
    return x.reshape(dims)


def _split(x, split=None, *, axis=0, num_outputs=None, n_out=1, **kw):
    sizes = split.tolist() if split is not None else kw.get("split")
    if sizes is None:
        sizes = [x.shape[axis] // n_out] * n_out
    return list(torch.split(x, [int(s) for s in sizes], dim=axis))


def _resize(x, roi=None, scales=None, sizes=None, *, mode="nearest", **kw):
    if mode != "nearest" and mode != "linear":
        raise NotImplementedError(f"Resize mode {mode}")
    ctm = kw.get("coordinate_transformation_mode", "half_pixel")
    if sizes is not None and sizes.numel():
        size = [int(s) for s in sizes.tolist()[2:]]
        return F.interpolate(
            x,
            size=size,
            mode="nearest" if mode == "nearest" else "bilinear",
            **({} if mode == "nearest" else {"align_corners": ctm == "align_corners"}),
        )
    sf = [float(s) for s in scales.tolist()[2:]]
    if mode == "nearest":
        return F.interpolate(x, scale_factor=sf, mode="nearest")
    return F.interpolate(x, scale_factor=sf, mode="bilinear", align_corners=ctm == "align_corners")


def _layernorm(x, scale, bias=None, *, axis=-1, epsilon=1e-5, **_):
    axis = axis % x.dim()
    return F.layer_norm(x, x.shape[axis:], scale, bias, epsilon)


def _reduce_mean(x, axes=None, *, keepdims=1, **kw):
    ax = axes.tolist() if axes is not None else kw.get("axes")
    return x.mean(dim=[int(a) for a in ax], keepdim=bool(keepdims))


def _clip(x, lo=None, hi=None, **kw):
    lo = kw.get("min") if lo is None else lo
    hi = kw.get("max") if hi is None else hi
    return torch.clamp(x, min=lo, max=hi)


def _unsqueeze(x, axes=None, **kw):
    ax = sorted(
        int(a) % (x.dim() + len(axes if axes is not None else kw["axes"]))
        for a in (axes.tolist() if axes is not None else kw["axes"])
    )
    for a in ax:
        x = x.unsqueeze(a)
    return x


def _expand(x, shape, **_):
    return x.expand(*np.broadcast_shapes(tuple(x.shape), tuple(int(s) for s in shape.tolist())))


def _trilu(x, k=None, *, upper=1, **_):
    kk = int(k.item()) if k is not None else 0
    return torch.triu(x, kk) if upper else torch.tril(x, kk)


def _cos(x, value=None, **_):
    return x


# The detectors' NMS-free post-processing (yolov10n, yolo_e2e): top-k over scores, the row
# gathers it feeds, and integer index arithmetic (Div on integers truncates, as ONNX says).
# Host constants are read with tolist() alone: make_fx (the torch.compile side traces OnnxTorch
# into a flat graph first) cannot read a value out of a tensor that another op produced.
def _ints(t) -> list[int]:
    return [int(v) for v in np.asarray(t.tolist()).reshape(-1)]


def _topk(x, k, *, axis=-1, largest=1, **_):
    v, i = torch.topk(x, _ints(k)[0], dim=axis, largest=bool(largest), sorted=True)
    return [v, i]


def _reduce(fn):
    def reduce(x, axes=None, *, keepdims=1, **kw):
        return fn(x, dim=_ints(axes) if axes is not None else kw.get("axes", []), keepdim=bool(keepdims))

    return reduce


def _gathernd(x, i, *, batch_dims=0, **_):
    if batch_dims != 1 or i.shape[-1] != 1:
        raise NotImplementedError("GatherND: only batch_dims=1 with 1-coordinate indices")
    rows = torch.arange(x.shape[0], device=x.device).reshape(-1, *([1] * (i.dim() - 2)))
    return x[rows, i[..., 0]]


def _div(a, b, **_):
    return a / b if a.is_floating_point() else torch.div(a, b, rounding_mode="trunc")


def _slice(x, starts, ends, axes=None, steps=None, **_):
    idx = [slice(None)] * x.dim()
    begin, end = _ints(starts), _ints(ends)
    axes_ = _ints(axes) if axes is not None else range(len(begin))
    steps_ = _ints(steps) if steps is not None else [1] * len(begin)
    for k, ax in enumerate(axes_):
        idx[ax] = slice(begin[k], end[k], steps_[k])
    return x[tuple(idx)]


def _squeeze(x, axes=None, **kw):
    ax = _ints(axes) if axes is not None else kw.get("axes")
    return x.squeeze() if ax is None else x.squeeze(tuple(a % x.dim() for a in ax))


OPS = {
    "Conv": _conv,
    "MaxPool": _maxpool,
    "Gemm": _gemm,
    "Reshape": _reshape,
    "Split": _split,
    "Resize": _resize,
    "LayerNormalization": _layernorm,
    "ReduceMean": _reduce_mean,
    "Clip": _clip,
    "Unsqueeze": _unsqueeze,
    "Expand": _expand,
    "Trilu": _trilu,
    "Relu": lambda x, **_: F.relu(x),
    "Sigmoid": lambda x, **_: torch.sigmoid(x),
    "Erf": lambda x, **_: torch.erf(x),
    "Add": lambda a, b, **_: a + b,
    "Sub": lambda a, b, **_: a - b,
    "Mul": lambda a, b, **_: a * b,
    "Div": _div,
    "Equal": lambda a, b, **_: a == b,
    "LessOrEqual": lambda a, b, **_: a <= b,
    "Range": lambda s, lim, d, **_: torch.arange(int(s), int(lim), int(d), device=s.device),
    "Where": lambda c, a, b, **_: torch.where(c, a, b),
    "Identity": lambda x, **_: x,
    # Exported HF transformers (attention masks, GPT-2's tanh GELU): comparisons and logic.
    "And": lambda a, b, **_: a & b,
    "Or": lambda a, b, **_: a | b,
    "Not": lambda a, **_: ~a,
    "Less": lambda a, b, **_: a < b,
    "Greater": lambda a, b, **_: a > b,
    "GreaterOrEqual": lambda a, b, **_: a >= b,
    "Pow": lambda a, b, **_: torch.pow(a, b),
    "Tanh": lambda x, **_: torch.tanh(x),
    "IsNaN": lambda x, **_: torch.isnan(x),
    "Cast": lambda x, to, **_: x.to(_ONNX_TORCH_TYPES[to]),
    "GatherElements": lambda x, i, axis=0, **_: torch.gather(x, axis, torch.where(i < 0, i + x.shape[axis], i).long()),
    "MatMul": lambda a, b, **_: a @ b,
    "GlobalAveragePool": lambda x, **_: x.mean(dim=tuple(range(2, x.dim())), keepdim=True),
    "Flatten": lambda x, axis=1, **_: x.reshape(int(np.prod(x.shape[:axis])), -1),
    "Concat": lambda *xs, axis, **_: torch.cat(xs, dim=axis),
    "Transpose": lambda x, perm=None, **_: x.permute(*(perm or list(reversed(range(x.dim()))))),
    "Softmax": lambda x, axis=-1, **_: torch.softmax(x, dim=axis),
    "LogSoftmax": lambda x, axis=-1, **_: torch.log_softmax(x, dim=axis),
    "Gather": lambda x, i, axis=0, **_: (
        torch.index_select(x, axis, i.reshape(-1).long()).reshape(
            tuple(x.shape[:axis]) + tuple(i.shape) + tuple(x.shape[axis + 1 :])
        )
        if i.dim()
        else x.select(axis, int(i))
    ),
    "BatchNormalization": lambda x, s, b, m, v, epsilon=1e-5, **_: F.batch_norm(x, m, v, s, b, False, 0.0, epsilon),
    "ConstantOfShape": lambda shape, value=None, **_: _constant_of_shape(shape, value),
    "TopK": _topk,
    "ReduceMax": _reduce(torch.amax),
    "ReduceSum": _reduce(torch.sum),
    "GatherND": _gathernd,
    "Mod": lambda a, b, **_: torch.remainder(a, b),
    "Slice": _slice,
    "Squeeze": _squeeze,
    "Tile": lambda x, reps, **_: x.repeat(*_ints(reps)),
}


def _constant_of_shape(shape, value=None):
    fill = (
        torch.from_numpy(numpy_helper.to_array(value).reshape(-1)[:1].copy()) if value is not None else torch.zeros(1)
    )
    return torch.full([int(s) for s in shape.tolist()], fill.item(), dtype=fill.dtype, device=shape.device)


_ONNX_TORCH_TYPES = {
    1: torch.float32,
    2: torch.uint8,
    3: torch.int8,
    6: torch.int32,
    7: torch.int64,
    9: torch.bool,
    10: torch.float16,
    11: torch.float64,
    16: torch.bfloat16,
}

# Ops whose inputs after the first are shapes/axes/sizes read on the host (kept on the CPU so
# forward() never synchronizes; everything else is resident on the GPU).
SHAPE_ARGS = {"Reshape", "Expand", "Unsqueeze", "Split", "ReduceMean", "Resize", "ConstantOfShape", "Trilu"}
SHAPE_ARGS |= {"TopK", "ReduceMax", "ReduceSum", "Slice", "Squeeze", "Tile"}


class OnnxTorch(torch.nn.Module):
    def __init__(self, model: onnx.ModelProto, device: str = "cuda"):
        super().__init__()
        g = model.graph
        inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in g.initializer}
        self.inputs = [i.name for i in g.input if i.name not in inits]
        self.outputs = [o.name for o in g.output]
        shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in g.input}
        self.types = {i.name: _ONNX_TORCH_TYPES.get(i.type.tensor_type.elem_type, torch.float32) for i in g.input}
        self.device = device
        self._fold(list(g.node), inits, shapes)

    @staticmethod
    def _run_node(node, args):
        a = _attrs(node)
        if node.op_type == "Constant":
            return [torch.from_numpy(numpy_helper.to_array(a["value"]).copy())]
        if node.op_type == "Shape":
            return [torch.tensor(list(args[0].shape), dtype=torch.int64)]
        fn = OPS.get(node.op_type)
        if fn is None:
            raise NotImplementedError(f"no torch mapping for ONNX {node.op_type}")
        args = list(args)
        while args and args[-1] is None:
            args.pop()
        if node.op_type == "Split":
            a["n_out"] = len(node.output)
        out = fn(*args, **a)
        return out if isinstance(out, list) else [out]

    def _fold(self, nodes, inits, shapes):
        """Run once on the CPU with zero inputs; every value that does not depend on the inputs
        (static shapes included) becomes a constant; the rest is the forward program, whose
        constant arguments are placed once: host for shape arguments, GPU otherwise."""
        env = dict(inits)
        dynamic = set(self.inputs)
        for name in self.inputs:
            env[name] = torch.zeros(shapes[name], dtype=self.types[name])
        program = []
        with torch.no_grad():
            for node in nodes:
                outs = self._run_node(node, [env[n] if n else None for n in node.input])
                env.update(zip(node.output, outs))
                if node.op_type != "Shape" and any(i in dynamic for i in node.input if i):
                    dynamic.update(node.output)
                    program.append(node)
        self.program = []
        for node in program:
            args = []
            for k, n in enumerate(node.input):
                if not n or n in dynamic:
                    args.append(n or None)
                else:
                    host = node.op_type in SHAPE_ARGS and k > 0
                    args.append(env[n] if host else env[n].to(self.device))
            self.program.append((node, args))

    def to_half(self) -> OnnxTorch:
        """A copy whose float32 constants are float16 (the fp16 baseline: feed it half inputs)."""
        import copy

        net = copy.copy(self)
        net.program = [
            (node, [a.half() if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a for a in args])
            for node, args in self.program
        ]
        net.types = {k: torch.float16 if v == torch.float32 else v for k, v in self.types.items()}
        return net

    @torch.no_grad()
    def forward(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        env = dict(zip(self.inputs, xs))
        for node, args in self.program:
            vals = [env[a] if isinstance(a, str) else a for a in args]
            env.update(zip(node.output, self._run_node(node, vals)))
        return [env[o] for o in self.outputs]
