"""Issue 14: fusing a long elementwise chain stays near-linear (benchmarks/chain_scaling.py times
it); these tests pin what the linear-time rewrite must keep: one kernel, the same numbers, and
provenance that names every original op while the fused body's origins stay small."""

from __future__ import annotations

import numpy as np

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.pass_infra import make_pass, run_passes

OPS = ["relu", "sigmoid", "tanh", "neg", "abs"]


def chain_text(n: int) -> str:
    lines = [
        "x = @param:x -> float_type, {4, 4}",
        "c = @literal{0.5} -> float_type, {1}",
        "@2 = multibroadcast[out_lens={4, 4}](c) -> float_type, {4, 4}, {0, 0}",
    ]
    prev = "x"
    for k in range(n):
        name = f"@{k + 3}"
        op = OPS[k % len(OPS)]
        args = f"{prev},@2" if k % 3 == 2 else prev
        lines.append(f"{name} = {'add' if k % 3 == 2 else op}({args}) -> float_type, {{4, 4}}")
        prev = name
    lines.append(f"@{n + 3} = @return({prev})")
    return "\n".join(lines)


def test_long_chain_fuses_into_one_kernel_with_full_provenance():
    text = chain_text(300)
    p, q = parse(text), parse(text)
    originals = {i.id for i in q.main if not i.is_builtin() and i.name != "multibroadcast"}
    run_passes(q, [make_pass("fuse_pointwise"), make_pass("dead_code_elimination")])
    fused = [i for i in q.main if i.name == "pointwise"]
    assert len(fused) == 1 and len(q.modules) == 2
    assert originals <= set(fused[0].origin)  # "where did this node go" finds every op
    body = fused[0].module_inputs[0]
    assert max(len(i.origin) for i in body) <= 4  # body copies come from one op each, not the chain
    feeds = {"x": np.linspace(-2, 2, 16, dtype=np.float32).reshape(4, 4)}
    np.testing.assert_allclose(evaluate(q, feeds)[0], evaluate(p, feeds)[0], rtol=1e-6)
