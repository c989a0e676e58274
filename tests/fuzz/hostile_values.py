"""Seeded fed *values* for the hostile-input fuzz (issue 40): every op that reads a shape, size,
count, axis, k, pad or divisor from an input the model is fed, with values in and out of range,
and the ops whose output length depends on the values (NonZero, NonMaxSuppression). Each case is a
one-node model, its feed and its output names; the fuzz runs it through `run` and ONNX Runtime.

Left out on purpose, where ORT itself is wrong or narrower than ONNX: a TopK k of 2^31 or more (ORT
checks k truncated to 32 bits and returns k mod 2^32 values), repeated Reduce axes (ORT
deduplicates them, we refuse), OneHot with float indices (ORT has no kernel for it)."""

from __future__ import annotations

import random

import numpy as np
from onnx import helper

from tests.safety.hostile import I64, F, model_bytes

X43 = np.arange(12, dtype=np.float32).reshape(4, 3)


def _out(name: str, t: int, rank: int) -> tuple[str, int, list[str]]:
    """An output of known rank and unknown dims (ONNX's checker needs the rank)."""
    return (name, t, [f"{name}_{i}" for i in range(rank)])


def _ints(rng: random.Random, n: int, lo: int, hi: int, extreme: float = 0.1) -> np.ndarray:
    # Extremes that overflow or are negative: every runtime refuses them before allocating. A
    # size such as 2^31 would be a legal 8 GiB tensor, which ORT (in the same process) allocates.
    pool = [2**62, -(2**62), -(2**31) - 1, 2**63 - 1]
    return np.array([rng.choice(pool) if rng.random() < extreme else rng.randint(lo, hi) for _ in range(n)], np.int64)


def _one(op: str, ins: list[str], outs: list[str], **attrs) -> list:
    return [helper.make_node(op, ins, outs, **attrs)]


def _shape_ops(rng: random.Random, op: str):
    if op == "Reshape":
        r = rng.randint(1, 3)
        s = _ints(rng, r, -2, 13)
        return _one(op, ["X", "S"], ["Y"]), [("X", F, [4, 3]), ("S", I64, [r])], [_out("Y", F, r)], {"X": X43, "S": s}
    if op == "Expand":
        r = rng.randint(2, 3)
        x = X43[:, :1] if rng.random() < 0.5 else X43[:1]
        s = _ints(rng, r, -1, 5)
        ins = [("X", F, list(x.shape)), ("S", I64, [r])]
        return _one(op, ["X", "S"], ["Y"]), ins, [_out("Y", F, r)], {"X": np.ascontiguousarray(x), "S": s}
    if op == "Tile":
        s = _ints(rng, 2, -1, 3)
        return _one(op, ["X", "R"], ["Y"]), [("X", F, [4, 3]), ("R", I64, [2])], [_out("Y", F, 2)], {"X": X43, "R": s}
    if op == "ConstantOfShape":
        r = rng.randint(1, 3)
        val = helper.make_tensor("v", F, [1], [2.5])
        return _one(op, ["S"], ["Y"], value=val), [("S", I64, [r])], [_out("Y", F, r)], {"S": _ints(rng, r, -1, 4)}
    if op == "Range":
        a, b, c = (np.array(v, np.int64) for v in _ints(rng, 3, -5, 5, extreme=0.03))
        ins = [("a", I64, []), ("b", I64, []), ("c", I64, [])]
        return _one(op, ["a", "b", "c"], ["Y"]), ins, [_out("Y", I64, 1)], {"a": a, "b": b, "c": c}
    raise ValueError(op)


def _layout_ops(rng: random.Random, op: str):
    if op == "Pad":
        mode = rng.choice(["constant", "reflect", "edge", "wrap"])
        ins = [("X", F, [4, 3]), ("P", I64, [4])]
        return _one(op, ["X", "P"], ["Y"], mode=mode), ins, [_out("Y", F, 2)], {"X": X43, "P": _ints(rng, 4, -5, 5)}
    if op == "Split":
        ins = [("X", F, [4, 3]), ("S", I64, [2])]
        outs = [_out("Y1", F, 2), _out("Y2", F, 2)]
        return _one(op, ["X", "S"], ["Y1", "Y2"], axis=1), ins, outs, {"X": X43, "S": _ints(rng, 2, -1, 4)}
    if op == "Slice":
        names = ["X", "S", "E", "A", "P"]
        ins = [("X", F, [4, 3])] + [(n, I64, [1]) for n in names[1:]]
        feed = {
            "X": X43,
            "S": _ints(rng, 1, -6, 6, 0.2),
            "E": _ints(rng, 1, -6, 6, 0.2),
            "A": _ints(rng, 1, -3, 2, 0.0),
            "P": np.array([rng.choice([-3, -2, -1, 0, 1, 2, 3, 2**62])], np.int64),
        }
        return _one(op, names, ["Y"]), ins, [_out("Y", F, 2)], feed
    if op == "Unsqueeze":
        ins = [("X", F, [4, 3]), ("A", I64, [1])]
        return _one(op, ["X", "A"], ["Y"]), ins, [_out("Y", F, 3)], {"X": X43, "A": _ints(rng, 1, -4, 3, 0.0)}
    if op == "ReduceSum":
        ins = [("X", F, [4, 3]), ("A", I64, [1])]
        return _one(op, ["X", "A"], ["Y"]), ins, [_out("Y", F, 2)], {"X": X43, "A": _ints(rng, 1, -3, 2, 0.05)}
    raise ValueError(op)


def _count_ops(rng: random.Random, op: str):
    if op == "TopK":
        ins = [("X", F, [4, 3]), ("K", I64, [1])]
        outs = [_out("V", F, 2), _out("J", I64, 2)]
        k = np.array([rng.randint(-1, 4)], np.int64)
        return _one(op, ["X", "K"], ["V", "J"], axis=1), ins, outs, {"X": X43, "K": k}
    if op in ("CumSum", "Trilu"):
        lo, hi = (-3, 2) if op == "CumSum" else (-5, 5)
        ins = [("X", F, [4, 3]), ("A", I64, [])]
        feed = {"X": X43, "A": np.array(_ints(rng, 1, lo, hi, 0.05)[0])}
        return _one(op, ["X", "A"], ["Y"]), ins, [_out("Y", F, 2)], feed
    if op == "OneHot":
        vals = helper.make_node("Constant", [], ["vals"], value=helper.make_tensor("v", F, [2], [0.0, 1.0]))
        nodes = [vals, helper.make_node(op, ["I", "D", "vals"], ["Y"])]
        feed = {"I": _ints(rng, 3, -5, 5, 0.0), "D": _ints(rng, 1, -1, 4, 0.0)}
        return nodes, [("I", I64, [3]), ("D", I64, [1])], [_out("Y", F, 2)], feed
    if op in ("Div", "Mod"):
        feed = {"A": _ints(rng, 3, -9, 9, 0.0), "D": _ints(rng, 3, -2, 2, 0.0)}
        return _one(op, ["A", "D"], ["Y"]), [("A", I64, [3]), ("D", I64, [3])], [_out("Y", I64, 1)], feed
    raise ValueError(op)


def _data_dependent(rng: random.Random, op: str):
    if op == "NonZero":
        x = np.array([[rng.choice([0.0, 0.0, 1.0, -2.0]) for _ in range(3)] for _ in range(4)], np.float32)
        return _one(op, ["X"], ["Y"]), [("X", F, [4, 3])], [_out("Y", I64, 2)], {"X": x}
    if op == "NonMaxSuppression":
        n = rng.randint(1, 5)
        corner = np.array([[rng.uniform(0, 2), rng.uniform(0, 2)] for _ in range(n)], np.float32)
        boxes = np.concatenate([corner, corner + np.float32(rng.uniform(0.5, 1.5))], axis=1)[None]
        scores = np.array([[[rng.random() for _ in range(n)]]], np.float32)
        feed = {
            "B": boxes,
            "S": scores,
            "M": _ints(rng, 1, -1, 6, 0.1),
            "I": np.array([rng.choice([0.0, 0.3, 0.5, 1.0, 1.5, -0.1, float("nan")])], np.float32),
            "T": np.array([rng.choice([0.0, 0.2, 0.6, float("nan"), -1.0])], np.float32),
        }
        ins = [("B", F, [1, n, 4]), ("S", F, [1, 1, n]), ("M", I64, [1]), ("I", F, [1]), ("T", F, [1])]
        return _one(op, ["B", "S", "M", "I", "T"], ["Y"]), ins, [_out("Y", I64, 2)], feed
    if op == "Resize":
        pool = [0.5, 1.0, 2.0, 3.0, 0.0, -1.0, float("nan")]
        sc = np.array([1, 1] + [rng.choice(pool) for _ in range(2)], np.float32)
        x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
        nodes = _one(op, ["X", "", "S"], ["Y"], mode=rng.choice(["nearest", "linear"]))
        return nodes, [("X", F, [1, 1, 2, 2]), ("S", F, [4])], [_out("Y", F, 4)], {"X": x, "S": sc}
    raise ValueError(op)


FAMILIES = {
    **{op: _shape_ops for op in ("Reshape", "Expand", "Tile", "ConstantOfShape", "Range")},
    **{op: _layout_ops for op in ("Pad", "Split", "Slice", "Unsqueeze", "ReduceSum")},
    **{op: _count_ops for op in ("TopK", "CumSum", "Trilu", "OneHot", "Div", "Mod")},
    **{op: _data_dependent for op in ("NonZero", "NonMaxSuppression", "Resize")},
}


def value_case(rng: random.Random) -> tuple[str, bytes, dict[str, np.ndarray], list[str]]:
    """(op, model, feed, output names) for one seeded case."""
    op = rng.choice(sorted(FAMILIES))
    nodes, ins, outs, feed = FAMILIES[op](rng, op)
    opset = 19 if op == "Pad" else 18
    return op, model_bytes(nodes, ins, outs, opset=opset), feed, [o[0] for o in outs]
