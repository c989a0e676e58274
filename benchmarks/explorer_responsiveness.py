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
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from migx_explore.session import Session

FIRST_RENDER_TARGET_S = 3.0
STEP_TARGET_S = 0.200
SINGLE_GRAPH_TARGET_S = 3.0
TOGGLE_TARGET_S = 2.0
FUSION_PASS = "fusion.fuse_pointwise_reduce"


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
    warm.numeric.cancel()  # its background check must not run beside the timed loads
    warm.numeric.wait(120)
    totals, phases = [], []
    for _ in range(repeat):
        ex = Explorer()
        totals.append(timed(lambda ex=ex: ex.load(model)))
        phases.append(ex.last_load)
        ex.numeric.cancel()
        ex.numeric.wait(120)
    n = ex.session.initial.total_instructions()
    print(f"\n[first render] {model}: {n} instructions, {len(ex.session.trace.records)} pass records")
    line("first render: load -> first graph (numeric check deferred)", totals, FIRST_RENDER_TARGET_S)
    for key in ("import_s", "trace_s", "first_view_s"):
        line(f"  of which {key[:-2]}", [p[key] for p in phases])
    t0 = time.perf_counter()
    ex = Explorer()
    ex.load(model)
    ex.numeric.wait(600)
    print(f"{'then the deferred numeric check of every changed pass':58s} done {time.perf_counter() - t0:6.2f} s "
          "after the load started (the graph was up long before)")


CHECK_MODES = {"inline": {"numeric": True}, "deferred": {"numeric": True, "defer_numeric": True},
               "off": {"numeric": False}}


def session_numbers(model: str, repeat: int) -> None:
    for mode, kw in CHECK_MODES.items():
        s = Session.from_model(model, **kw)
        print(f"\n[session, numeric check {mode}] first trace: {timed(s.run):.2f} s, "
              f"{len(s.trace.records)} records")
        s.view.hide_unchanged = True
        s.first()
        steps = [timed(lambda: (s.step(), s.stats())) for _ in range(len(s.visible()) - 1)]
        line("session step (step + stats), changed passes only", steps, STEP_TARGET_S)
        toggles = []
        for _ in range(repeat):
            for enabled in (False, True):
                s.set_enabled(FUSION_PASS, enabled)
                toggles.append(timed(s.run))
        line(f"session toggle {FUSION_PASS} + re-trace", toggles, TOGGLE_TARGET_S)
        print(f"{'':58s} re-ran {s.last_retrace.ran} of {s.last_retrace.ran + s.last_retrace.reused} "
              f"top-level passes (the rest from the prefix cache)")


def explorer_numbers(model: str, repeat: int) -> None:
    from migx_explore.widgets.explorer import Explorer

    for mode in ("deferred", "off"):  # the explorer's own default is deferred
        s = Session.from_model(model, **CHECK_MODES[mode])
        s.run()
        build = timed(lambda: Explorer(s))  # noqa: B023 - s is this iteration's session
        ex = Explorer(s)
        ex.numeric.wait(600)  # steps measured on their own, not beside the background check
        print(f"\n[explorer, numeric check {mode}] widget built in {build:.2f} s")
        ex.tree.hide_unchanged.value = True
        ex.first()
        n = len(s.visible()) - 1
        ex.views.cache._pool = None  # cold: no background prefetch
        cold = [timed(ex.next) for _ in range(n)]
        line("explorer step, cold (graphviz on the click)", cold, STEP_TARGET_S)
        ex2 = Explorer(s)
        ex2.numeric.wait(600)
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
    for label, view, kw in (("diff", "diff", {}), ("diff, every cluster expanded", "diff", {"expand": Clusters(True)}),
                            ("before | after", "side_by_side", {})):
        times: list[tuple[float, str]] = []
        for r in changed:
            before, after, d = content.record_snapshots(s, r.index)
            times.append((timed(lambda: content.graph_svg(before, after, view, diff=d, **kw)), r.path))  # noqa: B023
        line(f"graph: {label}", [t for t, _ in times])
        worst = max(times)
        verdict = "within" if worst[0] <= SINGLE_GRAPH_TARGET_S else "OVER"
        print(f"{'':58s} slowest: {worst[1]} ({worst[0]:.2f} s, {verdict} the {SINGLE_GRAPH_TARGET_S:g} s "
              "target for one graph)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8")
    ap.add_argument("--repeat", type=int, default=2, help="toggle off/on cycles")
    ap.add_argument("--sections", default="first,session,explorer,graphs",
                    help="comma-separated: first (first render), session, explorer, graphs")
    args = ap.parse_args(argv)
    sections = {"first": first_render_numbers, "session": session_numbers, "explorer": explorer_numbers,
                "graphs": graph_numbers}
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in sections]
    if unknown:  # before minutes of measuring, not after
        ap.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(sections)} "
                 "(toggle times are part of session and explorer)")
    print(f"model {args.model}; targets: first render <= {FIRST_RENDER_TARGET_S:g} s, step <= "
          f"{STEP_TARGET_S * 1e3:.0f} ms, toggle + recompute <= {TOGGLE_TARGET_S:g} s")
    for name in chosen:
        sections[name](args.model, args.repeat)


if __name__ == "__main__":
    main()
