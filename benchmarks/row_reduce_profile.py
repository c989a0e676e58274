"""Device time of the row-reduction kernels (layernorm, RMSNorm, softmax): the register kernel
(gpu/codegen/reduce_rows.py) against the loop kernel it replaces, in one process on one GPU.

    python benchmarks/row_reduce_profile.py --models bert,gpt2,llama --out DIR

For small standalone programs (the transformer cases' norm shapes) and for whole models, each
variant is compiled, captured in a CUDA graph and replayed --reps times under CUPTI
(torch.profiler); the row kernels' time is summed per replay, the median over the replays given. Variants: `loop`
(REGISTER_ROWS off: the kernels of main before the register kernel, byte for byte), `reg` (the
defaults), and `reg32` / `reg128` / `g16` / `g8` (other block and group sizes, VARIANTS).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

NORM_WORDS = ("reduce", "norm", "softmax")


VARIANTS = {  # name: (REGISTER_ROWS, MIN_THREADS, WARP_GROUP)
    "loop": (False, 64, 32),
    "reg": (True, 64, 32),
    "reg32": (True, 32, 32),
    "reg128": (True, 128, 32),
    "g16": (True, 64, 16),
    "g8": (True, 64, 8),
}


def _variants() -> dict[str, Callable[[], None]]:
    from migx_explore.gpu.codegen import reduce_rows

    def setter(on: bool, threads: int, group: int) -> Callable[[], None]:
        def apply() -> None:
            reduce_rows.REGISTER_ROWS = on
            reduce_rows.MIN_THREADS = threads
            reduce_rows.WARP_GROUP = group

        return apply

    return {name: setter(*v) for name, v in VARIANTS.items()}


def replay_kernels(c, reps: int) -> list[list[tuple[str, float]]]:
    """(name, device us) of each kernel of each of `reps` graph replays. A graph's independent
    branches may run in either order, so a replay's list is a set, not a sequence."""
    from torch.profiler import ProfilerActivity, profile

    sync = lambda: c.backend.streams.sync(c.stream)  # noqa: E731
    for _ in range(5):
        c.launch_graph(io=False)
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            c.launch_graph(io=False)
        sync()
    kev = [
        e for e in prof.events() if e.device_type.name == "CUDA" and "Memcpy" not in e.name and "Memset" not in e.name
    ]
    kev.sort(key=lambda e: e.time_range.start)
    per = len(kev) // reps
    return [[(e.name[:60], float(e.device_time_total)) for e in kev[r * per : (r + 1) * per]] for r in range(reps)]


def summary(replays: list[list[tuple[str, float]]]) -> dict:
    """Medians over the replays: all kernels, the row kernels, and each row kernel name's mean."""
    med = statistics.median
    rows = [[(k, us) for k, us in r if any(w in k for w in NORM_WORDS)] for r in replays]
    by_name: dict[str, list[float]] = {}
    for r in rows:
        for k, us in r:
            by_name.setdefault(k, []).append(us)
    return {
        "kernels": len(replays[0]),
        "sum_us": round(med(sum(us for _, us in r) for r in replays), 2),
        "row_kernels": len(rows[0]),
        "row_sum_us": round(med(sum(us for _, us in r) for r in rows), 2),
        "row_by_name": {k: (len(v) // len(replays), round(med(v), 2)) for k, v in by_name.items()},
    }


def profile_program(program, feeds: dict, reps: int) -> list[tuple[str, float]]:
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu import compile_program_ir
    from migx_explore.gpu.executor import CompiledProgram
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend

    be = get_backend()
    lowered = compile_program_ir(program, CompileOptions(), backend=be, pass_manager=PassManager(validate=False))
    c = CompiledProgram(lowered, be)
    try:
        c.run(feeds, mode="graph")
        return replay_kernels(c, reps)
    finally:
        c.close()


def _standalone() -> dict[str, tuple]:
    """name: (program, feeds), the norm shapes of the transformer cases at fp16."""
    from migx_explore.compiler import Program, Shape, make_op

    def op(m, name, inputs, **attrs):
        return m.add_instruction(make_op(name, **attrs), list(inputs))

    def ln(rows: int, n: int, add: bool) -> Program:
        p = Program()
        m = p.main
        lens = [rows, n]
        x = m.add_parameter("x", Shape.of("float16", lens))
        g = m.add_parameter("g", Shape.of("float16", [n]))
        b = m.add_parameter("b", Shape.of("float16", [n]))
        if add:
            r = m.add_parameter("r", Shape.of("float16", lens))
            y = op(m, "add_layernorm", [x, r], epsilon=1e-5, axis=-1)
        else:
            y = op(m, "layernorm", [x], epsilon=1e-5, axis=-1)
        y = op(m, "mul", [y, op(m, "multibroadcast", [g], out_lens=lens)])
        m.add_return([op(m, "add", [y, op(m, "multibroadcast", [b], out_lens=lens)])])
        return p

    def rms(rows: int, n: int) -> Program:
        p = Program()
        m = p.main
        lens = [rows, n]
        x = m.add_parameter("x", Shape.of("float16", lens))
        w = m.add_parameter("w", Shape.of("float16", [n]))
        xf = op(m, "convert", [x], target_type="float32")
        ms = op(m, "reduce_mean", [op(m, "mul", [xf, xf])], axes=[1])
        eps = m.add_literal(np.array([1e-6], np.float32), Shape.scalar("float32"))
        inv = op(m, "rsqrt", [op(m, "add", [ms, op(m, "multibroadcast", [eps], out_lens=[rows, 1])])])
        y = op(m, "convert", [op(m, "mul", [xf, op(m, "multibroadcast", [inv], out_lens=lens)])], target_type="float16")
        m.add_return([op(m, "mul", [y, op(m, "multibroadcast", [w], out_lens=lens)])])
        return p

    def softmax(rows: int, n: int) -> Program:
        p = Program()
        m = p.main
        x = m.add_parameter("x", Shape.of("float16", [rows, n]))
        m.add_return([op(m, "softmax", [x], axis=-1)])
        return p

    progs = {
        "bert_add_ln_128x256": ln(128, 256, True),
        "gpt2_ln_128x128": ln(128, 128, False),
        "llama_rms_64x128": rms(64, 128),
        "softmax_512x128": softmax(512, 128),
        "ln_512x768": ln(512, 768, True),
        "ln_64x4096": ln(64, 4096, True),
    }
    rng = np.random.default_rng(0)
    out = {}
    for name, p in progs.items():
        feeds = {q.param_name: rng.normal(0, 1, q.shape.lens).astype(np.float16) for q in p.main.params()}
        out[name] = (p, feeds)
    return out


def _model(case, reps: int) -> list[tuple[str, float]]:
    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.compiler.onnx.context import param_name
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu import compile_program_ir
    from migx_explore.gpu.executor import CompiledProgram
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend

    be = get_backend()
    lowered = compile_program_ir(
        parse_onnx(case.model), CompileOptions(precision="fp16"), backend=be, pass_manager=PassManager(validate=False)
    )
    c = CompiledProgram(lowered, be)
    try:
        c.run({param_name(k): v for k, v in case.feeds.items()}, mode="graph")
        return replay_kernels(c, reps)
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert,gpt2,llama", help="comma list, or '' for the standalone programs only")
    ap.add_argument("--model-variants", default="loop,reg")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default="bench_out")
    args = ap.parse_args()
    import torch

    variants = _variants()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"device": torch.cuda.get_device_name(), "standalone": {}, "models": {}}
    text = [f"# Row-reduction kernels, fp16, {res['device']} (median of {args.reps} replays, us)", ""]
    text.append("| program | " + " | ".join(variants) + " |")
    text.append("|---|" + "---|" * len(variants))
    for name, (p, feeds) in _standalone().items():
        row = {}
        for v, apply in variants.items():
            apply()
            row[v] = summary(profile_program(p, feeds, args.reps))
        res["standalone"][name] = row
        cells = [f"{row[v]['row_sum_us']:.2f}" for v in variants]
        text.append(f"| {name} | " + " | ".join(cells) + " |")
        print(text[-1], flush=True)
    names = [n for n in args.models.split(",") if n]
    if names:
        from gpu_transformers import transformer_cases

        for case in transformer_cases(names):
            res["models"][case.name] = {}
            text += ["", f"## {case.name}", ""]
            for v in args.model_variants.split(","):
                variants[v]()
                sm = summary(_model(case, args.reps))
                res["models"][case.name][v] = sm
                text.append(
                    f"{v}: {sm['kernels']} kernels, sum {sm['sum_us']:.1f} us; "
                    f"row kernels {sm['row_kernels']}, sum {sm['row_sum_us']:.1f} us"
                )
                text += [f"    {n} x {us:6.2f}  {k}" for k, (n, us) in sm["row_by_name"].items()]
                print("\n".join(text[-len(sm["row_by_name"]) - 1 :]), flush=True)
    variants["reg"]()
    (out / "row_reduce_profile.json").write_text(json.dumps(res, indent=1))
    (out / "row_reduce_profile.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
