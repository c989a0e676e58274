"""Render timings and SVG sizes on synthetic programs (python benchmarks/render.py).

Targets: a full render of a ~500-instruction snapshot in <= 1 s; a focus-mode diff render of a
~2,000-instruction model in <= 2 s. Times are wall clock, best of `--repeat`, and include building
the display graph, writing DOT and running graphviz's `dot` (the part users wait for).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from migx_explore.compiler.pass_infra import PassManager
from migx_explore.compiler.snapshot import snapshot
from migx_explore.render import build_graph, diff_graph, program_graph, render_svg, side_by_side, text_diff
from migx_explore.render.synthetic import FuseBiasRelu, conv_chain


def best_of(n: int, fn: Callable[[], object]) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def row(name: str, seconds: float, nodes: int, svg: str | None, target: float | None = None) -> None:
    size = f"{len(svg.encode()) / 1024:8.1f} KiB" if svg is not None else " " * 12
    verdict = "" if target is None else ("  ok" if seconds <= target else f"  OVER {target:g} s target")
    print(f"{name:<52} {seconds * 1e3:8.0f} ms {nodes:6d} nodes {size}{verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    r = args.repeat

    small = snapshot(conv_chain(80, residual_every=4))
    big_prog = conv_chain(340, residual_every=4)
    trace = PassManager(validate=False).run(big_prog, [FuseBiasRelu(limit=1)])
    rec = trace.records[0]
    print(
        f"programs: {small.total_instructions()} instructions; "
        f"{rec.before.total_instructions()} -> {rec.after.total_instructions()} instructions "
        f"({rec.diff.summary()})\n"
    )

    t, (g, svg) = best_of(r, lambda: (lambda g: (g, render_svg(g)))(build_graph(small)))
    row(f"full render, {small.total_instructions()} instructions", t, len(g.nodes), svg, 1.0)
    t, g = best_of(r, lambda: build_graph(small))
    row("  of which: display graph", t, len(g.nodes), None)

    t, (g, svg) = best_of(r, lambda: (lambda g: (g, render_svg(g)))(diff_graph(rec.before, rec.after, rec.diff)))
    row(f"focus diff render, {rec.after.total_instructions()} instructions", t, len(g.nodes), svg, 2.0)
    t, g = best_of(r, lambda: diff_graph(rec.before, rec.after, rec.diff))
    row("  of which: display graph (two builds, merge, focus)", t, len(g.nodes), None)

    t, (g, svg) = best_of(r, lambda: (lambda g: (g, render_svg(g)))(side_by_side(rec.before, rec.after, rec.diff)))
    row("side-by-side focus diff render, same model", t, len(g.nodes), svg)

    t, (g, svg) = best_of(1, lambda: (lambda g: (g, render_svg(g)))(program_graph(rec.after)))
    row("full model with the default node budget (400)", t, len(g.nodes), svg)
    t, (g, svg) = best_of(1, lambda: (lambda g: (g, render_svg(g)))(program_graph(rec.after, chains=True)))
    row("full model with chains collapsed", t, len(g.nodes), svg)
    t, (g, svg) = best_of(1, lambda: (lambda g: (g, render_svg(g)))(program_graph(rec.after, budget=None)))
    row("full model, every node (no budget)", t, len(g.nodes), svg)

    t, text = best_of(r, lambda: text_diff(rec.before, rec.after))
    print(f"{'text diff, same model':<52} {t * 1e3:8.0f} ms {len(text.splitlines()):6d} lines")

    try:
        from migx_explore.compiler.pass_infra import make_pass
        from migx_explore.models import load
    except ImportError:
        print("(YOLO-style model not available: migx_explore.models is missing)")
        return
    yolo = PassManager().run(load("yolo"), [make_pass("fuse_pointwise")]).records[0]
    t, (g, svg) = best_of(r, lambda: (lambda g: (g, render_svg(g)))(diff_graph(yolo.before, yolo.after, yolo.diff)))
    row(f"fuse_pointwise diff on YOLO ({yolo.after.total_instructions()} instr.)", t, len(g.nodes), svg)


if __name__ == "__main__":
    main()
