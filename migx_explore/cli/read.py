"""`migx-explore read MODEL [--input-dim x=1,3,224,224] [--full]`: import and print the IR
(migraphx-driver read). MODEL is an .onnx file or a built-in model name."""

from __future__ import annotations

import argparse

from ._precision import add_precision_arguments, apply_quantize_stage


def run(args: argparse.Namespace) -> int:
    from migx_explore.compiler.printer import print_program

    from ..loading import load_program

    program, _ = load_program(args)
    apply_quantize_stage(program, args)  # --fp16 etc.: print the program after the quantize stage
    print(print_program(program, full=args.full), end="")
    return 0


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser("read", help="import a model and print its IR")
    add_model_arguments(p)
    add_precision_arguments(p)
    p.add_argument("--full", action="store_true", help="print every literal value (the text then parses back exactly)")
    p.set_defaults(func=run)
