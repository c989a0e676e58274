"""Issue 28: the radix top-k's knobs compared in one process (gpu/codegen/topk.py reads them at
each compile): CUPTI time of each (variant, type, n, k) as in gpu_topk_kernel.py, and where the
variant sets MIGX_TOPK_CLOCKS=1 the clock64 cycles of one block's stages instead (load + first
histogram, the remaining passes, the compaction, the sort and output; cumulative).

    python3 benchmarks/gpu_topk_variants.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

VARIANTS = {
    "default": {},
    "one_block": {"MIGX_TOPK_SPREAD_MIN": "10240"},
    "chunk4096": {"MIGX_TOPK_CHUNK": "4096"},
    "per2": {"MIGX_TOPK_PER": "2"},
    "per8": {"MIGX_TOPK_PER": "8"},
}
CASES = [("float32", 2100, 10), ("float32", 2100, 300), ("float32", 8400, 10), ("float32", 8400, 300)]
CASES += [("float32", 24000, 300), ("float16", 2100, 300), ("float16", 8400, 300)]


def stages(t: str, n: int, k: int) -> list[float]:
    from gpu_topk_kernel import topk_program

    from migx_explore.gpu import compile_program
    from migx_explore.gpu.runtime import get_backend

    x = np.round(np.random.default_rng(n + k).random([1, n]) / 1e-4) * 1e-4
    with compile_program(topk_program(t, n, k), backend=get_backend()) as c:
        c.run({"x": x.astype(np.float32)}, mode="graph")
        got = c.run({"x": x.astype(np.float32)}, mode="graph")
    return [float(v) for v in np.asarray(got[0]).ravel()[:4]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    from gpu_topk_kernel import one_case

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"rows": [], "stages": []}
    for name in args.variants.split(","):
        os.environ.update(VARIANTS[name])
        for t, n, k in CASES:
            try:
                row = one_case(t, n, k, 30, 3)
            except Exception as e:  # noqa: BLE001 - the other cases still count
                row = {"error": f"{type(e).__name__}: {e}"}
            row.update(variant=name, type=t, n=n, k=k)
            res["rows"].append(row)
            print(name, t, n, k, row.get("topk_us"), row.get("exact"), row.get("error", ""), flush=True)
        if name in ("default", "one_block"):
            os.environ["MIGX_TOPK_CLOCKS"] = "1"
            for n, k in ((2100, 10), (2100, 300), (8400, 300)):
                cyc = stages("float32", n, k)
                res["stages"].append({"variant": name, "n": n, "k": k, "cycles": cyc})
                print("stages", name, n, k, cyc, flush=True)
            del os.environ["MIGX_TOPK_CLOCKS"]
        for key in VARIANTS[name]:
            del os.environ[key]
        (out / "topk_variants.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
