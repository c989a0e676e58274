"""How responsive the explorer is on the YOLO-style example (a benchmark that prints, not a test).

    python benchmarks/explorer_responsiveness.py [--model yolo] [--repeat 3]

Targets: a step <= 200 ms; toggling a fusion pass and recomputing <= 2 s. Measured:

* session step: Session.step() + stats() (the pure state a step changes);
* explorer step, cold: the widget's whole step, drawing the diff graph with graphviz;
* explorer step, prefetched: the same when the user paused long enough for the background
  prefetch of the next pass to finish (the common case when reading each graph);
* toggle: disabling fusion.fuse_pointwise_reduce and re-tracing (prefix-cached), in the session
  alone and through the explorer (tree and views refreshed), with and without the per-pass
  numeric check (the reference evaluator run after every pass that changed the IR).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from migx_explore.session import Session

STEP_TARGET_S = 0.200
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


def session_numbers(model: str, repeat: int) -> None:
    for numeric in (True, False):
        s = Session.from_model(model, numeric=numeric)
        print(f"\n[session, numeric check {'on' if numeric else 'off'}] first trace: {timed(s.run):.2f} s, "
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

    for numeric in (True, False):
        s = Session.from_model(model, numeric=numeric)
        s.run()
        build = timed(lambda: Explorer(s))  # noqa: B023 - s is this iteration's session
        ex = Explorer(s)
        print(f"\n[explorer, numeric check {'on' if numeric else 'off'}] widget built in {build:.2f} s")
        ex.tree.hide_unchanged.value = True
        ex.first()
        n = len(s.visible()) - 1
        ex.views.cache._pool = None  # cold: no background prefetch
        cold = [timed(ex.next) for _ in range(n)]
        line("explorer step, cold (graphviz on the click)", cold, STEP_TARGET_S)
        ex2 = Explorer(s)
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolo")
    ap.add_argument("--repeat", type=int, default=2, help="toggle off/on cycles")
    args = ap.parse_args(argv)
    print(f"model {args.model}; targets: step <= {STEP_TARGET_S * 1e3:.0f} ms, toggle + recompute <= "
          f"{TOGGLE_TARGET_S:g} s")
    session_numbers(args.model, args.repeat)
    explorer_numbers(args.model, args.repeat)


if __name__ == "__main__":
    main()
