"""`migx-explore read MODEL [--input-dim x=1,3,224,224] [--full]`: import and print the IR
(migraphx-driver read). MODEL is an .onnx file, a built-in model name, or MIGraphX's own text (a
printed program or a MIGRAPHX_TRACE_COMPILE log: its last program is printed)."""

from __future__ import annotations

import argparse

from ._precision import add_precision_arguments, apply_quantize_stage


def run(args: argparse.Namespace) -> int:
    from migx_explore.compiler.printer import print_program

    from ..loading import load_program
    from ..migraphx.load import is_migraphx_text, refuse_mxr

    refuse_mxr(args.model)
    if is_migraphx_text(args.model):
        return _read_migraphx(args)

    program, _ = load_program(args)
    apply_quantize_stage(program, args)  # --fp16 etc.: print the program after the quantize stage
    print(print_program(program, full=args.full), end="")
    return 0


def _read_migraphx(args: argparse.Namespace) -> int:
    """A MIGraphX printed program or compile log: print the program it ends with (our text form)
    and, on stderr, what was read (passes, problems with their line numbers)."""
    import sys

    from migx_explore.compiler.printer import print_program

    from ..migraphx import read_log

    log = read_log(args.model, version=getattr(args, "migraphx", None))
    if args.full:  # every literal value, in a text our parser reads back
        program = log.program if log.kind == "program" else log.trace.final.to_program()
        print(print_program(program, full=True), end="")
    else:
        print(with_symbols(log.trace.final, log.read.symbols), end="")
    print(log.summary(), file=sys.stderr)
    return 0


def with_symbols(snap, symbols: dict[int, tuple[str, ...]]) -> str:
    """The snapshot's text with each instruction's debug symbols after ` # `, as MIGraphX prints
    them (`--debug-symbols`): the ONNX node each instruction came from."""
    out = []
    for ms in snap.modules:
        head, *lines = ms.text.rstrip("\n").split("\n")
        out.append(head)
        for r, line in zip(ms.instrs, lines):
            syms = symbols.get(r.id)
            out.append(line + (" # " + ", ".join(syms) if syms else ""))
        out.append("")
    return "\n".join(out) + "\n"


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser("read", help="import a model and print its IR")
    add_model_arguments(p)
    add_precision_arguments(p)
    p.add_argument("--full", action="store_true", help="print every literal value (the text then parses back exactly)")
    p.set_defaults(func=run)
