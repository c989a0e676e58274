"""The parts of issue28_table.py that need no GPU (and no torch): interleaved timing rounds, their
summary, the detector's selection-aware errors and the markdown table. Tested on the CPU with
fake timers (tests/test_issue28_table.py).

Why interleave: two timings of the same graph taken at different moments of one process differ
by 5-15 µs on the same GPU (clocks, host load, what ran just before), which is as large as the
differences the table is about. Timing every side in the same rounds, in rotated order, exposes
each side to the same drift; the medians and their ratio are the headline.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

import numpy as np

Timer = Callable[[int], Sequence[float]]  # n -> n device-µs samples of one side


def interleave(
    timers: Mapping[str, Timer], rounds: int = 10, per_round: int = 50, warmup: int = 10, discard: int = 1
) -> dict[str, list[list[float]]]:
    """Samples per side per round: every round times each side `per_round` times, the order
    rotated by one side a round (so no side always follows the same other one), the first
    `discard` samples of each batch dropped (the switch from another graph)."""
    names = list(timers)
    for name in names:
        if warmup:
            timers[name](warmup)
    out: dict[str, list[list[float]]] = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            out[name].append([float(v) for v in timers[name](per_round + discard)][discard:])
    return out


def summarize(samples: Mapping[str, list[list[float]]], ours: str = "ours") -> dict:
    """Median / p10 / p90 of each side over all its rounds; ours' median over each other side's
    (the headline ratio); and the spread of that ratio over the rounds (per-round medians)."""
    out: dict = {"median_us": {}, "p10_us": {}, "p90_us": {}, "ratio": {}, "round_ratio_min": {}, "round_ratio_max": {}}
    for name, rounds in samples.items():
        flat = [v for batch in rounds for v in batch]
        if not flat:
            continue
        out["median_us"][name] = statistics.median(flat)
        out["p10_us"][name] = float(np.percentile(flat, 10))
        out["p90_us"][name] = float(np.percentile(flat, 90))
    if ours not in out["median_us"]:
        return out
    mine = [statistics.median(b) for b in samples[ours]]
    for name, rounds in samples.items():
        if name.startswith(ours) or name not in out["median_us"]:  # ours and ours_* are not baselines
            continue
        out["ratio"][name] = out["median_us"][ours] / out["median_us"][name]
        per = [m / statistics.median(b) for m, b in zip(mine, rounds) if b]
        out["round_ratio_min"][name], out["round_ratio_max"][name] = min(per), max(per)
    others = [n for n in out["median_us"] if not n.startswith(ours)]
    for extra in (n for n in out["median_us"] if n.startswith(ours + "_")):  # e.g. a second program of ours
        out.setdefault("extra_ratio", {})[extra] = {n: out["median_us"][extra] / out["median_us"][n] for n in others}
    out["rounds"] = len(mine)
    out["per_round"] = len(samples[ours][0]) if samples[ours] else 0
    return out


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of a [n, 4] against every box of b [m, 4] (x1 y1 x2 y2)."""
    lo, hi = np.maximum(a[:, None, :2], b[None, :, :2]), np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=-1)
    area = lambda x: np.prod(np.clip(x[:, 2:] - x[:, :2], 0, None), axis=-1)  # noqa: E731
    return inter / np.maximum(area(a)[:, None] + area(b)[None, :] - inter, 1e-9)


def detection_errors(got, want, min_iou: float = 0.5) -> dict:
    """Errors of detections [.., k, 6] (x1 y1 x2 y2 score label) that survive near-tied scores.

    position_rel_err   row k against row k, max |d| / max |want|: one swap of two near-tied
                       candidates makes it as large as a whole box.
    sorted_score_err   the k selected scores as sorted values, max |d| / max |want score|:
                       blind to which of two tied candidates was taken.
    matched            detections of `want` that have one in `got` with the same label and
                       IoU >= min_iou (greedy, best score first): the same object found.
    matched_box_err    over those pairs, max |box d| / max |want box|.
    """
    a = np.asarray(got, np.float64).reshape(-1, 6)
    b = np.asarray(want, np.float64).reshape(-1, 6)
    scale = max(float(np.max(np.abs(b))), 1e-9)
    out = {"position_rel_err": float(np.max(np.abs(a - b))) / scale, "rows": len(b)}
    sa, sb = np.sort(a[:, 4])[::-1], np.sort(b[:, 4])[::-1]
    out["sorted_score_err"] = float(np.max(np.abs(sa - sb))) / max(float(np.max(np.abs(sb))), 1e-9)
    iou = _iou(b[:, :4], a[:, :4])
    iou[b[:, 5][:, None] != a[:, 5][None, :]] = -1.0
    used = np.zeros(len(a), bool)
    pairs = []
    for j in np.argsort(-b[:, 4], kind="stable"):
        cand = np.where(used, -1.0, iou[j])
        i = int(np.argmax(cand))
        if cand[i] >= min_iou:
            used[i] = True
            pairs.append((i, int(j)))
    out["matched"] = len(pairs)
    box_scale = max(float(np.max(np.abs(b[:, :4]))), 1e-9)
    out["matched_box_err"] = (
        max((float(np.max(np.abs(a[i, :4] - b[j, :4]))) for i, j in pairs), default=0.0) / box_scale
    )
    return out


def strip_private(obj):
    """A JSON-ready copy without the working entries (keys starting with "_": open programs,
    graphs, modules, reference outputs)."""
    if isinstance(obj, Mapping):
        return {k: strip_private(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, (list, tuple)):
        return [strip_private(v) for v in obj]
    return obj


def _f(v, fmt: str = ".1f") -> str:
    """A number in `fmt`; a string is already formatted (italic timed-apart cells)."""
    return "–" if v is None else v if isinstance(v, str) else format(v, fmt)


def _kernels(part: Mapping) -> str:
    o = part.get("ours", {})
    return f"{o['kernels']}+{o['blas_calls']}" if "kernels" in o else "–"


def _apart(part: Mapping) -> tuple[dict, dict]:
    """Medians and ratios from the separate timings (phases A and B), in italics: the cells a row
    shows when its interleaved phase did not run."""
    med = {
        side: f"_{part[key]['graph_us']:.1f}_"
        for side, key in (("ours", "ours"), ("torch_graph", "torch"), ("torch_compile", "torch_compile"))
        if isinstance(part.get(key), dict) and part[key].get("graph_us") is not None
    }
    ratio = {
        side: f"_{part[key]:.2f}_"
        for side, key in (
            ("torch_graph", "graph_ratio_vs_torch_graph"),
            ("torch_compile", "graph_ratio_vs_torch_compile"),
        )
        if part.get(key) is not None
    }
    return med, ratio


def _line(label: str, prec: str, part: Mapping, err_key: str, torch_err_key: str | None) -> str:
    il = part.get("interleaved", {})
    med, ratio = il.get("median_us", {}), il.get("ratio", {})
    if not med:
        med, ratio = _apart(part)
    lo, hi = il.get("round_ratio_min", {}), il.get("round_ratio_max", {})
    spread = f"{lo['torch_compile']:.2f}-{hi['torch_compile']:.2f}" if "torch_compile" in lo else "–"
    tc = part.get("torch_compile", {})
    return (
        f"| {label} | {prec} | {_f(med.get('ours'))} | {_f(med.get('torch_graph'))} | "
        f"{_f(med.get('torch_compile'))} | {_f(ratio.get('torch_graph'), '.2f')} | "
        f"**{_f(ratio.get('torch_compile'), '.2f')}** | {spread} | "
        f"{_f(part.get('graph_ratio_vs_torch_compile'), '.2f')} | {_kernels(part)} | "
        f"{part.get('torch', {}).get('kernels', '–')} | {tc.get('kernels', '–')} | "
        f"{_f(part.get(err_key), '.1e')} | {_f(part.get(torch_err_key) if torch_err_key else None, '.1e')} |"
    )


LEGEND = """\
Latencies: median device µs of one graph replay (batch 1, inputs on the device, TF32 off) from
the interleaved phase: after every row's compiles, each side was replayed {per_round} times a round
for {rounds} rounds, sides in rotated order, so all sides saw the same drift. "ours / compile" is
the headline ratio (ours median / torch.compile + CUDA graph median); "round ratios" is its range
over the rounds; "timed apart" is the same ratio from the first, separate timings (ours in phase
A, torch.compile in phase B), for comparison; a row whose interleaved phase did not run shows those
separate timings in italics. Kernels: ours = generated kernels + BLAS calls of one
replay; torch = kernels of one eager call (what its CUDA graph holds); torch.compile = kernels of
one compiled-graph replay.
Errors, against PyTorch fp32 (eager) of the same network:
- fp32 rows: max |ours - torch| / (|torch| + 1e-3), element by element.
- fp16 rows: max |ours fp16 - torch fp32| / max |torch fp32|; "torch err" is the same for
  PyTorch's own fp16 run: ours is within the precision when it is of the same order.
- yolov10n: see the detection table; its element errors count swapped near-tied detections."""


def markdown(results: Mapping) -> str:
    """The table of issue28_table.py's results (layout: gpu_vs_torch.compare_row's rows)."""
    rows = results.get("rows", {})
    il = next(
        (
            p["interleaved"]
            for r in rows.values()
            for p in (r, r.get("fp16", {}))
            if p.get("interleaved", {}).get("rounds")
        ),
        {"rounds": "?", "per_round": "?"},
    )
    lines = [
        f"# Issue 28 table: {results.get('device', '?')}, torch {results.get('torch', '?')}",
        "",
        LEGEND.format(rounds=il.get("rounds", "?"), per_round=il.get("per_round", "?")),
        "",
        "| row | prec | ours graph | torch CUDA graph | torch.compile graph | ours / torch graph | ours / compile "
        "| round ratios | timed apart | our kernels+BLAS | torch kernels | torch.compile kernels | ours err "
        "| torch err |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name, row in rows.items():
        label = row.get("label", name)
        if "error" in row:
            notes.append(f"- {label}: **failed**: {row['error'][:300]}")
            if "ours" not in row:
                continue
        lines.append(_line(label, "fp32", row, "max_rel_err_vs_torch", None))
        fp16 = row.get("fp16", {})
        if "error" in fp16:
            notes.append(f"- {label} fp16: **failed**: {fp16['error'][:300]}")
        elif fp16:
            lines.append(_line(label, "fp16", fp16, "ours_err_vs_torch_fp32", "torch_err_vs_torch_fp32"))
        for part, prec in ((row, "fp32"), (fp16, "fp16")):
            for side, us in part.get("interleaved", {}).get("median_us", {}).items():
                if side.startswith("ours_"):
                    r = part["interleaved"].get("extra_ratio", {}).get(side, {})
                    vs = ", ".join(f"{r[k]:.2f}x {k}" for k in r)
                    notes.append(f"- {label} {prec}: {row.get('extra_sides', {}).get(side, side)}: {us:.1f} µs ({vs})")
            if "error" in part.get("interleaved", {}):
                notes.append(f"- {label} {prec}: interleaved timing failed: {part['interleaved']['error']}")
            tc = part.get("torch_compile", {})
            if "error" in tc:
                notes.append(f"- {label} {prec}: torch.compile: {tc['error'][:200]}")
            for n in part.get("torch_notes", []) or []:
                notes.append(f"- {label} {prec}: torch side fallback: {n[:200]}")
        if row.get("note"):
            notes.append(f"- {label}: {row['note']}")
    det = [(row.get("label", n), row) for n, row in rows.items() if "detection" in row]
    if det:
        lines += [
            "",
            "Detector errors against PyTorch fp32 (see issue28_report.detection_errors): position = row k vs "
            "row k; sorted score = the selected scores as sorted values; matched = same label, IoU >= 0.5.",
            "",
            "| row | side | position rel err | sorted score err | matched / rows | matched box err "
            "| top-k launches µs |",
            "|---|---|---|---|---|---|---|",
        ]
        for label, row in det:
            for side, d in row["detection"].items():
                topk = ", ".join(f"{t:.1f}" for t in d.get("topk_us", [])) or "–"
                lines.append(
                    f"| {label} | {side} | {d['position_rel_err']:.1e} | {d['sorted_score_err']:.1e} | "
                    f"{d['matched']} / {d['rows']} | {d['matched_box_err']:.1e} | {topk} |"
                )
    if notes:
        lines += ["", "Notes:", "", *notes]
    if "elapsed_s" in results:
        lines += ["", f"Run time: {results['elapsed_s']:.0f} s ({results.get('phases', '')})"]
    return "\n".join(lines) + "\n"
