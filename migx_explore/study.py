"""The ordering study: which pass orderings matter for this model?

For every movable pass (enabled, not a dead-code-elimination cleanup, not the final entry, in a
target-independent pipeline: the backend's order is its lowering protocol, not a choice) the study
swaps it with its movable neighbour, one step earlier or later, within its pipeline and across the
boundary into the next one. Cleanups stay where they are, so "one step" moves past the next pass
that does something, and moving A one step later is the same variant as moving its neighbour one
step earlier: each adjacent pair is one variant. `scope="pipeline"` swaps adjacent sub-pipelines
instead. A move the declared ordering constraints forbid (must_follow, requires, final: see
compiler/pass_infra/ordering.py) is not run; it is listed with the constraint it breaks.

Every variant is compiled on a sweep worker (migx_explore.sweep: Dask, or serially) and returns
its figures: final IR size, kernel launches, BLAS calls, numeric error of the optimized program
against the unoptimized one, (with a GPU) eager and graph latency, and how often each rewrite
rule fired. The report ranks the moves that change something and names the rewrites each one
gained or lost ("moving simplify_algebra after fuse_pointwise loses 12 conv+mul folds").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.pass_infra import Pipeline, check_order, entry_paths
from migx_explore.gpu.pipelines import TARGET_INDEPENDENT

from .stats import launch_count

SCOPES = ("pass", "pipeline")
CLEANUPS = frozenset({"dead_code_elimination"})
BLAS_OPS = frozenset({"gpu::gemm"})  # compile_blas plans every gpu::gemm (quantized ones too) as a BLAS call
# A latency change under this fraction of the baseline is timing noise, not a change.
LATENCY_NOISE = 0.05
# Relative RMS a move may add before it counts as a numeric change (passes reassociate fp32 sums).
NUMERIC_NOISE = 1e-6


@dataclass
class OrderVariant:
    label: str  # "fuse_attention before simplify_reshapes"
    moved: str  # path of the entry that moves later (pass scope) or the later pipeline (pipeline scope)
    over: str  # path of the entry (or pipeline) it trades places with
    across: bool  # the two sit in different pipelines
    pipelines: list[Pipeline]


@dataclass
class Skipped:
    label: str
    reason: str  # the ordering constraint the move would break


@dataclass
class OrderStudy:
    model: str
    scope: str
    baseline: dict
    variants: list[dict] = field(default_factory=list)  # one record per OrderVariant, in plan order
    skipped: list[Skipped] = field(default_factory=list)
    where: str = ""  # where the variants ran (migx_explore.sweep)
    note: str = ""

    # ---- reading ----------------------------------------------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        """Flat rows (baseline first) for tables, parquet and CSV."""
        out = []
        for r in [self.baseline, *self.variants]:
            d = deltas(self.baseline, r)
            out.append(
                {
                    "model": self.model,
                    "scope": self.scope,
                    "variant": r["label"],
                    "moved": r.get("moved", ""),
                    "over": r.get("over", ""),
                    "across": bool(r.get("across", False)),
                    "instructions": r.get("instructions"),
                    "launches": r.get("launches"),
                    "blas": r.get("blas"),
                    "numeric_rms": r.get("numeric_rms"),
                    "numeric_max_abs": r.get("numeric_max_abs"),
                    "numeric_ok": r.get("numeric_ok"),
                    "eager_us": r.get("eager_us"),
                    "graph_us": r.get("graph_us"),
                    **{f"d_{k}": v for k, v in d.items()},
                    "changed": changes_something(self.baseline, r),
                    "score": impact(self.baseline, r),
                    "rewrites": rewrite_change(self.baseline, r),
                    "error": r.get("error", ""),
                }
            )
        return out

    def ranked(self) -> list[dict]:
        """Variants that change something, most consequential first (see `impact`); failures last."""
        changed = [r for r in self.variants if changes_something(self.baseline, r)]
        return sorted(changed, key=lambda r: (bool(r.get("error")), -impact(self.baseline, r)))

    def describe(self, r: dict) -> str:
        """One sentence per move: what it changes and the rewrites it gains or loses."""
        if r.get("error"):
            return f"{r['label']}: fails ({r['error']})"
        d = deltas(self.baseline, r)
        parts = [
            f"{_signed(d[k])} {name}"
            for k, name in (("launches", "kernel launches"), ("blas", "BLAS calls"), ("instructions", "instructions"))
            if d.get(k)
        ]
        for mode in ("eager", "graph"):
            if d.get(f"{mode}_us") is not None and _latency_changed(self.baseline, r, mode):
                parts.append(f"{d[f'{mode}_us']:+.1f} µs {mode}")
        if _numeric_changed(self.baseline, r):
            parts.append(
                f"numeric rms {self.baseline.get('numeric_rms') or 0:.2e} -> {r.get('numeric_rms'):.2e}"
                + ("" if r.get("numeric_ok", True) else " (out of tolerance)")
            )
        gained = rewrite_change(self.baseline, r)
        text = f"{r['label']}: " + (", ".join(parts) if parts else "same figures")
        return text + (f"; {gained}" if gained else "")

    def report(self, top: int = 10) -> str:
        ranked = self.ranked()
        lines = [
            f"{self.model}: ordering study ({self.scope} scope), {len(self.variants)} moves run"
            + (f" on {self.where}" if self.where else "")
            + f", {len(self.skipped)} forbidden by ordering constraints, "
            f"{len(ranked)} change something"
        ]
        b = self.baseline
        lines.append(
            f"baseline: {b.get('instructions')} instructions, {b.get('launches')} launches, "
            f"{b.get('blas')} BLAS calls" + _lat(b)
        )
        for k, r in enumerate(ranked[:top], 1):
            lines.append(f"{k:>3}. {self.describe(r)}")
        if len(ranked) > top:
            lines.append(f"     ... {len(ranked) - top} more")
        for s in self.skipped:
            lines.append(f"  not run: {s.label} ({s.reason})")
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def plot(self, path: str | None = None, top: int = 15):
        """The ranked moves as bars: Δ kernel launches, Δ instructions and, with a GPU, Δ latency."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = [r for r in self.ranked() if not r.get("error")][:top]
        panels = [("Δ kernel launches", "launches"), ("Δ instructions", "instructions")]
        if any(r.get("graph_us") is not None for r in rows):
            panels.append(("Δ graph latency (µs)", "graph_us"))
        fig, axes = plt.subplots(
            1,
            len(panels),
            figsize=(3.8 * len(panels) + 3.0, 0.38 * max(len(rows), 1) + 1.6),
            sharey=True,
            squeeze=False,
        )
        ys = list(range(len(rows)))
        for ax, (title, key) in zip(axes[0], panels):
            vals = [deltas(self.baseline, r).get(key) or 0 for r in rows]
            ax.barh(ys, vals, color=["#c0392b" if v > 0 else "#27ae60" for v in vals])
            ax.axvline(0, color="#555", lw=0.8)
            ax.set_title(title, fontsize=10)
            ax.grid(axis="x", alpha=0.3)
        axes[0][0].set_yticks(ys)
        axes[0][0].set_yticklabels([r["label"] for r in rows], fontsize=8)
        axes[0][0].invert_yaxis()
        fig.suptitle(
            f"{self.model}: orderings that matter ({self.scope} scope); red = worse than the shipped order", fontsize=10
        )
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


# ---- comparing records ------------------------------------------------------------------------------------
def deltas(base: dict, r: dict) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for k in ("instructions", "launches", "blas", "eager_us", "graph_us"):
        a, b = r.get(k), base.get(k)
        out[k] = None if a is None or b is None else a - b
    return out


def _latency_changed(base: dict, r: dict, mode: str) -> bool:
    a, b = r.get(f"{mode}_us"), base.get(f"{mode}_us")
    return a is not None and b is not None and b > 0 and abs(a - b) > LATENCY_NOISE * b


def _numeric_changed(base: dict, r: dict) -> bool:
    a, b = r.get("numeric_rms"), base.get("numeric_rms")
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return False
    return r.get("numeric_ok", True) != base.get("numeric_ok", True) or abs(a - b) > NUMERIC_NOISE


def changes_something(base: dict, r: dict) -> bool:
    if r.get("error"):
        return True
    d = deltas(base, r)
    return bool(
        d["launches"]
        or d["blas"]
        or d["instructions"]
        or _numeric_changed(base, r)
        or _latency_changed(base, r, "eager")
        or _latency_changed(base, r, "graph")
    )


def impact(base: dict, r: dict) -> float:
    """How much a move matters: a numeric break outranks everything, then launches and BLAS calls
    (what a GPU pays per kernel), then latency relative to the baseline, then IR size."""
    if r.get("error"):
        return 0.0
    d = deltas(base, r)
    score = 10.0 * (abs(d["launches"] or 0) + abs(d["blas"] or 0)) + abs(d["instructions"] or 0)
    for mode in ("eager", "graph"):
        if _latency_changed(base, r, mode):
            score += 100.0 * abs(d[f"{mode}_us"]) / base[f"{mode}_us"]
    if base.get("numeric_ok", True) and not r.get("numeric_ok", True):
        score += 1e6
    return score


def rewrite_change(base: dict, r: dict, top: int = 3) -> str:
    """'loses 12 find_mul_conv (optimize_module), gains 3 ...': rewrite rules that fired a
    different number of times; for passes without rules, how many instructions each changed."""
    for key in ("rewrites", "work"):
        a, b = Counter(r.get(key) or {}), Counter(base.get(key) or {})
        diff = {k: a[k] - b[k] for k in set(a) | set(b) if a[k] != b[k]}
        if not diff:
            continue
        items = sorted(diff.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:top]
        if key == "rewrites":
            return ", ".join(
                f"{'gains' if v > 0 else 'loses'} {abs(v)} {k.split(':', 1)[1]} ({k.split(':', 1)[0]})"
                for k, v in items
            )
        return ", ".join(f"{k} changes {abs(v)} {'more' if v > 0 else 'fewer'} instructions" for k, v in items)
    return ""


def _signed(v: float | None) -> str:
    return "" if v is None else f"{v:+d}" if isinstance(v, int) else f"{v:+.1f}"


def _lat(r: dict) -> str:
    out = "".join(f", {m} {r[f'{m}_us']:.1f} µs" for m in ("eager", "graph") if r.get(f"{m}_us") is not None)
    return out


# ---- planning ------------------------------------------------------------------------------------------
def _flat(pipelines: Sequence[Pipeline]) -> list[tuple[int, int, str]]:
    """(pipeline index, entry index, path) of every movable entry, in order."""
    out = []
    for pi, pl in enumerate(pipelines):
        if pl.name not in TARGET_INDEPENDENT or not pl.enabled:
            continue
        for k, (e, path) in enumerate(zip(pl.entries, entry_paths(pl))):
            if e.enabled and e.name not in CLEANUPS and not e.final:
                out.append((pi, k, path))
    return out


def _new_warnings(base: Sequence[Pipeline], variant: Sequence[Pipeline]) -> list[str]:
    """Ordering-constraint warnings the variant adds to those the configuration already has (compared by
    constraint and pass, without the #n a move may renumber)."""

    def key(w) -> tuple[str, str]:
        return w.constraint, w.pass_path.split("#")[0]

    known = {key(w) for w in check_order(base)}
    return [w.message for w in check_order(variant) if key(w) not in known]


def plan_order_variants(pipelines: Sequence[Pipeline], scope: str = "pass") -> tuple[list[OrderVariant], list[Skipped]]:
    """The moves of the study over this configuration, and those the ordering constraints forbid."""
    if scope not in SCOPES:
        raise MigxError(f"study scope {scope!r}: choose {' or '.join(SCOPES)}")
    base = list(pipelines)
    candidates = []
    if scope == "pass":
        flat = _flat(base)
        for (pa, ka, path_a), (pb, kb, path_b) in zip(flat, flat[1:]):
            pls = [p.copy() for p in base]
            a, b = pls[pa].entries[ka], pls[pb].entries[kb]
            pls[pa].entries[ka], pls[pb].entries[kb] = b, a
            where = f" (across {base[pa].name} | {base[pb].name})" if pa != pb else ""
            candidates.append(OrderVariant(f"{b.name} before {a.name}{where}", path_a, path_b, pa != pb, pls))
    else:
        idx = [i for i, pl in enumerate(base) if pl.name in TARGET_INDEPENDENT and pl.enabled]
        for i, j in zip(idx, idx[1:]):
            pls = [p.copy() for p in base]
            pls[i], pls[j] = pls[j], pls[i]
            candidates.append(
                OrderVariant(f"{base[j].name} before {base[i].name}", base[i].name, base[j].name, True, pls)
            )
    runnable, skipped = [], []
    for v in candidates:
        broken = _new_warnings(base, v.pipelines)
        if broken:
            skipped.append(Skipped(v.label, broken[0]))
        else:
            runnable.append(v)
    return runnable, skipped


# ---- measuring (runs on a sweep worker) --------------------------------------------------------------------
def measure_order(session, payload: dict) -> dict:
    """Figures of one configuration on a worker's session (payload: pipelines, gpu timing options)."""
    if payload.get("pipelines") is not None:
        session.pipelines = [p.copy() for p in payload["pipelines"]]
    trace = session.run()
    if trace.error:
        return {"error": trace.error.splitlines()[0][:200]}
    final = trace.final
    rec: dict[str, Any] = {
        "instructions": final.total_instructions(),
        "launches": launch_count(final),
        "blas": sum(1 for m in final.modules for i in m.instrs if i.op.name in BLAS_OPS),
        "rewrites": dict(Counter(f"{_top_name(trace, r)}:{m.rule}" for r in trace.records for m in r.matches)),
        "work": {},
        "eager_us": None,
        "graph_us": None,
    }
    work: Counter = Counter()
    for r in trace.top_level():
        if r.changed and r.pipeline in TARGET_INDEPENDENT:
            work[r.name] += len(r.diff.added) + len(r.diff.removed) + len(r.diff.changed)
    rec["work"] = dict(work)
    cfg = payload.get("numeric")
    if cfg is not None:
        rec.update(_numeric(cfg, _optimized(trace)))
    if payload.get("timed"):
        from .gpu_bridge import time_snapshot

        res = time_snapshot(
            final,
            modes=payload["modes"],
            warmup=payload["warmup"],
            iters=payload["iters"],
            inputs=payload.get("inputs"),
        )
        for m in payload["modes"]:
            mt = res.modes.get(m)
            if mt is not None:
                rec[f"{m}_us"] = mt.device_us.median
    return rec


def _top_name(trace, r) -> str:
    while r.parent is not None:
        r = trace.records[r.parent]
    return r.name


def _optimized(trace):
    """The program after the last target-independent pass: what the numeric check compares (the
    backend's lowered form is the GPU's to run, not the reference evaluator's)."""
    snap = trace.initial
    for r in trace.top_level():
        if r.pipeline in TARGET_INDEPENDENT and r.after is not None:
            snap = r.after
    return snap


def _numeric(cfg, snap) -> dict:
    from .session_trace import numeric_check

    chk = numeric_check(cfg, snap)
    rms = chk.rms if chk.rms is not None and not math.isnan(chk.rms) else chk.max_abs
    return {"numeric_rms": float(rms), "numeric_max_abs": float(chk.max_abs), "numeric_ok": bool(chk.ok)}


# ---- the study --------------------------------------------------------------------------------------------
def study_order(
    session,
    *,
    scope: str = "pass",
    gpu: bool = False,
    numeric: bool = True,
    modes: Sequence[str] = ("eager", "graph"),
    warmup: int = 5,
    iters: int = 30,
    inputs=None,
    progress: Callable[[int, int, str], None] | None = None,
    cluster: str | None = None,
    workers: int | None = None,
    gpus: int | None = None,
    sweeper=None,
) -> OrderStudy:
    """Run the ordering study over the session's current configuration (left untouched)."""
    from .gpu_bridge import unavailable_reason
    from .sweep import sweep

    plan, skipped = plan_order_variants(session.pipelines, scope)
    why = unavailable_reason() if gpu else "timing not requested (--gpu)"
    common = {"timed": why is None, "modes": tuple(modes), "warmup": warmup, "iters": iters, "inputs": inputs}
    reference = (session.traces.numeric_config() or _reference(session)) if numeric else None
    payloads = [dict(common, pipelines=None)] + [dict(common, pipelines=v.pipelines) for v in plan]
    labels = ["(shipped order)"] + [v.label for v in plan]
    run = sweep(
        session,
        measure_order,
        payloads,
        labels,
        sweeper=sweeper,
        numeric=reference,
        progress=progress,
        cluster=cluster,
        workers=workers,
        gpus=gpus,
    )
    base, recs = run.records[0], run.records[1:]
    if base.get("error"):
        raise MigxError(f"the ordering study needs the shipped order to compile: {base['error']}")
    for v, r in zip(plan, recs):
        r.update(label=v.label, moved=v.moved, over=v.over, across=v.across)
    notes = [n for n in (run.note, "" if why is None else f"latency not measured: {why}") if n]
    return OrderStudy(session.name, scope, base, recs, skipped, run.where, "; ".join(notes))


def _reference(session):
    from migx_explore.compiler.pass_infra import make_numeric_config

    return make_numeric_config(session.initial.to_program(), session.traces.numeric_inputs)


__all__ = [
    "OrderStudy",
    "OrderVariant",
    "SCOPES",
    "Skipped",
    "changes_something",
    "impact",
    "measure_order",
    "plan_order_variants",
    "rewrite_change",
    "study_order",
]
