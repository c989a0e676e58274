"""How responsive the explorer is on a real-size model (a benchmark that prints, not a test).

    python benchmarks/explorer_responsiveness.py [--model yolov8] [--repeat 3]

Targets (issue 18): the first graph within 3 s of asking for the model; a step <= 200 ms median;
toggling a fusion pass and recomputing <= 2 s. Measured:

* first render: Explorer.load(model) from nothing to the first graph drawn (import, trace with
  the numeric check deferred, tree, first changed pass drawn), split into its phases;
* session step: Session.step() + stats() (the pure state a step changes);
* explorer step, cold: the widget's whole step, drawing the diff graph with graphviz;
* explorer step, prefetched: the same when the user paused long enough for the background
  prefetch of the next pass to finish (the common case when reading each graph);
* graphs: every changed top-level pass drawn cold (display graph, DOT, graphviz) in the diff view,
  the diff view with every fused node expanded into its cluster, and before | after; the median
  and the slowest (a single graph must stay within a few seconds: hub nodes once took 8-20 s);
* toggle: disabling fusion.fuse_pointwise_reduce and re-tracing (prefix-cached), in the session
  alone and through the explorer (tree and views refreshed), with the per-pass numeric check
  inline (the reference evaluator after every pass that changed the IR), deferred (the
  explorer's default: checked afterwards in the background) and off.

Issue 23's targets, in one run (section `scale`, the default's last part):

* export: the YOLOv10n-shaped export (`yolov10n`, ~750 instructions, Ultralytics' node names):
  Explorer.load -> first graph <= 2 s (the rest of the trace in the background), and the step
  median <= 200 ms with the graph drawn, cold (right after the click before) and after a pause;
* decode: `trace gpt2_decode --input-dim P=1..255 --input-dim T=1` <= 60 s and <= 2 GB peak, and
  the same traced as the decoder's buckets (`--buckets pow2`, the fallback);
* lstm: `trace bilstm --svg`, unrolled (rewrite_rnn(fuse_lstm=false): thousands of instructions) <= 60 s;
* read: `read` of a 100,000-node elementwise chain <= 5 s.

The last three run as separate processes (wall time and peak RSS per process; one over its
limit is reported as such, not waited for).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from migx_explore import pass_changes
from migx_explore.session import Session

FIRST_RENDER_TARGET_S = 3.0
STEP_TARGET_S = 0.200
SINGLE_GRAPH_TARGET_S = 3.0
TOGGLE_TARGET_S = 2.0
FUSION_PASS = "fusion.fuse_pointwise_reduce"
EXPORT_MODEL = "yolov10n"
EXPORT_FIRST_GRAPH_S = 2.0
DECODE_TARGET = (60.0, 2 << 30)
UNROLLED_SPEC = "dynamic_shapes,required{rewrite_rnn(fuse_lstm=false)},optimize_rewrite,fusion,backend"
LSTM_SVG_TARGET_S = 60.0
READ_TARGET_S = 5.0
CHAIN_NODES = 100_000


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def line(label: str, seconds: list[float], target: float | None = None) -> None:
    med = statistics.median(seconds)
    verdict = "" if target is None else ("  within target" if med <= target else f"  OVER the {target:g} s target")
    print(f"{label:58s} median {med * 1e3:8.1f} ms  max {max(seconds) * 1e3:8.1f} ms  (n={len(seconds)}){verdict}")


def first_render_numbers(model: str, repeat: int) -> None:
    from migx_explore.widgets.explorer import Explorer

    warm = Explorer()  # warm: imports, the model's ONNX bytes, graphviz's first start
    warm.load(model)
    warm.tracer.cancel()  # its background trace and check must not run beside the timed loads
    warm.numeric.cancel()
    warm.wait(120)
    totals, phases = [], []
    for _ in range(repeat):
        ex = Explorer()
        totals.append(timed(lambda ex=ex: ex.load(model)))
        phases.append(ex.last_load)
        ex.tracer.cancel()
        ex.numeric.cancel()
        ex.wait(120)
    n = ex.session.initial.total_instructions()
    print(f"\n[first render] {model}: {n} instructions, {len(ex.session.trace.records)} pass records")
    line("first render: load -> first graph (numeric check deferred)", totals, FIRST_RENDER_TARGET_S)
    for key in ("import_s", "trace_s", "first_view_s"):
        line(f"  of which {key[:-2]}", [p[key] for p in phases])
    t0 = time.perf_counter()
    ex = Explorer()
    ex.load(model)
    ex.wait(600)
    print(
        f"{'then the deferred numeric check of every changed pass':58s} done {time.perf_counter() - t0:6.2f} s "
        "after the load started (the graph was up long before)"
    )


CHECK_MODES = {
    "inline": {"numeric": True},
    "deferred": {"numeric": True, "defer_numeric": True},
    "off": {"numeric": False},
}


def session_numbers(model: str, repeat: int) -> None:
    for mode, kw in CHECK_MODES.items():
        s = Session.from_model(model, **kw)
        print(f"\n[session, numeric check {mode}] first trace: {timed(s.run):.2f} s, {len(s.trace.records)} records")
        s.cursor.view.hide_unchanged = True
        s.first()
        steps = [timed(lambda: (s.step(), pass_changes.stats(s))) for _ in range(len(s.visible()) - 1)]
        line("session step (step + stats), changed passes only", steps, STEP_TARGET_S)
        toggles = []
        for _ in range(repeat):
            for enabled in (False, True):
                s.set_enabled(FUSION_PASS, enabled)
                toggles.append(timed(s.run))
        line(f"session toggle {FUSION_PASS} + re-trace", toggles, TOGGLE_TARGET_S)
        info = s.traces.last_retrace
        print(
            f"{'':58s} re-ran {info.ran} of {info.ran + info.reused} top-level passes (the rest from the prefix cache)"
        )


def explorer_numbers(model: str, repeat: int) -> None:
    from migx_explore.widgets.explorer import Explorer

    for mode in ("deferred", "off"):  # the explorer's own default is deferred
        s = Session.from_model(model, **CHECK_MODES[mode])
        s.run()
        build = timed(lambda: Explorer(s))  # noqa: B023 - s is this iteration's session
        ex = Explorer(s)
        ex.wait(600)  # steps measured on their own, not beside the background trace and check
        print(f"\n[explorer, numeric check {mode}] widget built in {build:.2f} s")
        ex.tree.hide_unchanged.value = True
        ex.first()
        n = len(s.visible()) - 1
        ex.views.cache._pool = None  # cold: no background prefetch
        cold = [timed(ex.next) for _ in range(n)]
        line("explorer step, cold (graphviz on the click)", cold, STEP_TARGET_S)
        ex2 = Explorer(s)
        ex2.wait(600)
        ex2.tree.hide_unchanged.value = True
        ex2.first()
        warm = []
        for _ in range(n):
            time.sleep(1.0)  # a user reading the graph; the prefetch finishes meanwhile
            warm.append(timed(ex2.next))
        line("explorer step, next pass prefetched", warm, STEP_TARGET_S)
        toggles = []
        for _ in range(repeat):
            for enabled in (False, True):
                toggles.append(timed(lambda en=enabled: ex2.toggle(FUSION_PASS, en)))
        line(f"explorer toggle {FUSION_PASS} (re-trace + redraw)", toggles, TOGGLE_TARGET_S)


def graph_numbers(model: str, repeat: int) -> None:
    from migx_explore.render import Clusters
    from migx_explore.widgets import content

    s = Session.from_model(model, numeric=False)
    s.run()
    changed = [r for r in s.trace.top_level() if r.changed]
    print(f"\n[graphs] {model}: {len(changed)} changed top-level passes, each drawn cold")
    for label, view, kw in (
        ("diff", "diff", {}),
        ("diff, every cluster expanded", "diff", {"expand": Clusters(True)}),
        ("before | after", "side_by_side", {}),
    ):
        times: list[tuple[float, str]] = []
        for r in changed:
            before, after, d = content.record_snapshots(s, r.index)
            times.append((timed(lambda: content.graph_svg(before, after, view, diff=d, **kw)), r.path))  # noqa: B023
        line(f"graph: {label}", [t for t, _ in times])
        worst = max(times)
        verdict = "within" if worst[0] <= SINGLE_GRAPH_TARGET_S else "OVER"
        print(
            f"{'':58s} slowest: {worst[1]} ({worst[0]:.2f} s, {verdict} the {SINGLE_GRAPH_TARGET_S:g} s "
            "target for one graph)"
        )


def export_numbers(model: str, repeat: int) -> None:
    """First graph and steps on the export, as a user sees them (the numeric check deferred)."""
    from migx_explore.widgets.explorer import Explorer

    warm = Explorer()  # imports, the model's ONNX bytes, graphviz's first start
    warm.load(EXPORT_MODEL)
    warm.wait(600)
    firsts, ex = [], None
    for _ in range(repeat):
        if ex is not None:
            ex.wait(600)
        ex = Explorer()
        firsts.append(timed(lambda ex=ex: ex.load(EXPORT_MODEL)))
    n = ex.session.initial.total_instructions()
    print(
        f"\n[export] {EXPORT_MODEL}: {n} instructions; first graph after "
        f"{int(ex.last_load['passes_traced'])} pass records traced"
    )
    line("export: load -> first graph", firsts, EXPORT_FIRST_GRAPH_S)
    t0 = time.perf_counter()
    ex.wait(600)
    print(
        f"{'  then the rest of the trace + numeric check, in the background':58s} done "
        f"{time.perf_counter() - t0:6.2f} s later"
    )
    ex.tree.hide_unchanged.value = True
    for label, pause in (("cold (right after the previous step)", 0.0), ("after a 1 s pause (prefetched)", 1.0)):
        ex.first()
        steps, summaries = [], 0
        for _ in range(len(ex.session.visible()) - 1):
            if pause:
                time.sleep(pause)
            steps.append(timed(ex.next))
            # drawn, not just stepped: the graph, or the rewrite summary a pass opens on when its
            # change cannot be read as one region (lowering, memory_coloring, ...)
            if ex.views.select.value == "rewrites":
                summaries += 1
                assert ex.views.rewrites.rows_box.children
            else:
                assert ex.views.graph.svg.startswith("<svg")
        line(f"export: step with the view drawn, {label}", steps, STEP_TARGET_S)
        print(f"  ({summaries} of {len(steps)} passes opened on their rewrite summary, the rest on a graph)")


def _child(cmd: list[str], limit_s: float, mem_limit: int | None = None) -> tuple[float | None, int, str]:
    """Run a CLI command in a child process: (seconds or None when killed at the limit, peak RSS
    bytes of the child, last line of stderr, with the child's CPU seconds appended: on a shared
    machine the wall time says as much about the neighbours). mem_limit caps its address space
    (a run that once grew past 15 GB must not take the machine down with it)."""

    def cap() -> None:
        if mem_limit:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))

    # os.wait4 gives this child's own rusage: RUSAGE_CHILDREN's ru_maxrss is the largest of all
    # children so far, so a small run after a big one read as 0
    with tempfile.TemporaryFile(mode="w+") as err_file:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "migx_explore", *cmd],
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            text=True,
            preexec_fn=cap,
        )
        killed = threading.Event()
        timer = threading.Timer(limit_s, lambda: (killed.set(), proc.kill()))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        if killed.is_set():
            return None, 0, f"killed after {limit_s:.0f} s"
        err_file.seek(0)
        lines = err_file.read().strip().splitlines()
    err = lines[-1] if proc.returncode and lines else ""
    return seconds, usage.ru_maxrss * 1024, err or f"cpu {usage.ru_utime + usage.ru_stime:.1f} s"


def _verdict(label: str, seconds: float | None, err: str, target: float, peak: int = 0, mem: int | None = None) -> None:
    if seconds is None or not err.startswith("cpu "):
        print(f"{label:58s} {err or 'failed'}  (target <= {target:g} s)")
        return
    ok = seconds <= target and (mem is None or peak <= mem)
    mem_txt = f", peak {peak / 2**30:.2f} GB (<= {mem / 2**30:g} GB)" if mem else ""
    print(f"{label:58s} {seconds:8.2f} s ({err}){mem_txt}  (target <= {target:g} s){'' if ok else '  OVER target'}")


def scale_numbers(model: str, repeat: int) -> None:
    """Issue 23's other targets, each in its own process."""
    print("\n[scale]")
    export_numbers(model, repeat)
    with tempfile.TemporaryDirectory() as tmp:
        limit, mem = DECODE_TARGET
        secs, peak, err = _child(
            [
                "trace",
                "gpt2_decode",
                "--input-dim",
                "P=1..255",
                "--input-dim",
                "T=1",
                "--buckets",
                "none",
                "--out",
                os.path.join(tmp, "decode"),
                "-q",
            ],
            3 * limit,
            4 * mem,
        )
        _verdict("decode: trace gpt2_decode P=1..255, T=1, every size (--buckets none)", secs, err, limit, peak, mem)
        # The fallback when every length is too many: the decoder's buckets (16, 32, ..., 255).
        secs, peak, err = _child(
            [
                "trace",
                "gpt2_decode",
                "--input-dim",
                "P=1..255",
                "--input-dim",
                "T=1",
                "--buckets",
                "auto",
                "--out",
                os.path.join(tmp, "decode_buckets"),
                "-q",
            ],
            2 * limit,
            4 * mem,
        )
        _verdict("decode: the same as buckets (the default past 64 sizes)", secs, err, limit, peak, mem)
        # unrolled step by step as MIGraphX does (rewrite_rnn's default fuses a plain direction into
        # one lstm_recurrence op; the issue's case is the ~6,000-instruction unrolled graph)
        secs, _, err = _child(
            ["trace", "bilstm", "--svg", "--spec", UNROLLED_SPEC, "--out", os.path.join(tmp, "lstm"), "-q"],
            2 * LSTM_SVG_TARGET_S,
        )
        _verdict("lstm: trace bilstm --svg (unrolled)", secs, err, LSTM_SVG_TARGET_S)
        import onnx

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from chain_scaling import chain_model

        path = os.path.join(tmp, f"chain{CHAIN_NODES}.onnx")
        onnx.save(chain_model(CHAIN_NODES), path)
        secs, _, err = _child(["read", path], 4 * READ_TARGET_S)
        _verdict(f"read: {CHAIN_NODES:,}-node elementwise chain", secs, err, READ_TARGET_S)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8")
    ap.add_argument("--repeat", type=int, default=2, help="toggle off/on cycles")
    ap.add_argument(
        "--sections",
        default="first,session,explorer,graphs,scale",
        help="comma-separated: first (first render), session, explorer, graphs, scale (issue 23: "
        "the yolov10n export, the decode P range, the LSTM --svg, read of 100,000 nodes)",
    )
    args = ap.parse_args(argv)
    sections = {
        "first": first_render_numbers,
        "session": session_numbers,
        "explorer": explorer_numbers,
        "graphs": graph_numbers,
        "scale": scale_numbers,
    }
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in sections]
    if unknown:  # before minutes of measuring, not after
        ap.error(
            f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(sections)} "
            "(toggle times are part of session and explorer)"
        )
    print(
        f"model {args.model}; targets: first render <= {FIRST_RENDER_TARGET_S:g} s, step <= "
        f"{STEP_TARGET_S * 1e3:.0f} ms, toggle + recompute <= {TOGGLE_TARGET_S:g} s"
    )
    for name in chosen:
        sections[name](args.model, args.repeat)


if __name__ == "__main__":
    main()
