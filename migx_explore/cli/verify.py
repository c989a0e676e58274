"""`migx-explore verify MODEL`: evaluate after every pass and compare with the unoptimized program.

The check is MIGraphX's (verify_rms_range): per output, the RMS of the error over the range of
the reference, against a threshold of 80 x epsilon of the type the program computes in
(compiler/verify.py); `--rtol/--atol` switch to elementwise allclose. Inputs are seeded random
values that respect the model, or real ones from `--inputs FEED.npz`.
Exit status 1 names the first pass that breaks the tolerance."""

from __future__ import annotations

import argparse

from ._inputs import add_inputs_argument, load_program_and_feed
from ._options import add_quiet, fake_backend_note, step
from ._pipeline_args import add_pipeline_arguments, make_session


def run(args: argparse.Namespace) -> int:
    from ..verification import verify_session

    program, name, feed = load_program_and_feed(args)
    s = make_session(program, args, numeric=True, name=name)
    with step(f"checking {name} after every pass", args):
        report = verify_session(
            s,
            feed,
            rtol=args.rtol,
            atol=args.atol,
            rms=args.rms_tol,
            seed=args.seed,
            bisect=args.bisect,
            inputs_label=f"inputs from {args.inputs}" if feed is not None else None,
        )
    print(report)
    if not report.ok:
        return 1
    if args.gpu:
        with step("comparing every GPU value with the reference", args):
            return _verify_gpu(s)
    return 0


def _verify_gpu(session) -> int:
    """Compare every value of the compiled program on the GPU with the reference evaluator."""
    from ..bisect import gpu_divergence

    if session.trace.final.module("main").instrs and not any(
        r.op.name.startswith("gpu::") for r in session.trace.final.module("main").instrs
    ):
        print("--gpu needs the backend pipeline (drop --no-backend)")
        return 1
    d = gpu_divergence(session.final(), session.traces.numeric_config().inputs)
    note = fake_backend_note()
    if d is None:
        if note:
            print("OK on the fake backend (no GPU ran: its values are the reference evaluator's, so they agree)")
            print(note)
            return 0
        print("OK: every GPU value agrees with the reference evaluator (max|err| <= 1e-4 + 1e-3 max|ref| per value)")
        return 0
    print(f"FAIL on the GPU: {d.describe()}")
    return 1


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser("verify", help="numeric check after every pass against the unoptimized program")
    add_model_arguments(p)
    add_pipeline_arguments(p)
    add_inputs_argument(p)
    p.add_argument(
        "--rms-tol",
        type=float,
        default=None,
        metavar="T",
        help="fixed threshold for the relative RMS error (default: 80 x epsilon of the compute type, "
        "e.g. 9.5e-06 for float32, 7.8e-02 for float16)",
    )
    p.add_argument("--rtol", type=float, default=None, help="use elementwise allclose with this rtol instead")
    p.add_argument("--atol", type=float, default=None, help="use elementwise allclose with this atol instead")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--bisect", action="store_true", help="find the first diverging replacement of the failing pass")
    p.add_argument(
        "--gpu",
        action="store_true",
        help="also run on the GPU, reading back every value, and name "
        "the first instruction whose GPU value diverges from the reference",
    )
    add_quiet(p)
    p.set_defaults(func=run)
