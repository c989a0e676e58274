"""`migx-explore` command line (verbs mirror migraphx-driver's: read, run, passes, trace, verify,
perf, compile, ...). Each verb lives in its own module with `register(subparsers)`; errors the
tool raises on purpose (MigxError) print as one line and exit 2, never as a traceback."""

from __future__ import annotations

import argparse
import importlib
import sys

from ..compiler.errors import MigxError

# Verb modules, in the order `--help` lists them. A module missing here is skipped, so verbs can
# be added one file at a time.
VERBS = ["read", "run", "onnx", "passes", "trace", "verify", "perf", "compile", "waterfall", "bisect", "generate"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="migx-explore",
                                     description="Explore, compile and time ML graphs pass by pass.")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        try:
            mod = importlib.import_module(f"{__name__}.{verb}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{verb}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except MigxError as e:
        print(f"migx-explore {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"migx-explore {args.verb}: error: file not found: {e.filename}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
