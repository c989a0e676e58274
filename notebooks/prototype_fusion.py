"""Notebook 03: prototype a fusion rule, and add an op end to end (built by build_notebooks.py)."""

from __future__ import annotations

from cells import GPU_CHECK, YOLO, code, md


# ---- 03: prototyping a fusion --------------------------------------------------------------------
def prototype() -> list:
    return [
        md("""
# Prototyping a fusion rule, and adding an op

A 1x1 convolution after a convolution is one convolution: `conv(conv(x, W1), W2) = conv(x, W2·W1)`
when `W2` is 1x1 (contract `W2` over the middle channels). This notebook writes that rule with the
matcher DSL in a cell, shows where it matches and where it *almost* matches (and why not) on the
graph, inserts it into the `fusion` pipeline, checks the numbers and times the result, and
compares with the library's own rule on the built-in models.

The last part adds a new op, SiLU, end to end: the op's contract, a rule `x * sigmoid(x) ->
silu(x)`, every pass, and the GPU kernel generated for it.
"""),
        code(GPU_CHECK),
        md("""
## A model to try it on

The built-in models never put a 1x1 convolution *directly* after another (there is always an
activation or a residual add between; section 5 shows their near misses), so the prototype starts
on a small model built here with `onnx.helper`: a chain with one clean conv → 1x1 pair and three
that each break one condition.
"""),
        code("""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from migx_explore.compiler.onnx import parse_onnx
from migx_explore.session import Session

rng = np.random.default_rng(0)
inits, nodes = [], []


def conv(x, c_in, c_out, k, group=1):
    w = (rng.standard_normal((c_out, c_in // group, k, k)) / np.sqrt(c_in * k * k / group)).astype(np.float32)
    inits.append(numpy_helper.from_array(w, f"w{len(inits)}"))
    y = f"conv{len(nodes)}"
    nodes.append(helper.make_node("Conv", [x, inits[-1].name], [y], kernel_shape=[k, k], pads=[k // 2] * 4,
                                  group=group))
    return y


def op(kind, *xs):
    y = f"{kind.lower()}{len(nodes)}"
    nodes.append(helper.make_node(kind, list(xs), [y]))
    return y


a = conv("x", 16, 32, 3)
b = conv(a, 32, 16, 1)            # conv -> 1x1: the pattern
d = conv(op("Relu", b), 16, 16, 1)  # a relu sits between
e = conv(d, 16, 16, 3)            # e has two 1x1 users:
h = op("Add", conv(e, 16, 8, 1), conv(e, 16, 8, 1))
j = conv(conv(h, 8, 8, 3, group=2), 8, 8, 1)  # grouped first conv
graph = helper.make_graph(nodes, "conv_pairs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
                          [helper.make_tensor_value_info(j, TensorProto.FLOAT, [1, 8, 16, 16])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
session = Session(parse_onnx(model), name="conv_pairs")
print(session.initial.text[:1200])
"""),
        md("""
## The rule

A rule (`migx_explore.compiler.pattern_rewriter`) is a pattern, a `check` that returns a reason to refuse
(or a plan for the rewrite), and a rewrite. The matcher says *what* to look for; each condition is
its own matcher, so a failure names the one that failed.
"""),
        code("""
from migx_explore.compiler import matcher as mt
from migx_explore.compiler import pattern_rewriter as rw
from migx_explore.compiler.ref import eval_instruction


def is_1x1(ins):
    return all(d == 1 for d in ins.inputs[1].shape.lens[2:])


def plain(ins):
    return ins.op["group"] == 1 and all(s == 1 for s in ins.op["stride"]) and not any(ins.op["padding"])


second = mt.name("convolution")(
    mt.pred("1x1 kernel", is_1x1, lambda ins: f"kernel is {'x'.join(map(str, ins.inputs[1].shape.lens[2:]))}"),
    mt.pred("group 1, stride 1, no padding", plain, "the 1x1 conv is grouped, strided or padded"),
    mt.arg(1)(mt.is_constant().bind("w2")),
    mt.arg(0)(mt.name("convolution")(mt.used_once(), mt.arg(1)(mt.is_constant().bind("w1"))).bind("first")),
)


def check(module, r):
    if r["first"].op["group"] != 1:
        return f"the first conv is grouped (group={r['first'].op['group']}); this prototype handles dense convs"
    return None


def fuse(module, r):
    w1 = np.asarray(eval_instruction(r["w1"]), np.float64)
    w2 = np.asarray(eval_instruction(r["w2"]), np.float64)[:, :, 0, 0]
    w = np.einsum("om,mc...->oc...", w2, w1).astype(np.float32)  # (out, mid) . (mid, in, kh, kw)
    first = r["first"]
    # In place: the 1x1 conv keeps its stable id (the diff shows it as changed) and becomes the
    # fused conv; the first conv loses its only user and dead-code elimination removes it.
    module.replace_instruction(r.root, first.op, [first.inputs[0], module.add_literal(w)])


my_rule = rw.rule("my_conv_conv_1x1", second, fuse, check)
print(my_rule)
"""),
        md("""
## Where it matches, and where it almost does

`matches` lists full matches; `near_misses` lists instructions where the rule got past its first
tests and then failed (or `check` refused), with the reason. `min_depth=2` skips instructions that
fail right after the root test (every 3x3 convolution fails "1x1 kernel"). On the graph: matches
green, near misses amber — hover a node for the reason.
"""),
        code("""
from IPython.display import HTML, display

from migx_explore.widgets.content import highlight_svg

main = session.initial.to_program().main
hits = rw.matches(main, my_rule)
near = rw.near_misses(main, my_rule, min_depth=2)
print(f"{len(hits)} matches, {len(near)} near misses")
for n in near:
    print(f"  #{n.instruction:<4d} {n.op:12s} {n.reason}")
matched = {r.root.id for r in hits} | {r["first"].id for r in hits}
display(HTML(highlight_svg(session.initial, matched, {n.instruction: n.reason for n in near},
                           title="my_conv_conv_1x1: matches green, near misses amber")))
"""),
        md("""
## Into the pipeline

The library already has this rewrite inside `simplify_algebra` (it runs in `optimize_rewrite`), so
to see the prototype do the work, switch the top-level `optimize_module` entries off and insert
the rule at the start of the `fusion` pipeline. `insert_pass` takes a rule (run to a fixpoint as a
pass); the pass manager checks the result against the reference evaluator of the input model.
"""),
        code("""
from migx_explore.stats import ir_metrics

session.disable("optimize_module")
path = session.insert_pass(my_rule, before="fusion.fuse_pointwise_reduce")
rec = session.trace.find(path)
print(path, "->", rec.diff.summary(), f"({len(rec.matches)} rewrites)")
print("numeric check against the original model:", "ok" if rec.numeric.ok else "FAILED",
      f"(max |error| = {rec.numeric.max_abs:.2e})")

default = Session(parse_onnx(model), name="conv_pairs (default pipelines)")
print("final IR, default pipelines:      ", ir_metrics(default.final()))
print("final IR, prototype, no algebra:  ", ir_metrics(session.final()))
"""),
        md("""
One rewrite, numerically the same program (the error is float32 rounding of the combined
weights), and the same final IR as the default pipelines, where the library's version of this rule
does the fold inside `optimize_rewrite`.
"""),
        md("""
## The library's rule

`simplify_algebra`'s `find_conv_conv_1x1` (`CONV_CONV_1X1`) also takes a constant bias between the
convolutions, expands grouped (even depthwise) convolutions to dense ones and combines non-constant
weights in the graph, as MIGraphX's conv1x1-fusion branch does.
On the same model, and on two built-in models, its near misses show what real networks put between
their convolutions:
"""),
        code("""
from collections import Counter

from migx_explore.compiler.passes.simplify_algebra import CONV_CONV_1X1

print("conv_pairs:", len(rw.matches(main, CONV_CONV_1X1)), "matches")
for n in rw.near_misses(main, CONV_CONV_1X1):
    print(f"  #{n.instruction:<4d} {n.reason}")
for name in ("mobilenet", "yolo"):
    s = Session.from_model(name, numeric=False)
    m = s.trace.find("optimize_rewrite.optimize_module").before.to_program().main
    reasons = Counter(n.reason for n in rw.near_misses(m, CONV_CONV_1X1) if n.op == "convolution")
    print(f"{name}: {len(rw.matches(m, CONV_CONV_1X1))} matches; near misses:")
    for reason, count in reasons.most_common():
        print(f"  {count:3d} x {reason}")
"""),
        md("""
## Step through it, and time it
"""),
        code("""
import migx_explore

ex = migx_explore.explore(session)
ex.goto(path)
ex
"""),
        code("""
if NO_GPU:
    print("Skipping GPU timing:", NO_GPU)
else:
    for label, s in (("default pipelines", default), ("prototype, no algebra", session)):
        t = gpu_bridge.time_session(s, modes=("eager", "graph"), iters=100)
        print(f"{label:24s}", "   ".join(f"{m} {t.modes[m].device_us.median:8.1f} µs" for m in t.modes))
"""),
        *add_an_op(),
    ]


def add_an_op() -> list:
    return [
        md("""
## Adding an op: SiLU, from a rule to a GPU kernel

The YOLO-style model computes SiLU as `x * sigmoid(x)`: two elementwise ops. A fusion that turns
the pair into one `silu` op needs the op first, and an op is one checked contract
(`compiler/op.py`): a shape rule, a reference compute (numpy), traits from a declared set, and its
GPU code: here an expression over ops that already have GPU code. `unary` (from
`compiler/ops/pointwise.py`) supplies the shape rule (same lens and type as the input) and the
`pointwise` trait. `op_contract_problems` says what is missing, if anything; the CI test
`tests/test_op_contract.py` runs it on every op.
"""),
        code("""
from migx_explore.compiler.op import GpuCode
from migx_explore.compiler.ops.pointwise import unary
from migx_explore.gpu.codegen import op_contract_problems


def silu(x):
    x64 = x.astype(np.float64)
    return (x64 / (1.0 + np.exp(-x64))).astype(x.dtype)


unary("silu", silu, gpu=GpuCode.pointwise("mul(x, sigmoid(x))"), doc="x * sigmoid(x) (SiLU, swish)")
print("silu:", op_contract_problems("silu") or "contract complete")
"""),
        md("""
Running that cell again registers the same spec again, which is a no-op. A *different* spec
under the same name is an error that names both definitions (`replace=True` replaces on purpose):
"""),
        code("""
unary("silu", silu, gpu=GpuCode.pointwise("mul(x, sigmoid(x))"), doc="x * sigmoid(x) (SiLU, swish)")
try:
    unary("silu", np.tanh, gpu=GpuCode.pointwise("tanh(x)"))
except ValueError as e:
    print(str(e)[:160], "...")
"""),
        md("""
The fusion is a table row: pattern `x * sigmoid(x)` (either argument order; both `x` bindings
must be the same instruction) and replacement `silu(x)`. It matches every SiLU of the model.
"""),
        code(
            """
x = mt.any_().bind("x")
fuse_silu = rw.row("fuse_silu", mt.name("mul")(mt.either_arg(0, 1)(x, mt.name("sigmoid")(mt.arg(0)(x)))),
                   rw.to("silu", "x"))  # x * sigmoid(x) -> silu(x)
print(fuse_silu)

yolo = Session.from_model(MODEL)
print(len(rw.matches(yolo.initial.to_program().main, fuse_silu)), "matches on", MODEL)
""".replace("MODEL", repr(YOLO))
        ),
        md("""
Inserted before the fusion pipeline, the rule runs as a pass (`RewritePass`); every later pass
sees `silu` like any other elementwise op: `fuse_pointwise` puts it in a pointwise body, the
backend's `fuse_ops` folds it into the epilogue of the convolution before it (a direct kernel, or
the in-place kernel after a BLAS GEMM), and `compile_ops` writes its C++ from the declared
expression. Without a GPU the session compiles for the recording fake backend, which
keeps the generated kernel source.
"""),
        code("""
from migx_explore.gpu import kernel_cache

path = yolo.insert_pass(fuse_silu, before="fusion.fuse_pointwise_reduce")
rec = yolo.trace.find(path)
print(path, f"{len(rec.matches)} rewrites; numeric check against the original model:",
      "ok" if rec.numeric.ok else "FAILED")
failed = [r.path for r in yolo.trace.records if r.status == "failed"]
print(f"{len(yolo.trace.records)} pass records, failed: {failed or 'none'}")

final = yolo.final().to_program()
with_silu = [ins for ins in final.main if any(j.name == "silu" for m in ins.module_inputs for j in m)]
print(dict(Counter(ins.name for ins in with_silu)), "compute silu (BLAS GEMMs in their epilogue kernels)")
direct = next(ins for ins in with_silu if ins.name == "gpu::code_object")
print(kernel_cache.source_for(direct.op["key"]).source)
"""),
        code("""
if NO_GPU:
    print("Skipping the GPU run:", NO_GPU)
else:
    t = gpu_bridge.time_session(yolo, modes=("eager", "graph"), iters=50)
    print("yolo with silu:", "   ".join(f"{m} {t.modes[m].device_us.median:8.1f} µs" for m in t.modes))
"""),
    ]
