"""Multi-layer perceptrons: a fixed-batch classifier and one with a symbolic batch dim."""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder


def mlp(features: int = 784, hidden: tuple[int, ...] = (256, 128), classes: int = 10) -> onnx.ModelProto:
    """Gemm layers with ReLU (as torch.onnx exports nn.Linear), then LogSoftmax."""
    g = GraphBuilder("mlp", seed=3)
    y = g.input("x", [1, features])
    c = features
    for h in hidden:
        y = g.node("Relu", [g.node("Gemm", [y, g.weight([h, c], fan_in=c), g.bias(h)], transB=1)])
        c = h
    logits = g.node("Gemm", [y, g.weight([classes, c], fan_in=c), g.bias(classes)], transB=1, alpha=1.0, beta=1.0)
    g.node("LogSoftmax", [logits], name="log_probs", axis=1)
    g.output("log_probs", dims=[1, classes])
    return g.model()


def dynamic_mlp(features: int = 64, hidden: int = 128, classes: int = 10) -> onnx.ModelProto:
    """MatMul + Add + Relu layers on a ['batch', features] input; the batch dim is symbolic.

    Import with a range (`load("dynamic_mlp", x=[(1, 4), 64])`) for a dynamic program that
    split_single_dyn_dim can split, or with a size for a static one. Only ops whose IR shape
    rules take dynamic dims (dot, broadcasts, pointwise) are used."""
    g = GraphBuilder("dynamic_mlp", seed=4)
    x = g.input("x", ["batch", features])
    y = g.node(
        "Relu", [g.node("Add", [g.node("MatMul", [x, g.weight([features, hidden], fan_in=features)]), g.bias(hidden)])]
    )
    g.node("Add", [g.node("MatMul", [y, g.weight([hidden, classes], fan_in=hidden)]), g.bias(classes)], name="scores")
    g.output("scores", dims=["batch", classes])
    return g.model()
