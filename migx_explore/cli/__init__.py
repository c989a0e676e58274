"""`migx-explore` command line (verbs mirror migraphx-driver's: read, run, passes, trace, verify,
perf, compile, ...). Each verb lives in its own module with `register(subparsers)`.

One error boundary (migx_explore.errors) wraps every verb: errors the tool raises on purpose
(MigxError) and OS refusals print as one line `migx-explore VERB: error: ...` and exit 2;
anything else is an internal error, one line naming it and exit 3 (`--debug` shows the traceback).
Outputs that would overwrite an input are refused before the verb runs (migx_explore.outputs)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
import traceback
import warnings

from ..errors import debug_enabled, describe_error, format_error

# Verb modules, in the order `--help` lists them. A module missing here is skipped, so verbs can
# be added one file at a time.
VERBS = [
    "read",
    "run",
    "onnx",
    "passes",
    "trace",
    "verify",
    "perf",
    "compile",
    "waterfall",
    "study",
    "generate",
    "keys",
    "report",
    "compare",
]


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with "did you mean" on a mistyped choice (a verb, a mode); subparsers
    are made of the same class."""

    def error(self, message: str):  # type: ignore[override]
        m = re.search(r"invalid choice: '?([^'\s]+)'? \(choose from (.*)\)", message)
        if m:
            choices = [c.strip(" '") for c in m.group(2).split(",")]
            close = difflib.get_close_matches(m.group(1), choices, n=3, cutoff=0.6)
            if close:
                message += f"; did you mean {', '.join(close)}?"
        super().error(message)


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> None:
    """Refuse arguments no option takes, from the verb's own parser (its usage, its name), with the
    closest option names for a mistyped one; argparse would answer from the top-level parser."""
    target = parser
    while True:
        subs = [a for a in target._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs else None
        if chosen is None or chosen not in subs[0].choices:
            break
        target = subs[0].choices[chosen]
    known = [o for a in target._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
    hints = []
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.split("=")[0], known, n=1, cutoff=0.6)
            hints += [f"{extra.split('=')[0]}: did you mean {close[0]}?"] if close else []
    target.error(f"unrecognized arguments: {' '.join(extras)}" + "".join(f"; {h}" for h in hints))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="migx-explore", description="Explore, compile and time ML graphs pass by pass.")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    parser.add_argument(
        "--work-budget",
        metavar="N",
        default=None,
        help="instructions one reference evaluation may "
        "run, e.g. 500M (default 10M; MIGX_EXPLORE_WORK_BUDGET): stops a Loop with a huge trip count",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        # Every listed verb has a module (tests/test_no_silent_miss.py): a missing one is an error here.
        importlib.import_module(f"{__name__}.{verb}").register(sub)
    return parser


def _global_option_first(argv: list[str], flag: str) -> list[str]:
    """Move `flag VALUE` (or `flag=VALUE`) from after the verb to the front, where argparse wants it."""
    out, front, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == flag and i + 1 < len(argv):
            front += [a, argv[i + 1]]
            i += 2
            continue
        (front if a.startswith(flag + "=") else out).append(a)
        i += 1
    return front + out


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"migx-explore: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    from ._options import on_broken_pipe

    return on_broken_pipe(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in argv[1:]:  # accepted after the verb too: `migx-explore read m.onnx --debug`
        argv = ["--debug"] + [a for a in argv if a != "--debug"]
    argv = _global_option_first(argv, "--work-budget")
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unrecognized(parser, args, extras)
    if args.work_budget is not None:  # the evaluator reads it from the environment (compiler/limits.py)
        os.environ["MIGX_EXPLORE_WORK_BUDGET"] = args.work_budget
    args.command_line = argv  # as given, for outputs that record how they were made (report)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    if not getattr(args, "debug", False):  # warnings as one line each, without file:line noise
        warnings.showwarning = _one_line_warning
    try:
        from ..outputs import check_args

        check_args(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`passes | head`): not an error
        raise
    except Exception as e:  # noqa: BLE001 - the one boundary: every error becomes one line
        message = describe_error(e)
        if not message.known and (args.debug or debug_enabled()):
            traceback.print_exc()
        print(format_error(e, args.verb), file=sys.stderr)
        return message.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
