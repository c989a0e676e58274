"""Cells of notebooks/06_precision.ipynb (one model at fp32 / fp16 / int8: graph and timing), built
by build_notebooks.py.

Everything but the timing runs without a GPU: the quantize stage, the rewritten graphs, accuracy
on the reference evaluator, and the lowered GPU program (compiled on the recording fake backend).
Timing runs live where a GPU stack is usable. Elsewhere the cell shows the numbers that
benchmarks/precision.py recorded (docs/results/precision_nvidia_h100_80gb_hbm3.json), labelled
with the device and the date."""

from __future__ import annotations

from cells import code, md  # shared cell helpers (this folder is on sys.path)


def precision() -> list:
    return [
        md("""
# Precision modes: one transformer layer at fp32, fp16 and int8

Nobody runs MIGraphX at fp32: `migraphx-driver perf --fp16` (or `--bf16`, `--int8`, `--fp8`) is the
normal way to time a model. Here `CompileOptions(precision=...)` (and `--fp16` / `--int8` ... on the
CLI, `Session(precision=...)`) adds a **`quantize`** stage in front of the GPU target's five pipelines.
This notebook follows the benchmark transformer layer (sequence 128, width 256, 4 heads;
`benchmarks/gpu_models.py`) through it:

1. what the stage contains at each precision;
2. what it does to the graph: converts at fp16, calibrated quantize / dequantize pairs and then
   `quant_dot` at int8;
3. the error against fp32 on the reference evaluator, which computes in the low precision;
4. the GPU program: half GEMMs, int8 GEMMs in cuBLASLt's TN layout, quantize kernels;
5. graph latency on an H100 against PyTorch.
"""),
        code("""
import sys
import warnings
from pathlib import Path

import numpy as np

import migx_explore
from migx_explore import gpu_bridge

ROOT = Path(migx_explore.__file__).resolve().parents[1]  # the repository (benchmarks/, docs/)
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_models  # noqa: E402

NO_GPU = gpu_bridge.unavailable_reason()  # None where a GPU stack is usable
print("GPU:", "available" if NO_GPU is None else f"not available here ({NO_GPU}); GPU cells show recorded numbers")
"""),
        md("""
## The `quantize` stage

These are MIGraphX's pass names. fp16 is `truncate_float` between two `optimize_module` runs.
int8 probes the inputs of every `dot` / `convolution` (`capture_arguments`). `quantize_8bits` then
runs the program on the calibration feeds and replaces each probe with a per-tensor symmetric
quantize / dequantize pair. Later, `simplify_qdq` (in `required`) turns dot-of-dequantized values
into `quant_dot` with int32 accumulation.
"""),
        code("""
from migx_explore.compiler.inputs import random_inputs
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.gpu.pipelines import CompileOptions, gpu_pipelines

MODEL = gpu_models.transformer()  # batch 1, seq 128, dim 256, 4 heads
feed = random_inputs(parse_onnx(MODEL), seed=1)  # also the calibration feed
for prec in ("fp16", "int8"):
    stage = gpu_pipelines(CompileOptions(precision=prec))[0]
    print(f"{prec}: {stage.name} = {', '.join(e.pass_.name for e in stage.entries)}")
"""),
        md("""
## What the stage does to the graph

Each program below is taken after the target-independent pipelines, before lowering. The tables
count instructions by element type and show the ops the stage brings in. Under the tables is the
first projection, `MatMul + Add`, at each precision.
"""),
        code("""
import collections

from migx_explore.compiler import print_program
from migx_explore.compiler.pass_infra import PassManager


def quantized(prec: str):
    program = parse_onnx(MODEL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        PassManager().run(program, gpu_pipelines(CompileOptions(precision=prec), include_backend=False,
                                                 calibration=(feed,)))
    return program


programs = {prec: quantized(prec) for prec in ("fp32", "fp16", "int8")}
WATCH = ("dot", "quant_dot", "convert", "quantizelinear", "dequantizelinear", "pointwise")
print(f"{'':6s}" + "".join(f"{t:>10s}" for t in ("float32", "float16", "int8", "int32")) + "   "
      + "  ".join(WATCH))
for prec, program in programs.items():
    types = collections.Counter(i.shape.type for i in program.main if not i.shape.is_tuple
                                and not i.is_literal() and i.name not in ("@param", "@return"))
    names = collections.Counter(i.name for i in program.main)
    print(f"{prec:6s}" + "".join(f"{types.get(t, 0):10d}" for t in ("float32", "float16", "int8", "int32"))
          + "   " + "  ".join(f"{names.get(n, 0):{len(n)}d}" for n in WATCH))
"""),
        code("""
# Straight after the quantize stage (before fuse_pointwise merges them into pointwise kernels):
stage_only = parse_onnx(MODEL)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    PassManager().run(stage_only, gpu_pipelines(CompileOptions(precision="int8"), calibration=(feed,))[:1])
names = collections.Counter(i.name for i in stage_only.main)
print("int8, after the quantize stage only:", {n: names[n] for n in ("dot", "quantizelinear", "dequantizelinear")})
"""),
        code("""
def first_projection(program, width: int = 150) -> str:
    lines = [ln for ln in print_program(program).splitlines() if "@literal" not in ln]
    first = next(k for k, ln in enumerate(lines) if " dot(" in ln or "quant_dot(" in ln)
    return "\\n".join(ln[:width] for ln in lines[max(first - 4, 0):first + 3])


for prec, program in programs.items():
    print(f"--- {prec}\\n{first_projection(program)}\\n")
"""),
        code("""
from IPython.display import HTML, display

from migx_explore.render import program_graph, render_svg

svgs = []
for prec in ("fp32", "int8"):
    program = programs[prec]
    dot = next(i for i in program.main if i.name in ("dot", "quant_dot"))
    g = program_graph(program, focus=[dot.id], hops=2, literals=False, title=f"{prec}: the first projection")
    svgs.append(f"<div style='display:inline-block;vertical-align:top;margin-right:24px'>{render_svg(g)}</div>")
display(HTML("".join(svgs)))
"""),
        md("""
## Accuracy against fp32 (reference evaluator)

The reference evaluator does the arithmetic in the low precision the way numpy / ml_dtypes do:
half and bf16 values accumulate in float32, int8 products in int32. The issue's budgets for relative
RMS error are fp16 ≤ 1e-2, bf16 ≤ 3e-2, int8 ≤ 5e-2 and fp8 ≤ 8e-2.
"""),
        code("""
from migx_explore.compiler import evaluate

want = np.asarray(evaluate(programs["fp32"], feed)[0], np.float64)
for prec in ("fp16", "int8"):
    got = np.asarray(evaluate(programs[prec], feed)[0], np.float64)
    rel = np.sqrt(np.mean((got - want) ** 2)) / np.sqrt(np.mean(want ** 2))
    print(f"{prec}: relative RMS error {rel:.2e}")
"""),
        md("""
## The GPU program

This is lowered for the GPU on the recording fake backend, which needs no GPU. Three things differ
by precision:

* fp16 GEMMs are cuBLASLt calls on half storage with fp32 compute.
* int8 GEMMs are cuBLASLt int8 calls with int32 accumulation, in the TN layout 8-bit BLAS requires.
  Weights are re-laid out once at compile time. An activation × activation product (attention's
  K) gets a transposed copy.
* Quantize / dequantize become pointwise kernels; `fuse_pointwise` merges them with their
  neighbours.

If 8-bit BLAS cannot take a product (sizes not multiples of 4 / 16, or no fp8 GEMM on the GPU),
its operands widen exactly to float16 for a half GEMM with a float32 result. It never falls to the
host.
"""),
        code("""
from migx_explore.gpu import compile_program_ir
from migx_explore.gpu.ops import inner_op
from migx_explore.gpu.runtime.fake import FakeBackend

for prec in ("fp32", "fp16", "int8"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = compile_program_ir(parse_onnx(MODEL), CompileOptions(precision=prec, calibration=(feed,)),
                                     backend=FakeBackend())
    gemms = [i for i in lowered.main if i.name == "gpu::gemm"]
    kernels = collections.Counter(inner_op(i.op["op"]).name for i in lowered.main if i.name == "gpu::code_object")
    print(f"{prec}: {len(gemms)} GEMMs, e.g. [{gemms[0].inputs[0].shape.type}] {gemms[0].op['plan']}")
    print(f"      {sum(kernels.values())} kernels: {dict(kernels)}")
"""),
        md("""
## Graph latency on the GPU

Each number is the device time of one CUDA-graph replay, batch 1. PyTorch runs the same network
(built from the same ONNX graph) as `.half()` inside a CUDA graph, and as torch.compile fp16 inside
a CUDA graph. Without a GPU, the cell shows what `benchmarks/precision.py` recorded; the device and
date are printed.
"""),
        code("""
import json

recorded = None
path = ROOT / "docs" / "results" / "precision_nvidia_h100_80gb_hbm3.json"
if path.is_file():
    run = json.loads(path.read_text())["runs"][-1]
    entry = run["models"]["transformer"]
    recorded = {"device": run["device"], "date": run["date"],
                "ours": {p: v["graph_us"] for p, v in entry["ours"].items()}, "torch": entry["torch"]}
if recorded is None:  # the same numbers, embedded (benchmarks/precision.py on an H100)
    recorded = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-24 15:27 UTC",
                "ours": {"fp32": 65.0, "fp16": 38.2, "bf16": 38.8, "int8": 57.0, "fp8": 55.8},
                "torch": {"torch_fp32_graph_us": 92.8, "torch_half_graph_us": 68.9,
                          "torch_compile_half_graph_us": 54.5}}

if NO_GPU is None:
    from gpu_vs_torch import feeds_for
    from precision import ours, torch_baselines

    feeds = feeds_for(MODEL)
    data = {"device": "this GPU (live)", "date": "now",
            "ours": {p: ours(MODEL, feeds, p, 50)["graph_us"] for p in ("fp32", "fp16", "int8")},
            "torch": torch_baselines(MODEL, feeds, 50, with_compile=False)}
else:
    data = recorded
    print(f"No GPU here: recorded on {data['device']} on {data['date']} by benchmarks/precision.py")
for prec in ("fp32", "fp16", "int8"):
    print(f"ours {prec:5s} graph {data['ours'][prec]:7.1f} us")
for key, label in (("torch_fp32_graph_us", "torch fp32 + CUDA graph"),
                   ("torch_half_graph_us", "torch .half() + CUDA graph"),
                   ("torch_compile_half_graph_us", "torch.compile fp16 + CUDA graph")):
    if key in data["torch"]:
        print(f"{label:32s} {data['torch'][key]:7.1f} us")
print(f"ours fp16 / torch .half() graph: {data['ours']['fp16'] / data['torch']['torch_half_graph_us']:.2f}x")
"""),
        code("""
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from IPython.display import SVG  # noqa: E402

labels = ["ours fp32", "ours fp16", "ours int8", "torch fp32\\ngraph", "torch .half()\\ngraph"]
values = [data["ours"]["fp32"], data["ours"]["fp16"], data["ours"]["int8"], data["torch"]["torch_fp32_graph_us"],
          data["torch"]["torch_half_graph_us"]]
if "torch_compile_half_graph_us" in data["torch"]:
    labels.append("torch.compile\\nfp16 graph")
    values.append(data["torch"]["torch_compile_half_graph_us"])
fig, ax = plt.subplots(figsize=(7.5, 3.4))
ax.bar(labels, values, color=["#4c72b0", "#55a868", "#c44e52", "#999999", "#bbbbbb", "#dddddd"][:len(values)])
ax.set_ylabel("graph replay, device µs")
ax.set_title(f"transformer layer, batch 1 — {data['device']}, {data['date']}")
ax.grid(axis="y", alpha=0.3)
buf = io.StringIO()
fig.savefig(buf, format="svg", bbox_inches="tight")
plt.close(fig)
display(SVG(buf.getvalue()))
"""),
        md("""
## Reading it

* In one H100 run, fp16 is 0.59× our fp32 and 0.55× PyTorch's `.half()` CUDA graph (0.70× its
  torch.compile fp16 graph). The error is 4.5e-4.
* int8 is within its budget (the error is printed above) but *slower* than fp16 (57 against 38 µs). The
  per-kernel breakdown in `docs/results/precision_nvidia_h100_80gb_hbm3.md` shows why. At batch 1
  every GEMM is m = 128 tokens deep and costs a launch-bound 13–35 µs whatever its type, so the
  doubled tensor-core peak of int8 buys nothing. Meanwhile the stage has added quantize / dequantize
  kernels (20 kernels against 11) and a transposed copy of K for the TN layout.
* Fusing dequantize into the GEMM epilogue and quantize into the producing kernel would remove
  those kernels, and larger batches would make the GEMMs throughput-bound. That is where 8-bit
  pays off.
"""),
    ]
