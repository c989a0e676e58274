"""Per-kernel list of one gpt2_decode step (graph replay of the P=127 bucket program, CUPTI via
torch.profiler), and optionally torch.compile + CUDA graph's list for the same step: which
launches a decode step spends its time on.

    python3 benchmarks/decode_kernels.py --out DIR [--torch]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--past", type=int, default=127)
    ap.add_argument("--torch", action="store_true", help="also list torch.compile + CUDA graph's kernels")
    args = ap.parse_args()
    import torch
    from decode import dec_bucket, native_torch, pinned_model
    from gpu_kernel_profile import kernel_list, torch_compile_profile

    from migx_explore.decode import decoder
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.models.gpt2_decode import decode_feed

    torch.backends.cuda.matmul.allow_tf32 = False
    dec = decoder("gpt2_decode", target="gpu", backend=get_backend())
    cp = dec._program(1, dec_bucket(dec, args.past))
    feed = {"input_ids": np.array([[7]], np.int64), "past_len": np.array([args.past], np.int64)}
    cp.run(feed, mode="eager")
    cp.run(feed, mode="graph")
    ours = kernel_list(lambda: cp.launch_graph(io=False), lambda: cp.backend.streams.sync(cp.stream))
    r = {"device": torch.cuda.get_device_name(0), "steps": [f"{i.label} {i.kernel}" for i in cp.steps.info]}
    r["ours"] = {"kernels": ours, "sum_us": round(sum(k[1] for k in ours), 2), "count": len(ours)}
    if args.torch:
        xs = [torch.from_numpy(np.ascontiguousarray(v)).cuda() for v in decode_feed(args.past, 1).values()]
        tc = torch_compile_profile(native_torch(pinned_model(args.past, 1)), xs, 100)
        tc["sum_us"], tc["count"] = round(sum(k[1] for k in tc["kernels"]), 2), len(tc["kernels"])
        r["torch_compile"] = tc
    dec.close()
    for side in ("ours", "torch_compile"):
        if side in r:
            print(f"--- {side}: {r[side]['count']} kernels, {r[side]['sum_us']} us summed")
            for name, t, idle in r[side]["kernels"]:
                print(f"{t:8.2f}  (after {idle:5.2f} idle)  {name}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "decode_kernels.json").write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
