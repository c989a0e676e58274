"""`migx-explore generate MODEL --steps N [--prompt 1,2,3] [--target ref|gpu] [--exec-mode eager|graph]`:
greedy decoding with a KV-cache model: a prefill, then decode steps on per-bucket programs that
append to a preallocated cache in place (migx_explore.decode)."""

from __future__ import annotations

import argparse
import time

from migx_explore.compiler.errors import MigxError

from ._options import add_exec_mode, exec_modes


def _prompt(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise MigxError(f"--prompt {text!r}: expected token ids separated by commas, e.g. 1,2,3") from None
    if not ids:
        raise MigxError("--prompt needs at least one token id")
    return ids


def generate(args: argparse.Namespace) -> int:
    from ..decode import generate as run

    start = time.perf_counter()
    out = run(
        args.model,
        _prompt(args.prompt),
        args.steps,
        target=args.target,
        mode=exec_modes(args, several=False)[0],
        max_programs=args.max_programs,
        buckets=args.buckets,
        max_len=args.max_len,
    )
    elapsed = time.perf_counter() - start
    print("tokens: " + ",".join(map(str, out.tokens)))
    print(
        f"{len(out.tokens)} steps in {elapsed:.2f} s on {args.target}"
        + (f" ({args.exec_mode})" if args.target == "gpu" else "")
    )
    if out.stats is not None:
        print(f"shape cache: {out.stats}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("generate", help="greedy decoding with a KV-cache model (prefill + decode steps)")
    p.add_argument("model", metavar="MODEL", help="an .onnx KV-cache model or a built-in one (gpt2_decode)")
    p.add_argument("--steps", type=int, default=8, help="tokens to generate (the first comes from the prefill)")
    p.add_argument("--prompt", default="1,2,3,4", help="prompt token ids, comma-separated")
    p.add_argument("--target", choices=("ref", "gpu"), default="ref", help="ref: numpy reference evaluator")
    add_exec_mode(p, default="graph", several=False, old=("--mode",))
    p.add_argument(
        "--max-programs",
        type=int,
        default=8,
        help="GPU: compiled programs (one per bucket, each with its graph) kept at most",
    )
    p.add_argument(
        "--buckets",
        choices=("pow2", "exact"),
        default="pow2",
        help="cache rows a step attends over: the next power of two, or exactly P + T",
    )
    p.add_argument("--max-len", type=int, default=None, help="cache length (default: the model's 256 positions)")
    p.set_defaults(func=generate)
