"""Issue 28: the top-k launches alone, at n in {2100, 8400, 33600, 100000} and k in {1, 10, 100,
300}, batch 1, on sigmoid-like scores in [0, 1) (YOLOv10n's class scores; their keys share their
top bits). For each case one program holding only the topk is compiled with the GPU pipeline
(rewrite_topk splits the longer slices) and timed two ways: the median event-timed graph replay
(every launch of the program, index fix-ups of a split included) and each kernel's CUPTI time
through torch.profiler (median over --profile replays).

    python3 benchmarks/gpu_topk_kernel.py --label branch --out DIR [--split 8192,10240,1000000]
    python3 benchmarks/gpu_topk_kernel.py --label branch --out DIR --models yolov10n

--models: gpu_issue28_rows.py's row of each model (graph latency, kernel count, error against
the reference) plus every top-k launch of one graph replay with its CUPTI time (that script
lists only the top-k launches among the eight slowest kernels).

--split overrides the GPU pipeline's rewrite_topk threshold (gpu/codegen/topk.py's
SPLIT_THRESHOLD) where the installed tree has one, to compare a split against one launch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def topk_program(t: str, n: int, k: int, largest: bool = True):
    from migx_explore.compiler import Program, make_op
    from migx_explore.compiler.shape import Shape

    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of(t, [1, n]))
    tk = m.add_instruction(make_op("topk", k=k, axis=1, largest=largest), [x])
    m.add_return([m.add_instruction(make_op("get_tuple_elem", index=i), [tk]) for i in (0, 1)])
    return p


def profile_kernels(compiled, replays: int) -> list[tuple[str, float]]:
    """(name, median CUPTI us over `replays` graph replays) of each kernel, in launch order."""
    from gpu_kernel_profile import kernel_list

    runs = [
        kernel_list(lambda: compiled.launch_graph(io=False), lambda: compiled.backend.streams.sync(compiled.stream))
        for _ in range(replays)
    ]
    return [(runs[0][i][0], round(statistics.median(r[i][1] for r in runs), 2)) for i in range(len(runs[0]))]


def one_case(t: str, n: int, k: int, iters: int, replays: int) -> dict:
    from migx_explore.compiler import evaluate
    from migx_explore.gpu import compile_program
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.gpu.timing import time_program

    program = topk_program(t, n, k)
    x = np.round(np.random.default_rng(n + k).random([1, n]) / 1e-4) * 1e-4
    feeds = {"x": x.astype(np.float16 if t == "float16" else np.float32)}
    with compile_program(program, backend=get_backend()) as c:
        res = time_program(c, modes=("graph",), warmup=10, iters=iters, inputs=feeds, per_kernel=False)
        got = c.run(feeds, mode="graph")
        kernels = profile_kernels(c, replays)
    want = evaluate(program, feeds)
    return {
        "graph_us": round(res.modes["graph"].device_us.median, 2),
        "kernels": kernels,
        "topk_us": [us for name, us in kernels if name.startswith("topk")],
        "kernel_sum_us": round(sum(us for _, us in kernels), 2),
        "exact": bool(np.array_equal(np.asarray(got[1]), want[1])),
    }


def model_rows(names: str, iters: int) -> dict:
    from gpu_issue28_rows import our_row
    from gpu_kernel_profile import ours_profile
    from gpu_vs_torch import feeds_for

    from migx_explore import models

    rows: dict = {}
    for name in names.split(","):
        model = models.get_model(name)
        feeds = feeds_for(model)
        for precision in ("fp32", "fp16"):
            try:
                row = our_row(model, feeds, precision, iters)
                kernels = ours_profile(model, feeds, precision, 20)["kernels"]  # the kernel cache has them
                # gpu_kernel_profile.kernel_list gives (name, device us, idle us before it)
                row["topk_launches_us"] = [(k, us) for k, us, *_ in kernels if k.startswith("topk")]
                row["kernel_sum_us"] = round(sum(us for _, us, *_ in kernels), 1)
            except Exception as e:  # noqa: BLE001 - the other rows still count
                row = {"error": f"{type(e).__name__}: {e}"}
            rows[f"{name} {precision}"] = row
            print(name, precision, json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--label", default="ours")
    ap.add_argument("--n", default="2100,8400,33600,100000")
    ap.add_argument("--k", default="1,10,100,300")
    ap.add_argument("--types", default="float32")
    ap.add_argument("--split", default="", help="rewrite_topk thresholds to try (trees that have SPLIT_THRESHOLD)")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--profile", type=int, default=5)
    ap.add_argument("--models", default="", help="built-in models to run instead of the kernel grid")
    args = ap.parse_args()
    import torch

    from migx_explore.gpu.codegen import topk as topk_codegen

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = [int(s) for s in args.split.split(",") if s] if hasattr(topk_codegen, "SPLIT_THRESHOLD") else []
    res: dict = {"device": torch.cuda.get_device_name(), "label": args.label, "rows": []}
    if args.models:
        torch.backends.cuda.matmul.allow_tf32 = False
        res["models"] = model_rows(args.models, args.iters)
        (out / f"topk_models_{args.label}.json").write_text(json.dumps(res, indent=1))
        return
    for split in splits or [None]:
        if split is not None:
            topk_codegen.SPLIT_THRESHOLD = split
        for t in args.types.split(","):
            for n in map(int, args.n.split(",")):
                for k in map(int, args.k.split(",")):
                    try:
                        row = one_case(t, n, k, args.iters, args.profile)
                    except Exception as e:  # noqa: BLE001 - the other cases still count
                        row = {"error": f"{type(e).__name__}: {e}"}
                    row.update(type=t, n=n, k=k, split=split)
                    res["rows"].append(row)
                    brief = {key: row.get(key) for key in ("graph_us", "topk_us", "kernel_sum_us", "exact", "error")}
                    print(args.label, split, t, n, k, json.dumps(brief), flush=True)
                    (out / f"topk_kernel_{args.label}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
