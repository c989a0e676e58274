"""Op specs of the lowered GPU program (names follow MIGraphX: gpu::*, hip::*, load).

Every op that writes memory takes its output buffer(s) as its last input(s) and aliases them
(`output_alias`), so liveness and memory planning see buffers as ordinary values. Each op has a
numpy reference compute (allocations give zeros, kernels compute their wrapped op functionally),
so the pass manager's numeric checks continue through the whole backend pipeline.

Importing `migx_explore.gpu` imports this module, which registers these specs (and `load`) and
the `gpu::`/`hip::` namespaces, so a printed backend program parses once the gpu layer is loaded.
"""

from __future__ import annotations

import functools

import numpy as np

from migx_explore.compiler import dtypes
from migx_explore.compiler.errors import MigxError, ShapeError
from migx_explore.compiler.op import AttrSpec, GpuCode, Op, compute_shape, defop, get_spec, register_namespace
from migx_explore.compiler.ref import evaluate_module
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.value_keys import canonical_op, register_value_key, register_value_split


def A(name: str, kind: str, default=None, **kw) -> AttrSpec:
    return AttrSpec(name, kind, default, **kw)


@functools.lru_cache(maxsize=4096)
def inner_op(text: str) -> Op:
    """The op a `gpu::precompile_op`/`gpu::code_object`/`gpu::host_op` wraps, from its printed form."""
    from migx_explore.compiler.parser import parse_attrs

    name, _, rest = text.partition("[")
    attrs = parse_attrs(name, rest[:-1]) if rest else {}
    return Op(name, attrs)


def op_text(op: Op) -> str:
    from migx_explore.compiler.printer import format_op

    return format_op(op)


def _zeros(shape: Shape) -> np.ndarray:
    return np.zeros(shape.lens, dtypes.np_dtype(shape.type))


def _alias_last(op, shapes) -> int:
    return len(shapes) - 1


# --- kernel-wrapping ops ------------------------------------------------------------------------
# Inputs: the wrapped op's own inputs (`ninputs` of them; -1 = all but the outputs), then extra
# inputs of a fused epilogue (a pointwise submodule whose x0 is the op's result) or `workspace`
# scratch buffers of the kernel (a spread topk's ticket and candidates), then the index tensors of
# fused gathers (one per `gathers` pair), then `outputs` buffers. The wrapped op's submodule
# (pointwise, fused_reduce) or the epilogue is the module input.
def split_inputs(op: Op, items: list) -> tuple[list, list, list]:
    """(own inputs, epilogue inputs, output buffers); fused gathers' indices are in none of them
    (`gather_indices`), and an own input read through a gather is its table."""
    nout = op["outputs"]
    body = items[: len(items) - nout - len(op["gathers"]) // 2]
    n = op["ninputs"]
    n = len(body) if n < 0 else n
    return body[:n], body[n:], items[len(items) - nout :]


def gather_pairs(op: Op) -> list[tuple[int, int]]:
    """(own input, axis) of each gather fused into the kernel's loads, in the order of its indices."""
    g = list(op["gathers"])
    return list(zip(g[::2], g[1::2]))


def gather_indices(op: Op, items: list) -> list:
    """The index tensors of the fused gathers: the inputs just before the output buffers."""
    ng = len(op["gathers"]) // 2
    end = len(items) - op["outputs"]
    return items[end - ng : end]


def gathered(op: Op, own: list, indices: list, take) -> list:
    """`own` with each fused gather applied: `take(table, index, axis)` in place of its table."""
    out = list(own)
    for (k, axis), idx in zip(gather_pairs(op), indices):
        out[k] = take(out[k], idx, axis)
    return out


def own_shapes(op: Op, shapes: list[Shape]) -> list[Shape]:
    """The shapes the wrapped op's own inputs have as it sees them (a fused gather's result in
    place of its table), from the shapes of all the kernel op's inputs."""
    return gathered(op, split_inputs(op, shapes)[0], gather_indices(op, shapes), _gather_shape_of)


def _gather_shape_of(table: Shape, idx: Shape, axis: int) -> Shape:
    return compute_shape(Op("gather", axis=axis), [table, idx])


def _gather_value(table, idx, axis: int):
    return get_spec("gather").compute(Op("gather", axis=axis), [table, idx], None, None)


# Wrapped ops whose module inputs are their own bodies; for any other op a module is an epilogue.
MODULE_OPS = frozenset(
    {"pointwise", "fused_reduce", "split_fused_reduce", "fused_concat", "group", "if", "loop", "select_module"}
)


def _own_module(inner: Op) -> bool:
    return inner.name in MODULE_OPS


def _wrapped_shape(op, shapes, mods):
    inner = inner_op(op["op"])
    ins, extras, outs = split_inputs(op, shapes)
    ins = gathered(op, ins, gather_indices(op, shapes), _gather_shape_of)
    if not outs:
        raise ShapeError(f"{op.name}: needs an output buffer as its last input")
    own = _own_module(inner)
    if inner.has("in_place"):  # the op updates its output buffer (its last own input) in place
        ins = ins + outs
    res = compute_shape(inner, ins, mods if own else [])
    results = res.sub_shapes if res.is_tuple else (res,)
    if len(results) != len(outs):
        raise ShapeError(f"{op.name}: {inner.name} gives {len(results)} outputs but {len(outs)} buffers are passed")
    epilogue = None if own else (mods[0] if mods else None)
    if extras and epilogue is None and len(extras) != op["workspace"]:
        raise ShapeError(f"{op.name}: {len(extras)} epilogue inputs but no epilogue module")
    for r, o in zip(results, outs):
        if r.lens != o.lens:
            raise ShapeError(f"{op.name}: {inner.name} gives lens {list(r.lens)} but its buffer has {list(o.lens)}")
        if epilogue is None and r.type != o.type:
            raise ShapeError(f"{op.name}: {inner.name} gives {r.type} but its buffer is {o.type}")
    # A wrapped op that returns a tuple keeps it with one element too (a lowered select_module
    # over a one-output submodule is read through get_tuple_elem).
    return outs[0] if len(outs) == 1 and not res.is_tuple else Shape.tuple_of(outs)


def apply_epilogue(module, result: np.ndarray, extras, out: Shape, run=None) -> np.ndarray:
    """The epilogue module on the op's result and the extra inputs (through `run`, the compute's
    SubmoduleRunner, where there is one)."""
    res = (evaluate_module if run is None else run)(module, [result, *extras], check_shapes=False)[0]
    return np.broadcast_to(np.asarray(res), out.lens).astype(dtypes.np_dtype(out.type))


def _wrapped_compute(op, args, out, run):
    inner = inner_op(op["op"])
    ins, extras, outs = split_inputs(op, list(args))
    ins = gathered(op, ins, gather_indices(op, list(args)), _gather_value)
    mods = run.ins.module_inputs
    inner_shape = Shape.of(out.type, out.lens) if not out.is_tuple else out
    if inner.has("in_place"):
        ins = ins + outs
    res = get_spec(inner.name).compute(inner, ins, inner_shape, run)
    if mods and not _own_module(inner):
        return apply_epilogue(mods[0], np.asarray(res), extras, out, run)
    return res


_WRAPPED_ATTRS = [
    A("op", "str", "", show=True, doc="the wrapped op, printed"),
    A("ninputs", "int", -1, doc="inputs of the wrapped op; the rest (before the outputs) feed the epilogue"),
    A("outputs", "int", 1, doc="number of output buffers (the last inputs)"),
    A(
        "gathers",
        "ints",
        (),
        doc="(own input, axis) pairs: that input is a table the kernel reads through a gather along axis, "
        "its indices being the inputs before the outputs (fuse_ops' gather fusion)",
    ),
    A("workspace", "int", 0, doc="the last inputs before the outputs that are kernel scratch buffers (no epilogue)"),
]


def _wrapped_alias(op, shapes):
    return len(shapes) - 1


register_namespace("gpu::", "migx_explore.gpu")
register_namespace("hip::", "migx_explore.gpu")

defop(
    "gpu::precompile_op",
    _wrapped_shape,
    _wrapped_compute,
    attrs=_WRAPPED_ATTRS,
    nargs=(1, -1),
    output_alias=_wrapped_alias,
    doc="An op to be compiled into a generated kernel by compile_ops (output buffer last).",
)

defop(
    "gpu::code_object",
    _wrapped_shape,
    _wrapped_compute,
    attrs=_WRAPPED_ATTRS
    + [
        A("symbol_name", "str", "", show=True),
        A("global", "int", 0, show=True, doc="total threads"),
        A("local", "int", 0, show=True, doc="threads per block"),
        A("key", "str", "", doc="kernel-store key (hash of the generated source)"),
    ],
    nargs=(1, -1),
    output_alias=_wrapped_alias,
    doc="A compiled kernel launch: global/local threads, symbol in the kernel store under `key`.",
)

defop(
    "gpu::host_op",
    _wrapped_shape,
    _wrapped_compute,
    attrs=_WRAPPED_ATTRS
    + [A("why", "str", "", show=True, doc="why no kernel runs it: the declared reason or the refusal")],
    nargs=(1, -1),
    output_alias=_wrapped_alias,
    traits={"not_context_free"},
    doc="Runs the wrapped op's numpy compute on the host (no generated kernel yet); breaks graph capture.",
)


# --- gemm ---------------------------------------------------------------------------------------
def _gemm_shape(op, shapes, mods):
    a, b = shapes[0], shapes[1]
    out = shapes[-1]
    quant = a.type in _QUANT_ACC
    d = compute_shape(Op("quant_dot" if quant else "dot"), [a, b])
    if d.elements() != out.elements():
        raise ShapeError(f"gpu::gemm: product {list(d.lens)} does not fit buffer {list(out.lens)}")
    if len(shapes) > 3 and not mods:
        raise ShapeError("gpu::gemm: epilogue inputs given without an epilogue module")
    widened = d.type in ("float16", "bfloat16") and out.type == "float32"  # half inputs, float32 result
    if not mods and d.type != out.type and not widened:
        raise ShapeError(f"gpu::gemm: product is {d.type} but the buffer is {out.type}")
    return out


# int8 / fp8 GEMMs (quant_dot lowered): int32 / float32 accumulation and result.
_QUANT_ACC = {"int8": np.int32, "uint8": np.int32, "float8e4m3fn": np.float32}


def _gemm_compute(op, args, out, run):
    a, b = args[0], args[1]
    acc = _QUANT_ACC.get(dtypes.dtype(a.dtype).name) or (np.float32 if dtypes.is_low_float(a.dtype) else None)
    res = np.matmul(a.astype(acc) if acc else a, b.astype(acc) if acc else b) * op["alpha"]
    res = res.reshape(out.lens)
    if run.ins.module_inputs:
        return apply_epilogue(run.ins.module_inputs[0], res, list(args[2:-1]), out, run)
    return res


defop(
    "gpu::gemm",
    _gemm_shape,
    _gemm_compute,
    attrs=[
        A("alpha", "float", 1.0),
        A("algo", "str", "", doc="BLAS algorithm chosen by compile_blas"),
        A("plan", "str", "", doc="the BLAS call compile_blas planned (display)"),
        A("epilogue_symbol", "str", ""),
        A("epilogue_key", "str", ""),
        A("epilogue_global", "int", 0),
        A("epilogue_local", "int", 0),
        A("blas_bias", "int", -1, doc="epilogue input the BLAS call adds as a per-column bias (-1: none)"),
        A("blas_c", "int", -1, doc="epilogue input the BLAS call adds as C with beta = 1 (-1: none)"),
        A("blas_act", "str", "", doc="activation the BLAS call applies to the sum: relu, gelu_tanh ('': none)"),
        A(
            "kernel_symbol",
            "str",
            "",
            doc="the generated tensor-core kernel that computes product and epilogue "
            "in one launch instead of the BLAS call (compile_ops; '': BLAS)",
        ),
        A("kernel_key", "str", ""),
        A("kernel_global", "int", 0),
        A("kernel_local", "int", 0),
    ],
    nargs=(3, -1),
    output_alias=_alias_last,
    doc="Batched matrix product through the vendor BLAS (a[..., m, k] x b[..., k, n]) written row-major into "
    "the buffer (last input); an epilogue submodule (x0 = product, x1.. = inputs 2..) runs in place after it.",
)


# --- im2col -------------------------------------------------------------------------------------
def _im2col_shape(op, shapes, mods):
    from migx_explore.compiler.ops.nn import conv_params

    x = shapes[0]
    nd = x.ndim - 2
    kernel = op["kernel"]
    if len(kernel) != nd:
        raise ShapeError(f"gpu::im2col: kernel {kernel} needs {nd} values")
    pb, pe, st, dl = conv_params(op, nd)
    out = []
    for i in range(nd):
        n = (x.lens[2 + i] + pb[i] + pe[i] - (dl[i] * (kernel[i] - 1) + 1)) // st[i] + 1
        if n <= 0:
            raise ShapeError(f"gpu::im2col: kernel {kernel} does not fit input {list(x.lens)}")
        out.append(n)
    # out_type: the column matrix's type when the input is read in another float type (at fp16,
    # a float32 model input converted on the way, so no convert kernel runs before the im2col)
    return Shape.of(op["out_type"] or x.type, [x.lens[0], x.lens[1] * int(np.prod(kernel)), int(np.prod(out))])


def _im2col_compute(op, args, out, run):
    from migx_explore.compiler.ops.nn import conv_params, sliding_windows

    x = args[0]
    nd = x.ndim - 2
    pb, pe, st, dl = conv_params(op, nd)
    win = sliding_windows(x, op["kernel"], pb, pe, st, dl)  # N C O.. K..
    n, c = x.shape[:2]
    o_axes = tuple(range(2, 2 + nd))
    k_axes = tuple(range(2 + nd, 2 + 2 * nd))
    win = np.transpose(win, (0, 1) + k_axes + o_axes)
    return np.ascontiguousarray(win).reshape(out.lens).astype(dtypes.np_dtype(out.type), copy=False)


defop(
    "gpu::im2col",
    _im2col_shape,
    _im2col_compute,
    attrs=[
        A("kernel", "ints", (1, 1), show=True),
        A("padding", "ints", (0, 0), show=True),
        A("stride", "ints", (1, 1), show=True),
        A("dilation", "ints", (1, 1)),
        A("out_type", "str", "", doc="the columns' type when it differs from the input's (a float conversion)"),
    ],
    nargs=1,
    doc="Sliding windows of an NC* input as columns: (N, C*prod(kernel), prod(out spatial)).",
    gpu=GpuCode.kernel("im2col"),
)


# --- concat written in place --------------------------------------------------------------------
def _concat_alias_shape(op, shapes, mods):
    parts = shapes[1:]
    want = compute_shape(Op("concat", axis=op["axis"]), parts)
    if want.lens != shapes[0].lens:
        raise ShapeError(f"gpu::concat_alias: parts concatenate to {list(want.lens)}, buffer is {list(shapes[0].lens)}")
    return shapes[0]


defop(
    "gpu::concat_alias",
    _concat_alias_shape,
    lambda op, a, out, run: np.concatenate(a[1:], axis=op["axis"]),
    attrs=[A("axis", "int", 0, show=True)],
    nargs=(2, -1),
    output_alias=lambda op, s: 0,
    doc="The concat buffer (input 0) once its producers (inputs 1..) wrote their slices (eliminate_concat).",
)


# --- buffers ------------------------------------------------------------------------------------
defop(
    "hip::allocate",
    lambda op, s, m: op["shape"],
    lambda op, a, out, run: _zeros(out),
    attrs=[A("shape", "shape", Shape.scalar("float32"), show=True)],
    nargs=0,
    traits={"not_context_free"},
    doc="A device buffer; memory_coloring turns each into a `load` from the scratch arena.",
)

defop(
    "hip::hip_allocate_memory",
    lambda op, s, m: op["shape"],
    lambda op, a, out, run: _zeros(out),
    attrs=[A("shape", "shape", Shape.scalar("int8"), show=True), A("id", "str", "scratch", show=True)],
    nargs=0,
    traits={"not_context_free"},
    doc="The preallocated arena (preallocate_param).",
)

defop(
    "load",
    lambda op, s, m: op["shape"],
    lambda op, a, out, run: _zeros(out),
    attrs=[A("shape", "shape", Shape.scalar("float32"), show=True), A("offset", "int", 0, show=True)],
    nargs=1,
    output_alias=lambda op, s: 0,
    traits={"not_context_free"},
    doc="A typed region of a memory buffer at a byte offset (memory_coloring, eliminate_allocation).",
    gpu=GpuCode.none("a buffer at an offset of the memory parameter"),
)

defop(
    "hip::hip_copy_literal",
    lambda op, s, m: s[0],
    lambda op, a, out, run: a[0],
    attrs=[A("id", "str", "", show=True)],
    nargs=1,
    doc="The device copy of a literal, uploaded once at finalize (write_literals).",
)

defop(
    "hip::copy_to_gpu",
    lambda op, s, m: s[-1],
    lambda op, a, out, run: a[0],
    nargs=2,
    output_alias=_alias_last,
    traits={"not_context_free"},
    doc="Host input to device buffer (offload_copy).",
)

defop(
    "hip::copy_from_gpu",
    lambda op, s, m: Shape.of(s[0].type, s[0].lens),
    lambda op, a, out, run: a[0],
    nargs=1,
    traits={"not_context_free"},
    doc="Device value to a host output buffer (offload_copy).",
)

defop(
    "hip::sync_stream",
    lambda op, s, m: s[0],
    lambda op, a, out, run: a[0],
    nargs=(1, -1),
    output_alias=lambda op, s: 0,
    traits={"not_context_free", "side_effect"},
    doc="Wait for the stream before results are read on the host (sync_device).",
)

defop(
    "gpu::check_context",
    lambda op, s, m: Shape.scalar("int8"),
    lambda op, a, out, run: np.zeros(1, np.int8),
    attrs=[A("target", "str", "any", show=True)],
    nargs=0,
    traits={"not_context_free", "side_effect"},
    doc="Checked at finalize: the program was compiled for the device it runs on (check_context).",
)


# --- value keys (compiler/value_keys.py): what each compute above reads -----------------------
@register_value_key("gpu::precompile_op", "gpu::code_object", "gpu::host_op")
def _wrapped_value_key(ins):
    """The wrapped op on its own inputs (the buffers it writes are not read, kernel names and
    launch sizes not at all); plain, it is the very computation of the op it wraps."""
    op, inputs = ins.op, ins.inputs
    inner = inner_op(op["op"])
    n = len(inputs)
    nout, ngather = op["outputs"], len(op["gathers"]) // 2
    body = n - nout - ngather
    own = body if op["ninputs"] < 0 else op["ninputs"]
    rank = inputs[0].shape.ndim if inputs and not inputs[0].shape.is_tuple else 0
    canon = canonical_op(inner, rank)
    mods = ins.module_inputs
    if own == body and not ngather and not inner.has("in_place") and (_own_module(inner) or not mods):
        return canon, range(own), mods
    read = range(n) if inner.has("in_place") else range(n - nout)
    return ("wrapped", canon, op["ninputs"], nout, op["gathers"]), read, mods


@register_value_split("gpu::precompile_op", "gpu::code_object")
def _wrapped_value_split(ins):
    """A float convolution kernel with a fused epilogue: the epilogue applied to the convolution
    of its own inputs, which the plain kernel before fuse_ops computed already. Only where the
    convolution's compute gives the output's element type itself (float32 or float64 in and
    out), so the stored convolution is the very array the epilogue would be given."""
    op, inputs, out = ins.op, ins.inputs, ins.shape
    inner = inner_op(op["op"])
    mods = ins.module_inputs
    if inner.name != "convolution" or not mods or _own_module(inner) or op["gathers"] or op["workspace"]:
        return None
    own = split_inputs(op, list(inputs))[0]
    if len(own) != 2 or out.is_tuple or op["outputs"] != 1:
        return None
    types = {own[0].shape.type, own[1].shape.type, out.type}
    if len(types) != 1 or not types <= {"float32", "float64"}:
        return None

    def finish(conv, args, run=None):
        return apply_epilogue(mods[0], conv, split_inputs(op, list(args))[1], out, run)

    return (canonical_op(inner, own[0].shape.ndim), range(2), ()), (out.type, out.lens), finish


def _as_convolution(ins):
    """The convolution a float32 GEMM computes where lowering made it of one: filters
    multibroadcast(reshape(W)) times the columns gpu::im2col(x) (or reshape(x), a 1x1 kernel with
    no padding, stride or dilation), batch-broadcast. The reference convolution computes that
    very product (compiler/ops/nn.py's _conv_compute: the same columns, one matmul of the same
    filters), so the GEMM keys as convolution(x, W), on x's and W's values (input paths), and
    lowering a convolution costs no recomputation. None for anything else."""
    from migx_explore.compiler.ops.nn import conv_params

    if len(ins.inputs) < 3 or ins.op["alpha"] != 1.0:
        return None
    a, b, out = ins.inputs[0], ins.inputs[1], ins.shape
    if a.name != "multibroadcast" or a.inputs[0].name != "reshape" or out.is_tuple or out.type != "float32":
        return None
    w = a.inputs[0].inputs[0]
    ws = w.shape
    if ws.is_tuple or ws.type != "float32" or ws.ndim < 3 or out.ndim != ws.ndim:
        return None
    f, ck = ws.lens[0], int(np.prod(ws.lens[1:]))
    n, nd = out.lens[0], ws.ndim - 2
    if a.inputs[0].shape.lens != (f, ck) or a.shape.lens != (n, f, ck) or out.lens[1] != f:
        return None
    wrapped = b.name in ("gpu::precompile_op", "gpu::code_object", "gpu::host_op") and len(b.inputs) == 2
    if wrapped and inner_op(b.op["op"]).name == "gpu::im2col":  # compiled or not, the same columns
        im = inner_op(b.op["op"])
        x = b.inputs[0]
        if im["out_type"] not in ("", x.shape.type) or tuple(im["kernel"]) != ws.lens[2:]:
            return None
        try:
            pb, pe, st, dl = conv_params(im, nd)
        except (MigxError, ValueError, TypeError, IndexError):
            return None
        conv = Op("convolution", padding=tuple(pb) + tuple(pe), stride=tuple(st), dilation=tuple(dl))
    elif b.name == "reshape" and all(k == 1 for k in ws.lens[2:]):
        x = b.inputs[0]
        if x.shape.is_tuple or x.shape.lens[2:] != out.lens[2:]:
            return None
        conv = Op("convolution", padding=(0,) * (2 * nd), stride=(1,) * nd, dilation=(1,) * nd)
    else:
        return None
    xs = x.shape
    if xs.is_tuple or xs.type != "float32" or xs.ndim != ws.ndim or xs.lens[:2] != (n, ws.lens[1]):
        return None
    return canonical_op(conv, xs.ndim), ((1, 0), (0, 0, 0)), ()


@register_value_key("gpu::gemm")
def _gemm_value_key(ins):
    """alpha, the epilogue and the inputs before the buffer (not the BLAS plan or kernel names);
    a plain float GEMM at alpha 1 is the `dot` of its two inputs, or the convolution lowering
    made it of (_as_convolution)."""
    a = ins.inputs[0].shape
    if ins.op["alpha"] == 1.0 and not ins.module_inputs and len(ins.inputs) == 3 and a.type not in _QUANT_ACC:
        return _as_convolution(ins) or (Op("dot"), (0, 1), ())
    conv = _as_convolution(ins) if ins.module_inputs else None
    if conv is not None:  # the epilogue on that convolution: its columns are not read
        return ("gpu::gemm", 1.0, conv[0]), (*conv[1], *range(2, len(ins.inputs) - 1)), ins.module_inputs
    return ("gpu::gemm", ins.op["alpha"]), range(len(ins.inputs) - 1), ins.module_inputs


@register_value_split("gpu::gemm")
def _gemm_value_split(ins):
    """A float GEMM at alpha 1 with an epilogue: the epilogue applied to the product of its two
    inputs, which the plain GEMM before fuse_ops (or the dot before lowering) computed already."""
    a, out = ins.inputs[0].shape, ins.shape
    if ins.op["alpha"] != 1.0 or not ins.module_inputs or a.type in _QUANT_ACC or out.is_tuple:
        return None
    product = "float32" if dtypes.is_low_float(dtypes.np_dtype(a.type)) else a.type

    def finish(prod, args, run=None):
        return apply_epilogue(ins.module_inputs[0], prod, list(args[2:-1]), out, run)

    return _as_convolution(ins) or (Op("dot"), (0, 1), ()), (product, out.lens), finish


@register_value_key("hip::allocate", "hip::hip_allocate_memory", "load")
def _zeros_value_key(ins):
    return "zeros", (), ()  # a buffer holds zeros in the reference, wherever it lives


def output_buffers(ins) -> list:
    """The buffer inputs an instruction writes (empty for ops that write nothing)."""
    name = ins.name
    if name in ("gpu::precompile_op", "gpu::code_object", "gpu::host_op"):
        return list(ins.inputs[len(ins.inputs) - ins.op["outputs"] :])
    if name in ("gpu::gemm", "hip::copy_to_gpu"):
        return [ins.inputs[-1]]
    return []


WRAPPING_OPS = ("gpu::precompile_op", "gpu::code_object", "gpu::host_op")


def buffer_root(ins):
    """The instruction that owns the memory `ins` lives in (follows views and output buffers)."""
    while True:
        if ins.name == "get_tuple_elem":
            bufs = output_buffers(ins.inputs[0])
            if not bufs:
                return ins.inputs[0]
            ins = bufs[ins.op["index"]]
            continue
        alias = ins.op.spec.output_alias
        if alias is None or ins.is_builtin():
            return ins
        ins = ins.inputs[alias(ins.op, [i.shape for i in ins.inputs])]
