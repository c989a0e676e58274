"""Elementwise ops as C++ expressions, and whole pointwise submodules as straight-line code.

One table row per op: `a -> C++`. Arguments arrive already in compute type (16-bit floats as
float), so each row only has to get the arithmetic right; `convert` and comparisons handle types.
An op declared with `GpuCode.pointwise("mul(x, sigmoid(x))")` needs no row: its C++ is composed
from the rows of the ops in its expression (`op_expr`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.ir import Instruction, Module
from migx_explore.compiler.op import Expr, Op, compute_shape, input_index, parse_expression
from migx_explore.compiler.shape import Shape

from .common import CodegenUnsupported, compute_type, is_float, literal

# Float functions: name for float (suffix f) and double come from one base name.
_FLOAT_FN = {
    "acos": "acos",
    "acosh": "acosh",
    "asin": "asin",
    "asinh": "asinh",
    "atan": "atan",
    "atanh": "atanh",
    "ceil": "ceil",
    "cos": "cos",
    "cosh": "cosh",
    "exp": "exp",
    "floor": "floor",
    "log": "log",
    "log2": "log2",
    "nearbyint": "rint",
    "sin": "sin",
    "sinh": "sinh",
    "sqrt": "sqrt",
    "tan": "tan",
    "tanh": "tanh",
    "erf": "erf",
    "abs": "fabs",
}


def _fn(base: str, t: str) -> str:
    return base + "f" if compute_type(t) == "float" else base


def _one(t: str) -> str:
    return literal(1, t)


def _zero(t: str) -> str:
    return literal(0, t)


Row = Callable[[Op, Sequence[str], Sequence[str], str], str]


def _unary_float(name: str) -> Row:
    def row(op, a, ts, out):
        if not is_float(ts[0]):
            if name == "abs":
                return f"({a[0]} < 0 ? -{a[0]} : {a[0]})"
            if name in ("ceil", "floor", "nearbyint"):
                return a[0]
            raise CodegenUnsupported(f"{name} of {ts[0]}")
        return f"{_fn(_FLOAT_FN[name], ts[0])}({a[0]})"

    return row


def _convert(op, a, ts, out):
    src, dst = ts[0], op["target_type"]
    ct = compute_type(dst)
    if dst == "bool":
        return f"({a[0]} != {_zero(src)})"
    if is_float(src) and not is_float(dst):
        info = np.iinfo(dtypes.np_dtype(dst))
        return f"migx::sat_int<{ct}>((double){a[0]}, {float(info.min)!r}, {float(info.max)!r})"
    if is_float(src) and is_float(dst) and op["saturate"] and dtypes.narrows(src, dst):
        # clamp in the source's compute type, before a cast that would overflow to inf
        m = dtypes.float_max(dst)
        st = compute_type(src)
        lim = f"{m!r}f" if st == "float" else repr(m)
        inf_too = "true" if dst in dtypes.LOW_PRECISION else "false"  # fp8: ONNX saturate clamps inf too
        return f"(({ct})migx::sat_float<{st}>({a[0]}, {lim}, {inf_too}))"
    return f"(({ct}){a[0]})"


def _div(op, a, ts, out):
    return f"({a[0]} / {a[1]})" if is_float(ts[0]) else f"migx::idiv({a[0]}, {a[1]})"


def _mod(op, a, ts, out):
    return f"migx::pymod({a[0]}, {a[1]})"


def _fmod(op, a, ts, out):
    return f"{_fn('fmod', ts[0])}({a[0]}, {a[1]})" if is_float(ts[0]) else f"migx::cmod({a[0]}, {a[1]})"


def _pow(op, a, ts, out):
    if is_float(ts[0]):
        return f"{_fn('pow', ts[0])}({a[0]}, {a[1]})"
    return f"(({compute_type(out)})pow((double){a[0]}, (double){a[1]}))"


def _sigmoid(op, a, ts, out):
    one = _one(ts[0])
    return f"({one} / ({one} + {_fn('exp', ts[0])}(-{a[0]})))"


def _rsqrt(op, a, ts, out):
    return f"{_fn('rsqrt', ts[0])}({a[0]})"


def _recip(op, a, ts, out):
    return f"({_one(ts[0])} / {a[0]})" if is_float(ts[0]) else f"migx::idiv(({compute_type(ts[0])})1, {a[0]})"


def _relu(op, a, ts, out):
    return f"migx::max_({a[0]}, {_zero(ts[0])})"


def _leaky(op, a, ts, out):
    return f"({a[0]} >= {_zero(ts[0])} ? {a[0]} : {a[0]} * {literal(op['alpha'], ts[0])})"


def _elu(op, a, ts, out):
    return f"({a[0]} >= {_zero(ts[0])} ? {a[0]} : {literal(op['alpha'], ts[0])} * {_fn('expm1', ts[0])}({a[0]}))"


def _shift(sym: str) -> Row:
    def row(op, a, ts, out):
        bits = dtypes.dtype(ts[0]).size * 8
        return f"(({a[1]}) < {bits} ? ({compute_type(out)})({a[0]} {sym} {a[1]}) : ({compute_type(out)})0)"

    return row


def _quantize(op, a, ts, out):
    if is_float(out):  # fp8: saturate to the finite range in float; the store rounds to fp8
        limit = float(dtypes.finfo(out).max)
        zp = f" + (float){a[2]}" if len(a) == 3 else ""
        return f"fminf(fmaxf((float){a[0]} / (float){a[1]}{zp}, {-limit!r}f), {limit!r}f)"
    info = np.iinfo(dtypes.np_dtype(out))
    zp = f" + (double){a[2]}" if len(a) == 3 else ""
    return (
        f"(({compute_type(out)})fmin(fmax(rint((double){a[0]} / (double){a[1]}){zp}, {float(info.min)!r}), "
        f"{float(info.max)!r}))"
    )


def _dequantize(op, a, ts, out):
    zp = f" - (double){a[2]}" if len(a) == 3 else ""
    return f"(({compute_type(out)})(((double){a[0]}{zp}) * (double){a[1]}))"


def _bin(sym: str) -> Row:
    return lambda op, a, ts, out: f"({a[0]} {sym} {a[1]})"


def _logical(sym: str) -> Row:
    return lambda op, a, ts, out: f"(({a[0]} != {_zero(ts[0])}) {sym} ({a[1]} != {_zero(ts[1])}))"


ROWS: dict[str, Row] = {
    "add": _bin("+"),  # a + b
    "sub": _bin("-"),  # a - b
    "mul": _bin("*"),  # a * b
    "div": _div,  # a / b (integers truncate; /0 gives 0)
    "max": lambda op, a, ts, out: f"migx::max_({a[0]}, {a[1]})",
    "min": lambda op, a, ts, out: f"migx::min_({a[0]}, {a[1]})",
    "pow": _pow,
    "mod": _mod,  # sign of the divisor (numpy.mod)
    "fmod": _fmod,  # sign of the dividend
    "sqdiff": lambda op, a, ts, out: f"(({a[0]} - {a[1]}) * ({a[0]} - {a[1]}))",
    "prelu": lambda op, a, ts, out: f"({a[0]} < {_zero(ts[0])} ? {a[0]} * {a[1]} : {a[0]})",
    "equal": _bin("=="),
    "greater": _bin(">"),
    "less": _bin("<"),
    "logical_and": _logical("&&"),
    "logical_or": _logical("||"),
    "logical_xor": _logical("!="),
    "bitwise_and": _bin("&"),
    "bitwise_or": _bin("|"),
    "bitwise_xor": _bin("^"),
    "bitwise_not": lambda op, a, ts, out: f"(!{a[0]})" if ts[0] == "bool" else f"(({compute_type(out)})~{a[0]})",
    "shift_left": _shift("<<"),
    "shift_right": _shift(">>"),
    "where": lambda op, a, ts, out: f"({a[0]} ? {a[1]} : {a[2]})",
    "clip": lambda op, a, ts, out: f"migx::min_(migx::max_({a[0]}, {a[1]}), {a[2]})",
    "neg": lambda op, a, ts, out: f"(-{a[0]})",
    "sign": lambda op, a, ts, out: f"migx::sign_({a[0]})",
    "recip": _recip,
    "sigmoid": _sigmoid,
    "rsqrt": _rsqrt,
    "relu": _relu,
    "isnan": lambda op, a, ts, out: f"migx::isnan_({a[0]})" if is_float(ts[0]) else "false",
    "isinf": lambda op, a, ts, out: f"migx::isinf_({a[0]})" if is_float(ts[0]) else "false",
    "not": lambda op, a, ts, out: f"(!{a[0]})" if out == "bool" else f"(({compute_type(out)})({a[0]} == 0))",
    "leaky_relu": _leaky,
    "elu": _elu,
    "convert": _convert,
    "quantizelinear": _quantize,
    "dequantizelinear": _dequantize,
    # Values that are the same at every position of a pointwise body.
    "identity": lambda op, a, ts, out: a[0],
    "contiguous": lambda op, a, ts, out: a[0],
    "multibroadcast": lambda op, a, ts, out: a[0],
    "broadcast": lambda op, a, ts, out: a[0],
    "reshape": lambda op, a, ts, out: a[0],
    "layout": lambda op, a, ts, out: a[0],  # a copy: the output buffer's strides are the new layout
}
for _name in _FLOAT_FN:
    ROWS.setdefault(_name, _unary_float(_name))


def op_expr(op: Op, args: Sequence[str], arg_types: Sequence[str], out_type: str) -> str:
    """C++ for one elementwise op: its row, or its declared expression over existing ops."""
    row = ROWS.get(op.name)
    if row is not None:
        return row(op, list(args), list(arg_types), out_type)
    code = op.spec.gpu
    if code is not None and code.kind == "pointwise" and code.detail:
        return _composed(parse_expression(code.detail), list(args), list(arg_types), op.name)[0]
    raise CodegenUnsupported(
        f"no elementwise code for {op.name}: declare gpu=GpuCode.pointwise('<expression over existing ops>') "
        f"in its defop (README 'Extending'), or add a row to gpu/codegen/expr.py ROWS"
    )


def _composed(tree: Expr, args: list[str], types: list[str], owner: str) -> tuple[str, str]:
    """(C++, element type) of a parsed pointwise expression, built from the rows of its ops."""
    if isinstance(tree, str):
        k = input_index(tree)
        if k >= len(args):
            raise CodegenUnsupported(f"{owner}: expression reads {tree} but the op has {len(args)} inputs")
        return args[k], types[k]
    if isinstance(tree, float):
        raise CodegenUnsupported(f"{owner}: a bare constant {tree} has no type")  # typed by its neighbours below
    name, *subs = tree
    done = {i: _composed(a, args, types, owner) for i, a in enumerate(subs) if not isinstance(a, float)}
    like = next(iter(done.values()), (None, types[0] if types else "float32"))[1]
    parts = [done[i] if i in done else (literal(a, like), like) for i, a in enumerate(subs)]
    out = compute_shape(Op(name), [Shape.scalar(t) for _, t in parts]).type
    return op_expr(Op(name), [e for e, _ in parts], [t for _, t in parts], out), out


def scalar_literal(ins: Instruction) -> str:
    data = np.asarray(ins.literal.data).reshape(-1)
    if data.size == 0 or not np.all(data == data[0]) and not (data.dtype.kind == "f" and np.all(np.isnan(data))):
        raise CodegenUnsupported(f"literal of {data.size} distinct values inside a fused body")
    return literal(data[0].item(), ins.shape.type)


class BodyEmitter:
    """Emits the instructions of a pointwise-style module as C++ locals named v<id>."""

    def __init__(self, prefix: str = "v"):
        self.prefix = prefix
        self.lines: list[str] = []

    def run(
        self, module: Module, inputs: Sequence[str], input_types: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        """Bind params in order to `inputs`; returns (expr, type) per module output."""
        env: dict[int, tuple[str, str]] = {}
        params = module.params()
        if len(params) != len(inputs):
            raise CodegenUnsupported(f"{module.name}: {len(params)} params but {len(inputs)} inputs")
        for k, p in enumerate(params):
            env[p.id] = (inputs[k], input_types[k] if input_types else p.shape.type)
        for ins in module:
            if ins.is_param():
                continue
            if ins.is_return():
                break
            if ins.is_literal():
                env[ins.id] = (scalar_literal(ins), ins.shape.type)
                continue
            args = [env[i.id] for i in ins.inputs]
            expr = op_expr(ins.op, [a for a, _ in args], [t for _, t in args], ins.shape.type)
            var = f"{self.prefix}{ins.id}"
            self.lines.append(f"const {compute_type(ins.shape.type)} {var} = {expr};")
            env[ins.id] = (var, ins.shape.type)
        return [env[o.id] for o in module.output_instructions()]
