"""Hypothesis strategy for small ONNX graphs (2 to 6 nodes) of shape-moving and arithmetic ops,
the combinations the optimizer's rewrites match (reshape around a dot, constant multiplies and adds
to fold, transposes to merge, slices of concats). Used by tests/fuzz/test_onnx_differential.py."""

from __future__ import annotations

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import helper, numpy_helper


@st.composite
def graphs(draw) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=2, max_size=4)))
    values = {"x": shape}  # ONNX name -> shape
    nodes, inits = [], []

    def const(arr) -> str:
        name = f"c{len(inits)}"
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    for k in range(draw(st.integers(2, 6))):
        src = draw(st.sampled_from(sorted(values)))
        s = values[src]
        out = f"v{k}"
        kind = draw(
            st.sampled_from(
                [
                    "unary",
                    "binary_const",
                    "binary",
                    "transpose",
                    "reshape",
                    "matmul",
                    "reduce",
                    "slice",
                    "concat",
                    "softmax",
                ]
            )
        )
        if kind == "unary":
            nodes.append(
                helper.make_node(draw(st.sampled_from(["Relu", "Neg", "Sigmoid", "Tanh", "Abs"])), [src], [out])
            )
        elif kind in ("binary_const", "binary"):
            op = draw(st.sampled_from(["Add", "Mul", "Sub"]))
            if kind == "binary":
                same = sorted(n for n, t in values.items() if t == s)
                other = draw(st.sampled_from(same))
            else:
                cs = tuple(1 if draw(st.booleans()) else d for d in s[len(s) - draw(st.integers(0, len(s))) :])
                other = const(rng.uniform(-2, 2, cs).astype(np.float32))
            nodes.append(helper.make_node(op, [src, other], [out]))
        elif kind == "transpose":
            perm = list(draw(st.permutations(range(len(s)))))
            nodes.append(helper.make_node("Transpose", [src], [out], perm=perm))
            s = tuple(s[p] for p in perm)
        elif kind == "reshape":
            n = int(np.prod(s))
            divisors = [d for d in range(1, n + 1) if n % d == 0]
            a = draw(st.sampled_from(divisors))
            b = draw(st.sampled_from([d for d in divisors if (n // a) % d == 0]))
            new = (a, b, n // (a * b)) if draw(st.booleans()) else (a, n // a)
            nodes.append(helper.make_node("Reshape", [src, const(np.array(new, np.int64))], [out]))
            s = new
        elif kind == "matmul":
            n = draw(st.integers(1, 4))
            w = rng.uniform(-1, 1, (s[-1], n)).astype(np.float32)
            nodes.append(helper.make_node("MatMul", [src, const(w)], [out]))
            s = (*s[:-1], n)
        elif kind == "reduce":
            axis = draw(st.integers(0, len(s) - 1))
            keep = draw(st.integers(0, 1)) if len(s) > 1 else 1
            nodes.append(helper.make_node("ReduceSum", [src, const(np.array([axis], np.int64))], [out], keepdims=keep))
            s = tuple(1 if i == axis else d for i, d in enumerate(s)) if keep else s[:axis] + s[axis + 1 :]
        elif kind == "slice":
            axis = draw(st.integers(0, len(s) - 1))
            lo = draw(st.integers(0, s[axis] - 1))
            hi = draw(st.integers(lo + 1, s[axis]))
            nodes.append(
                helper.make_node(
                    "Slice",
                    [
                        src,
                        const(np.array([lo], np.int64)),
                        const(np.array([hi], np.int64)),
                        const(np.array([axis], np.int64)),
                    ],
                    [out],
                )
            )
            s = tuple(hi - lo if i == axis else d for i, d in enumerate(s))
        elif kind == "concat":
            axis = draw(st.integers(0, len(s) - 1))
            same = sorted(
                n
                for n, t in values.items()
                if len(t) == len(s) and all(a == b for i, (a, b) in enumerate(zip(t, s)) if i != axis)
            )
            other = draw(st.sampled_from(same))
            nodes.append(helper.make_node("Concat", [src, other], [out], axis=axis))
            s = tuple(d + values[other][axis] if i == axis else d for i, d in enumerate(s))
        else:
            nodes.append(helper.make_node("Softmax", [src], [out], axis=draw(st.integers(-len(s), len(s) - 1))))
        values[out] = s
    last = nodes[-1].output[0]
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(last, onnx.TensorProto.FLOAT, list(values[last]))],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m, {"x": rng.uniform(-2, 2, shape).astype(np.float32)}
