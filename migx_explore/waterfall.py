"""Runtime impact of each pass: compile the model with each pass (or sub-pipeline) disabled in turn,
or with growing pipeline prefixes, and measure every variant: kernel launches always, eager and
graph-capture latency on the GPU when there is one.

Variants re-trace through the Session's prefix cache (only the passes after the toggle run again)
and reuse compiled kernels through the kernel cache, so a waterfall costs little more than the
timing itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from migx_explore.compiler.errors import MigxError

from .stats import launch_count

# Backend entries without which there is no runnable program: never toggled.
ESSENTIAL = frozenset(
    {
        "auto_contiguous",
        "lowering",
        "adjust_allocation",
        "compile_blas",
        "replace_allocate",
        "compile_ops",
        "write_literals",
        "memory_coloring",
        "sync_device",
        "preallocate_param",
        "eliminate_allocation",
        "check_context",
        "normalize_ops",
        "dead_code_elimination",
        "eliminate_identity",
        "split_single_dyn_dim",
        "simplify_dyn_ops",
        "eliminate_data_type_for_gpu",
        "rewrite_quantization",
        "insert_pad",
    }
)
TOGGLABLE_PIPELINES = ("optimize_rewrite", "fusion")


@dataclass
class Variant:
    label: str
    disabled: tuple[str, ...]  # session targets switched off for this variant
    launches: int = 0
    eager_us: float | None = None
    graph_us: float | None = None
    error: str = ""


@dataclass
class Waterfall:
    model: str
    by: str
    baseline: Variant
    variants: list[Variant] = field(default_factory=list)
    timing_note: str = ""
    where: str = ""  # where the variants ran (migx_explore.sweep): serial, local cluster, ...
    scale_note: str = ""  # how to scale out, when the sweep ran serially for want of Dask

    def rows(self) -> list[dict[str, Any]]:
        b = self.baseline
        out = []
        for v in [b, *self.variants]:
            out.append(
                {
                    "variant": v.label,
                    "launches": v.launches,
                    "d_launches": v.launches - b.launches,
                    "eager_us": v.eager_us,
                    "graph_us": v.graph_us,
                    "d_eager_us": _delta(v.eager_us, b.eager_us),
                    "d_graph_us": _delta(v.graph_us, b.graph_us),
                    "error": v.error,
                }
            )
        return out

    def table(self) -> str:
        head = f"{'variant':<44}{'launches':>9}{'Δ':>6}{'eager µs':>11}{'Δ eager':>10}{'graph µs':>11}{'Δ graph':>10}"
        lines = [head]
        for r in self.rows():
            lines.append(
                f"{r['variant'][:43]:<44}{r['launches']:>9}{r['d_launches']:>+6}{_f(r['eager_us']):>11}"
                f"{_f(r['d_eager_us'], True):>10}{_f(r['graph_us']):>11}{_f(r['d_graph_us'], True):>10}"
                + (f"  {r['error']}" if r["error"] else "")
            )
        if self.timing_note:
            lines.append(self.timing_note)
        return "\n".join(lines)

    def plot(self, path: str | None = None):
        """A waterfall chart: what each variant adds over the full pipeline (Δ launches, Δ µs)."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = self.rows()[1:]
        labels = [r["variant"] for r in rows]
        panels = [("Δ kernel launches", [r["d_launches"] for r in rows])]
        for mode in ("eager", "graph"):
            vals = [r[f"d_{mode}_us"] for r in rows]
            if any(v is not None for v in vals):
                panels.append((f"Δ {mode} latency (µs)", [v if v is not None else 0.0 for v in vals]))
        fig, axes = plt.subplots(
            1, len(panels), figsize=(4.2 * len(panels) + 2.5, 0.36 * len(rows) + 1.6), sharey=True, squeeze=False
        )
        ys = list(range(len(rows)))
        for ax, (title, vals) in zip(axes[0], panels):
            colors = ["#c0392b" if v > 0 else "#27ae60" for v in vals]
            ax.barh(ys, vals, color=colors)
            ax.axvline(0, color="#555", lw=0.8)
            ax.set_title(title, fontsize=10)
            ax.grid(axis="x", alpha=0.3)
        axes[0][0].set_yticks(ys)
        axes[0][0].set_yticklabels(labels, fontsize=8)
        axes[0][0].invert_yaxis()
        b = self.baseline
        base = (
            f"baseline: {b.launches} launches"
            + (f", eager {b.eager_us:.1f} µs" if b.eager_us else "")
            + (f", graph {b.graph_us:.1f} µs" if b.graph_us else "")
        )
        what = {"pass": "each pass disabled", "pipeline": "each sub-pipeline disabled", "prefix": "pipeline prefixes"}[
            self.by
        ]
        fig.suptitle(f"{self.model}: cost of {what} ({base}); red = slower without it", fontsize=10)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


def _delta(v: float | None, b: float | None) -> float | None:
    return None if v is None or b is None else v - b


def _f(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.1f}" if signed else f"{v:.1f}"


def variant_plan(session, by: str = "pass") -> list[Variant]:
    """The variants to measure. `pass`: every target-independent (or optional backend) pass that
    changed the IR, disabled alone; `pipeline`: optimize_rewrite / fusion off; `prefix`: the
    pipelines cut after required, after optimize_rewrite, after fusion."""
    if by == "pipeline":
        return [Variant(f"-{p}", (p,)) for p in TOGGLABLE_PIPELINES if any(pl.name == p for pl in session.pipelines)]
    if by == "prefix":
        return [Variant("required only", ("optimize_rewrite", "fusion")), Variant("+optimize_rewrite", ("fusion",))]
    if by != "pass":
        raise MigxError(f"waterfall by {by!r}: choose pass, pipeline or prefix")
    out = []
    for rec in session.trace.top_level():
        if rec.changed and rec.status == "ok" and rec.name not in ESSENTIAL:
            out.append(Variant(f"-{rec.path}", (rec.path,)))
    return out


def measure_variant(session, v: Variant, *, modes: Sequence[str], warmup: int, iters: int, timer) -> None:
    saved = [(t, _state(session, t)) for t in v.disabled]
    try:
        for t in v.disabled:
            session.disable(t, reason="waterfall variant")
        session.run()
        if session.trace.error:
            v.error = session.trace.error.splitlines()[0][:120]
            return
        final = session.final()
        v.launches = launch_count(final)
        if timer is not None:
            res = timer(final, modes=modes, warmup=warmup, iters=iters)
            for m in modes:
                mt = res.modes.get(m)
                if mt is not None:
                    setattr(v, f"{m}_us", mt.device_us.median)
    except MigxError as e:
        v.error = str(e).splitlines()[0][:160]
    finally:
        for t, enabled in saved:
            session.set_enabled(t, enabled)


def _state(session, target: str) -> bool:
    for pl in session.pipelines:
        if pl.name == target:
            return pl.enabled
    for path, e, _ in session.config.entries():
        if path == target:
            return e.enabled
    return True


def waterfall_task(session, payload: dict) -> dict:
    """One waterfall variant on a sweep worker's own session (migx_explore.sweep): the targets
    switched off, the trace re-run from the first changed entry, the figures read off."""
    import functools

    from .gpu_bridge import time_snapshot

    v = Variant(payload["label"], tuple(payload["disabled"]))
    timer = functools.partial(time_snapshot, inputs=payload.get("inputs")) if payload.get("timed") else None
    measure_variant(session, v, modes=payload["modes"], warmup=payload["warmup"], iters=payload["iters"], timer=timer)
    return {"label": v.label, "launches": v.launches, "eager_us": v.eager_us, "graph_us": v.graph_us, "error": v.error}


def waterfall(
    session,
    *,
    by: str = "pass",
    modes: Sequence[str] = ("eager", "graph"),
    warmup: int = 5,
    iters: int = 50,
    time_gpu: bool = True,
    progress=None,
    inputs=None,
    cluster: str | None = None,
    workers: int | None = None,
    gpus: int | None = None,
    sweeper=None,
) -> Waterfall:
    """Every variant of `by` (and the baseline) as a task of a sweep (migx_explore.sweep): a local
    Dask cluster by default, `cluster=` a running one, `gpus=N` one worker per GPU, `workers=0` or
    no dask installed: serially in this process. The session itself is left untouched."""
    from .gpu_bridge import unavailable_reason
    from .sweep import sweep

    why = unavailable_reason() if time_gpu else "timing not requested"
    base = Variant("(all passes)", ())
    plan = variant_plan(session, by)
    common = {"modes": tuple(modes), "warmup": warmup, "iters": iters, "timed": why is None, "inputs": inputs}
    payloads = [dict(common, label=v.label, disabled=v.disabled) for v in [base, *plan]]
    run = sweep(
        session,
        waterfall_task,
        payloads,
        [p["label"] for p in payloads],
        sweeper=sweeper,
        progress=_skip_baseline(progress),
        cluster=cluster,
        workers=workers,
        gpus=gpus,
    )
    for v, rec in zip([base, *plan], run.records):
        v.launches = rec.get("launches", 0)
        v.eager_us, v.graph_us, v.error = rec.get("eager_us"), rec.get("graph_us"), rec.get("error", "")
    note = "" if why is None else f"latency not measured: {why}"
    errors = {v.error for v in [base, *plan]}
    if why is None and len(errors) == 1 and "" not in errors:  # every variant failed the same way
        note = f"every variant failed where it ran ({run.where}): {errors.pop()}"
    wf = Waterfall(session.name, by, base, plan, note)
    wf.where = run.where
    wf.scale_note = run.note
    return wf


def _skip_baseline(progress):
    """The caller's progress counts the variants; the baseline runs as one more task."""
    if progress is None:
        return None
    return lambda k, n, label: progress(max(k - 1, 0), n - 1, label) if k > 1 else None
