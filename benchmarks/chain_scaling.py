"""Pass-pipeline scaling on long elementwise chains: import an N-node chain (Add, Mul, Relu, Sigmoid,
... one after another), trace it through all five pipelines with full instrumentation, and print
wall time, peak memory and the time ratio against the previous size. Near-linear passes keep the
ratio close to the size ratio (x2 per doubling); a quadratic pass shows x4.

Goal (issue 14): 2,000 nodes in <= 5 s; 20,000 nodes in <= 60 s and <= 2 GB. Issue 23: the import
(`read`) of 100,000 nodes in <= 5 s (the `read s` column), and the trace of 100,000 nodes:

    python benchmarks/chain_scaling.py [--sizes 500,1000,2000,20000,100000] [--timeout 300]

Each size runs in its own process (peak RSS is per process; a size past --timeout is reported
as such instead of stalling the table).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

GOALS = {2000: (5.0, None), 20000: (60.0, 2 << 30)}
READ_GOALS = {100000: 5.0}


def chain_model(n: int):
    """An n-node elementwise chain on a [1, 64] input, cycling through common pointwise ops."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    ops = ["Add", "Mul", "Relu", "Sigmoid", "Sub", "Tanh"]
    nodes, inits = [], [numpy_helper.from_array(np.full([1, 64], 0.5, np.float32), "c")]
    prev = "x"
    for i in range(n):
        op = ops[i % len(ops)]
        out = f"v{i}"
        nodes.append(helper.make_node(op, [prev, "c"] if op in ("Add", "Mul", "Sub") else [prev], [out]))
        prev = out
    graph = helper.make_graph(
        nodes,
        f"chain{n}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 64])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def measure(n: int) -> dict:
    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu.pipelines import gpu_pipelines

    model = chain_model(n)
    t0 = time.perf_counter()
    prog = parse_onnx(model)
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    trace = PassManager().run(prog, [p.copy() for p in gpu_pipelines()])
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    slow = sorted(((r.time_s, r.path) for r in trace), reverse=True)[:2]
    return {
        "n": n,
        "seconds": seconds,
        "read_s": read_s,
        "rss": rss,
        "records": len(trace),
        "slowest": ", ".join(f"{p} {t:.2f}s" for t, p in slow),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,1000,2000,20000")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per size")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child process: measure one size
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    print(f"{'nodes':>7}{'read s':>8}{'seconds':>10}{'x prev':>8}{'peak MB':>9}  goal                slowest passes")
    prev = None
    for n in (int(s) for s in args.sizes.split(",")):
        try:
            res = subprocess.run(
                [sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, timeout=args.timeout
            )
            row = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else None
        except subprocess.TimeoutExpired:
            print(f"{n:>7}  killed after {args.timeout:.0f} s")
            prev = None
            continue
        if row is None:
            print(f"{n:>7}  failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
            continue
        ratio = f"x{row['seconds'] / prev['seconds']:.1f}" if prev else ""
        goal = ""
        if n in GOALS:
            t_max, mem_max = GOALS[n]
            ok = row["seconds"] <= t_max and (mem_max is None or row["rss"] <= mem_max)
            goal = f"<= {t_max:.0f} s" + (f", <= {mem_max >> 30} GB" if mem_max else "")
            goal += ": met" if ok else ": MISSED"
        if n in READ_GOALS:
            goal = f"read <= {READ_GOALS[n]:.0f} s: " + ("met" if row["read_s"] <= READ_GOALS[n] else "MISSED")
        print(
            f"{n:>7}{row['read_s']:>8.2f}{row['seconds']:>10.2f}{ratio:>8}{row['rss'] / 2**20:>9.0f}  {goal:<20}"
            f"{row['slowest']}"
        )
        prev = row


if __name__ == "__main__":
    main()
