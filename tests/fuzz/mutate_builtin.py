"""Seeded semantic mutations of the built-in models (issue 26): each case is a built-in model with
one edit of the kind a hostile or broken exporter makes (an attribute out of range, an op swapped,
a declared dim or type changed, an opset changed, weights or shape constants rewritten, a node
rewired or dropped) plus a feed built from the mutated model's declared inputs.

`mutant(seed, i)` always builds the same case, so a failure is re-run alone from its id.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

# Small built-in models (by weight: the cheap ones more often), covering conv, pooling, resize,
# gather/reshape shape arithmetic, attention-style matmuls, layer norm and dynamic dims.
BASES = {"mlp": 3, "dynamic_mlp": 3, "resnet_block": 3, "transformer": 3, "mobilenet": 1, "yolo": 1}

UNARY = [
    "Relu",
    "Sigmoid",
    "Tanh",
    "Abs",
    "Neg",
    "Exp",
    "Erf",
    "Identity",
    "Softplus",
    "Floor",
    "Ceil",
    "Sqrt",
    "Reciprocal",
    "Sin",
    "Cos",
    "Sign",
    "Not",
    "Log",
]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Equal", "Less", "MatMul"]
INT_CHOICES = [-(2**31), -5, -1, 0, 1, 2, 3, 7, 1 << 20]
OPSETS = [1, 5, 6, 7, 9, 11, 13, 15, 17, 18, 19, 21, 99]


@functools.cache
def _base(name: str) -> bytes:
    from migx_explore import models

    return models.get_model(name).SerializeToString()


@dataclass
class Mutant:
    name: str
    model: onnx.ModelProto
    feed: dict[str, np.ndarray] | None  # None: the declared inputs cannot be fed (a negative dim, a bad type)
    # The edit made the arithmetic ill-conditioned (weights scaled by 1e4, a reciprocal or exp where a
    # relu was, inf/NaN constants): two correct runtimes then round, and make inf or NaN, differently.
    ill_conditioned: bool = False


ILL_CONDITIONED = {"Reciprocal", "Exp", "Log", "Pow", "Div", "Sqrt", "Erf", "Softplus", "Tanh", "Sigmoid"}


def _graph_values(m: onnx.ModelProto) -> list[str]:
    names = [i.name for i in m.graph.input] + [t.name for t in m.graph.initializer]
    for n in m.graph.node:
        names += [o for o in n.output if o]
    return names


def mut_attribute(m, r):
    nodes = [
        n
        for n in m.graph.node
        if any(a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS) for a in n.attribute)
    ]
    if not nodes:
        return "no int attribute"
    n = r.choice(nodes)
    a = r.choice([a for a in n.attribute if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)])
    if a.type == onnx.AttributeProto.INT:
        a.i = r.choice(INT_CHOICES + [a.i + 1, a.i - 1])
    elif a.ints:
        k = r.randrange(len(a.ints))
        a.ints[k] = r.choice(INT_CHOICES + [a.ints[k] + 1])
    return f"{n.op_type}.{a.name}"


def mut_op_swap(m, r):
    pool = [n for n in m.graph.node if n.op_type in UNARY or n.op_type in BINARY]
    if not pool:
        return "no swappable op"
    n = r.choice(pool)
    old = n.op_type
    n.op_type = r.choice(UNARY if old in UNARY else BINARY)
    del n.attribute[:]
    return f"{old}->{n.op_type}"


def mut_input_dim(m, r):
    inputs = [i for i in m.graph.input if i.type.tensor_type.shape.dim]
    vi = r.choice(inputs)
    d = r.choice(vi.type.tensor_type.shape.dim)
    v = r.choice([0, -5, 1, 2, 3, "N", "sym"])
    if isinstance(v, str):
        d.dim_param = v
    else:
        old = d.dim_value if d.HasField("dim_value") else 1
        d.dim_value = r.choice([v, old * 2, old + 1])
    return f"input {vi.name} dim"


def mut_output_decl(m, r):
    vi = r.choice(list(m.graph.output))
    tt = vi.type.tensor_type
    kind = r.randrange(3)
    if kind == 0:
        tt.elem_type = r.choice([-1, 0, 7, 10, 999])
        return f"output {vi.name} elem_type {tt.elem_type}"
    if kind == 1 and tt.shape.dim:
        d = r.choice(tt.shape.dim)
        d.dim_value = (d.dim_value or 1) + r.choice([1, 3])
        return f"output {vi.name} dim"
    tt.shape.dim.add().dim_value = 1
    return f"output {vi.name} rank"


def mut_opset(m, r):
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = r.choice(OPSETS)
            return f"opset {o.version}"
    return "no opset"


def _constant_tensors(m) -> list[onnx.TensorProto]:
    out = list(m.graph.initializer)
    for n in m.graph.node:
        out += [a.t for a in n.attribute if n.op_type == "Constant" and a.type == onnx.AttributeProto.TENSOR]
    return out


def mut_values(m, r):
    t = r.choice(_constant_tensors(m))
    arr = numpy_helper.to_array(t).copy()
    if arr.size == 0:
        return "empty constant"
    if arr.dtype.kind in "iu":
        flat = arr.reshape(-1)
        flat[r.randrange(flat.size)] = r.choice([-(2**31), -7, -2, -1, 0, 1, 2, 5, 99, 1 << 20])
    elif arr.dtype.kind == "f":
        arr = (arr * r.choice([0.0, -1.0, 1e4, 1e-4])).astype(arr.dtype)
        if r.random() < 0.3:
            arr.reshape(-1)[0] = r.choice([np.nan, np.inf, -np.inf])
    else:
        return "non-numeric constant"
    t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return f"values of {t.name}"


def mut_const_shape(m, r):
    t = r.choice(_constant_tensors(m))
    arr = numpy_helper.to_array(t)
    choice = r.randrange(3)
    if choice == 0:
        new = arr.reshape(-1)
    elif choice == 1:
        new = arr.reshape((1, *arr.shape))
    else:
        new = np.zeros((0, *arr.shape[1:]), arr.dtype)
    t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(new), t.name))
    return f"shape of {t.name} -> {list(new.shape)}"


def mut_rewire(m, r):
    idx = r.randrange(len(m.graph.node))
    n = m.graph.node[idx]
    if not n.input:
        return "no inputs"
    earlier = [i.name for i in m.graph.input] + [t.name for t in m.graph.initializer]
    for p in m.graph.node[:idx]:
        earlier += [o for o in p.output if o]
    k = r.randrange(len(n.input))
    n.input[k] = r.choice(earlier)
    return f"{n.op_type} input {k}"


def mut_drop(m, r):
    kind = r.randrange(3)
    n = r.choice(list(m.graph.node))
    if kind == 0:
        m.graph.node.remove(n)
        return f"dropped {n.op_type}"
    if kind == 1 and n.input:
        del n.input[-1]
        return f"{n.op_type} lost an input"
    n.input.extend([r.choice(_graph_values(m))])
    return f"{n.op_type} gained an input"


MUTATIONS: list[Callable] = [
    mut_attribute,
    mut_op_swap,
    mut_input_dim,
    mut_output_decl,
    mut_opset,
    mut_values,
    mut_const_shape,
    mut_rewire,
    mut_drop,
]


def feed_for(m: onnx.ModelProto, r: random.Random) -> dict[str, np.ndarray] | None:
    """Arrays for the declared inputs (symbolic dims 2, unknown 1), or None when a declared input
    cannot be fed at all (a negative dim, no tensor type, an invalid element type)."""
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(r.randrange(1 << 30))
    feed = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            return None
        try:
            dt = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        except (KeyError, ValueError, TypeError):
            return None
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                if d.dim_value < 0:
                    return None
                dims.append(int(d.dim_value))
            else:
                dims.append(2 if d.dim_param else 1)
        if np.prod(dims, dtype=np.int64) > 1 << 22:
            return None
        if dt.kind == "f":
            feed[vi.name] = rng.standard_normal(dims).astype(dt)
        elif dt.kind == "b":
            feed[vi.name] = rng.random(dims) < 0.5
        else:
            feed[vi.name] = rng.integers(0, 3, dims).astype(dt)
    return feed


def mutant(seed: int, i: int) -> Mutant:
    r = random.Random(seed * 1_000_003 + i)
    base = r.choices(list(BASES), weights=list(BASES.values()))[0]
    m = onnx.load_model_from_string(_base(base))
    mutation = r.choice(MUTATIONS)
    what = mutation(m, r)
    ill = mutation is mut_values or (mutation is mut_op_swap and what.split("->")[-1] in ILL_CONDITIONED)
    return Mutant(f"mutant[{seed}:{i}] {base} {mutation.__name__}: {what}", m, feed_for(m, r), ill)
