"""Decode-step latency of the built-in gpt2_decode (4 layers, d128, fp32, TF32 off) on the GPU,
in one run: our decoder's step (power-of-two bucket programs, cache on the device, appended in
place; gpu/decode.py) eager and graph, and the plain exact-P program, against PyTorch eager,
PyTorch CUDA graph of the same network (built from the ONNX graph by gpu_onnx_torch, shapes pinned
at P=127) and torch.compile + CUDA graph (inductor, static shapes, its call captured and replayed,
as in gpu_vs_torch.py) of the same network written as a plain module with the same weights
(native_torch); latency across past lengths P; and 1,000 graph decode steps checking that device memory does not grow.

    python3 benchmarks/decode.py --out docs/results/    [--iters 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pinned_model(past: int, new: int):
    """gpt2_decode with its symbolic dims fixed (PyTorch's converter folds Shape chains)."""
    from migx_explore.models import get_model

    m = get_model("gpt2_decode")
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                d.dim_value = past if d.dim_param == "P" else new
    return m


def native_torch(model, half: bool = False):
    """gpt2_decode written as a plain PyTorch module (what torch.compile handles best), its weights
    read from the ONNX initializers in node order (float16 with `half`; `.to_half()` gives that
    copy, which gpu_vs_torch.half_net uses).

    The weights stay plain tensors the forward closes over, not parameters: held in a
    ParameterList and sliced per layer, torch.compile's replay held the same 124 kernels as eager
    and took about twice the latency decode.py measured for this closure form (H100 / H200)."""
    import torch
    from onnx import numpy_helper

    def load(t):
        w = torch.from_numpy(numpy_helper.to_array(t).copy()).cuda()
        return w.half() if half and w.is_floating_point() else w

    inits = {t.name: load(t) for t in model.graph.initializer}
    nodes = list(model.graph.node)
    tables = [inits[n.input[0]] for n in nodes if n.op_type == "Gather" and n.input[0] in inits]
    norms = [(inits[n.input[1]], inits[n.input[2]]) for n in nodes if n.op_type == "LayerNormalization"]
    mats = [inits[n.input[1]] for n in nodes if n.op_type == "MatMul" and n.input[1] in inits]
    biases = [inits[i] for n in nodes if n.op_type == "Add" for i in n.input if i in inits]
    layers = (len(norms) - 1) // 2
    heads = next(vi for vi in model.graph.input if vi.name == "past_key_0").type.tensor_type.shape.dim[1].dim_value
    F = torch.nn.functional

    class Decoder(torch.nn.Module):
        def to_half(self):
            return native_torch(model, half=True)

        def forward(self, ids, *pasts):
            wte, wpe = tables
            past, new, d = pasts[0].shape[2], ids.shape[1], wte.shape[1]
            dh = d // heads
            pos = torch.arange(past, past + new, device=ids.device)
            x = wte[ids] + wpe[pos]
            visible = torch.arange(past + new, device=ids.device)[None, :] <= pos[:, None]
            presents = []
            for i in range(layers):
                w, b = mats[6 * i : 6 * i + 6], biases[6 * i : 6 * i + 6]
                h = F.layer_norm(x, (d,), *norms[2 * i], eps=1e-5)
                q, k, v = ((h @ w[j] + b[j]).view(1, new, heads, dh).transpose(1, 2) for j in range(3))
                k = torch.cat([pasts[2 * i], k], 2)
                v = torch.cat([pasts[2 * i + 1], v], 2)
                presents += [k, v]
                s = torch.where(visible, (q @ k.transpose(-1, -2)) * (1.0 / dh**0.5), float("-inf"))
                ctx = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(1, new, d)
                x = x + ctx @ w[3] + b[3]
                h = F.layer_norm(x, (d,), *norms[2 * i + 1], eps=1e-5) @ w[4] + b[4]
                x = x + (0.5 * h * (1 + torch.erf(h / 2**0.5))) @ w[5] + b[5]
            x = F.layer_norm(x, (d,), *norms[-1], eps=1e-5)
            return [x @ mats[-1], *presents]

    return Decoder()


def torch_times(feed: dict, past: int, iters: int, with_compile: bool = True) -> dict:
    import torch
    from gpu_onnx_torch import OnnxTorch

    net = OnnxTorch(pinned_model(past, 1))
    xs = [torch.from_numpy(np.ascontiguousarray(feed[n])).cuda() for n in net.inputs]
    stream = torch.cuda.Stream()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(fn, on=None) -> float:
        s = on or stream
        with torch.cuda.stream(s):
            for _ in range(10):
                fn()
            t = []
            for _ in range(iters):
                e0.record(s)
                fn()
                e1.record(s)
                e1.synchronize()
                t.append(e0.elapsed_time(e1) * 1e3)
        return statistics.median(t)

    out = {"torch_eager_us": timed(lambda: net(*xs))}
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        net(*xs)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, stream=stream):
        net(*xs)
    out["torch_graph_us"] = timed(graph.replay)
    native = native_torch(pinned_model(past, 1))
    with torch.no_grad():
        out["native_max_abs_diff"] = float((native(*xs)[0] - net(*xs)[0]).abs().max())
        out["native_eager_us"] = timed(lambda: native(*xs))
        try:
            if not with_compile:
                raise RuntimeError("skipped")
            # torch.compile (inductor, static shapes) of the plain module (the ONNX interpreter
            # above would make dynamo recompile per node), its compiled call captured in a CUDA
            # graph and replayed: the same "torch.compile + CUDA graph" as gpu_vs_torch.py. The
            # earlier mode="reduce-overhead" form timed cudagraph trees' host-side bookkeeping
            # between the events (731 us on an H200 for a graph that replays in ~100 us).
            from gpu_vs_torch import torch_compiled_latency

            tc = torch_compiled_latency(native, xs, iters, 10)
            out["torch_compile_graph_us"] = tc["graph_us"]
            out["torch_compile_kernels"] = tc["kernels"]
        except Exception as e:  # noqa: BLE001 - report, keep the rest of the run
            out["torch_compile_error"] = f"{type(e).__name__}: {e}"[:300]
    out["torch_logits"] = net(*xs)[0].float().cpu().numpy()
    return out


def _time(cp, inputs: dict, iters: int, modes=("eager", "graph")) -> dict:
    from migx_explore.gpu.timing import time_program

    res = time_program(cp, modes=modes, warmup=10, iters=iters, inputs=inputs, per_kernel=False)
    out = {f"{m}_us": res.modes[m].device_us.median for m in modes}
    out["launches"] = res.modes[modes[0]].launches
    return out


def exact_program(backend, past: int):
    """The plain static program for one past length (what split_single_dyn_dim's dim_P holds)."""
    from migx_explore.gpu import compile
    from migx_explore.models import get_model
    from migx_explore.models.gpt2_decode import decode_feed

    feed = decode_feed(past, 1)
    dims = {k: list(v.shape) for k, v in feed.items()}
    return compile(get_model("gpt2_decode"), backend=backend, input_dims=dims), feed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for decode_<device>.json/.md")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--pasts", default="1,16,64,127,200,255")
    ap.add_argument("--exact-pasts", default="1,127,255", help="past lengths for the exact-P programs")
    ap.add_argument("--no-torch-compile", action="store_true")
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from migx_explore.decode import decoder
    from migx_explore.gpu.runtime import get_backend
    from migx_explore.models.gpt2_decode import decode_feed

    be = get_backend()
    device = torch.cuda.get_device_name(0)
    r: dict = {"device": device, "date": time.strftime("%Y-%m-%d"), "model": "gpt2_decode (4 layers, d128, fp32)"}
    pasts = [int(x) for x in args.pasts.split(",")]
    t0 = time.perf_counter()
    dec = decoder("gpt2_decode", target="gpu", backend=be)
    step_inputs = {"input_ids": np.array([[7]], np.int64), "past_len": np.array([127], np.int64)}
    bucketed = {}
    for past in pasts:
        cp = dec._program(1, dec_bucket(dec, past))
        bucketed[past] = _time(cp, {**step_inputs, "past_len": np.array([past], np.int64)}, args.iters)
    r["bucketed_compile_s"] = time.perf_counter() - t0
    exact = {}
    for past in sorted({int(x) for x in args.exact_pasts.split(",")} | {127}):
        cp, feed = exact_program(be, past)
        exact[past] = _time(cp, feed, args.iters, modes=("graph",))
        if past == 127:
            ref_logits = cp.run(feed, mode="graph")[0]
        cp.close()
    r["graph_us_by_P"] = {p: v["graph_us"] for p, v in bucketed.items()}
    r["eager_us_by_P"] = {p: v["eager_us"] for p, v in bucketed.items()}
    r["exact_graph_us_by_P"] = {p: v["graph_us"] for p, v in exact.items()}
    r["flatness_max_over_min"] = max(r["graph_us_by_P"].values()) / min(r["graph_us_by_P"].values())
    feed = decode_feed(127, 1)
    p = r["P127"] = {
        "graph_us": bucketed[127]["graph_us"],
        "eager_us": bucketed[127]["eager_us"],
        "exact_graph_us": exact[127]["graph_us"],
        "launches": bucketed[127]["launches"],
    }
    p.update(
        {k: v for k, v in torch_times(feed, 127, args.iters, not args.no_torch_compile).items() if k != "torch_logits"}
    )
    torch_logits = torch_times(feed, 127, 3, False)["torch_logits"]
    p["max_abs_diff_exact_vs_torch"] = float(np.abs(ref_logits - torch_logits).max())
    p["ratio_graph_vs_torch_graph"] = p["graph_us"] / p["torch_graph_us"]
    if "torch_compile_graph_us" in p:
        p["ratio_graph_vs_torch_compile_graph"] = p["graph_us"] / p["torch_compile_graph_us"]
    # 1,000 decode steps (prefill + decode, restarting when the cache is full), graph mode: no
    # program compiled after the warm-up pass and no device memory growth.
    prompt = np.array([[1, 2, 3, 4]], np.int64)

    def run_steps(n: int) -> float:
        past, ids, t = 0, prompt, []
        for _ in range(n):
            if past + ids.shape[1] > dec.max_len:
                past, ids = 0, prompt
            s0 = time.perf_counter()
            logits = dec.step(ids, past, "graph")
            t.append((time.perf_counter() - s0) * 1e6)
            past += ids.shape[1]
            ids = np.array([[int(np.argmax(logits[0, -1]))]], np.int64)
        return statistics.median(t)

    run_steps(300)  # every bucket compiled and captured
    compiles = dec.memory().compiles
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    r["host_step_us"] = run_steps(1000)
    torch.cuda.synchronize()
    r["steps_1000_device_free_delta_bytes"] = int(free0 - torch.cuda.mem_get_info()[0])
    r["steps_1000_new_compiles"] = dec.memory().compiles - compiles
    r["program_cache"] = str(dec.memory())
    dec.close()
    print(report(r))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        tag = device.split()[-1].lower().replace(" ", "_") if device else "gpu"
        (out / f"decode_{tag}.json").write_text(json.dumps(r, indent=1, default=float))
        (out / f"decode_{tag}.md").write_text(report(r) + "\n")


def dec_bucket(dec, past: int) -> int:
    from migx_explore.gpu.decode import bucket_for

    return bucket_for(past + 1, dec.max_len, dec.buckets)


def report(r: dict) -> str:
    p = r["P127"]
    lines = [
        f"# gpt2_decode decode step on {r['device']} ({r['date']}), fp32, TF32 off",
        "",
        "Device time per step (median), P=127, T=1:",
        "",
        "| | latency (us) |",
        "|---|---|",
        f"| ours eager (bucket 128) | {p['eager_us']:.1f} |",
        f"| ours graph (bucket 128, in-place cache) | {p['graph_us']:.1f} |",
        f"| ours graph (exact P=127 program) | {p['exact_graph_us']:.1f} |",
        f"| PyTorch eager | {p['torch_eager_us']:.1f} |",
        f"| PyTorch CUDA graph | {p['torch_graph_us']:.1f} |",
        f"| PyTorch eager, plain module | {p['native_eager_us']:.1f} |",
    ]
    if "torch_compile_graph_us" in p:
        lines.append(f"| torch.compile + CUDA graph, plain module | {p['torch_compile_graph_us']:.1f} |")
    lines += ["", f"ours graph / PyTorch CUDA graph: {p['ratio_graph_vs_torch_graph']:.2f}x (target <= 1.0)"]
    if "ratio_graph_vs_torch_compile_graph" in p:
        lines.append(
            f"ours graph / torch.compile + CUDA graph: {p['ratio_graph_vs_torch_compile_graph']:.2f}x (target <= 1.3)"
        )
    else:
        lines.append(f"torch.compile: {p.get('torch_compile_error')}")
    lines += [
        "",
        f"launches per step (eager): {p['launches']}; max |logits - torch| (exact program) = "
        f"{p['max_abs_diff_exact_vs_torch']:.2e}; plain module vs ONNX-built torch: "
        f"{p['native_max_abs_diff']:.2e}",
        "",
        "| P | bucketed graph (us) | bucketed eager (us) | exact-P graph (us) |",
        "|---|---|---|---|",
    ]
    for k in r["graph_us_by_P"]:
        ex = r["exact_graph_us_by_P"].get(k)
        lines.append(
            f"| {k} | {r['graph_us_by_P'][k]:.1f} | {r['eager_us_by_P'][k]:.1f} | "
            + (f"{ex:.1f} |" if ex is not None else "- |")
        )
    lines += [
        "",
        f"flatness of the bucketed graph latency, max/min over P: {r['flatness_max_over_min']:.2f} (target <= 1.2)",
        f"1,000 graph steps (host step incl. ids/past_len in, logits out: {r['host_step_us']:.0f} us median): "
        f"device free memory changed by {r['steps_1000_device_free_delta_bytes']} bytes, "
        f"{r['steps_1000_new_compiles']} new compiles; program cache: {r['program_cache']}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
