"""Checks over the IR that compiler/ir.py delegates here to stay small: Module.validate (use lists,
def-before-use, shapes recomputed by each op's rule, references to modules of the program) and
Program.structure_key (what program equality compares)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from .errors import ValidationError
from .op import compute_shape
from .printer import instruction_label


def remember_shape(module: Any, ins: Any) -> None:
    """Note that `ins`'s shape was just computed by its op's rule from its inputs' shapes (the IR
    does so on every insert and replace), so validate_module need not recompute it while op and
    shapes stay the very same objects: after a pass that made hundreds of instructions (lowering,
    compile_ops) validation otherwise ran each shape rule a second time."""
    if not ins._module_inputs:  # with submodules, validate_module keys them by their snapshots
        memo = module.__dict__.setdefault("_shapes_checked", {})
        memo[ins._id] = (ins._op, tuple([i._shape for i in ins._inputs]), ins._shape, ())


def validate_module(module: Any, submodule_stamp: Callable[[Any], object] | None = None) -> None:
    """Check one ir.Module; raise ValidationError naming the module and instruction at fault.
    (`module` is untyped here: naming ir.Module would make an import cycle with ir.py.)
    `submodule_stamp`: what a submodule is now, as an object that is the same exactly while its
    content is (the pass manager passes snapshot_module: its Snapshots instrumentation re-read the
    modules before validation, so a submodule changed around the Module API is a new snapshot).
    With it, an instruction whose submodules' stamps are the ones its shape passed with does not
    run its shape rule again; without it, such shapes are recomputed every time."""
    stamp = submodule_stamp
    seen: set[int] = set()
    members = {id(i) for i in module}
    user_ids: dict[int, set[int]] = {}
    # Shapes recomputed before, by instruction id: (op, input shapes, stored shape) objects that
    # passed. Ops and shapes are immutable and a shape rule is a function of them, so the very
    # same objects pass again; validating after every pass of a trace recomputed every shape of
    # every changed module each time (most of an explorer re-trace's validation time).
    # Kept for the instructions of this validation only, so removed ones do not pile up.
    passed: dict[int, tuple] = module.__dict__.get("_shapes_checked", {})
    checked: dict[int, tuple] = {}
    count = 0

    def fail(msg: str) -> None:
        # Names the instruction the loop below is at. The label scans the module for the
        # position, so build it only on failure (for every instruction it was quadratic).
        label = instruction_label(ins)
        raise ValidationError(f"module {module.name}: {label}: {msg}", module.name, label)

    for ins in module:
        count += 1
        if ins._module is not module:
            fail(f"belongs to module {ins._module.name}")
        for i in ins._inputs:
            if not i._alive or id(i) not in members:
                fail(f"uses #{i._id} ({i.name}) which is not in this module (dangling reference)")
            if i._id not in seen:
                fail(f"uses #{i._id} ({i.name}) before it is defined")
            users = user_ids.get(id(i))
            if users is None:  # one set per value: `in` on a long use list per edge was O(n^2)
                users = user_ids[id(i)] = {id(u) for u in i._outputs}
            if id(ins) not in users:
                fail(f"is missing from the use list of its input #{i._id} ({i.name})")
        for u in ins._outputs:
            if not u._alive or id(u) not in members:
                fail(f"use list names #{u._id} ({u.name}) which is not in this module")
            if ins not in u._inputs:
                fail(f"use list names #{u._id} ({u.name}) which does not use it")
        if ins.is_return() and ins is not module.last:
            fail("@return is not the last instruction")
        if not ins.is_builtin():
            in_shapes = tuple([i._shape for i in ins._inputs])
            # A rule that reads submodules (pointwise, fused ops, GEMM epilogues) is keyed by
            # their snapshots too: the Snapshots instrumentation re-reads a module after a pass
            # that may have gone around the Module API, so a changed submodule is a new object.
            subs = tuple([stamp(sm) for sm in ins._module_inputs]) if ins._module_inputs and stamp else ()
            prev = passed.get(ins._id)
            if (
                prev is not None
                and (stamp is not None or not ins._module_inputs)
                and prev[0] is ins._op
                and (prev[2] is ins._shape or prev[2] == ins._shape)
                and len(prev[1]) == len(in_shapes)
                and (all(map(operator.is_, prev[1], in_shapes)) or prev[1] == in_shapes)
                and len(prev[3]) == len(subs)
                and all(map(operator.is_, prev[3], subs))
            ):  # the very op and submodules, and equal shapes, that passed the shape rule before
                checked[ins._id] = prev
            else:
                try:
                    expect = compute_shape(ins._op, list(in_shapes), ins._module_inputs)
                except Exception as e:  # noqa: BLE001 - reported as a validation failure
                    fail(f"shape rule fails: {e}")
                if expect != ins._shape:
                    fail(f"stored shape {ins._shape} differs from recomputed {expect}")
                checked[ins._id] = (ins._op, in_shapes, ins._shape, subs)
        for m in ins._module_inputs:
            if module.program.modules.get(m.name) is not m:
                fail(f"references module {m.name!r} which is not in the program")
        seen.add(ins._id)
    if count != module._count:
        raise ValidationError(
            f"module {module.name}: instruction count {module._count} but {count} linked", module.name
        )
    module.__dict__["_shapes_checked"] = checked


def structure_key(program: Any) -> tuple:
    """Modules and, position by position, ops, inputs, submodules, shapes and literal values of an
    ir.Program. Instruction ids are left out (a parsed program gets fresh ids)."""
    mods = []
    for m in program.get_modules():
        pos = {ins.id: k for k, ins in enumerate(m)}
        rows = []
        for ins in m:
            lit = None
            if ins.literal is not None:
                lit = (ins.literal.data.dtype.str, ins.literal.data.shape, ins.literal.data.tobytes())
            rows.append(
                (
                    ins.op,
                    tuple(pos[i.id] for i in ins.inputs),
                    tuple(x.name for x in ins.module_inputs),
                    ins.shape,
                    lit,
                )
            )
        mods.append((m.name, m.bypass, tuple(rows)))
    return tuple(mods)
