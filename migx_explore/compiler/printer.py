"""MIGraphX-style text form.

    module: "main"
    x = @param:x -> float32, {1, 3, 8, 8}, {192, 64, 8, 1}
    @1 = @literal{ ... } -> float32, {16, 3, 3, 3}, {27, 9, 3, 1}
    @2 = convolution[padding={1, 1, 1, 1},stride={1, 1}](x,@1) -> float32, {1, 16, 8, 8}, {1024, 64, 8, 1}
    @3 = @return(@2)

Element types print as the API names them (`float32`, `float16`, `int64`, as in `Shape.of` and
`convert[target_type=...]`), so one spelling appears from code to printed IR. MIGraphX prints
`float_type`, `half_type`, `int64_type`; the parser reads those too, so text copied from
`migraphx-driver` parses, and `parse(print(p)) == p` holds whichever spelling went in.

Variable names: a parameter prints as its name, every other instruction as `@<index>` where the
index counts every instruction of the module. Names in a module other than main are prefixed with
`<module>:`. In display mode literals with more than 10 elements print `{ ... }`; `full=True`
prints every value so that `parse(print(p, full=True))` reproduces the program exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np

from .instruction import Instruction
from .op import format_float, format_op, format_value  # noqa: F401  (format_op, format_value: re-exported)


# What printing reads of a module and a program. ir.Module and ir.Program fit; they print through
# this file (str(module)), so it sits below ir and names them by what it needs.
class PrintableModule(Protocol):
    name: str
    bypass: bool

    def __iter__(self) -> Iterator[Instruction]: ...


class PrintableProgram(Protocol):
    def get_modules(self) -> Sequence[PrintableModule]: ...


ELIDE_OVER = 10


def format_literal(data: np.ndarray, full: bool) -> str:
    data = np.asarray(data)
    if data.size > 1 and not any(data.strides):  # values MIGraphX elided (compiler/migraphx_text.py)
        return "{ ... }"
    flat = data.reshape(-1)
    if not full and flat.size > ELIDE_OVER:
        return "{ ... }"
    if flat.dtype == np.bool_:
        vals = ["true" if x else "false" for x in flat]
    elif flat.dtype.kind in "iu":
        vals = [str(int(x)) for x in flat]
    else:
        # float32 -> Python float is exact, so repr round-trips through parse + cast.
        vals = [format_float(float(x)) for x in flat]
    return "{" + ", ".join(vals) + "}"


class Namer:
    """Variable names for one module, MIGraphX style."""

    def __init__(self, module: PrintableModule):
        prefix = "" if module.name == "main" else module.name + ":"
        self.names: dict[int, str] = {}
        for k, ins in enumerate(module):
            self.names[ins.id] = prefix + (ins.param_name if ins.is_param() else f"@{k}")

    def __getitem__(self, ins: Instruction) -> str:
        return self.names.get(ins.id, f"<#{ins.id}>")


def format_instruction(ins: Instruction, namer: Namer, full: bool = False, literal_ref=None) -> str:
    """`literal_ref(literal) -> str` prints literals as `{#key}` references (the saved-file form,
    whose data lives beside the text)."""
    name = namer[ins]
    if ins.is_param():
        return f"{name} = @param:{ins.param_name} -> {ins.shape}"
    if ins.is_literal():
        body = "{#" + literal_ref(ins.literal) + "}" if literal_ref else format_literal(ins.literal.data, full)
        return f"{name} = @literal{body} -> {ins.shape}"
    args = ",".join(namer[i] for i in ins.inputs)
    if ins.is_return():
        return f"{name} = @return({args})"
    text = f"{name} = {format_op(ins.op)}({args})"
    if ins.module_inputs:
        text += ", [" + ", ".join(m.name for m in ins.module_inputs) + "]"
    return f"{text} -> {ins.shape}"


def print_module(module: PrintableModule, full: bool = False, literal_ref=None) -> str:
    namer = Namer(module)
    lines = [f'module: "{module.name}"']
    if module.bypass:
        lines[0] += " bypass"
    lines.extend(format_instruction(ins, namer, full, literal_ref) for ins in module)
    return "\n".join(lines) + "\n"


def print_program(program: PrintableProgram, full: bool = False, literal_ref=None) -> str:
    return "\n".join(print_module(m, full, literal_ref) for m in program.get_modules())


def instruction_label(ins: Instruction) -> str:
    """A short human label for messages: `@5 = convolution (#17)`."""
    try:
        k = next(k for k, i in enumerate(ins.module) if i is ins)
        var = ins.param_name if ins.is_param() else f"@{k}"
    except StopIteration:
        var = "<removed>"
    return f"{var} = {ins.name} (#{ins.id})"
