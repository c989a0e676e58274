"""`migx-explore run MODEL [--inputs FEED.npz] [--out OUT.npz] [--target ref|gpu]`: evaluate a model.

npz keys are the ONNX graph input / output names (the importer records them on the Program);
a program without ONNX names (a saved program file) uses its parameter names and output_<i>.
Without --inputs, seeded random inputs are used (--seed)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from migx_explore.compiler.errors import MigxError

from ._options import add_exec_mode, add_quiet, exec_modes, print_fake_backend_note, step
from ._precision import add_precision_arguments, apply_quantize_stage, precision_options


def input_names(program) -> list[tuple[str, str]]:
    """(npz key, parameter name) for every input of main."""
    from migx_explore.compiler.onnx.context import param_name

    names = getattr(program, "input_names", None)
    params = program.main.param_names()
    if names is not None and sorted(param_name(n) for n in names) == sorted(params):
        return [(n, param_name(n)) for n in names]
    return [(p, p) for p in params]


def output_names(program) -> list[str]:
    names = getattr(program, "output_names", None)
    n = len(program.main.output_instructions())
    return list(names) if names is not None and len(names) == n else [f"output_{i}" for i in range(n)]


def evaluate_on(program, feed: dict[str, Any], target: str, mode: str, options: Any = None) -> list[np.ndarray]:
    if target == "ref":
        from migx_explore.compiler.ref import evaluate, with_buffer_params

        return evaluate(program, with_buffer_params(program, feed))  # a compiled program's buffers: zeros
    try:
        from .. import gpu

        compile_for_gpu = gpu.compile
    except (ImportError, AttributeError) as e:
        raise MigxError(f"--target gpu is unavailable: the GPU layer could not be loaded ({e})") from None
    with compile_for_gpu(program, options) as compiled:
        return [np.asarray(o) for o in compiled.run(feed, mode=mode)]


def run(args: argparse.Namespace) -> int:
    from migx_explore.compiler.inputs import random_inputs

    from ._inputs import load_program_and_feed

    program, label, feed = load_program_and_feed(args, exact_outputs=True)
    if feed is None:
        feed = random_inputs(program, seed=args.seed)
    options = None
    if args.precision != "fp32":  # ref: the quantize stage alone; gpu: the stage plus the five pipelines
        if args.target == "ref":
            apply_quantize_stage(program, args)
        else:
            from migx_explore.gpu.pipelines import CompileOptions

            options = CompileOptions(**precision_options(args))
    try:
        with step(f"running {label} on the {'GPU' if args.target == 'gpu' else 'reference evaluator'}", args):
            outs = evaluate_on(program, feed, args.target, exec_modes(args, several=False)[0], options)
    except MigxError as e:
        if args.inputs:
            raise
        from migx_explore.compiler.inputs import explain_random_failure

        raise explain_random_failure(e) from None
    names = output_names(program)
    for name, value in zip(names, outs):
        v = np.asarray(value)
        stats = ""
        if v.size and v.dtype.kind in "fiub":
            f = v.astype(np.float64)
            stats = f"  min {np.nanmin(f):.6g}  max {np.nanmax(f):.6g}  mean {np.nanmean(f):.6g}"
        print(f"{name}: {v.dtype} {list(v.shape)}{stats}")
    if args.target == "gpu":
        print_fake_backend_note()
    if args.out:
        from ..outputs import atomic_file

        try:
            with atomic_file(args.out, suffix=".npz") as tmp:
                np.savez(tmp, **{n: np.asarray(v) for n, v in zip(names, outs)})
        except OSError as e:
            raise MigxError(f"cannot write {args.out!r}: {e.strerror}") from None
        print(f"wrote {len(outs)} output(s) to {args.out}", file=sys.stderr)
    return 0


def register(sub) -> None:
    from ..loading import add_model_arguments
    from ._inputs import add_inputs_argument

    p = sub.add_parser("run", help="evaluate a model on inputs from an .npz (or seeded random inputs)")
    add_model_arguments(p)
    add_precision_arguments(p)
    add_inputs_argument(p, "run")
    p.add_argument("--out", metavar="OUT.npz", help="write the outputs keyed by ONNX output name")
    p.add_argument("--target", choices=("ref", "gpu"), default="ref", help="ref: numpy reference evaluator")
    add_exec_mode(p, default="eager", several=False, old=("--mode",))
    add_quiet(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (without --inputs)")
    p.set_defaults(func=run)
