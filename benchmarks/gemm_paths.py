"""Our graph latency with each GEMM path, against torch.compile + CUDA graph, in one process and
timed interleaved (rounds that rotate through the variants, so drift hits all of them alike):

    python benchmarks/gemm_paths.py --models bert,gpt2,llama,vit,whisper --precision fp16 --out DIR
    python benchmarks/gemm_paths.py --models resnet18,yolov10n --variants auto,all --out DIR

Variants are MIGX_GEMM_GEN settings read at compile time: "0" (every GEMM a cuBLASLt call, its
epilogue in cuBLASLt or a kernel after it), "auto" (the default: small half GEMMs as the generated
tensor-core kernel, gpu/codegen/gemm_mma.py) and "all"; or "+"-joined KEY=VALUE settings of other
variables and of convolution_layout (parse_variant), e.g.
`--variants MIGX_CONV_IGEMM=0,MIGX_CONV_IGEMM=auto+convolution_layout=channels_last`.
Prints, per model, the median graph
latency of each, its ratio to torch.compile, the launches, the largest output difference to the
"0" variant, and the per-kernel profile (CUPTI) of the first and second variants (--profile-variants), so the
gaps can be compared too, and where the first two profiled variants launch different kernels, the
runs that differ side by side (an implicit-GEMM convolution against its im2col + GEMM).
Writes gemm_paths.md / .json under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


# What a variant may set besides MIGX_GEMM_GEN: compile options by name
OPTION_KEYS = ("convolution_layout",)


def parse_variant(variant: str) -> tuple[dict[str, str], dict[str, str]]:
    """(environment, compile options) of a variant: a bare value is MIGX_GEMM_GEN's, else
    "+"-joined KEY=VALUE settings, e.g. "MIGX_CONV_IGEMM=0+convolution_layout=channels_last"."""
    if "=" not in variant:
        return {"MIGX_GEMM_GEN": variant}, {}
    env, options = {}, {}
    for part in variant.split("+"):
        key, _, value = part.partition("=")
        (options if key in OPTION_KEYS else env)[key] = value
    return env, options


def _label(variant: str) -> str:
    return variant if "=" in variant else f"MIGX_GEMM_GEN={variant}"


def compile_variant(model, variant: str, precision: str):
    from migx_explore.compiler.onnx import parse_onnx
    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu import compile_program_ir
    from migx_explore.gpu.executor import CompiledProgram
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime import get_backend

    env, options = parse_variant(variant)
    with mock.patch.dict(os.environ, env):  # read by the passes while this program compiles
        be = get_backend()
        program = compile_program_ir(
            parse_onnx(model),
            CompileOptions(precision=precision, **options),
            backend=be,
            pass_manager=PassManager(validate=False),
        )
    return CompiledProgram(program, be)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert,gpt2,llama")
    ap.add_argument("--precision", default="fp16", choices=("fp32", "fp16"))
    ap.add_argument("--variants", default="0,auto")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=40, help="replays per variant per round")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel CUPTI profiles")
    ap.add_argument("--profile-variants", default="0,1", help="indexes of the variants to profile")
    ap.add_argument("--out", default="bench_out")
    args = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    variants = args.variants.split(",")
    device = torch.cuda.get_device_name()
    results: dict = {"device": device, "precision": args.precision, "variants": variants, "models": {}}
    text = [f"# GEMM paths, {args.precision}, {device}", ""]
    rows = [
        "| model | " + " | ".join(_label(v) for v in variants) + " | torch.compile |",
        "|---" * (len(variants) + 2) + "|",
    ]
    for case in _cases(args.models.split(",")):
        try:
            one_case(case, variants, args, results, rows, text)
        except Exception as e:  # noqa: BLE001 - the other models still run; the error is the row
            rows.append(f"| {case.name} | failed: {type(e).__name__}: {str(e)[:200]} |")
            print(f"{case.name}: failed: {e!r}"[:2000], flush=True)
        (out / "gemm_paths.md").write_text("\n".join(rows) + "\n\n" + "\n".join(text))
        (out / "gemm_paths.json").write_text(json.dumps(results, indent=1))
    print("\n".join(rows), flush=True)


def _cases(names: list[str]):
    """gpu_kernel_profile's cases (transformer exports, and issue 28's rows by name: resnet18,
    yolov10n, ...) as objects with name, model, feeds, torch_module and torch inputs xs."""
    from types import SimpleNamespace

    from gpu_kernel_profile import _cases as profile_cases

    for name, model, feeds, net, xs in profile_cases(names):
        yield SimpleNamespace(name=name, model=model, feeds=feeds, torch_module=net, xs=xs)


def one_case(case, variants: list[str], args, results: dict, rows: list[str], text: list[str]) -> None:
    from gpu_kernel_profile import kernel_list
    from gpu_vs_torch import half_inputs, half_net, timed, torch_compiled_latency
    from issue28_report import interleave

    from migx_explore.compiler.onnx.context import param_name
    from migx_explore.gpu.timing import graph_replay_us

    inputs = {param_name(k): v for k, v in case.feeds.items()}
    compiled = {v: compile_variant(case.model, v, args.precision) for v in variants}
    outs = {v: [np.asarray(o, np.float64) for o in c.run(inputs, mode="graph")] for v, c in compiled.items()}
    base = outs[variants[0]]
    diff = {v: max(float(np.max(np.abs(a - b))) for a, b in zip(o, base)) for v, o in outs.items()}
    launches = {v: sum(i.kind in ("kernel", "blas") for i in c.steps.info) for v, c in compiled.items()}
    timers = {v: (lambda n, c=c: graph_replay_us(c, n)) for v, c in compiled.items()}
    if not args.no_torch:
        xs, net = case.xs, case.torch_module
        if args.precision == "fp16":
            net, xs = half_net(net), half_inputs(xs)
        # the replay tuple keeps the compiled module and inputs alive with the graph
        graph, stream, *_ = torch_compiled_latency(net, xs, iters=args.iters, warmup=3, keep=True)["_replay"]
        timers["torch.compile"] = lambda n: timed(graph.replay, stream, n)
    samples = interleave(timers, rounds=args.rounds, per_round=args.iters, warmup=5)
    med = {k: statistics.median(x for batch in s for x in batch) for k, s in samples.items() if s}
    tc = med.get("torch.compile")
    cells = [f"{med[v]:.1f}" + (f" ({med[v] / tc:.2f}x)" if tc else "") + f", {launches[v]} launches" for v in variants]
    rows.append(f"| {case.name} | " + " | ".join(cells) + (f" | {tc:.1f} |" if tc else " | - |"))
    profiles = {}
    picked = [variants[int(i)] for i in args.profile_variants.split(",") if int(i) < len(variants)]
    for v in [] if args.no_profile else picked:
        c = compiled[v]
        c.run(inputs, mode="graph")
        ks = kernel_list(lambda c=c: c.launch_graph(io=False), lambda c=c: c.backend.streams.sync(c.stream))
        profiles[v] = {"graph_us": med[v], "kernels": ks}
    results["models"][case.name] = {
        "median_us": med,
        "launches": launches,
        "max_diff_to_first": diff,
        "samples": samples,
        "profiles": profiles,
    }
    summary = f"{case.name}: " + ", ".join(f"{k} {m:.1f} us" for k, m in med.items())
    summary += f"; launches {launches}; max |diff| to {variants[0]}: {diff}"
    print(summary, flush=True)
    text.append(summary)
    if len(profiles) >= 2:  # where the first two profiled variants launch different kernels
        (la, pa), (lb, pb) = list(profiles.items())[:2]
        text += [f"## {case.name}: where {_label(la)} and {_label(lb)} differ", ""]
        text += span_lines(_label(la), _label(lb), differing_spans(pa["kernels"], pb["kernels"])) + [""]
    for v, prof in profiles.items():
        ks = prof["kernels"]
        text += [
            f"## {case.name}, {_label(v)}: graph {med[v]:.1f} us, {len(ks)} kernels summing to "
            f"{sum(k[1] for k in ks):.1f} us",
            "",
        ]
        text += [f"    {us:8.2f}  (after {idle:5.2f} idle)  {name}" for name, us, idle in ks] + [""]
    for c in compiled.values():
        c.close()


def differing_spans(first: list, second: list) -> list[tuple[list, list]]:
    """The runs of kernels where two profiles of one model differ, in launch order: (kernels of
    `first`, kernels of `second`) per run, each kernel a (name, us, idle) row as kernel_list gives
    them. Kernels with the same name in both line up (difflib on the names), so each run is what
    one variant launched in place of the other's: an implicit-GEMM convolution against its
    im2col, GEMM and epilogue, say."""
    import difflib

    names = [[k[0] for k in ks] for ks in (first, second)]
    matcher = difflib.SequenceMatcher(None, *names, autojunk=False)
    return [(first[i1:i2], second[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def span_lines(label_a: str, label_b: str, spans: list[tuple[list, list]]) -> list[str]:
    """The report of differing_spans: per run, both sides' summed device time and kernels."""
    out = [f"| {label_a} us | {label_b} us | {label_a} kernels | {label_b} kernels |", "|---|---|---|---|"]
    for a, b in spans:
        names = ["; ".join(k[0].removesuffix("_kernel")[:48] for k in ks) for ks in (a, b)]
        out.append(f"| {sum(k[1] for k in a):.1f} | {sum(k[1] for k in b):.1f} | {names[0]} | {names[1]} |")
    total = [sum(k[1] for a in side for k in a) for side in zip(*spans)] if spans else [0.0, 0.0]
    return out + [f"| **{total[0]:.1f}** | **{total[1]:.1f}** | (every differing run) | |"]


if __name__ == "__main__":
    main()
