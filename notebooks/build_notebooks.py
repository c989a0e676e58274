"""Generate the example notebooks from the cell sources below, so they stay reviewable as code.

    python notebooks/build_notebooks.py             # write the .ipynb files (no outputs)
    python notebooks/build_notebooks.py --execute   # ... and run them with nbclient, saving outputs
                                                    # and widget state (what gets committed)

Every notebook runs top to bottom on the built-in models without a GPU: GPU cells print why
they skip (gpu_bridge.unavailable_reason())."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from cells import GPU_CHECK, YOLO, code, md  # shared cell helpers (this folder is on sys.path)
from decode_notebook import decode  # notebook 05's cells live in their own file
from nbformat.v4 import new_notebook
from ordering_study_notebook import ordering_study  # notebook 07 lives in its own file
from precision_notebook import precision  # notebook 06 lives in its own file
from prototype_fusion import prototype  # notebook 03 lives in its own file

HERE = Path(__file__).resolve().parent


# ---- 01: the tour ------------------------------------------------------------------------------------
def tour() -> list:
    return [
        md(f"""
# A tour of migx-explore

This notebook opens the explorer on the built-in YOLO-style model (`{YOLO}`), steps through the GPU
target's five sub-pipelines (`dynamic_shapes`, `required`, `optimize_rewrite`, `fusion`, `backend`)
one pass at a time, looks at what a pass changed, switches a pass off and on, and times the compiled
program on the GPU where there is one.
"""),
        code("""
import migx_explore
from migx_explore import models

models.list_models()
"""),
        md("""
## The explorer

* **left**: the pipeline tree. A checkbox per pass and per pipeline switches it off; bold blue
  passes changed the IR, grey ones did nothing, struck-through ones are disabled (hover for the
  reason). Click a name to jump there, a pipeline name to fold it. The filter box and
  *hide unchanged passes* also decide which passes the stepper visits.
* **top right**: the stepper. Buttons, a slider over the passes, and a key box: click it, then press
  `n` / `p` (next / previous), `f` / `l` (first / last).
* **views**: the merged *Diff* graph (added green, removed red and dashed, changed amber), *Before |
  After* side by side, *Focus* (a few hops around the change, or around instruction ids you type;
  ids are printed on the nodes), *Compare* (the IR after any two passes, side by side with synced
  pan/zoom, and their text side by side), the *Text diff* aligned by instruction id, and *IR
  metrics* (instructions and kernel launches after every pass; click a pass to go there).
* **the graph**: scroll to zoom, drag to pan, *Fit* for the whole graph, *Changes* to centre on what
  the pass changed (every step does this; a note says when changed nodes are off-screen), a search
  box (name, op or instruction id; Enter steps through the hits), a minimap (click to move there),
  and a click on a node pins it across passes. Under the tree: the pass's stats, including the
  numeric check, which runs in the background after the first graph is shown.
* **Recipe / export**: the pipeline as a spec string, a `MIGRAPHX_DISABLE_PASSES` line and a repro
  script.
* **bottom**: the GPU panel (compile and time eager vs graph capture; without a GPU it shows the
  results recorded on an H200, labelled with device and date).
"""),
        code(f"""
ex = migx_explore.explore("{YOLO}")
ex
"""),
        md("""
## Stepping from Python

Every control is also a method, so a notebook can drive the explorer (and the widget above follows).
Here: only visit passes that changed something, then step three times.
"""),
        code("""
ex.tree.hide_unchanged.value = True  # the same as ticking "hide unchanged passes"
ex.first()
for _ in range(3):
    rec = ex.next()
    print(f"{rec.path:48s} {rec.diff.summary():>18s}  {rec.time_s * 1e3:7.2f} ms")
"""),
        md("""
## What one pass did

`fusion.fuse_pointwise_reduce` turns chains of pointwise ops into single kernels. Its stats, then
the text diff (instructions matched by their stable id, so renumbering does not show as change):
"""),
        code("""
from migx_explore import pass_changes

ex.goto("fusion.fuse_pointwise_reduce")
st = pass_changes.stats(ex.session)
for key in ("pass", "instructions_before", "instructions_after", "launches_before", "launches_after",
            "time_ms", "numeric_max_abs", "numeric_ok"):
    print(f"{key:20s} {st[key]}")
"""),
        code("""
diff = pass_changes.text_diff(ex.session)
print(diff[:2500] + ("\\n..." if len(diff) > 2500 else ""))
"""),
        md("""
## Switching a pass off

Toggling re-traces only from the first pass whose pipeline prefix changed (earlier results come from
a cache). Without pointwise fusion every pointwise op stays its own kernel launch:
"""),
        code("""
from migx_explore.stats import ir_metrics

with_fusion = ir_metrics(ex.session.final())
ex.toggle("fusion.fuse_pointwise_reduce", False)
without_fusion = ir_metrics(ex.session.final())
retrace = ex.session.traces.last_retrace
print(f"re-traced {retrace.ran} passes, reused {retrace.reused} from the cache")
print(f"{'':14s}{'with fusion':>14s}{'without':>10s}")
for key in ("instructions", "launches", "fused_modules"):
    print(f"{key:14s}{with_fusion[key]:>14d}{without_fusion[key]:>10d}")
print("pipeline spec:", ex.session.config.spec())
"""),
        code("""
ex.toggle("fusion.fuse_pointwise_reduce", True)
ex.session.config.spec()
"""),
        md("""
## Comparing two points of the pipeline

The *Compare* view shows the IR after any two passes (or the input program, `-1`) side by side; pan
and zoom move both panels. From Python:
"""),
        code("""
ex.views.compare("optimize_rewrite.optimize_module", "fusion.fuse_pointwise_reduce")
print(ex.views.graph.titles)
ex.views.select.value = "diff"  # back to the merged diff of the current pass
"""),
        md("""
## Timing on the GPU

The GPU panel (bottom of the explorer) compiles the final program and times it eagerly (one launch
per kernel) and as a captured graph (one launch for the whole program). The same from Python:
"""),
        code(GPU_CHECK),
        code("""
if NO_GPU:
    print("Skipping GPU timing:", NO_GPU)
else:
    result = ex.gpu.run()  # the same as pressing "Compile & time" in the panel
    print(result.table())
"""),
    ]


# ---- 02: pass ordering ---------------------------------------------------------------------------
def ordering() -> list:
    return [
        md("""
# Pass ordering: a lesson

A compiler's passes enable and undo each other, so their order matters. This notebook changes the
order (and the set) of passes on `resnet_block` (two ResNet basic blocks: conv, batch-norm, ReLU,
residual add) and measures each variant by

* the **final IR**: instruction count and op mix,
* the **kernel-launch count**: what an eager run pays per launch, and what graph capture removes,
* the **rule rewrites** each variant made (every matcher rewrite is recorded in the trace),
* the **latency** on a GPU (skipped, with the reason, where there is none),
* the **ordering-constraint warnings** the pipeline itself reports.
"""),
        code(GPU_CHECK),
        code("""
from collections import Counter

from migx_explore.session import Session
from migx_explore.stats import ir_metrics, op_histogram

MODEL = "resnet_block"
results = []


def rewrites(session):
    \"\"\"How often each matcher rule rewrote something over the whole trace.\"\"\"
    return Counter(m.rule for r in session.trace.records for m in r.matches)


def measure(session, label):
    \"\"\"Final-IR metrics (and GPU latency where possible) of one pipeline variant.\"\"\"
    session.run()
    assert session.trace.error is None, session.trace.error
    row = {"variant": label, **ir_metrics(session.final()), "warnings": len(session.config.warnings()),
           "find_mul_conv": rewrites(session)["find_mul_conv"]}
    if NO_GPU is None:
        t = gpu_bridge.time_session(session, modes=("eager", "graph"), iters=50)
        row.update({f"{m} µs": round(t.modes[m].device_us.median, 1) for m in t.modes})
    results.append(row)
    return row


def show():
    cols = [c for c in results[0] if c not in ("variant", "main_instructions")]
    print(f"{'variant':52s}" + "".join(f"{c[:13]:>14s}" for c in cols))
    for r in results:
        print(f"{r['variant']:52s}" + "".join(f"{r.get(c, '-')!s:>14s}" for c in cols))


def op_delta(a, b):
    \"\"\"Ops the variant b has more (+) or fewer (-) of than a, in the final program.\"\"\"
    d = Counter(op_histogram(b.final()))
    d.subtract(op_histogram(a.final()))
    return {k: v for k, v in sorted(d.items()) if v}


base = Session.from_model(MODEL)
measure(base, "default pipelines")
show()
"""),
        md("""
## 1. Algebra before fusion, or only after it?

`optimize_module` runs `simplify_reshapes`, `eliminate_convert`, `simplify_algebra`, CSE and constant
propagation to a fixpoint. In the default pipelines it runs in `optimize_rewrite` — *before* any
fusion — where `simplify_algebra`'s `find_mul_conv` folds each batch-norm's scale into the
convolution weights and `propagate_constant` folds the shifts into constants.

First, move the `fusion` pipeline's `optimize_module` after `fuse_pointwise_reduce`:
"""),
        code("""
late = Session.from_model(MODEL)
late.config.move("fusion.optimize_module", after="fusion.fuse_pointwise_reduce")
measure(late, "fusion.optimize_module after fuse_pointwise_reduce")
show()
print("what the moved pass did:", late.trace.find("fusion.optimize_module").diff.summary())
print("ordering warnings:", late.config.warnings() or "none")
"""),
        md("""
**No change at all** — and the trace says why: by the time `fusion` runs, `optimize_rewrite` has
already simplified everything, so `fusion.optimize_module` is a safety net that finds nothing
wherever it sits. (`fuse_pointwise_reduce` also runs `optimize_module` as a nested step between its
fusion steps: open it in the tree below to see its children.)

The order that matters is *algebra before fusion at all*. Switch both top-level `optimize_module`
entries off, so the algebra only runs inside `fuse_pointwise_reduce`, after `fuse_pointwise` has
already sealed each batch-norm's multiply and add into a fused kernel with the ReLU:
"""),
        code("""
after_only = Session.from_model(MODEL)
after_only.disable("optimize_module")  # every top-level entry of that name
measure(after_only, "optimize_module only inside fuse_pointwise_reduce")
show()
print("ops that differ from the default:", op_delta(base, after_only))
"""),
        md("""
`find_mul_conv` never fired: once the multiply sits inside a fused kernel it is no longer
`mul(convolution, constant)` at the top level, so the scale stays a separate constant that every run
multiplies in (the extra literals and broadcasts above), instead of being folded into the
weights once at compile time. The launch count is the same — the fuser still makes one kernel per
chain — but each kernel does more work and reads more constants.

## 2. `layout_convolution` on and off

`layout_convolution` puts every convolution's input in one layout (standard NCHW here; NHWC with
`channels_last=True`, MIGraphX's `MIGRAPHX_ENABLE_NHWC`) and inserts the layout changes around it,
which later passes cancel or fuse where they can.
"""),
        code("""
no_layout = Session.from_model(MODEL)
no_layout.disable("layout_convolution")
measure(no_layout, "layout_convolution disabled")

nhwc = Session.from_model(MODEL)
nhwc.config.set_options("layout_convolution", channels_last=True)
measure(nhwc, "layout_convolution channels_last=True")
show()
print("layout_convolution (NHWC) did:", nhwc.trace.find("optimize_rewrite.layout_convolution").diff.summary())
print("ops that differ from the default:", op_delta(base, nhwc))
"""),
        md("""
Off makes no difference for this model: its convolutions already read standard NCHW tensors, so
the pass has nothing to do. Channels-last inserts layout changes around every convolution; the
ones between consecutive convolutions cancel, but those at the model's input and output and around
the residual adds remain as extra kernels — more launches for an eager run to pay for.

## 3. Open a variant in the explorer

The algebra-after-fusion variant, at `fuse_pointwise_reduce`: tick *hide unchanged passes* and step
to compare with the default; unfold `fuse_pointwise_reduce` in the tree for its nested steps.
"""),
        code("""
import migx_explore

ex = migx_explore.explore(after_only)
ex.goto("fusion.fuse_pointwise_reduce")
ex
"""),
        md("""
## What to take away

* Order decides what a pass can see: algebra that runs after the fuser meets ops already sealed
  inside fused kernels and cannot fold across kernel boundaries any more.
* A pass that "does nothing" in a trace is often a safety net for an earlier one; the trace (and
  `last_retrace`) tells you whether moving it could matter before you measure.
* Every extra kernel costs an eager launch (several microseconds of host time each), which graph
  capture replaces by one launch for the whole program (see `04_graph_capture.ipynb`).
* `session.config.warnings()` reports orders that break the pipeline's own rules (MIGraphX's passes rely
  on some, e.g. nothing may run after the final `eliminate_identity`).
"""),
    ]


# ---- 04: graph capture ---------------------------------------------------------------------------
def graph_capture() -> list:
    return [
        md("""
# Eager vs graph capture

An eager run launches every kernel from the host: each launch costs host time (Python, driver call)
and leaves a gap on the GPU, whether the kernel runs for 2 µs or 2 ms. Graph capture (CUDA graphs,
HIP graphs) records the launches once and replays the whole program with one call. So the gain is
about *launch count × per-launch cost*: large for small, many-kernel models, small for big kernels.

This notebook measures both modes on several built-in models and splits the difference per launch.
(The IR's count of launching instructions is a static estimate; the executor's step count below
also counts BLAS epilogue kernels and copies.)
"""),
        code(GPU_CHECK),
        code("""
from migx_explore.session import Session
from migx_explore.stats import ir_metrics

MODELS = {"mlp": None, "transformer": None, "resnet_block": None, "yolo": None, "mobilenet": None}
sessions = {}
print(f"{'model':14s}{'instructions':>14s}{'fused kernels':>15s}{'launching instructions':>24s}")
for name, dims in MODELS.items():
    s = Session.from_model(name, input_dims=dims, numeric=False)
    s.run()
    sessions[name] = s
    m = ir_metrics(s.final())
    print(f"{name:14s}{m['instructions']:>14d}{m['fused_modules']:>15d}{m['launches']:>24d}")
"""),
        md("""
## Timing both modes

Each mode warms up, then runs many iterations. *Device* time brackets the program's own work with
events on its stream; *enqueue* is the host time to submit it (the launch loop, or one graph
launch). Per launch, the eager enqueue time is the host-side cost graph capture removes.
"""),
        md("""
Without a GPU here, these are the timings recorded on a real one (the same benchmark, run on the
device and date named in the table):
"""),
        code("""
from IPython.display import HTML, display

from migx_explore.widgets.timing_view import recorded_html

if NO_GPU:
    display(HTML(recorded_html("yolo")))
else:
    print("A GPU is present: the live timings follow.")
"""),
        code("""
timings = {}
if NO_GPU:
    print("Skipping GPU timing:", NO_GPU)
else:
    print(f"{'model':14s}{'launches':>9s}{'eager µs':>10s}{'graph µs':>10s}{'speed-up':>10s}"
          f"{'eager enqueue µs/launch':>25s}{'graph enqueue µs':>18s}")
    for name, s in sessions.items():
        t = gpu_bridge.time_session(s, modes=("eager", "graph"), warmup=20, iters=200)
        timings[name] = t
        e, g = t.modes["eager"], t.modes["graph"]
        print(f"{name:14s}{e.launches:>9d}{e.device_us.median:>10.1f}{g.device_us.median:>10.1f}"
              f"{e.device_us.median / g.device_us.median:>9.2f}x{e.enqueue_per_launch_us:>25.2f}"
              f"{g.enqueue_us.median:>18.1f}")
"""),
        md("""
## Where the time goes

If the eager device time is close to *launches × host cost per launch*, the GPU spends the run
waiting for the host to submit the next kernel: the program is launch-bound, and a captured graph
removes most of that wait. The numbers measured here:
"""),
        code("""
if not timings:
    print("Skipping:", NO_GPU)
else:
    cost = sorted(t.modes["eager"].enqueue_per_launch_us for t in timings.values())
    print(f"one eager launch costs the host {cost[0]:.1f}-{cost[-1]:.1f} µs here (launch loop + driver call)\\n")
    print(f"{'model':14s}{'launches x cost':>17s}{'eager device':>14s}{'graph device':>14s}{'graph saves':>13s}")
    for name, t in timings.items():
        e, g = t.modes["eager"], t.modes["graph"]
        bound = e.launches * e.enqueue_per_launch_us
        print(f"{name:14s}{bound:>14.1f} µs{e.device_us.median:>11.1f} µs{g.device_us.median:>11.1f} µs"
              f"{1 - g.device_us.median / e.device_us.median:>13.0%}")
"""),
        md("""
## Latency distributions and the slowest kernels

Per model: device and host time per mode (median, p10–p90), and the slowest kernels of an eager run
(the GPU panel of the explorer draws the same figure).
"""),
        code("""
if not timings:
    print("Skipping the plots:", NO_GPU)
else:
    from IPython.display import HTML, display

    from migx_explore.widgets.timing_view import figure_svg, summary

    for name, t in timings.items():
        display(HTML(f"<h4>{name}</h4><p>{summary(t)}</p>" + figure_svg(t)))
"""),
        md("""
## Reading the numbers

* The eager enqueue time per launch is the host-side cost of one launch (Python and driver); with
  graph capture the host pays one graph launch for the whole program.
* These models are small, so their kernels run for a few microseconds each: where *launches x cost*
  matches the eager device time above, the GPU idles between kernels, and the replayed graph's
  device time is what the kernels themselves need. A model dominated by a few large kernels would
  show eager and graph times close together.
* Fusion passes that cut the launch count help eager runs for the same reason (see
  `02_pipeline_ordering.ipynb`); graph capture needs fixed shapes and addresses, which is why the
  executor plans one memory arena per program and replays always read and write the same buffers.
"""),
    ]


NOTEBOOKS = {
    "01_tour.ipynb": tour,
    "02_pipeline_ordering.ipynb": ordering,
    "03_prototype_fusion.ipynb": prototype,
    "04_graph_capture.ipynb": graph_capture,
    "05_decode.ipynb": decode,  # cells in decode_notebook.py
    "06_precision.ipynb": precision,  # cells in precision_notebook.py
    "07_ordering_study.ipynb": ordering_study,  # cells in ordering_study_notebook.py
}


def build(name: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=NOTEBOOKS[name]())
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path = HERE, timeout: int = 900) -> nbformat.NotebookNode:
    """Run a notebook with nbclient, keeping outputs and the widget state (what Lab shows on open)."""
    from nbclient import NotebookClient

    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", store_widget_state=True, resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--execute", action="store_true", help="run each notebook and save its outputs")
    ap.add_argument("names", nargs="*", help=f"notebooks to build (default: all of {', '.join(NOTEBOOKS)})")
    args = ap.parse_args(argv)
    for name in args.names or NOTEBOOKS:
        nb = build(name)
        if args.execute:
            t0 = time.perf_counter()
            execute(nb)
            print(f"{name}: executed in {time.perf_counter() - t0:.1f} s")
        nbformat.write(nb, HERE / name)
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
