"""truncate_float: the pass behind quantize_fp16 / quantize_bf16 (MIGraphX src/truncate_float.cpp,
driven by src/quantization.cpp).

Every selected instruction (all by default) is recomputed in the low float type: each float32 /
float64 input gets a `convert` to the low type, the op is re-inserted on the converted inputs and
its result converted back to its original type, so the program's interface does not change:

    add(x, y)  ->  convert[float32](add(convert[half](x), convert[half](y)))

The optimize_module that quantize_fp16 runs next collapses the back-to-back converts this leaves
between neighbours (find_nested_convert) and folds converted literals (weights stored in half).
As in MIGraphX, `convert` and instructions without inputs are skipped, and an op with a tuple
result (topk) is recomputed in the low type with each get_tuple_elem user converted back. We also
skip instructions with submodules (MIGraphX re-inserts them on converted inputs without converting
back, which changes their result type; If/Loop bodies keep fp32 here).
Reductions stay numerically sound without special-casing: the GPU reduce, softmax and layernorm
kernels and the reference evaluator accumulate half and bf16 in float32.

keep_out_of_range (ours; the quantize stage sets it): values the low type cannot hold stay in
float32 (keep_in_float32 says which), and so do the instructions that read them.
- Sums of squares (a variance: x^2 overflows half from |x| > 256), up to their square root.
- A literal with a finite magnitude beyond the low type's largest value (the float32 minimum,
  -3.4e38, of an HF attention mask), and what views, where, add, sub, min / max and the like
  compute from it. So the mask, `scores + mask` and the softmax over it compute in float32,
  where a score added to -3.4e38 leaves -3.4e38 and a row with every key masked is uniform as in
  the float32 model. In half, convert clamps -3.4e38 to -65504 and -65504 + s rounds to steps of
  32: such a row would attend to its largest scores instead. The softmax's result is in [0, 1]
  and goes on in half.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from ..errors import MigxError
from ..ir import Module
from ..op import Op
from ..pass_infra import Pass
from ..ref import eval_instruction

LOW_FLOAT_TYPES = ("float16", "bfloat16")
# ops whose result stays within [-1, 1] (or is not a float) whatever their input's range: an
# out-of-range input does not make their output out of range
_BOUNDED = frozenset(
    {
        "softmax",
        "sigmoid",
        "tanh",
        "erf",
        "sign",
        "isnan",
        "isinf",
        "equal",
        "greater",
        "less",
        "not",
        "argmax",
        "argmin",
        "cos",
        "sin",
    }
)
# what a sum of squares (a variance) flows through before its square root
_SUM_OF_SQUARES = frozenset({"reduce_sum", "reduce_mean", "add", "sub", "mul", "div", "convert"})


def _is_square(ins) -> bool:
    """pow(x, 2) or mul(x, x)."""
    if ins.name == "mul" and len(ins.inputs) == 2 and ins.inputs[0] is ins.inputs[1]:
        return True
    if ins.name != "pow" or not ins.inputs[1].can_eval():
        return False
    e = np.asarray(eval_instruction(ins.inputs[1]), np.float64)
    return e.size > 0 and bool(np.all(e == 2))


def _beyond(data: np.ndarray, m: float) -> bool:
    """Whether a finite element of `data` has a magnitude above `m`."""
    if not data.size:
        return False
    # The extremes in the array's own dtype settle it when both are finite: every weight of a
    # model went through a float64 copy and a finite mask before (a tenth of resnet18's compile).
    lo, hi = float(data.min()), float(data.max())
    if np.isfinite(lo) and np.isfinite(hi):
        return max(-lo, hi) > m
    v = np.asarray(data, np.float64)
    return bool(np.any(np.abs(v[np.isfinite(v)]) > m))


def keep_in_float32(module: Module, low: str) -> set[int]:
    """Ids of the instructions keep_out_of_range leaves in float32 (see the module docstring):
    - values beyond `low`'s finite range because a constant is (an HF mask's -3.4e38), through
      every op but those with a bounded result (softmax, sigmoid, ...), and their readers;
    - sums of squares (RMSNorm / LayerNorm variance: x^2 overflows half from |x| > 256 and a mean
      of squares from an RMS of 256), from the square through reductions and constant shifts /
      scales up to the square root or division that reads them, as HF's own RMSNorm computes in
      float32."""
    m = dtypes.float_max(low)
    wide: set[int] = set()
    squares: set[int] = set()
    for ins in module:
        if ins.shape.is_tuple or not ins.shape.dtype.is_float:
            continue
        if ins.is_literal():
            if _beyond(np.asarray(ins.literal.data), m):
                wide.add(ins.id)
        elif ins.name not in _BOUNDED and any(i.id in wide for i in ins.inputs):
            wide.add(ins.id)
        if _is_square(ins) or (
            any(i.id in squares for i in ins.inputs)
            and (
                ins.op.has("view")
                or (ins.name in _SUM_OF_SQUARES and all(i.id in squares or i.can_eval() for i in ins.inputs))
            )
        ):
            squares.add(ins.id)
    marked = wide | squares
    return marked | {ins.id for ins in module if any(i.id in marked for i in ins.inputs)}


@dataclass(frozen=True)
class TruncateFloat(Pass):
    name: ClassVar[str] = "truncate_float"
    ins_names: tuple[str, ...] = ("all",)
    float_type: str = "float16"
    keep_out_of_range: bool = False  # ours (see the module docstring); MIGraphX truncates everything

    def __post_init__(self):
        if dtypes.dtype(self.float_type).name not in LOW_FLOAT_TYPES:
            raise MigxError(
                f"truncate_float: float_type must be one of {', '.join(LOW_FLOAT_TYPES)}, got {self.float_type!r}"
            )

    def _selected(self, name: str) -> bool:
        return "all" in self.ins_names or name in self.ins_names

    def apply_module(self, module: Module, ctx) -> bool:
        low = dtypes.dtype(self.float_type).name
        keep = keep_in_float32(module, low) if self.keep_out_of_range else set()
        changed = False
        for ins in list(module):
            if (
                not self._selected(ins.name)
                or ins.name == "convert"
                or not ins.inputs
                or ins.is_return()
                or ins.module_inputs
            ):
                continue
            if ins.id in keep:
                continue
            if not any(i.shape.type in ("float32", "float64") for i in ins.inputs):
                continue
            with module.program.provenance([ins]):
                inputs = [
                    module.insert_instruction(ins, Op("convert", target_type=low), [i])
                    if i.shape.type in ("float32", "float64")
                    else i
                    for i in ins.inputs
                ]
                low_ins = module.insert_instruction(ins, ins.op, inputs)
                if ins.shape.is_tuple:  # convert back through each get_tuple_elem user
                    for gte in list(ins.outputs):
                        elem = module.insert_instruction(ins, gte.op, [low_ins])
                        back = (
                            elem
                            if elem.shape.type == gte.shape.type
                            else module.insert_instruction(ins, Op("convert", target_type=gte.shape.type), [elem])
                        )
                        module.replace_all_uses(gte, back)
                        module.remove_instruction(gte)
                    module.remove_instruction(ins)
                    changed = True
                    continue
                out = low_ins
                if low_ins.shape.type != ins.shape.type:
                    out = module.insert_instruction(ins, Op("convert", target_type=ins.shape.type), [low_ins])
            module.replace_all_uses(ins, out)
            module.remove_instruction(ins)
            changed = True
        return changed
