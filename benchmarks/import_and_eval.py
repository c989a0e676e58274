"""Import time and reference-evaluation time of every built-in model, plus the import time of a
~15 MB model (an MLP with big initializers), which must stay under a second.

    python benchmarks/import_and_eval.py [--repeat N]

Import is measured from serialized bytes (what reading a file costs, minus the disk), so model
building in Python is not counted."""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from migx_explore import models
from migx_explore.compiler import evaluate, random_inputs
from migx_explore.compiler.onnx import parse_onnx


def big_mlp(width: int = 1400, layers: int = 2, seed: int = 0) -> onnx.ModelProto:
    """MatMul + Add + Relu layers of width x width float32 weights (~7.8 MB each for 1400)."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = rng.standard_normal((width, width), dtype=np.float32) * np.float32(1 / np.sqrt(width))
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(width, np.float32), f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [f"h{i}"]),
        ]
        x = f"h{i}"
    g = helper.make_graph(
        nodes,
        "big_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # dynamic_mlp's symbolic batch dim warns on import

    print(f"{'model':<14} {'MB':>6} {'instrs':>7} {'import ms':>10} {'ref eval ms':>12}")
    for name in models.list_models():
        data = models.get_model(name).SerializeToString()
        t_import = best_of(lambda: parse_onnx(data), args.repeat)
        program = parse_onnx(data)
        feed = random_inputs(program, seed=0)
        t_eval = best_of(lambda: evaluate(program, feed), args.repeat)
        print(f"{name:<14} {len(data) / 1e6:6.1f} {len(program.main):7d} {t_import * 1e3:10.1f} {t_eval * 1e3:12.1f}")

    data = big_mlp().SerializeToString()
    t_big = best_of(lambda: parse_onnx(data), args.repeat)
    print(
        f"\nbig_mlp: {len(data) / 1e6:.1f} MB of ONNX imported in {t_big * 1e3:.0f} ms "
        f"({'under' if t_big < 1.0 else 'OVER'} the 1 s budget)"
    )
    return 0 if t_big < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
