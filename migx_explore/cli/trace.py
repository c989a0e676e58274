"""`migx-explore trace MODEL --out DIR [--svg]`: numbered IR files per pass plus a JSON index."""

from __future__ import annotations

import argparse
import sys

from migx_explore.compiler.pass_infra import write_trace

from ..like_this import EXACT_SIZES_LIMIT, bucket_long_ranges
from ..outputs import TRACE_MARKER, check_output_folder, replaced_folder
from ..rewrite_summary import index_rewrites
from ..stats import launch_count
from ._inputs import add_inputs_argument, load_program_and_feed
from ._options import Progress, add_quiet, heading
from ._pipeline_args import add_pipeline_arguments, make_session


def run(args: argparse.Namespace) -> int:
    if args.out is None and args.model_explorer is None:
        from migx_explore.compiler.errors import MigxError

        raise MigxError("trace needs --out DIR (the IR files) or --model-explorer DIR, or both")
    if args.out is not None:
        check_output_folder(args.out)  # refuse a bad --out before spending time on the model
    if args.model_explorer is not None:
        from ..model_explorer import check_export_folder

        check_export_folder(args.model_explorer)
    from ..migraphx.load import is_migraphx_text, refuse_mxr

    refuse_mxr(args.model)
    if is_migraphx_text(args.model):  # MIGraphX's own compile log: its passes, not ours
        return _write(_migraphx_session(args), args)
    program, name, feed = load_program_and_feed(args)
    s = make_session(program, args, numeric=args.numeric or feed is not None, name=name)
    if args.buckets == "pow2":
        s.config.set_options("split_single_dyn_dim", buckets="pow2")
    elif args.buckets == "auto" and (note := bucket_long_ranges(s)) and not args.quiet:
        print(f"note: {note} (--buckets none traces every size)", file=sys.stderr)
    if feed is not None:
        s.traces.set_inputs(feed)
    with Progress(f"tracing {name}", quiet=args.quiet) as progress:
        s.traces.on_progress = progress
        s.run()
    return _write(s, args)


def _migraphx_session(args: argparse.Namespace):
    from ..migraphx.load import LoadedLog
    from ..session import Session

    s = Session.from_migraphx(args.model, version=args.migraphx)
    if not args.quiet:
        print(s.state(LoadedLog).log.summary(), file=sys.stderr)
    return s


def _write(s, args: argparse.Namespace) -> int:
    trace, name = s.trace, s.name
    if args.model_explorer:
        from ..model_explorer import export_trace

        e = export_trace(s, args.model_explorer)
        print(f"wrote a Model Explorer trace ({len(e.passes)} pass graphs, {e.nodes} nodes) to {args.model_explorer}")
    if args.out is None:
        return 1 if s.trace.error else 0
    with Progress(f"writing {args.out}", quiet=args.quiet):
        with replaced_folder(args.out) as folder:  # replaces only what a previous trace there wrote
            files = write_trace(
                trace,
                folder,
                changed_only=not args.all,
                extra={
                    "generator": TRACE_MARKER,
                    "model": name,
                    "spec": s.config.label(),
                    "launches_before": launch_count(trace.initial),
                    "launches_after": launch_count(trace.final),
                },
                per_pass=lambda rec: index_rewrites(trace, rec),
            )
            if args.svg:
                files += _write_svg_and_index(s, folder, args)
            else:
                files.append(_write_index_html(s, folder, args))
    _print_summary(trace, args.verbose, table=not args.quiet)
    from ..like_this import like_this_summary, range_note

    note = range_note(trace)
    if note:
        print(note)
    alike = like_this_summary(trace.final)
    if alike and not args.quiet:
        heading("alike submodules in the final program (folded as '× N like this'):")
        for line in alike:
            print(line)
    print(f"wrote {len(files)} files to {args.out}")
    if s.trace.error:
        print(f"error: {s.trace.error}")
        return 1
    return 0


def _write_svg_and_index(s, folder: str, args: argparse.Namespace) -> list[str]:
    """--svg: each changed pass is drawn once, for index.html, and that drawing (the one the page
    opens on, at the files' node budget) is also its numbered SVG file; render_trace draws the
    input and what the page did not (unchanged passes with --all, a pass whose drawing failed)."""
    import os

    from ..render import render_trace
    from ..render.tracefiles import TRACE_FILE_BUDGET, pass_file_name

    written: dict[int, str] = {}

    def on_drawn(rec, svg: str) -> None:
        path = os.path.join(folder, pass_file_name(rec))
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
        written[rec.index] = path

    index = _write_index_html(s, folder, args, graph_budget=TRACE_FILE_BUDGET, on_drawn=on_drawn)
    rest = render_trace(s.trace, folder, changed_only=not args.all, skip=set(written))
    return [*written.values(), *rest, index]


def _write_index_html(s, folder: str, args: argparse.Namespace, **draw) -> str:
    """DIR/index.html: the report page over the folder, each pass linking its numbered files; graph
    diffs are drawn into the page only with --svg (the drawing is what costs time)."""
    import os

    from migx_explore.compiler.pass_infra.trace import record_file_name

    from ..render.tracefiles import has_pass_file, pass_file_name
    from ..report import write_report
    from ..report.repro import cli_command

    links = {}
    for rec in s.trace.records:
        names = [n for n in (record_file_name(rec),) if os.path.exists(os.path.join(folder, n))]
        if args.svg and has_pass_file(rec, changed_only=not args.all):  # drawn with the page, or by render_trace
            names.append(pass_file_name(rec))
        if names:
            links[rec.index] = names
    path = os.path.join(folder, "index.html")
    write_report(
        s,
        path,
        graphs=bool(args.svg),
        files=links,
        command=cli_command(getattr(args, "command_line", None)),
        inputs_path=args.inputs,
        **draw,
    )
    return path


def _print_summary(trace, verbose: bool, *, table: bool = True) -> None:
    total = sum(r.time_s for r in trace.top_level())
    changed = [r for r in trace.top_level() if r.changed]
    print(
        f"{len(trace.top_level())} passes ({len(changed)} changed the IR, "
        f"{sum(1 for r in trace.top_level() if r.status == 'disabled')} disabled), {total * 1e3:.1f} ms in passes"
    )
    print(
        f"instructions {trace.initial.total_instructions()} -> {trace.final.total_instructions()}, "
        f"kernel launches {launch_count(trace.initial)} -> {launch_count(trace.final)}"
    )
    if not table:
        return
    pending = sum(1 for r in changed if r.numeric_pending)
    if pending:  # tracing did not wait for them: they run here, each re-running what its pass changed
        print(f"numeric check: {pending} changed passes, checked now that the trace is done")
    heading("every pass:" if verbose else "passes that changed the program (+added -removed ~changed, time):")
    for r in trace.top_level() if verbose else changed:
        d = r.diff.summary() if r.diff else r.status
        num = ""
        if r.numeric is not None and not r.numeric.note:
            fig = (
                f"rms {r.numeric.rms:.2e}"
                if r.numeric.threshold == r.numeric.threshold
                else f"max|err| {r.numeric.max_abs:.2e}"
            )
            num = f"  {fig}" + ("" if r.numeric.ok else f"  TOLERANCE BROKEN ({r.numeric.describe()})")
        print(f"  {r.index + 1:>3} {r.path:<48} {d:<18} {r.time_s * 1e3:8.2f} ms{num}")


def register(sub) -> None:
    from ..loading import add_model_arguments

    p = sub.add_parser("trace", help="run the pipelines and write numbered per-pass IR files + index.json")
    add_model_arguments(p)
    add_pipeline_arguments(p)
    p.add_argument(
        "--out",
        metavar="DIR",
        help="output folder: new, empty, or a previous trace's, inside an existing folder",
    )
    p.add_argument(
        "--model-explorer",
        metavar="DIR",
        help="also write the trace for Google Model Explorer: a graph per pass, overlays, compare "
        "mappings (open DIR/graphs.json, or DIR/trace.migx with --extensions=migx_explore)",
    )
    p.add_argument("--svg", action="store_true", help="also write an SVG diff per (changed) pass")
    p.add_argument("--all", action="store_true", help="write files for unchanged passes too")
    p.add_argument(
        "--buckets",
        choices=["auto", "pow2", "none"],
        default="auto",
        help="trace a dynamic range (--input-dim x=LO..HI) as the decoder's buckets (16, 32, 64, ... "
        "up to HI), one submodule per bucket instead of per size: pow2 always, none never, auto "
        f"(default) when the range has more than {EXACT_SIZES_LIMIT} sizes; the summary says so",
    )
    p.add_argument(
        "--numeric",
        action="store_true",
        help="check outputs against the input program after each pass (MIGraphX's relative RMS; implied by --inputs)",
    )
    add_inputs_argument(p)
    p.add_argument("-v", "--verbose", action="store_true", help="list every pass, not only the changed ones")
    add_quiet(p)
    p.set_defaults(func=run)
