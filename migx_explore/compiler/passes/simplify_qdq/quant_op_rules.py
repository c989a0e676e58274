"""match_find_quantizable_ops of simplify_qdq (MIGraphX src/simplify_qdq.cpp): a dot or
convolution whose two inputs are dequantized 8-bit values becomes the quantized op, rescaled by
one dequantizelinear whose scale is the product of the input scales and whose zero point
collects the zero-point cross terms:

    dot(dq(a, sa, za), dq(b, sb, zb))
      -> dequantizelinear(quant_dot(a, b), sa * sb, quant_dot(za, b) + quant_dot(a, zb) - quant_dot(za, zb))

(the zero-point terms only where a zero point is not all zeros). Between the dequantizelinear and
the op there may be broadcasts, transposes, reshapes, contiguous and converts (the same list as
MIGraphX's skip_post_dq_ops); they are replayed on the quantized data, converts excepted in an
fp16 model (float dequantize, half op), whose result is converted back to half.

Quantization axes, as MIGraphX: dot scales / zero points are per tensor or per row of the first
input (axis M) and per column of the second (axis K); convolution input parameters are per tensor
and weight parameters per tensor or per output channel. Other axes are left alone.

Two extensions:
- MIGraphX's matcher needs a dequantizelinear with an explicit zero point; a two-input
  dequantizelinear (zero point omitted, i.e. zero) is accepted here too.
- uint8 data (ONNX Runtime's default for activations, asymmetric with a zero point) is moved to
  int8 the way MIGraphX's ONNX parser moves MatMulInteger / ConvInteger operands (its bias_uint8
  builder): data and zero point both minus 128, which leaves x - zero_point, and so every
  dequantized value, unchanged. A uint8 quantizelinear becomes an int8 one with the shifted zero
  point (its clamp [0, 255] becomes [-128, 127], the same values); other uint8 data (constants)
  is shifted by convert / add / convert, which propagate_constant folds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import dtypes
from ...ir import Instruction, Module
from ...matcher import MatchResult, arg, is_constant, name, skip, skip_broadcasts
from ...op import Op
from ...pattern_rewriter import Rule, replace_value
from ...ref import eval_instruction
from ...shape import Shape

# MIGraphX's supported quantized data: int8 and the fp8 family. Our quant ops take int8 and
# float8e4m3fn (compiler/ops/quant.py); the other fp8 variants are refused with that reason.
QUANT_DATA_TYPES = ("int8", "float8e4m3fn")
_SHIFTED_TO_INT8 = "uint8"  # x - 128: the same x - zero_point in int8 (see the module docstring)
_FP8_FAMILY = ("float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
POST_DQ_OPS = ("broadcast", "multibroadcast", "contiguous", "transpose", "reshape", "convert")


def _dequantized(key: str) -> object:
    dq = name("dequantizelinear")(arg(1)(skip_broadcasts(is_constant().bind(f"scale{key}"))))
    return skip(*POST_DQ_OPS)(dq.bind(f"dq{key}"))


def _between(dq: Instruction, op_arg: Instruction) -> list[Instruction]:
    """The ops from the op's argument back to (not including) the dequantizelinear."""
    chain = []
    while op_arg is not dq:
        chain.append(op_arg)
        op_arg = op_arg.inputs[0]
    return chain


def _zero_point(dq: Instruction) -> Instruction | None | str:
    """The constant behind dq's zero point (broadcasts skipped), None without one, or a refusal."""
    if len(dq.inputs) < 3:
        return None
    zp = dq.inputs[2]
    while zp.name in ("broadcast", "multibroadcast") and len(zp.inputs) == 1:
        zp = zp.inputs[0]
    return zp if zp.can_eval() else "zero point is not a constant"


def _all_zero(zp: Instruction | None) -> bool:
    return zp is None or bool(np.all(np.asarray(eval_instruction(zp), np.float64) == 0))


def _valid_qparam(q: Instruction | None, lens, axis: int) -> bool:
    return q is None or q.shape.elements() in (1, lens[axis])


def _fits(q: Instruction, lens) -> bool:
    return q.shape.ndim == len(lens) and all(d in (1, n) for d, n in zip(q.shape.lens, lens))


def _valid_dot_qparam(q: Instruction | None, out, operand, which: int) -> bool:
    """Dot parameters per tensor, per row of the first input (which=0) or per column of the second
    (which=1), as MIGraphX; plus the N-D form ONNX Runtime's QLinearMatMul takes, one row / column
    per batch matrix: shape [..., M, 1] / [..., 1, N] (the reduced K side 1)."""
    axis = len(out) - 2 + which
    if _valid_qparam(q, out, axis):
        return True
    k_side = len(out) - 1 - which
    return _fits(q, out) and _fits(q, operand) and q.shape.lens[k_side] == 1


def _broadcast_to(m: Module, before: Instruction, q: Instruction, lens, axis: int) -> Instruction:
    """MIGraphX's qparam_broadcast_op: a single value is multibroadcast, a vector broadcast along
    axis; an N-D parameter of the full rank (see _valid_dot_qparam) is multibroadcast."""
    if q.shape.elements() == 1 or (q.shape.ndim == len(lens) and q.shape.ndim > 1):
        return m.insert_instruction(before, Op("multibroadcast", out_lens=list(lens)), [q])
    return m.insert_instruction(before, Op("broadcast", axis=axis, out_lens=list(lens)), [q])


def _varying_axes(param: Instruction) -> set[int]:
    """The axes of a dequantizelinear's (broadcast) scale or zero point along which it may vary,
    read from what places it: broadcast[axis] or multibroadcast of a smaller constant, else every
    axis with a real stride."""
    lens = param.shape.lens
    if param.name in ("broadcast", "multibroadcast") and len(param.inputs) == 1:
        src = param.inputs[0].shape.lens
        off = param.op["axis"] if param.name == "broadcast" else len(lens) - len(src)
        return {off + i for i, n in enumerate(src) if n != 1}
    return {i for i, (n, st) in enumerate(zip(lens, param.shape.strides)) if n != 1 and st != 0}


def _reshaped_axis(axis: int, src, dst) -> int | None:
    """Where a reshape from src to dst lens puts axis `axis`, when it keeps it whole."""
    before = math.prod(src[:axis])
    for j, n in enumerate(dst):
        if n == src[axis] and math.prod(dst[:j]) == before:
            return j
    return None


def _mapped_axes(axes: set[int], chain: list[Instruction]) -> set[int] | None:
    """The axes of a dequantized value after the shape ops between it and the quantizable op
    (`chain`, op side first); None where a reshape splits or merges one of them."""
    for c in reversed(chain):
        if c.name == "transpose":
            perm = list(c.op["permutation"])
            axes = {perm.index(a) for a in axes}
        elif c.name in ("broadcast", "multibroadcast"):
            off = c.op["axis"] if c.name == "broadcast" else c.shape.ndim - c.inputs[0].shape.ndim
            axes = {a + off for a in axes}
        elif c.name in ("reshape", "reshape_lazy"):
            moved = {_reshaped_axis(a, c.inputs[0].shape.lens, c.shape.lens) for a in axes}
            if None in moved:
                return None
            axes = moved
    return axes


def _axis_refusal(dq: Instruction, chain: list[Instruction], target: int, batch: set[int], what: str) -> str | None:
    """Why dq's per-axis scale / zero point does not vary along the `target` axis only of the
    operand the quantizable op reads (a per-column scale of a MatMul weight quantized along its
    rows, say: its length may equal the column count by chance). The N-D per-matrix form (a
    constant of full rank) may vary along the `batch` axes too."""
    for param in dq.inputs[1:]:
        if param.shape.elements() == 1 or (param.can_eval() and _uniform(param)):
            continue
        raw = param
        while raw.name in ("broadcast", "multibroadcast") and len(raw.inputs) == 1:
            raw = raw.inputs[0]
        allowed = {target} | (batch if raw.shape.ndim > 1 else set())
        axes = _mapped_axes(_varying_axes(param), chain)
        if axes is None:
            return f"a reshape between dequantizelinear and the op splits the {what} quantization axis"
        if not axes <= allowed:
            return f"the {what} is quantized along axis {sorted(axes)}, not {sorted(allowed)}"
    return None


def _uniform(param: Instruction) -> bool:
    v = np.asarray(eval_instruction(param))
    return v.size == 0 or bool(np.all(v == v.reshape(-1)[0]))


@dataclass(frozen=True)
class _Plan:
    chains: tuple[list[Instruction], list[Instruction]]
    zps: tuple[Instruction | None, Instruction | None]
    fp16: bool


class FindQuantizableOps(Rule):
    """dot / convolution of two dequantized values -> dequantizelinear(quant op, product of scales)"""

    name = "match_find_quantizable_ops"

    def pattern(self):
        return name("dot", "convolution")(arg(0)(_dequantized("1")), arg(1)(_dequantized("2")))

    def check(self, module: Module, r: MatchResult):
        ins, dq1, dq2 = r.root, r["dq1"], r["dq2"]
        fp16 = dq1.shape.type != ins.shape.type and ins.shape.type == "float16"
        chains = (_between(dq1, ins.inputs[0]), _between(dq2, ins.inputs[1]))
        for chain in chains:
            for c in chain:
                if c.name == "convert" and not fp16:
                    return f"a convert to {c.shape.type} sits between dequantizelinear and {ins.name}"
        types = {_as_quant_type(dq1.inputs[0].shape.type), _as_quant_type(dq2.inputs[0].shape.type)}
        for t in types:
            if t in _FP8_FAMILY:
                return f"quantized data is {t}; our quant ops take int8 or float8e4m3fn"
            if t not in QUANT_DATA_TYPES:
                return f"quantized data is {t}; quant ops take int8 or fp8"
        if len(types) != 1:
            return f"the two inputs are quantized to different types ({', '.join(sorted(types))})"
        zps = (_zero_point(dq1), _zero_point(dq2))
        for z in zps:
            if isinstance(z, str):
                return z
        s1, s2 = r["scale1"], r["scale2"]
        b_lens = _replayed_lens(dq2, chains[1])
        a_lens = _replayed_lens(dq1, chains[0])
        if ins.name == "convolution":
            why = _axis_refusal(dq2, chains[1], 0, set(), "weight")
        else:
            n = len(ins.shape.lens)
            batch = set(range(n - 2))
            why = _axis_refusal(dq1, chains[0], n - 2, batch, "first input") or _axis_refusal(
                dq2, chains[1], n - 1, batch, "second input"
            )
        if why:
            return why
        if ins.name == "convolution":
            ok = (
                s1.shape.elements() == 1
                and (zps[0] is None or zps[0].shape.elements() == 1)
                and _valid_qparam(s2, b_lens, 0)
                and _valid_qparam(zps[1], b_lens, 0)
            )
            if not ok:
                return "convolution quantization is per tensor for the input, per output channel for the weights"
        else:
            out = ins.shape.lens
            ok = (
                _valid_dot_qparam(s1, out, a_lens, 0)
                and _valid_dot_qparam(zps[0], out, a_lens, 0)
                and _valid_dot_qparam(s2, out, b_lens, 1)
                and _valid_dot_qparam(zps[1], out, b_lens, 1)
            )
            if not ok:
                return "dot quantization axes are the rows of the first input and the columns of the second"
        return _Plan(chains, zps, fp16)

    def rewrite(self, module: Module, r: MatchResult, plan: _Plan) -> None:
        ins, dq1, dq2 = r.root, r["dq1"], r["dq2"]
        a = _replay(module, dq1, plan.chains[0], plan.fp16)
        b = _replay(module, dq2, plan.chains[1], plan.fp16)
        plan = _Plan(
            plan.chains,
            (_shifted_zero_point(module, dq1, plan.zps[0]), _shifted_zero_point(module, dq2, plan.zps[1])),
            plan.fp16,
        )
        conv = ins.name == "convolution"

        def qop(x: Instruction, y: Instruction) -> Instruction:
            op = Op("quant_convolution", ins.op.attrs) if conv else Op("quant_dot")
            return module.insert_instruction(ins, op, [x, y])

        q = qop(a, b)
        out = q.shape.lens
        # scales: conv input per tensor and weights per output channel (axis 1 of the result);
        # dot rows of the first input (axis M) and columns of the second (axis K)
        s_axes = (1, 1) if conv else (len(out) - 2, len(out) - 1)
        s1 = _broadcast_to(module, ins, _wide_scale(module, ins, r["scale1"]), out, s_axes[0])
        s2 = _broadcast_to(module, ins, _wide_scale(module, ins, r["scale2"]), out, s_axes[1])
        scale = module.insert_instruction(ins, Op("mul"), [s1, s2])
        acc = q.shape.type
        zero = module.add_literal(np.zeros((), dtypes.np_dtype(acc)), Shape.scalar(acc))
        zp = module.insert_instruction(ins, Op("multibroadcast", out_lens=list(out)), [zero])
        z1, z2 = plan.zps
        zp_axes = (1, 0) if conv else (len(a.shape.lens) - 2, len(b.shape.lens) - 1)
        z1b = None if z1 is None else _broadcast_to(module, ins, z1, a.shape.lens, zp_axes[0])
        z2b = None if z2 is None else _broadcast_to(module, ins, z2, b.shape.lens, zp_axes[1])
        asym1, asym2 = not _all_zero(z1), not _all_zero(z2)
        if asym1:
            zp = module.insert_instruction(ins, Op("add"), [zp, qop(z1b, b)])
        if asym2:
            zp = module.insert_instruction(ins, Op("add"), [zp, qop(a, z2b)])
        if asym1 and asym2:
            zp = module.insert_instruction(ins, Op("sub"), [zp, qop(z1b, z2b)])
        out_ins = module.insert_instruction(ins, Op("dequantizelinear"), [q, scale, zp])
        if plan.fp16:
            out_ins = module.insert_instruction(ins, Op("convert", target_type="float16"), [out_ins])
        elif out_ins.shape.type != ins.shape.type:  # rescaled in float32 (see _wide_scale)
            out_ins = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [out_ins])
        replace_value(module, ins, out_ins)


def _wide_scale(m: Module, before: Instruction, scale: Instruction) -> Instruction:
    """A half / bf16 scale as float32: the rescale of an int32 accumulator (up to ~2^20 for a
    3x3x64 convolution) must not pass through half, whose range ends at 65504 (an fp16-quantized
    QDQ model dequantizes in half). The result is converted back to the op's type."""
    if scale.shape.type not in ("float16", "bfloat16"):
        return scale
    return m.insert_instruction(before, Op("convert", target_type="float32"), [scale])


def _replayed_lens(dq: Instruction, chain: list[Instruction]) -> tuple[int, ...]:
    """The lens of the quantized argument after replaying the chain (converts change no lens)."""
    return chain[0].shape.lens if chain else dq.shape.lens


def _replay(m: Module, dq: Instruction, chain: list[Instruction], fp16: bool) -> Instruction:
    """MIGraphX's propagate_quantized_ins: the chain's ops applied to the quantized data."""
    x = dq.inputs[0]
    if x.shape.type == _SHIFTED_TO_INT8:
        x = shift_uint8_to_int8(m, dq, x)
    for c in reversed(chain):
        if c.name == "convert" and fp16:
            continue
        x = m.insert_instruction(dq, c.op, [x])
    return x


def _as_quant_type(t: str) -> str:
    return "int8" if t == _SHIFTED_TO_INT8 else t


def _int8_from_shifted(m: Module, before: Instruction, x: Instruction) -> Instruction:
    """convert(int8, convert(int32, x) - 128): uint8 values (or zero points) as int8, same x - zp."""
    wide = m.insert_instruction(before, Op("convert", target_type="int32"), [x])
    k = m.add_literal(np.array(-128, np.int32), Shape.scalar("int32"))
    kb = m.insert_instruction(before, Op("multibroadcast", out_lens=list(x.shape.lens)), [k])
    moved = m.insert_instruction(before, Op("add"), [wide, kb])
    return m.insert_instruction(before, Op("convert", target_type="int8"), [moved])


def shift_uint8_to_int8(m: Module, before: Instruction, x: Instruction) -> Instruction:
    """uint8 data x as int8 data x - 128. A quantizelinear is re-made with an int8 output and its
    zero point minus 128 (or -128 when it had none): the same rounding and the same clamp."""
    if x.name != "quantizelinear":
        return _int8_from_shifted(m, before, x)
    src, scale = x.inputs[0], x.inputs[1]
    if len(x.inputs) == 3:
        zp = _int8_from_shifted(m, before, x.inputs[2])
    else:
        k = m.add_literal(np.array(-128, np.int8), Shape.scalar("int8"))
        zp = m.insert_instruction(before, Op("multibroadcast", out_lens=list(x.shape.lens)), [k])
    return m.insert_instruction(before, Op("quantizelinear"), [src, scale, zp])


def _shifted_zero_point(m: Module, dq: Instruction, zp: Instruction | None) -> Instruction | None:
    """The constant zero point behind a uint8 dequantizelinear, minus 128, as an int8 literal of its
    shape (-128 where there was none); others as they are."""
    if dq.inputs[0].shape.type != _SHIFTED_TO_INT8:
        return zp
    if zp is None:
        return m.add_literal(np.array(-128, np.int8), Shape.scalar("int8"))
    v = np.asarray(eval_instruction(zp), np.int32) - 128
    return m.add_literal(v.astype(np.int8), Shape.of("int8", zp.shape.lens))
