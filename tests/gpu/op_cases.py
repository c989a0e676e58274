"""Small programs, one op family each, with inputs in each op's domain: the GPU kernels (or the
fake backend's emulations) must match the reference evaluator on all of them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from migx_explore.compiler import Program, Shape, make_op


def _prog(shapes: dict[str, tuple[str, list[int]]], body: Callable) -> Program:
    p = Program()
    m = p.main
    params = {n: m.add_parameter(n, Shape.of(t, s)) for n, (t, s) in shapes.items()}
    outs = body(m, params)
    m.add_return(outs if isinstance(outs, list) else [outs])
    return p


def op(m, name, inputs, **attrs):
    return m.add_instruction(make_op(name, **attrs), list(inputs))


def unary(name: str, **attrs) -> Program:
    return _prog({"x": ("float32", [3, 5, 7])}, lambda m, p: op(m, name, [p["x"]], **attrs))


def binary(name: str) -> Program:
    return _prog({"a": ("float32", [4, 33]), "b": ("float32", [4, 33])}, lambda m, p: op(m, name, [p["a"], p["b"]]))


def _where() -> Program:
    def body(m, p):
        c = op(m, "greater", [p["a"], p["b"]])
        return op(m, "where", [c, p["a"], op(m, "mul", [p["b"], p["b"]])])

    return _prog({"a": ("float32", [6, 10]), "b": ("float32", [6, 10])}, body)


def _transposed_broadcast() -> Program:
    def body(m, p):
        t = op(m, "transpose", [p["x"]], permutation=[0, 2, 1])
        b = op(m, "multibroadcast", [p["bias"]], out_lens=[2, 9, 5])
        return op(m, "tanh", [op(m, "add", [t, b])])

    return _prog({"x": ("float32", [2, 5, 9]), "bias": ("float32", [5])}, body)


def _half() -> Program:
    def body(m, p):
        s = op(m, "mul", [op(m, "add", [p["a"], p["b"]]), p["a"]])
        return [s, op(m, "convert", [s], target_type="float32")]

    return _prog({"a": ("float16", [8, 16]), "b": ("float16", [8, 16])}, body)


def _bf16() -> Program:
    return _prog(
        {"a": ("bfloat16", [8, 16]), "b": ("bfloat16", [8, 16])},
        lambda m, p: op(m, "sigmoid", [op(m, "add", [p["a"], p["b"]])]),
    )


def _convert_int() -> Program:
    def body(m, p):
        i = op(m, "convert", [op(m, "mul", [p["x"], p["x"]])], target_type="int32")
        return [i, op(m, "convert", [i], target_type="float32")]

    return _prog({"x": ("float32", [5, 6])}, body)


def reduce(name: str, axes, lens=(4, 6, 50)) -> Program:
    return _prog({"x": ("float32", list(lens))}, lambda m, p: op(m, name, [p["x"]], axes=list(axes)))


def _softmax(axis: int, name: str = "softmax") -> Program:
    return _prog({"x": ("float32", [3, 10, 77])}, lambda m, p: op(m, name, [p["x"]], axis=axis))


def _argmax(name: str, last: bool) -> Program:
    return _prog({"x": ("float32", [5, 40, 3])}, lambda m, p: op(m, name, [p["x"]], axis=1, select_last_index=last))


def _layernorm() -> Program:
    def body(m, p):
        x = p["x"]
        mean = op(m, "reduce_mean", [x], axes=[2])
        d = op(m, "sub", [x, op(m, "multibroadcast", [mean], out_lens=[2, 16, 96])])
        var = op(m, "reduce_mean", [op(m, "mul", [d, d])], axes=[2])
        eps = m.add_literal(np.array([1e-5], np.float32))
        den = op(m, "sqrt", [op(m, "add", [var, op(m, "multibroadcast", [eps], out_lens=[2, 16, 1])])])
        y = op(m, "div", [d, op(m, "multibroadcast", [den], out_lens=[2, 16, 96])])
        g = op(m, "multibroadcast", [p["g"]], out_lens=[2, 16, 96])
        return op(m, "mul", [y, g])

    return _prog({"x": ("float32", [2, 16, 96]), "g": ("float32", [96])}, body)


def pooling(**attrs) -> Program:
    return _prog({"x": ("float32", [2, 3, 11, 13])}, lambda m, p: op(m, "pooling", [p["x"]], **attrs))


def conv(x: list[int], w: list[int], bias_relu: bool = False, **attrs) -> Program:
    rng = np.random.default_rng(5)

    def body(m, p):
        wl = m.add_literal((rng.standard_normal(w) * 0.3).astype(np.float32))
        y = op(m, "convolution", [p["x"], wl], **attrs)
        if bias_relu:
            b = m.add_literal(rng.standard_normal(w[0]).astype(np.float32))
            y = op(m, "relu", [op(m, "add", [y, op(m, "broadcast", [b], axis=1, out_lens=list(y.shape.lens))])])
        return y

    return _prog({"x": ("float32", x)}, body)


def dot(a: list[int], b: list[int], transpose_b: bool = False, broadcast_a: bool = False) -> Program:
    def body(m, p):
        x, y = p["a"], p["b"]
        if transpose_b:
            perm = list(range(len(b)))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            y = op(m, "transpose", [y], permutation=perm)
        if broadcast_a:
            x = op(m, "multibroadcast", [x], out_lens=list(y.shape.lens[:-2]) + list(a[-2:]))
        return op(m, "dot", [x, y])

    return _prog({"a": ("float32", a), "b": ("float32", b)}, body)


def _concat() -> Program:
    return _prog(
        {"a": ("float32", [2, 3, 5]), "b": ("float32", [2, 4, 5]), "c": ("float32", [2, 1, 5])},
        lambda m, p: op(m, "concat", [p["a"], p["b"], p["c"]], axis=1),
    )


def _gather() -> Program:
    def body(m, p):
        idx = m.add_literal(np.array([[0, -1, 3], [2, 2, -4]], np.int64))
        return op(m, "gather", [p["x"], idx], axis=1)

    return _prog({"x": ("float32", [3, 6, 4])}, body)


def pad(mode: str) -> Program:
    return _prog(
        {"x": ("float32", [2, 5, 6])},
        lambda m, p: op(m, "pad", [p["x"]], pads=[0, 1, 2, 0, 3, 1], mode=mode, value=0.5),
    )


def resize(**attrs) -> Program:
    return _prog({"x": ("float32", [1, 2, 5, 7])}, lambda m, p: op(m, "resize", [p["x"]], **attrs))


def _slice_reverse() -> Program:
    def body(m, p):
        s = op(m, "slice", [p["x"]], axes=[1], starts=[1], ends=[5])
        return op(m, "reverse", [op(m, "neg", [s])], axes=[1, 2])

    return _prog({"x": ("float32", [3, 7, 4])}, body)


def topk(
    lens: list[int], k: int, axis: int, largest: bool = True, ties: bool = False, dtype: str = "float32"
) -> Program:
    """Both outputs (values and int64 indices); `ties` rounds the input so equal values abound."""

    def body(m, p):
        x = op(m, "floor", [p["x"]]) if ties else p["x"]
        t = op(m, "topk", [x], k=k, axis=axis, largest=largest)
        return [op(m, "get_tuple_elem", [t], index=0), op(m, "get_tuple_elem", [t], index=1)]

    return _prog({"x": (dtype, lens)}, body)


def _topk_nan() -> Program:
    """NaN counts as the largest value and ties with +inf by index (the reference's rule)."""

    def body(m, p):
        special = m.add_literal(np.array([[np.nan, np.inf, 2.0, np.nan, -np.inf]] * 3, np.float32))
        x = op(m, "concat", [p["x"], special], axis=1)
        t = op(m, "topk", [x], k=6, axis=1, largest=True)
        u = op(m, "topk", [x], k=6, axis=1, largest=False)
        return [op(m, "get_tuple_elem", [t], index=1), op(m, "get_tuple_elem", [u], index=1)]

    return _prog({"x": ("float32", [3, 20])}, body)


def _quant_conv() -> Program:
    rng = np.random.default_rng(7)

    def body(m, p):
        w = m.add_literal(rng.integers(-5, 6, (6, 4, 3, 3)).astype(np.int8))
        xq = op(
            m,
            "convert",
            [op(m, "mul", [p["x"], m.add_literal(np.full([1, 4, 7, 7], 3.0, np.float32))])],
            target_type="int8",
        )
        return op(m, "quant_convolution", [xq, w], padding=[1, 1], stride=[1, 1])

    return _prog({"x": ("float32", [1, 4, 7, 7])}, body)


def gathernd(data: list[int], ind: np.ndarray, batch_dims: int) -> Program:
    return _prog(
        {"x": ("float32", data)}, lambda m, p: op(m, "gathernd", [p["x"], m.add_literal(ind)], batch_dims=batch_dims)
    )


def scatternd(reduction: str) -> Program:
    def body(m, p):
        ind = m.add_literal(np.array([[[1], [3]], [[-1], [1 if reduction != "none" else 0]]], np.int64))
        return op(m, f"scatternd_{reduction}", [p["x"], ind, p["u"]])

    return _prog({"x": ("float32", [5, 3, 4]), "u": ("float32", [2, 2, 3, 4])}, body)


def scatter(reduction: str) -> Program:
    def body(m, p):
        ind = m.add_literal(
            np.array([[0, 2, 2], [3, 1, 3]] if reduction != "none" else [[0, 2, 1], [3, 1, 0]], np.int64)
        )
        return op(m, f"scatter_{reduction}", [p["x"], ind, p["u"]], axis=1)

    return _prog({"x": ("float32", [2, 4]), "u": ("float32", [2, 3])}, body)


def cumsum(lens: list[int], axis: int, exclusive: bool, reverse: bool) -> Program:
    return _prog(
        {"x": ("float32", lens)},
        lambda m, p: op(m, "prefix_scan_sum", [p["x"]], axis=axis, exclusive=exclusive, reverse=reverse),
    )


def _nonzero() -> Program:
    def body(m, p):
        t = op(m, "nonzero", [op(m, "relu", [p["x"]])])
        return [op(m, "get_tuple_elem", [t], index=0), op(m, "get_tuple_elem", [t], index=1)]

    return _prog({"x": ("float32", [3, 7, 45])}, body)


def _onehot() -> Program:
    def body(m, p):
        ind = m.add_literal(np.array([[0, 3, -1], [7, 2, -8]], np.int64))
        return op(m, "onehot", [ind, p["v"]], depth=5, axis=1)

    return _prog({"v": ("float32", [2])}, body)


def _int_dot() -> Program:
    def body(m, p):
        a = op(m, "convert", [p["a"]], target_type="int8")
        b = op(m, "convert", [p["b"]], target_type="int8")
        return op(m, "quant_dot", [a, b])

    return _prog({"a": ("float32", [2, 5, 7]), "b": ("float32", [2, 7, 3])}, body)


def _deconv() -> Program:
    rng = np.random.default_rng(3)

    def body(m, p):
        w = m.add_literal((rng.standard_normal([4, 3, 3, 3]) * 0.3).astype(np.float32))
        return op(m, "convolution_backwards", [p["x"], w], padding=[1, 0, 1, 1], stride=[2, 2], group=2)

    return _prog({"x": ("float32", [1, 4, 5, 6])}, body)


def _lrn() -> Program:
    return _prog(
        {"x": ("float32", [2, 7, 3, 4])}, lambda m, p: op(m, "lrn", [p["x"]], size=3, alpha=0.01, beta=0.75, bias=1.0)
    )


POSITIVE = {"log", "sqrt", "rsqrt", "log2", "pow", "acosh"}
UNIT = {"acos", "asin", "atanh"}

CASES: dict[str, Callable[[], Program]] = {}
for _n in (
    "exp",
    "log",
    "tanh",
    "sigmoid",
    "erf",
    "sqrt",
    "rsqrt",
    "recip",
    "abs",
    "neg",
    "floor",
    "ceil",
    "nearbyint",
    "sign",
    "relu",
    "sin",
    "cos",
    "atan",
    "asin",
    "log2",
    "isnan",
):
    CASES[f"unary_{_n}"] = (lambda n: lambda: unary(n))(_n)
CASES["unary_leaky_relu"] = lambda: unary("leaky_relu", alpha=0.2)
CASES["unary_elu"] = lambda: unary("elu", alpha=0.7)
for _n in ("add", "sub", "mul", "div", "pow", "max", "min", "mod", "fmod", "sqdiff", "prelu"):
    CASES[f"binary_{_n}"] = (lambda n: lambda: binary(n))(_n)
CASES.update(
    {
        "where_greater": _where,
        "transposed_broadcast": _transposed_broadcast,
        "half": _half,
        "bf16": _bf16,
        "convert_int": _convert_int,
        "reduce_sum_last": lambda: reduce("reduce_sum", [2]),
        "reduce_mean_mid": lambda: reduce("reduce_mean", [1]),
        "reduce_max_two": lambda: reduce("reduce_max", [0, 2]),
        "reduce_min_all": lambda: reduce("reduce_min", [0, 1, 2]),
        "reduce_prod": lambda: reduce("reduce_prod", [1], (3, 5, 4)),
        "reduce_big": lambda: reduce("reduce_sum", [1], (2, 5000, 3)),
        "softmax_last": lambda: _softmax(-1),
        "softmax_mid": lambda: _softmax(1),
        "logsoftmax": lambda: _softmax(2, "logsoftmax"),
        "argmax": lambda: _argmax("argmax", False),
        "argmin_last": lambda: _argmax("argmin", True),
        "layernorm": _layernorm,
        "maxpool": lambda: pooling(mode="max", lengths=[3, 3], stride=[2, 2], padding=[1, 1]),
        "avgpool_pad": lambda: pooling(
            mode="average", lengths=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=True
        ),
        "avgpool_ceil": lambda: pooling(mode="average", lengths=[2, 2], stride=[2, 2], padding=[0, 0], ceil_mode=True),
        "lppool": lambda: pooling(mode="lpnorm", lengths=[2, 3], stride=[1, 2], padding=[0, 1], lp_order=2),
        "conv_im2col": lambda: conv([1, 8, 12, 12], [16, 8, 3, 3], padding=[1, 1], stride=[1, 1]),
        # im2col's run form: 8 (fp16) / 4 (fp32) positions a thread, asymmetric padding; odd widths: per element
        "conv_im2col_runs": lambda: conv([2, 8, 10, 32], [16, 8, 3, 3], padding=[1, 0, 1, 2], stride=[1, 1]),
        "conv_im2col_odd": lambda: conv([1, 8, 11, 13], [16, 8, 3, 3], padding=[1, 1], stride=[1, 1]),
        "conv_bias_relu": lambda: conv([2, 8, 12, 12], [16, 8, 3, 3], True, padding=[1, 1], stride=[2, 2]),
        "conv_1x1": lambda: conv([2, 24, 7, 9], [12, 24, 1, 1], True, padding=[0, 0], stride=[1, 1]),
        "conv_depthwise": lambda: conv([1, 8, 10, 10], [8, 1, 3, 3], True, padding=[1, 1], stride=[1, 1], group=8),
        "conv_grouped_batch2": lambda: conv([2, 16, 9, 9], [12, 8, 3, 3], padding=[1, 1], stride=[1, 1], group=2),
        "conv_dilated_asym": lambda: conv(
            [1, 6, 15, 15], [4, 6, 3, 3], padding=[1, 2, 0, 1], stride=[2, 1], dilation=[2, 1]
        ),
        "conv_small_direct": lambda: conv([1, 3, 20, 20], [8, 3, 3, 3], True, padding=[1, 1], stride=[2, 2]),
        "dot_batched": lambda: dot([2, 3, 4, 5], [2, 3, 5, 6]),
        "dot_transposed_b": lambda: dot([3, 8, 16], [3, 10, 16], transpose_b=True),
        "dot_broadcast_a": lambda: dot([7, 5], [4, 5, 6], broadcast_a=True),
        "dot_vector": lambda: dot([1, 64], [64, 10]),
        "concat": _concat,
        "gather": _gather,
        "pad_constant": lambda: pad("constant"),
        "pad_reflect": lambda: pad("reflect"),
        "pad_edge": lambda: pad("edge"),
        "resize_nearest": lambda: resize(sizes=[1, 2, 10, 14], mode="nearest"),
        "resize_linear": lambda: resize(sizes=[1, 2, 9, 12], mode="linear"),
        "resize_linear_align": lambda: resize(
            sizes=[1, 2, 8, 3], mode="linear", coordinate_transformation_mode="align_corners"
        ),
        "resize_cubic": lambda: resize(sizes=[1, 2, 7, 9], mode="cubic"),
        "slice_reverse": _slice_reverse,
        # data-dependent and index-driven ops (gpu/codegen/indexing.py)
        "topk_ties": lambda: topk([4, 300], 7, -1, ties=True),
        "topk_k1": lambda: topk([3, 50], 1, 1),
        "topk_k_all": lambda: topk([2, 37], 37, -1, ties=True),
        "topk_smallest": lambda: topk([3, 40, 2], 5, 1, False),
        "topk_axis0_ties": lambda: topk([600, 3], 20, -2, largest=False, ties=True),
        "topk_int": lambda: topk([5, 30], 4, 1, dtype="int32"),
        "gathernd": lambda: gathernd([4, 5, 3], np.array([[1, -1], [3, 0], [0, 4]], np.int64), 0),
        "gathernd_batch1": lambda: gathernd([2, 5, 3, 4], np.array([[[4, 2], [0, 1]], [[1, -1], [2, 2]]], np.int64), 1),
        "gathernd_batch2": lambda: gathernd([2, 3, 4, 5], np.arange(24, dtype=np.int64).reshape(2, 3, 4, 1) % 4, 2),
        **{f"scatternd_{r}": (lambda r: lambda: scatternd(r))(r) for r in ("none", "add", "mul", "min", "max")},
        **{f"scatter_{r}": (lambda r: lambda: scatter(r))(r) for r in ("none", "add", "max")},
        "cumsum": lambda: cumsum([3, 600], 1, False, False),
        "cumsum_exclusive": lambda: cumsum([4, 9, 5], 1, True, False),
        "cumsum_reverse": lambda: cumsum([7, 3], 0, False, True),
        "cumsum_exclusive_reverse": lambda: cumsum([2, 300, 2], -2, True, True),
        "topk_nan": _topk_nan,
        "quant_convolution": _quant_conv,
        "nonzero": _nonzero,
        "onehot": _onehot,
        "quant_dot": _int_dot,
        "conv_transpose": _deconv,
        "lrn": _lrn,
    }
)


def inputs_for(name: str, program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    from migx_explore.compiler.inputs import random_inputs

    feeds = random_inputs(program, seed)
    op_name = name.split("_", 1)[-1]
    for k, v in feeds.items():
        if v.dtype.kind != "f":
            continue
        if op_name in POSITIVE or name in ("binary_pow",):
            feeds[k] = (np.abs(v) + 0.1).astype(v.dtype)
        elif op_name in UNIT:
            feeds[k] = (v * 0.9).astype(v.dtype)
        elif name in ("binary_div", "binary_mod", "binary_fmod", "unary_recip"):
            feeds[k] = (np.sign(v) * (np.abs(v) + 0.5)).astype(v.dtype)
        elif name == "reduce_prod":
            feeds[k] = (1 + 0.2 * v).astype(v.dtype)
    return feeds
