"""Issue 28's floor under a one-block top-k: the CUPTI time of an empty kernel (one block of 640
or 1,024 threads) and of one that only runs 16 block barriers, so a top-k launch's time can be
read as floor + work (docs/results/issue28_topk_survivors_*.md).

    python3 benchmarks/gpu_topk_floor.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

SRC = r"""
extern "C" __global__ void empty_kernel(int* p) { if (p[0] == 12345) p[1] = 1; }
extern "C" __global__ void barriers16_kernel(int* p) {
    int v = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 16; ++i) { v += p[0]; __syncthreads(); }
    if (v == 12345) p[1] = 1;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--launches", type=int, default=50)
    args = ap.parse_args()
    import cupy as cp
    import torch
    from gpu_kernel_profile import kernel_list

    mod = cp.RawModule(code=SRC)
    buf = cp.zeros(4, dtype=cp.int32)
    res: dict = {"device": torch.cuda.get_device_name()}
    for name in ("empty_kernel", "barriers16_kernel"):
        fn = mod.get_function(name)
        for threads in (640, 1024):
            fn((1,), (threads,), (buf,))  # loaded and warm
            cp.cuda.Device().synchronize()
            times = [
                us
                for _, us, _ in kernel_list(
                    lambda f=fn, th=threads: [f((1,), (th,), (buf,)) for _ in range(args.launches)],
                    cp.cuda.Device().synchronize,
                )
            ]
            res[f"{name} x{threads}"] = round(statistics.median(times), 2)
            print(name, threads, res[f"{name} x{threads}"], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "topk_floor.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
