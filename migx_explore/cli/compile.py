"""`migx-explore compile`: stop after any pass and save a portable program, or resume one.

migx-explore compile MODEL --until fusion.fuse_concat --out part.migx
migx-explore compile part.migx --resume [--out done.migx] [--run]
"""

from __future__ import annotations

import argparse

from migx_explore.compiler.errors import MigxError

from ._pipeline_args import add_pipeline_arguments
from ._precision import precision_options


def run(args: argparse.Namespace) -> int:
    from migx_explore.gpu.pipelines import CompileOptions

    from .. import portable

    if args.resume:
        part = portable.load_partial(args.model, recompile=args.recompile, trust_binaries=args.trust_binaries)
        print(
            f"{args.model}: {part.model}, saved after {part.after}, {part.signature.describe()}; "
            f"resuming ({_reuse(part, args)})"
        )
        trace = portable.resume(part)
        changed = sum(1 for r in trace.top_level() if r.changed)
        print(
            f"ran {len(trace.top_level())} passes ({changed} changed the IR); "
            f"{part.program.total_instructions()} instructions"
        )
        if args.out:
            from migx_explore.compiler.serialize import save_program

            save_program(part.program, args.out, metadata={"model": part.model, "spec": part.spec})
            print(f"wrote {args.out}")
        if args.run:
            feed = None
            if args.inputs:
                from ..feeds import feed_for_program, read_npz

                feed = feed_for_program(
                    part.program,
                    read_npz(args.inputs),
                    args.inputs,
                    require_all=False,
                    convert=getattr(args, "convert_inputs", False),
                )
            with portable.part_binaries(part):
                return _run_and_check(part.program, feed)
        return 0
    if not args.out:
        raise MigxError("compile needs --out FILE (or --resume to continue a saved partial compile)")
    from ..loading import load_program

    program, name = load_program(args)
    opts = CompileOptions(mode=args.compile_mode, enable_nhwc=args.nhwc, **precision_options(args))
    trace = portable.compile_until(program, args.until, args.out, options=opts, spec=args.spec, model=name)
    last = trace.top_level()[-1].path if trace.top_level() else "(nothing)"
    from ..keys import own_key_id

    kid = own_key_id()
    signed = (
        f"signed by key {kid}"
        if kid
        else "unsigned, so it carries kernel sources only; "
        "create a signing key with `migx-explore keys create` to ship binaries"
    )
    print(f"{name}: ran {len(trace.top_level())} passes up to {last}; wrote {args.out} ({signed})")
    return 0


def _reuse(part, args: argparse.Namespace) -> str:
    """What happens to the binaries the file carries, and why."""
    if args.recompile:
        return "shipped kernel binaries ignored (--recompile)"
    if part.kernels and not part.signature.trusted:
        return f"{part.kernels} kernel binaries reused from the file without a trusted signature (--trust-binaries)"
    if part.kernels:
        return f"{part.kernels} kernel binaries reused from the file"
    if part.shipped:
        how = (
            "trust its key with `migx-explore keys trust`"
            if part.signature.status == "untrusted"
            else "only signed files' binaries are used"
        )
        return f"{part.shipped} shipped kernel binaries not used, every kernel is compiled from its source ({how})"
    return "no kernel binaries for this machine in the file"


def _run_and_check(program, feed=None) -> int:
    """Finalize on this machine's GPU, run in graph mode, compare with the reference evaluator
    on `feed` (default: random inputs that respect the model)."""
    import numpy as np

    from migx_explore.compiler.inputs import random_inputs
    from migx_explore.compiler.ref import evaluate, with_buffer_params
    from migx_explore.compiler.snapshot import snapshot

    from ..gpu_bridge import compile_snapshot

    compiled = compile_snapshot(snapshot(program))
    try:
        given = feed if feed is not None else random_inputs(program, seed=0)
        feeds = {k: v for k, v in given.items() if k in compiled.inputs}
        outs = compiled.run(feeds, mode="graph")
        if compiled.backend.name == "fake":
            print("finalized on the recording fake backend (no numbers to compare)")
            return 0
        ref = evaluate(program, with_buffer_params(program, feeds))
        err = max(
            float(np.max(np.abs(np.asarray(o, np.float64) - np.asarray(r, np.float64)), initial=0.0))
            for o, r in zip(outs, ref)
        )
        ok = all(np.allclose(o, r, rtol=1e-3, atol=1e-4) for o, r in zip(outs, ref))
        print(
            f"ran on {compiled.backend.name}:{compiled.backend.arch} in graph mode; max|err| vs reference "
            f"{err:.3e} ({'OK' if ok else 'MISMATCH'})"
        )
        return 0 if ok else 1
    finally:
        compiled.close()


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser("compile", help="compile up to a pass and save a portable program, or --resume one")
    add_model_arguments(p)
    add_pipeline_arguments(p)
    p.add_argument("--until", default=None, help="last pass to run (path like fusion.fuse_concat); default: all")
    p.add_argument("--out", default=None, help="file to write")
    p.add_argument("--resume", action="store_true", help="MODEL is a saved partial compile: finish it")
    p.add_argument("--run", action="store_true", help="after --resume, run the result on this machine's GPU")
    p.add_argument(
        "--recompile",
        action="store_true",
        help="with --resume, compile every kernel from its source "
        "and ignore the binaries shipped in the file (a saved program's binaries run on your GPU)",
    )
    p.add_argument(
        "--trust-binaries",
        action="store_true",
        help="with --resume, use the kernel binaries shipped "
        "in the file even when no key you trust signed it (what versions before signing did)",
    )
    p.add_argument(
        "--inputs",
        metavar="FEED.npz",
        default=None,
        help="with --run: real inputs (keyed by input name) instead of random ones that respect the model",
    )
    p.add_argument(
        "--convert-inputs",
        action="store_true",
        help="with --inputs: cast a feed of another element type to the input's type instead of refusing it",
    )
    p.set_defaults(func=run)
