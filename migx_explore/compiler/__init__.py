"""migx_explore.compiler: the target-independent compiler core.

IR (shapes, ops, instructions, modules, programs), the text printer and parser, the numpy
reference evaluator, snapshots and diffs. Imports only numpy (onnx loads lazily in `.onnx`).
"""

from . import (
    ops,  # noqa: F401  (registers op specs)
    passes,  # noqa: F401  (registers the PASSES table: make_pass finds them by name)
)
from .errors import MigxError
from .inputs import random_inputs
from .ir import Instruction, Literal, Module, Program
from .op import GpuCode, Op, OpSpec, defop, make_op, registered_ops
from .parser import parse, parse_shape
from .printer import print_module, print_program
from .ref import evaluate, evaluate_all
from .shape import DynDim, Shape
from .snapshot import ProgramSnapshot, SnapshotDiff, diff, snapshot

__all__ = [
    "DynDim",
    "GpuCode",
    "Instruction",
    "Literal",
    "MigxError",
    "Module",
    "Op",
    "OpSpec",
    "Program",
    "ProgramSnapshot",
    "Shape",
    "SnapshotDiff",
    "defop",
    "diff",
    "evaluate",
    "evaluate_all",
    "make_op",
    "parse",
    "parse_shape",
    "print_module",
    "print_program",
    "random_inputs",
    "registered_ops",
    "snapshot",
]
