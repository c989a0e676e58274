"""The markdown report of benchmarks/gpu_vs_torch.py's results (split from it to keep each file
short): the fp32 table, the fp32/fp16 table against the best PyTorch of each precision, the
per-kind kernel breakdown, the micro-benchmarks and the kernel cache."""

from __future__ import annotations


def _fmt(v, spec: str = ".1f") -> str:
    return "—" if v is None else format(v, spec)


def report(r: dict) -> str:
    lines = [
        f"device: {r['device']}, torch {r['torch']}; batch 1, fp32, TF32 off; latencies: median device us",
        "",
        "| model | ours eager | ours graph | torch eager | torch graph | torch.compile + graph "
        "| graph/torch graph | graph/torch.compile | eager/torch eager "
        "| our kernels+BLAS | torch kernels | torch.compile kernels | our graph nodes | dispatch us/launch "
        "| arena MiB (naive) | err vs torch |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in r["models"].items():
        if "error" in row:
            lines.append(f"| {name} | error: {row['error'][:80]} |")
            continue
        o, t = row["ours"], row["torch"]
        tc = row.get("torch_compile") or {}
        lines.append(
            f"| {name} | {o['eager_us']:.1f} | {o['graph_us']:.1f} | {t['eager_us']:.1f} | {t['graph_us']:.1f} | "
            f"{_fmt(tc.get('graph_us'))} | {row['graph_ratio_vs_torch_graph']:.2f} | "
            f"{_fmt(row.get('graph_ratio_vs_torch_compile'), '.2f')} | {row['eager_ratio_vs_torch_eager']:.2f} | "
            f"{o['kernels']}+{o['blas_calls']} | {t['kernels']} | {tc.get('kernels', '—')} | {o['graph_nodes']} | "
            f"{o['dispatch_us_per_launch']:.2f} | "
            f"{o['arena_bytes'] / 2**20:.2f} ({o['naive_bytes'] / 2**20:.2f}) | {row['max_rel_err_vs_torch']:.1e} |"
        )
    notes = [f"- {n}: {row['note']}" for n, row in r["models"].items() if row.get("note")]
    notes += [
        f"- {n}: torch side fell back: {'; '.join(row['torch_notes'])}"
        for n, row in r["models"].items()
        if row.get("torch_notes")
    ]
    notes += [
        f"- {n}: torch.compile failed: {row['torch_compile']['error']}"
        for n, row in r["models"].items()
        if "error" in (row.get("torch_compile") or {})
    ]
    if notes:
        lines += ["", *notes]
    lines += _precision_lines(r)
    lines += _breakdown_lines(r)
    if "micro" in r:
        m = r["micro"]
        lines += [
            "",
            f"empty-kernel micro: eager enqueue {m['eager_enqueue_us_per_launch']:.2f} us/launch, "
            f"eager device "
            f"{m['eager_device_us_per_launch']:.2f} us/launch, graph replay {m['graph_us_per_node']:.3f} us/node "
            f"(1-node graph {m['graph_1_node_us']:.1f} us)",
        ]
    if "kernel_cache" in r:
        k = r["kernel_cache"]
        lines.append(
            f"kernel cache (resnet18_like, {k['kernels']} kernels): cold {k['cold_s']:.2f} s, warm "
            f"{k['warm_s'] * 1e3:.1f} ms, speedup {k['speedup']:.0f}x"
        )
    return "\n".join(lines)


def _breakdown_lines(r: dict) -> list[str]:
    """Per-kernel device time of one graph replay by kind, ours against torch.compile's."""
    from gpu_vs_torch import CATEGORIES

    out = []
    for name, row in r["models"].items():
        ours_b = (row.get("ours") or {}).get("graph_kernel_breakdown") or {}
        tc_b = (row.get("torch_compile") or {}).get("graph_kernel_breakdown") or {}
        if "by_kind" not in ours_b:
            continue
        if not out:
            out = [
                "",
                "Device time of one graph replay by kernel kind (CUPTI): count / us; 'gaps' is graph latency "
                "minus the kernels' sum (launch and dependency gaps between nodes).",
                "",
                "| model | side | " + " | ".join(CATEGORIES) + " | kernels sum | graph latency | gaps |",
                "|---|---|" + "---|" * (len(CATEGORIES) + 3),
            ]
        for side, b, lat in (
            ("ours", ours_b, row["ours"]["graph_us"]),
            ("torch.compile", tc_b, (row.get("torch_compile") or {}).get("graph_us")),
        ):
            if "by_kind" not in b or lat is None:
                continue
            cells = [
                f"{b['by_kind'][c][0]} / {b['by_kind'][c][1]:.1f}" if c in b["by_kind"] else "—" for c in CATEGORIES
            ]
            out.append(
                f"| {name} | {side} | "
                + " | ".join(cells)
                + f" | {b['kernel_us']:.1f} | {lat:.1f} | {lat - b['kernel_us']:.1f} |"
            )
    return out


def _best_torch(part: dict) -> float | None:
    """The faster of PyTorch CUDA graph and torch.compile + CUDA graph."""
    vals = [
        v
        for v in ((part.get("torch") or {}).get("graph_us"), (part.get("torch_compile") or {}).get("graph_us"))
        if v is not None
    ]
    return min(vals) if vals else None


def _precision_lines(r: dict) -> list[str]:
    """fp32 and fp16 side by side: our graph against the best PyTorch graph of each precision."""
    rows = [(n, row) for n, row in r["models"].items() if "fp16" in row and "error" not in row]
    if not rows:
        return []
    out = [
        "",
        "fp32 and fp16 graphs (median device us; best torch = the faster of CUDA graph and "
        "torch.compile + CUDA graph; kernels = generated kernels + BLAS calls; fp16 error relative to "
        "PyTorch fp32, max |diff| / max |ref|)",
        "",
        "| model | ours fp32 | best torch fp32 | ratio | ours fp16 | best torch fp16 | ratio "
        "| our kernels fp32 / fp16 | torch.compile kernels fp32 / fp16 | ours fp16 err | torch fp16 err |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in rows:
        o, h = row["ours"], row["fp16"]
        b32 = _best_torch(row)
        if "error" in h:
            out.append(
                f"| {name} | {o['graph_us']:.1f} | {_fmt(b32)} | {_fmt(b32 and o['graph_us'] / b32, '.2f')} "
                f"| fp16 error: {h['error'][:80]} |"
            )
            continue
        ho, b16 = h["ours"], _best_torch(h)
        tck = (row.get("torch_compile") or {}).get("kernels", "—")
        tck16 = (h.get("torch_compile") or {}).get("kernels", "—")
        out.append(
            f"| {name} | {o['graph_us']:.1f} | {_fmt(b32)} | {_fmt(b32 and o['graph_us'] / b32, '.2f')} | "
            f"{ho['graph_us']:.1f} | {_fmt(b16)} | {_fmt(b16 and ho['graph_us'] / b16, '.2f')} | "
            f"{o['kernels']}+{o['blas_calls']} / {ho['kernels']}+{ho['blas_calls']} | {tck} / {tck16} | "
            f"{h['ours_err_vs_torch_fp32']:.1e} | {h['torch_err_vs_torch_fp32']:.1e} |"
        )
    return out
