"""A seeded generator of malformed inputs for the CLI: ONNX models (truncation, byte flips, field
edits on shapes, attributes, dtypes, opsets, external data and graph structure) and saved programs
(truncation, byte flips, member and manifest edits with recomputed hashes).

Every case is reproducible from (seed, index): `model_case(seed, i)` always builds the same bytes,
so a failing case is re-run alone with its id.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


@dataclass
class Case:
    """One malformed input: the model bytes, plus files to put beside it (external data)."""

    name: str
    data: bytes
    extra: dict[str, bytes | str] = field(default_factory=dict)  # file name -> bytes, or "fifo"/"dir"

    def write(self, folder: Path, file_name: str = "m.onnx") -> Path:
        for name, content in self.extra.items():
            target = folder / name
            if content == "fifo":
                os.mkfifo(target)
            elif content == "dir":
                target.mkdir()
            else:
                target.write_bytes(content)  # type: ignore[arg-type]
        path = folder / file_name
        path.write_bytes(self.data)
        return path


# ---- valid base models ---------------------------------------------------------------------------
def _model(nodes, inputs, outputs, inits=(), opset: int = 18) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "fuzz", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def _vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def _init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def base_models() -> list[onnx.ModelProto]:
    """Small valid models covering the op families the mutations poke at."""
    x4 = [_vi("x", F, [1, 3, 4, 4])]
    return [
        _model(
            [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["y"])],
            [_vi("x", F, [2, 3])],
            [_vi("y", F, [2, 3])],
        ),
        _model(
            [
                helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["y"]),
            ],
            x4,
            [_vi("y", F, [1, 2, 4, 4])],
            [_init("w", np.ones([2, 3, 3, 3], np.float32)), _init("b", np.zeros([2], np.float32))],
        ),
        _model(
            [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
            [_vi("x", F, [2, 4])],
            [_vi("y", F, [2, 5])],
            [_init("w", np.ones([4, 5], np.float32)), _init("b", np.ones([5], np.float32))],
        ),
        _model(
            [helper.make_node("Pad", ["x", "p"], ["y"], mode="constant")],
            x4,
            [_vi("y", F, [1, 3, 6, 6])],
            [_init("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))],
        ),
        _model(
            [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
            x4,
            [_vi("y", F, [16, 3])],
            [_init("s", np.array([3, 16], np.int64))],
        ),
        _model(
            [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
            [_vi("x", F, [2, 5])],
            [_vi("y", F, [2, 2])],
            [_init("i", np.array([0, 3], np.int64))],
        ),
        _model(
            [helper.make_node("ReduceMean", ["x", "ax"], ["y"], keepdims=1)],
            x4,
            [_vi("y", F, [1, 3, 1, 1])],
            [_init("ax", np.array([2, 3], np.int64))],
        ),
        _model(
            [helper.make_node("Concat", ["x", "x"], ["c"], axis=1), helper.make_node("Softmax", ["c"], ["y"], axis=-1)],
            x4,
            [_vi("y", F, [1, 6, 4, 4])],
        ),
        _model(
            [helper.make_node("Div", ["x", "d"], ["q"]), helper.make_node("Cast", ["q"], ["y"], to=F)],
            [_vi("x", I32, [2, 3])],
            [_vi("y", F, [2, 3])],
            [_init("d", np.array([2], np.int32))],
        ),
        _model(
            [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
            x4,
            [_vi("y", F, [1, 3, 2, 2])],
        ),
        _model(
            [helper.make_node("Slice", ["x", "st", "en"], ["y"])],
            [_vi("x", F, [4, 6])],
            [_vi("y", F, [2, 6])],
            [_init("st", np.array([1], np.int64)), _init("en", np.array([3], np.int64))],
        ),
        _model(
            [
                helper.make_node("ConstantOfShape", ["s"], ["c"], value=_init("v", np.array([1.5], np.float32))),
                helper.make_node("Add", ["x", "c"], ["y"]),
            ],
            [_vi("x", F, [2, 3])],
            [_vi("y", F, [2, 3])],
            [_init("s", np.array([2, 3], np.int64))],
        ),
    ]


# ---- mutations -----------------------------------------------------------------------------------
HUGE = [1 << 20, 1 << 31, 1 << 40, 2**62, -1, -100, 0]
ODD_INTS = [-(2**63), -1, 0, 1, 3, 99, 2**31, 2**62]


def _tensor_values(m: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return list(m.graph.input) + list(m.graph.output)


def mut_dims(m, r):
    vi = r.choice(_tensor_values(m))
    dims = vi.type.tensor_type.shape.dim
    if not dims:
        return
    d = r.choice(dims)
    choice = r.randrange(3)
    if choice == 0:
        d.dim_value = r.choice(HUGE)
    elif choice == 1:
        d.dim_param = r.choice(["batch", "", "N x"])
    else:
        vi.type.tensor_type.shape.dim.add().dim_value = r.choice([1, 7, 1 << 30])


def mut_elem_type(m, r):
    targets = _tensor_values(m) + list(m.graph.initializer)
    t = r.choice(targets)
    code = r.choice([0, 2, 7, 8, 9, 10, 11, 14, 16, 17, 23, 99, 255])
    if isinstance(t, onnx.TensorProto):
        t.data_type = code
    else:
        t.type.tensor_type.elem_type = code


def mut_attribute(m, r):
    nodes = list(m.graph.node)
    n = r.choice(nodes)
    if n.attribute and r.random() < 0.6:
        a = r.choice(n.attribute)
        kind = r.randrange(4)
        if kind == 0:
            n.attribute.remove(a)
        elif kind == 1:
            a.CopyFrom(helper.make_attribute(a.name, r.choice(ODD_INTS)))
        elif kind == 2:
            a.CopyFrom(helper.make_attribute(a.name, [r.choice(ODD_INTS) for _ in range(r.randrange(1, 9))]))
        else:
            a.CopyFrom(helper.make_attribute(a.name, r.choice(["", "bogus", "\x00"])))
    else:
        name = r.choice(["axis", "pads", "perm", "kernel_shape", "strides", "to", "mode", "keepdims", "value"])
        value = r.choice([r.choice(ODD_INTS), [r.choice(ODD_INTS)] * r.randrange(1, 6), "wrap", 1.5])
        n.attribute.append(helper.make_attribute(name, value))


def mut_initializer(m, r):
    if not m.graph.initializer:
        return mut_structure(m, r)
    t = r.choice(m.graph.initializer)
    kind = r.randrange(5)
    if kind == 0:
        t.raw_data = t.raw_data[: r.randrange(len(t.raw_data) + 1)] if t.raw_data else b"\x01\x02\x03"
    elif kind == 1:
        t.dims[:] = [r.choice(HUGE) for _ in range(r.randrange(0, 4))]
    elif kind == 2:
        t.raw_data = bytes(r.randrange(256) for _ in range(r.randrange(0, 40)))
    elif kind == 3:  # pads / axes / shapes out of range
        arr = numpy_helper.to_array(t)
        if arr.dtype.kind == "i":
            vals = np.array([r.choice([-100, -5, 0, 7, 100, 2**40, -(2**40)]) for _ in range(arr.size)], arr.dtype)
            t.CopyFrom(numpy_helper.from_array(vals.reshape(arr.shape), t.name))
    else:
        del m.graph.initializer[m.graph.initializer[:].index(t)]


def mut_opset(m, r):
    kind = r.randrange(4)
    if kind == 0:
        m.opset_import[0].version = r.choice([0, 1, 6, 99, 10**6, -3])
    elif kind == 1:
        m.opset_import[0].domain = r.choice(["ai.onnx.ml", "com.microsoft", "weird"])
    elif kind == 2:
        del m.opset_import[:]
    else:
        m.ir_version = r.choice([0, 1, 3, 99, -1])


def mut_structure(m, r):
    g = m.graph
    kind = r.randrange(9)
    if kind == 0 and g.node:  # a node reading an undefined value
        r.choice(g.node).input.append("undefined_value")
    elif kind == 1:  # duplicate output
        g.output.append(copy.deepcopy(g.output[0]))
    elif kind == 2:  # empty graph
        del g.node[:]
        del g.output[:]
    elif kind == 3 and g.node:  # a cycle
        a = g.node[0]
        a.input.append(g.node[-1].output[0])
    elif kind == 4 and g.node:  # an unsupported or unknown op
        r.choice(g.node).op_type = r.choice(["FancyOp", "Loop", "If", "Scan", "", "relu"])
    elif kind == 5 and g.node:  # wrong input count
        n = r.choice(g.node)
        if r.random() < 0.5 and n.input:
            del n.input[-1]
        else:
            n.input.extend([n.input[0]] * r.randrange(1, 4) if n.input else ["x"])
    elif kind == 6:  # output nobody produces
        g.output[0].name = "nowhere"
    elif kind == 7 and g.node:  # two nodes writing the same value
        g.node.append(copy.deepcopy(g.node[-1]))
    else:  # input without a type
        g.input[0].type.Clear()


def mut_external(m, r) -> dict[str, bytes | str]:
    """Move the first initializer's data into an external file with a bad location or range."""
    if not m.graph.initializer:
        mut_structure(m, r)
        return {}
    t = m.graph.initializer[0]
    raw = numpy_helper.to_array(t).tobytes()
    t.ClearField("raw_data")
    for fld in ("float_data", "int32_data", "int64_data"):
        t.ClearField(fld)
    t.data_location = TensorProto.EXTERNAL
    kind = r.randrange(8)
    info = {"location": "w.bin"}
    extra: dict[str, bytes | str] = {"w.bin": raw}
    if kind == 0:
        info["offset"] = str(r.choice([-100, 2**62, len(raw) + 1]))
    elif kind == 1:
        info["length"] = r.choice(["abc", "-1", str(2**62), "1.5", ""])
    elif kind == 2:
        info["location"] = r.choice(["../escape.bin", "/etc/passwd", "", "a\x00b", "missing.bin"])
    elif kind == 3:
        extra = {"w.bin": "fifo"}
    elif kind == 4:
        extra = {"w.bin": "dir"}
    elif kind == 5:
        extra = {"w.bin": raw[: len(raw) // 2]}
        info["length"] = str(len(raw))
    elif kind == 6:
        info["offset"] = r.choice(["x", "0x10", " "])
    else:
        info["checksum"] = "whatever"
        info["length"] = str(len(raw))
    for k, v in info.items():
        t.external_data.add(key=k, value=v)
    return extra


FIELD_MUTATIONS: list[Callable] = [mut_dims, mut_elem_type, mut_attribute, mut_initializer, mut_opset, mut_structure]


def model_case(seed: int, index: int) -> Case:
    """Malformed model number `index` of the stream `seed` (same arguments, same bytes)."""
    r = random.Random(seed * 1_000_003 + index)
    bases = _BASES or _BASES.extend(base_models()) or _BASES
    m = copy.deepcopy(r.choice(bases))
    kind = index % 8
    extra: dict[str, bytes | str] = {}
    if kind == 0:  # truncation
        data = m.SerializeToString()
        return Case(f"truncate[{seed}:{index}]", data[: r.randrange(0, max(len(data), 1))])
    if kind == 1:  # random byte edits
        data = bytearray(m.SerializeToString())
        for _ in range(r.randrange(1, 6)):
            data[r.randrange(len(data))] = r.randrange(256)
        return Case(f"bytes[{seed}:{index}]", bytes(data))
    if kind == 2:
        extra = mut_external(m, r)
        name = "external"
    else:
        muts = [r.choice(FIELD_MUTATIONS) for _ in range(r.randrange(1, 3))]
        for mut in muts:
            with contextlib.suppress(Exception):  # a mutation an earlier one made impossible is skipped
                mut(m, r)
        name = "+".join(f.__name__[4:] for f in muts)
    return Case(f"{name}[{seed}:{index}]", m.SerializeToString(), extra)


_BASES: list[onnx.ModelProto] = []


# ---- saved programs ------------------------------------------------------------------------------
def saved_program_case(valid: bytes, seed: int, index: int) -> bytes:
    """A malformed variant of a valid saved program file."""
    import hashlib
    import io
    import zipfile

    r = random.Random(seed * 7_000_003 + index)
    kind = index % 5
    if kind == 0:
        return valid[: r.randrange(0, len(valid))]
    if kind == 1:
        data = bytearray(valid)
        for _ in range(r.randrange(1, 8)):
            data[r.randrange(len(data))] = r.randrange(256)
        return bytes(data)
    with zipfile.ZipFile(io.BytesIO(valid)) as z:
        members = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(members.pop("manifest.json"))
    if kind == 2:  # edit the manifest or the resume metadata
        target = r.choice([manifest, manifest["metadata"], manifest["members"], manifest["literals"]])
        if target:
            key = r.choice(sorted(target))
            target[key] = r.choice([None, [], {}, "x", -1, 2**62, [1, 2], {"a": 1}, [[9, 9]], True])
    elif kind == 3:  # edit a member (the attacker recomputes hashes)
        name = r.choice(sorted(members))
        body = members[name]
        if name.endswith(".json"):
            body = r.choice([b"[]", b"{}", b"null", b'{"main": [[1]]}', b'{"main": "x"}', body[: len(body) // 2]])
        elif name == "program.txt":
            lines = body.decode(errors="replace").splitlines()
            if lines:
                i = r.randrange(len(lines))
                lines[i] = r.choice(
                    [
                        "",
                        "@9 = bogus(@1) -> float_type, {2}",
                        lines[i][: len(lines[i]) // 2],
                        lines[i].replace("{", "{-"),
                        "x = @param:x -> float_type, {99999999999}",
                    ]
                )
            body = "\n".join(lines).encode()
        else:
            body = body[: r.randrange(len(body) + 1)]
        members[name] = body
        if name in manifest.get("members", {}):
            manifest["members"][name] = {"sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}
    else:  # drop a member, or list one that is not there
        if r.random() < 0.5 and members:
            del members[r.choice(sorted(members))]
        else:
            manifest["members"]["ghost.bin"] = {"sha256": "0" * 64, "size": 4}
            manifest["blobs"].append("ghost")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        for n, body in members.items():
            z.writestr(n, body)
    return out.getvalue()
