"""Cells of notebook 07: the ordering study, walked through on the built-in YOLO-style model."""

from __future__ import annotations

from cells import GPU_CHECK, YOLO, code, md


def ordering_study() -> list:
    return [
        md(f"""
# Which pass orderings matter? An ordering study

Notebook 02 moved passes by hand. Here the explorer asks the question for every pass at once: for
each *movable* pass of the target-independent pipelines (`dynamic_shapes`, `required`,
`optimize_rewrite`, `fusion`) it trades places with its neighbour, one step earlier or later,
inside its pipeline and across the boundary into the next one, and compiles every variant down
to GPU kernels. Dead-code-elimination cleanups stay where they are, and the backend keeps its
order (it is the lowering protocol, not a choice).

Some moves are **forbidden** by ordering constraints the passes declare (`must_follow`, `requires`,
`final`, in `compiler/pass_infra/ordering.py`); the study lists them with the rule instead of running them.

For every variant it records the final IR size, kernel launches, BLAS calls, the numeric error
against the unoptimized program, how often each rewrite rule fired, and on a GPU the eager and
graph-capture latency. We start on `{YOLO}`.
"""),
        code(GPU_CHECK),
        md("""
## Run it

The variants are independent, so they run as tasks on Dask: a local cluster of worker processes
here (two, to keep the notebook light), each with its own session. One `Sweeper` is reused by every
study below so the workers start once.
"""),
        code(f"""
from migx_explore.session import Session
from migx_explore.study import study_order
from migx_explore.sweep import Sweeper

sweeper = Sweeper(workers=2)
s = Session.from_model("{YOLO}", numeric=False)
study = study_order(s, sweeper=sweeper)
print(study.report())
"""),
        md("""
## Reading the report

* the **ranked list** holds the moves that change the compiled program, the most consequential
  first (a numeric break, then kernel launches and BLAS calls, then latency, then IR size), each
  with the rewrite rules it gained or lost;
* **not run** lists the moves an ordering constraint forbids, with the constraint;
* every other move is a pair of passes that commute on this model: they touch different ops.

Most moves change nothing: the passes of a well-built pipeline mostly commute. The chart shows the
ones that do not.
"""),
        code("""
study.plot();
"""),
        md("""
The full table (one row per move, the shipped order first) is plain data, ready for pandas:
"""),
        code("""
rows = study.rows()
[(r["variant"], r["d_launches"], r["d_instructions"], r["rewrites"]) for r in rows if r["changed"]]
"""),
        md("""
## A planted dependency

A class exercise: write a pass that only makes sense after fusion. `recompute_shared_kernels` gives
every extra user of a fused pointwise kernel its own copy (recompute instead of keeping the value
alive: a real scheduling trade-off). Placed right after `fuse_pointwise_reduce` it adds launches;
before fusion there are no fused kernels for it to copy. The study should find exactly that and
rank it first.
"""),
        code("""
def recompute_shared_kernels(module):
    if module.name != "main":
        return False
    changed = False
    for ins in list(module):
        if ins.name != "pointwise" or ins.shape.is_tuple:
            continue
        for user in [u for u in ins.outputs if not u.is_return()][1:]:
            copy = module.insert_instruction(user, ins.op, ins.inputs, ins.module_inputs)
            module.replace_instruction(user, inputs=[copy if i is ins else i for i in user.inputs])
            changed = True
    return changed

planted = Session.from_model("resnet_block", numeric=False)
planted.insert_pass(recompute_shared_kernels, after="fusion.fuse_pointwise_reduce")
planted_study = study_order(planted, sweeper=sweeper)
print(planted_study.report(top=3))
"""),
        md("""
## Whole sub-pipelines

`scope="pipeline"` swaps adjacent sub-pipelines instead: a coarse move, but a quick way to see
which stage depends on which. Compare the launch counts: running `fusion` before `optimize_rewrite`
fuses the ops before the algebraic rewrites have simplified them. A swap that broke the compile
would be a row with its error, never the end of the study.
"""),
        code("""
pipes = study_order(Session.from_model("mlp", numeric=False), scope="pipeline", sweeper=sweeper, numeric=False)
for r in pipes.rows():
    print(f"{r['variant']:<36} launches {r['launches']!s:>4}  {r['error'][:70]}")
"""),
        md("""
## Across models, and on a cluster

`study_models` runs the study over a model set on one cluster, and `write_rows` saves every row to
parquet (or CSV without pyarrow); from a shell:

    migx-explore study order models/*.onnx --out results.parquet
    migx-explore study order model.onnx --cluster tcp://scheduler:8786    # a running Dask cluster
    MIGX_DASK_SCHEDULER=tcp://scheduler:8786 migx-explore waterfall model.onnx
    migx-explore waterfall model.onnx --gpus 2                            # one worker per GPU
"""),
        code("""
import tempfile
from pathlib import Path

from migx_explore.study_set import write_rows

print(write_rows([study, planted_study], str(Path(tempfile.mkdtemp()) / "ordering_study.parquet")))
"""),
        md("""
## On a GPU

With a GPU every variant is also timed eagerly and through graph capture, and the latency change
joins the ranking (changes under 5 % are treated as noise).
"""),
        code("""
if NO_GPU is None:
    timed = study_order(s, gpu=True, sweeper=sweeper, iters=20)
    print(timed.report(top=5))
else:
    print("skipped: no GPU here")
sweeper.close()
"""),
    ]
