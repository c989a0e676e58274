"""One attention layer in the forms torch's exporters emit for Hugging Face models that use
scaled_dot_product_attention (attn_implementation="sdpa", transformers 5, torch 2.11; the same
forms from torch.onnx.export with dynamo=False and dynamo=True), built with onnx.helper so CI
covers them without torch:

* Q and Kᵀ each multiplied by √(1/√d) before their MatMul;
* a bool mask turned additive with Where(mask, 0, fill) and added to the scores (fill -inf in
  the TorchScript export, the float32 minimum in dynamo's);
* Softmax, then the guard Where(IsNaN(p), 0, p) before the second MatMul.

    bert   padding mask from attention_mask (B, S), -inf fill
    gpt2   causal mask And padding mask, -inf fill; left padding makes whole query rows masked
           (their output is 0 through the guard)
    llama  grouped-query attention (4 query heads, 2 K/V heads repeated with Unsqueeze, Expand,
           Reshape), rotary embeddings on Q and K (x·cos + rotate_half(x)·sin), causal And padding
           mask with the float32-minimum fill

Each model maps hidden (B, S, E) and attention_mask (B, S) to the attention output (B, S, E).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.onnx.onnx_util import init, make_model, vi

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
KINDS = ("bert", "gpt2", "llama")
B, S, E, H = 2, 8, 32, 4
D = E // H


def _rotary() -> tuple[np.ndarray, np.ndarray]:
    inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
    ang = np.arange(S)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def sdpa_attention(kind: str, *, guard_fill: float = 0.0) -> onnx.ModelProto:
    """The attention layer of `kind` (see the module doc); guard_fill changes the guard's 0 (a
    near miss: the fused kernel only knows the 0 fill)."""
    rng = np.random.default_rng({"bert": 1, "gpt2": 2, "llama": 3}[kind])
    kv_heads = 2 if kind == "llama" else H
    n = helper.make_node
    inits = [
        init("wq", (rng.standard_normal((E, E)) * 0.3).astype(np.float32)),
        init("wk", (rng.standard_normal((E, kv_heads * D)) * 0.3).astype(np.float32)),
        init("wv", (rng.standard_normal((E, kv_heads * D)) * 0.3).astype(np.float32)),
        init("q_shape", np.array([B, S, H, D], np.int64)),
        init("kv_shape", np.array([B, S, kv_heads, D], np.int64)),
        init("out_shape", np.array([B, S, E], np.int64)),
        init("half_scale", np.float32(np.sqrt(1.0 / np.sqrt(D)))),
        init("zero", np.float32(0.0)),
        init("guard_fill", np.float32(guard_fill)),
        init("fill", np.float32(-np.inf if kind != "llama" else np.finfo(np.float32).min)),
        init("ax12", np.array([1, 2], np.int64)),
    ]
    nodes = [
        n("MatMul", ["hidden", "wq"], ["q0"]),
        n("MatMul", ["hidden", "wk"], ["k0"]),
        n("MatMul", ["hidden", "wv"], ["v0"]),
        n("Reshape", ["q0", "q_shape"], ["q1"]),
        n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k0", "kv_shape"], ["k1"]),
        n("Transpose", ["k1"], ["k"], perm=[0, 2, 1, 3]),
        n("Reshape", ["v0", "kv_shape"], ["v1"]),
        n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
    ]
    q, k, v = "q", "k", "v"
    if kind == "llama":
        cos, sin = _rotary()
        inits += [
            init("cos", cos),
            init("sin", sin),
            init("lo", np.array([0], np.int64)),
            init("mid", np.array([D // 2], np.int64)),
            init("hi", np.array([D], np.int64)),
            init("last", np.array([3], np.int64)),
            init("ax2", np.array([2], np.int64)),
            init("rep_shape", np.array([B, kv_heads, H // kv_heads, S, D], np.int64)),
            init("heads_shape", np.array([B, H, S, D], np.int64)),
        ]
        for x in ("q", "k"):  # rotary: x·cos + rotate_half(x)·sin, rotate_half = [-x2, x1]
            nodes += [
                n("Slice", [x, "lo", "mid", "last"], [f"{x}_1"]),
                n("Slice", [x, "mid", "hi", "last"], [f"{x}_2"]),
                n("Neg", [f"{x}_2"], [f"{x}_n2"]),
                n("Concat", [f"{x}_n2", f"{x}_1"], [f"{x}_rot"], axis=-1),
                n("Mul", [x, "cos"], [f"{x}_c"]),
                n("Mul", [f"{x}_rot", "sin"], [f"{x}_s"]),
                n("Add", [f"{x}_c", f"{x}_s"], [f"{x}_r"]),
            ]
        for x, src in (("k", "k_r"), ("v", "v")):  # repeat_kv: each K/V head serves two query heads
            nodes += [
                n("Unsqueeze", [src, "ax2"], [f"{x}_u"]),
                n("Expand", [f"{x}_u", "rep_shape"], [f"{x}_e"]),
                n("Reshape", [f"{x}_e", "heads_shape"], [f"{x}_g"]),
            ]
        q, k, v = "q_r", "k_g", "v_g"
    nodes += [
        n("Transpose", [k], ["kt"], perm=[0, 1, 3, 2]),
        n("Mul", [q, "half_scale"], ["qs"]),
        n("Mul", ["kt", "half_scale"], ["kts"]),
        n("MatMul", ["qs", "kts"], ["scores"]),
        n("Cast", ["attention_mask"], ["mask_b"], to=BOOL),
        n("Unsqueeze", ["mask_b", "ax12"], ["pad"]),
    ]  # (B, 1, 1, S)
    keep = "pad"
    if kind != "bert":
        inits.append(init("causal", np.tril(np.ones((S, S), bool))))
        nodes.append(n("And", ["causal", "pad"], ["keep"]))
        keep = "keep"
    nodes += [
        n("Where", [keep, "zero", "fill"], ["additive"]),
        n("Add", ["scores", "additive"], ["masked"]),
        n("Softmax", ["masked"], ["p"], axis=-1),
        n("IsNaN", ["p"], ["p_nan"]),
        n("Where", ["p_nan", "guard_fill", "p"], ["p_safe"]),
        n("MatMul", ["p_safe", v], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "out_shape"], ["out"]),
    ]
    inputs = [vi("hidden", F, [B, S, E]), vi("attention_mask", I64, [B, S])]
    return make_model(nodes, inputs, [vi("out", F, [B, S, E])], inits, opset=18)


def sdpa_feeds(kind: str) -> dict[str, np.ndarray]:
    """Batch 0 unpadded; batch 1 padded at the end (bert) or, as generation pads, at the start
    (gpt2, llama: with the causal mask its first three query rows see no key at all)."""
    mask = np.ones((B, S), np.int64)
    if kind == "bert":
        mask[1, S - 3 :] = 0
    else:
        mask[1, :3] = 0
    hidden = np.random.default_rng(7).standard_normal((B, S, E)).astype(np.float32)
    return {"hidden": hidden, "attention_mask": mask}


GQA_FORMS = ("expand", "dynamo", "tile")


def gqa_attention(
    form: str, *, heads: int = 4, kv_heads: int = 2, b: int = 2, s: int = 8, d: int = 8
) -> onnx.ModelProto:
    """Grouped-query attention over inputs q (b, heads, s, d), k and v (b, kv_heads, s, d), a
    causal additive mask, the K/V heads repeated heads // kv_heads times:

    expand  torch's repeat_kv as the TorchScript exporter writes it: Unsqueeze, Expand to
            (b, kv, rep, s, d), Reshape to (b, heads, s, d); Kᵀ a Transpose
    dynamo  the dynamo exporter's: the same repeat reshaped to (b·heads, s, d), Kᵀ as
            Transpose(0, 2, 1) of that, reshaped back to (b, heads, d, s)
    tile    Tile(k, [1, rep, 1, 1]): query head h reads K/V head h mod kv_heads"""
    rep = heads // kv_heads
    n = helper.make_node
    mask = np.triu(np.full((s, s), np.finfo(np.float32).min, np.float32), 1)
    inits = [
        init("scale", np.float32(1 / np.sqrt(d))),
        init("mask", mask),
        init("ax2", np.array([2], np.int64)),
        init("rep_shape", np.array([b, kv_heads, rep, s, d], np.int64)),
        init("heads_shape", np.array([b, heads, s, d], np.int64)),
        init("flat_shape", np.array([b * heads, s, d], np.int64)),
        init("kt_shape", np.array([b, heads, d, s], np.int64)),
        init("reps", np.array([1, rep, 1, 1], np.int64)),
    ]
    nodes = []
    for x in ("k", "v"):
        if form == "tile":
            nodes.append(n("Tile", [x, "reps"], [f"{x}_g"]))
        else:
            nodes += [n("Unsqueeze", [x, "ax2"], [f"{x}_u"]), n("Expand", [f"{x}_u", "rep_shape"], [f"{x}_e"])]
            if form == "dynamo" and x == "k":
                nodes.append(n("Reshape", ["k_e", "flat_shape"], ["k_f"]))
            else:
                nodes.append(n("Reshape", [f"{x}_e", "heads_shape"], [f"{x}_g"]))
    if form == "dynamo":
        nodes += [n("Transpose", ["k_f"], ["k_ft"], perm=[0, 2, 1]), n("Reshape", ["k_ft", "kt_shape"], ["kt"])]
    else:
        nodes.append(n("Transpose", ["k_g"], ["kt"], perm=[0, 1, 3, 2]))
    nodes += [
        n("MatMul", ["q", "kt"], ["qk"]),
        n("Mul", ["qk", "scale"], ["scores"]),
        n("Add", ["scores", "mask"], ["masked"]),
        n("Softmax", ["masked"], ["p"], axis=-1),
        n("MatMul", ["p", "v_g"], ["out"]),
    ]
    inputs = [vi("q", F, [b, heads, s, d]), vi("k", F, [b, kv_heads, s, d]), vi("v", F, [b, kv_heads, s, d])]
    used = {x for node in nodes for x in node.input}
    inits = [t for t in inits if t.name in used]
    return make_model(nodes, inputs, [vi("out", F, [b, heads, s, d])], inits, opset=18)


def gqa_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input
    }
