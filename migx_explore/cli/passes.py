"""`migx-explore passes`: the GPU target's five pipelines and every entry's status."""

from __future__ import annotations

import argparse
import re

from migx_explore.compiler.pass_infra.conformance import conformance_summary
from migx_explore.compiler.reprs import short_value
from migx_explore.gpu.migraphx_catalogue import LATEST, VERSIONS, catalogue_diff, mode_catalogue
from migx_explore.gpu.pipelines import CompileOptions, PendingPass, gpu_pipelines

from ._options import add_compile_mode


def entry_status(entry) -> str:
    if isinstance(entry.pass_, PendingPass):
        return "pending: " + entry.reason
    row = entry.pass_.provenance()
    if not entry.enabled:
        return "disabled: " + (entry.reason or row.note or "disabled")
    if row.status == "mapped":
        return "mapped: " + row.note
    if row.status == "disabled":
        return "disabled: " + row.note
    # how the pass fares on MIGraphX's own unit tests (docs/migraphx_conformance.md), not a claim
    conformance = conformance_summary(entry.pass_.name)
    return "implemented" + (f" ({conformance})" if conformance else "") + (f": {row.note}" if row.note else "")


def _options_text(entry) -> str:
    """The entry's non-default options as `{k=v}`; a function option by its name, not its repr."""
    if isinstance(entry.pass_, PendingPass):
        return ""
    opts = entry.pass_.non_default_options()
    return "{" + ",".join(f"{k}={short_value(v)}" for k, v in opts.items()) + "}" if opts else ""


def run(args: argparse.Namespace) -> int:
    if args.diff:
        old, new = args.diff
        lines = catalogue_diff(old, new)
        print(f"MIGraphX develop {old} -> {new}: {len(mode_catalogue(old))} -> {len(mode_catalogue(new))} entries")
        for line in lines:
            print("  " + line)
        return 0
    opts = CompileOptions(
        mode=args.compile_mode,
        enable_nhwc=args.nhwc,
        enable_rewrite_dot=args.rewrite_dot,
        precision=args.precision,
        migraphx=args.migraphx,
    )
    total = 0
    counts: dict[str, int] = {}
    for pl in gpu_pipelines(opts):
        head = f"{pl.name} ({len(pl.entries)} entries)" + ("" if pl.enabled else " [pipeline disabled]")
        print(head)
        for k, e in enumerate(pl.entries, 1):
            status = entry_status(e)
            kind = re.match(r"\w+", status).group(0)  # implemented | mapped | disabled | pending
            counts[kind] = counts.get(kind, 0) + 1
            opts_txt = _options_text(e)
            print(f"  {k:>3}  {e.name + opts_txt:<52} {status}")
        total += len(pl.entries)
        print()
    print(f"{total} entries: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])))
    theirs = len(mode_catalogue(args.migraphx, args.compile_mode))
    extra = "fuse_kv_append" + (" and rewrite_rnn" if args.migraphx != "2026-05" else "")
    print(
        f"MIGraphX develop {args.migraphx}, mode {args.compile_mode}: {theirs} entries "
        f"(ours adds {extra}, each with its DCE)"
    )
    print(
        "MIGraphX tests: cases of MIGraphX's own pass tests that match or are equivalent (docs/migraphx_conformance.md)"
    )
    return 0


def register(sub) -> None:
    p = sub.add_parser("passes", help="list the five pipelines and their entries with status")
    add_compile_mode(p)
    p.add_argument(
        "--migraphx",
        choices=VERSIONS,
        default=LATEST,
        help="which MIGraphX develop pass list to follow (default: %(default)s)",
    )
    p.add_argument(
        "--diff", nargs=2, metavar=("OLD", "NEW"), choices=VERSIONS, help="list what changed between two pass lists"
    )
    p.add_argument("--nhwc", action="store_true", help="as MIGRAPHX_ENABLE_NHWC")
    p.add_argument("--rewrite-dot", action="store_true", help="as MIGRAPHX_ENABLE_REWRITE_DOT")
    g = p.add_mutually_exclusive_group()
    for name in ("fp16", "bf16", "int8", "fp8"):
        g.add_argument(
            f"--{name}",
            dest="precision",
            action="store_const",
            const=name,
            help=f"show the quantize stage for {name} first",
        )
    p.set_defaults(precision="fp32")
    p.set_defaults(func=run)
