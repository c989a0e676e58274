"""Seeded hostile inputs for tests/fuzz/test_fuzz_hostile.py (issue 40): invalid UTF-8 in every
string field of a model, fed indices out of range, fed shape / size / k / axis / pad / divisor
values and data-dependent output lengths (hostile_values.py), the same index and value cases on
the GPU path (`gpu`, the fake backend), wrong-typed feeds (a frozen shape operand too), hostile
pass-option values and --out paths with dots. `case(kind, seed, i)` rebuilds any one case from its name."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from tests.fuzz.hostile_values import value_case
from tests.safety.hostile import I64, F, model_bytes

KINDS = ("utf8", "indices", "values", "gpu", "feed_type", "option", "out_path")

# every token is 6 bytes; a case swaps one for 6 bytes that are not UTF-8
TOKENS = {
    "node name": b"NODE_A",
    "op input": b"DATA_D",
    "graph input": b"DATA_D",
    "graph output": b"OUT__Y",
    "op output": b"OUT__Y",
    "initializer": b"INIT_W",
    "node metadata key": b"MKEY_1",
    "node namespace": b"MVAL_1",
    "model metadata": b"MODL_M",
    "doc string": b"DOCS_S",
    "producer": b"PROD_P",
    "graph name": b"GRPH_G",
    "dim_param": b"DIMP_N",
    "value_info": b"VINF_V",
}
BAD_BYTES = [b"\xff\xfe\xfd\xfc\xfb\xfa", b"ab\xc3(cd", b"\xed\xa0\x80xyz", b"\xc0\xafabcd", b"abcd\xf8\x88"]


def utf8_model() -> bytes:
    g = helper.make_graph(
        [
            helper.make_node("Add", ["DATA_D", "INIT_W"], ["VINF_V"], name="NODE_A", doc_string="DOCS_S"),
            helper.make_node("Relu", ["VINF_V"], ["OUT__Y"], name="relu"),
        ],
        "GRPH_G",
        [helper.make_tensor_value_info("DATA_D", F, ["DIMP_N", 3])],
        [helper.make_tensor_value_info("OUT__Y", F, ["DIMP_N", 3])],
        initializer=[helper.make_tensor("INIT_W", F, [3], [1.0, 2.0, 3.0])],
        value_info=[helper.make_tensor_value_info("VINF_V", F, ["DIMP_N", 3])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9, producer_name="PROD_P")
    m.graph.node[0].metadata_props.add(key="MKEY_1", value="MVAL_1")
    m.metadata_props.add(key="MODL_M", value="x")
    return m.SerializeToString()


D43 = np.arange(12, dtype=np.float32).reshape(4, 3)


def _idx(rng: random.Random, lo: int, hi: int) -> int:
    """Mostly a small index; sometimes one past 32 bits, which a narrowing to int32 would wrap into
    range (2^32 + 1 -> 1)."""
    if rng.random() < 0.08:
        return rng.choice([1, -1]) * 2**32 + rng.randint(-2, 2)
    return rng.randint(lo, hi)


def _index_case(rng: random.Random) -> tuple[bytes, dict[str, np.ndarray], list[str]]:
    op = rng.choice(["Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND", "OneHot"])
    lo, hi = -9, 9
    if op == "Gather":
        axis = rng.choice([0, 1, -1])
        k = rng.randint(1, 4)
        out = [k, 3] if axis == 0 else [4, k]
        idx = np.array([_idx(rng, lo, hi) for _ in range(k)], np.int64)
        m = model_bytes(
            [helper.make_node(op, ["D", "I"], ["Y"], axis=axis)], [("D", F, [4, 3]), ("I", I64, [k])], [("Y", F, out)]
        )
        return m, {"D": D43, "I": idx}, ["Y"]
    if op == "GatherElements":
        axis = rng.choice([0, 1])
        idx = np.array([[_idx(rng, lo, hi) for _ in range(3)] for _ in range(2)], np.int64)
        m = model_bytes(
            [helper.make_node(op, ["D", "I"], ["Y"], axis=axis)],
            [("D", F, [4, 3]), ("I", I64, [2, 3])],
            [("Y", F, [2, 3])],
        )
        return m, {"D": D43, "I": idx}, ["Y"]
    if op == "GatherND":
        idx = np.array([[_idx(rng, lo, hi), _idx(rng, lo, hi)] for _ in range(2)], np.int64)
        m = model_bytes(
            [helper.make_node(op, ["D", "I"], ["Y"])], [("D", F, [4, 3]), ("I", I64, [2, 2])], [("Y", F, [2])]
        )
        return m, {"D": D43, "I": idx}, ["Y"]
    if op == "ScatterElements":
        idx = np.array([[_idx(rng, lo, hi) for _ in range(3)]], np.int64)
        upd = -np.ones((1, 3), np.float32)
        m = model_bytes(
            [helper.make_node(op, ["D", "I", "U"], ["Y"], axis=0)],
            [("D", F, [4, 3]), ("I", I64, [1, 3]), ("U", F, [1, 3])],
            [("Y", F, [4, 3])],
        )
        return m, {"D": D43, "I": idx, "U": upd}, ["Y"]
    if op == "ScatterND":
        idx = np.array([[_idx(rng, lo, hi)]], np.int64)
        m = model_bytes(
            [helper.make_node(op, ["D", "I", "U"], ["Y"])],
            [("D", F, [4, 3]), ("I", I64, [1, 1]), ("U", F, [1, 3])],
            [("Y", F, [4, 3])],
        )
        return m, {"D": D43, "I": idx, "U": -np.ones((1, 3), np.float32)}, ["Y"]
    depth = rng.randint(1, 5)
    nodes = [
        helper.make_node("Constant", [], ["depth"], value=helper.make_tensor("d", I64, [], [depth])),
        helper.make_node("Constant", [], ["vals"], value=helper.make_tensor("v", F, [2], [0.0, 1.0])),
        helper.make_node("OneHot", ["I", "depth", "vals"], ["Y"]),
    ]
    idx = np.array([_idx(rng, lo, hi) for _ in range(3)], np.int64)
    return model_bytes(nodes, [("I", I64, [3])], [("Y", F, [3, depth])]), {"I": idx}, ["Y"]


FEED_TYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "bool", "int8"]


def _feed_type_case(rng: random.Random) -> tuple[bytes, dict[str, np.ndarray], list[str]]:
    if rng.random() < 0.25:  # a shape operand the importer freezes to the fed value: typed the same
        m = model_bytes(
            [helper.make_node("Reshape", ["X", "S"], ["Y"])], [("X", F, [4, 3]), ("S", I64, [2])], [("Y", F, [3, 4])]
        )
        s = np.array([3, 4]).astype(rng.choice(["int64", "int32", "float64", "float32", "uint8", "int16"]))
        return m, {"X": D43.astype(rng.choice(["float32", "float32", "float64"])), "S": s}, ["Y"]
    m = model_bytes(
        [helper.make_node("Gather", ["D", "I"], ["Y"], axis=0)], [("D", F, [4, 3]), ("I", I64, [2])], [("Y", F, [2, 3])]
    )
    dt = rng.choice(FEED_TYPES)
    it = rng.choice(["int64", "int64", "int32", "uint8", "float32", "int16"])
    return m, {"D": D43.astype(dt), "I": np.array([rng.randint(0, 3), rng.randint(-4, 3)]).astype(it)}, ["Y"]


# (pass, option, kind) a spec can set; the fuzz sets them inside the pipeline that holds the pass
OPTIONS = [
    ("fusion", "fuse_pointwise_reduce", "split_size"),
    ("fusion", "fuse_pointwise_reduce", "enable_multi_output"),
    (None, "fuse_pointwise", "enable_rewrite_reshapes"),
    (None, "fuse_reduce", "enable_rewrite_reshapes"),
    ("optimize_rewrite", "simplify_reshapes", "depth"),
    ("optimize_rewrite", "simplify_reshapes", "enable_gather_rewrite"),
    (None, "split_reduce", "split_size"),
    (None, "rewrite_topk", "split_threshold"),
    (None, "capture_arguments", "ins_names"),
    (None, "fuse_attention", "max_head_dim"),
    (None, "schedule", "nstreams"),
]
HOSTILE_VALUES = [
    "9" * 5000,
    "9" * 40,
    "-1",
    "-0",
    "0",
    "1",
    "65280",
    "2147483648",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "1e308",
    "1.5",
    "x",
    "true",
    "false",
    "none",
    '""',
    '"x"',
    "{}",
    "{a, b}",
    "{1, 2}",
    "(",
    ")",
    "{",
    "}",
    "1)(2",
    "__import__('os').system('true')",
    "lambda: 0",
    "é",
    "\u202e",
    "a=b",
    "1,2",
    "'",
    "\\",
    "$(id)",
    "`id`",
    "0x10",
    "1_000",
    "+5",
    "  7  ",
    "\t",
    "1024",
]


@dataclass
class Case:
    kind: str
    name: str
    model: bytes = b""
    feed: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    field_name: str = ""
    spec: str = ""
    pass_name: str = ""
    option: str = ""
    out_parts: list[str] = field(default_factory=list)


def case(kind: str, seed: int, i: int) -> Case:
    rng = random.Random(f"{kind}:{seed}:{i}")
    name = f"{kind}[{seed}:{i}]"
    if kind == "utf8":
        fld = rng.choice(sorted(TOKENS))
        token, bad = TOKENS[fld], rng.choice(BAD_BYTES)
        m = utf8_model()
        # one occurrence (the first) or all of them: a name may be used consistently or not
        m = m.replace(token, bad) if rng.random() < 0.5 else m.replace(token, bad, 1)
        feed = {"DATA_D": np.ones((2, 3), np.float32)}
        return Case(kind, f"{name} {fld}", model=m, feed=feed, field_name=fld)
    if kind == "indices":
        m, feed, outs = _index_case(rng)
        return Case(kind, name, model=m, feed=feed, outputs=outs)
    if kind == "values":
        op, m, feed, outs = value_case(rng)
        return Case(kind, f"{name} {op}", model=m, feed=feed, outputs=outs)
    if kind == "gpu":  # the index and value cases through `run --target gpu` (fake backend)
        if rng.random() < 0.5:
            m, feed, outs = _index_case(rng)
            return Case(kind, f"{name} indices", model=m, feed=feed, outputs=outs)
        op, m, feed, outs = value_case(rng)
        return Case(kind, f"{name} {op}", model=m, feed=feed, outputs=outs)
    if kind == "feed_type":
        m, feed, outs = _feed_type_case(rng)
        return Case(kind, name, model=m, feed=feed, outputs=outs)
    if kind == "option":
        pipeline, pass_name, option = rng.choice(OPTIONS)
        value = rng.choice(HOSTILE_VALUES)
        call = f"{pass_name}({option}={value})"
        spec = f"{pipeline}{{{call}}}" if pipeline else call
        return Case(kind, f"{name} {spec[:60]!r}", spec=spec, pass_name=pass_name, option=option)
    if kind == "out_path":
        parts = [rng.choice(["run.1", "a.b.c", "x", ".hidden", "v1.0", "data"]) for _ in range(rng.randint(1, 3))]
        leaf = rng.choice(["out", "out.npz", "out.1", "o.u.t", "study", "x.npz.npz", ".npz"])
        return Case(kind, f"{name} {'/'.join(parts + [leaf])}", out_parts=parts + [leaf])
    raise ValueError(kind)


TensorProto  # noqa: B018 - re-exported for callers that build more cases
