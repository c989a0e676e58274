"""How things look: op categories, the one colour table keyed by category, diff-status colours,
and the short text pieces (shapes, key attributes, GPU launch info) that go into node labels.

Everything here is plain data and string formatting, so the display model can be built and
tested without graphviz.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape

# ---- categories ----------------------------------------------------------------------------------
CONV_GEMM = "conv_gemm"
POINTWISE = "pointwise"
REDUCE = "reduce"
DATA = "data_movement"
GPU_KERNEL = "gpu_kernel"
ALLOCATION = "allocation"
PARAM = "param"
LITERAL = "literal"
RETURN = "return"
OTHER = "other"
SUMMARY = "summary"  # "… N more" nodes standing for hidden instructions
CHAIN = "chain"  # a collapsed run of unchanged instructions
REF = "ref"  # a copy of a widely used node drawn beside one of its users (see scale.split_hubs)

_CONV_GEMM_OPS = frozenset(
    {"convolution", "convolution_backwards", "quant_convolution", "dot", "quant_dot", "gemm", "deconvolution", "group"}
)  # group: fuse_attention's two matmuls
# Ops that move or re-layout data without arithmetic; view ops are found by their trait.
_DATA_OPS = frozenset(
    {
        "contiguous",
        "concat",
        "gather",
        "gathernd",
        "pad",
        "layout",
        "reverse",
        "get_tuple_elem",
        "resize",
        "copy",
        "hip::copy",
        "hip::copy_to_gpu",
        "hip::copy_from_gpu",
        "hip::hip_copy_literal",
        "hip::sync_stream",
    }
)
_ALLOC_OPS = frozenset({"allocate", "hip::allocate", "load", "hip::hip_allocate_memory"})


def category_of(op: Op | None, name: str) -> str:
    """The display category of an op. `op` may be None (a name only, e.g. from a summary)."""
    if name == "@param":
        return PARAM
    if name == "@literal":
        return LITERAL
    if name == "@return":
        return RETURN
    if name in _ALLOC_OPS or name.endswith("::allocate"):
        return ALLOCATION
    # Lowered kernels come before trait checks: a gpu:: op is a launch whatever it computes.
    if name.startswith("gpu::"):
        return GPU_KERNEL
    if name in _CONV_GEMM_OPS:
        return CONV_GEMM
    if name in _DATA_OPS or name.startswith("hip::"):
        return DATA
    traits = op.spec.traits if op is not None else frozenset()
    if name == "pointwise" or "pointwise" in traits:
        return POINTWISE
    if "reduce" in traits:
        return REDUCE
    if "view" in traits:
        return DATA
    return OTHER


@dataclass(frozen=True)
class NodeStyle:
    fill: str
    border: str
    shape: str = "box"
    style: str = "rounded,filled"
    fontcolor: str = "#1a1a1a"
    fontsize: str = "10"


# The one colour table. Keys are the categories above; the DOT writer reads nothing else.
CATEGORY_STYLE: dict[str, NodeStyle] = {
    CONV_GEMM: NodeStyle("#9ecae1", "#2171b5"),
    POINTWISE: NodeStyle("#dadaeb", "#6a51a3"),
    REDUCE: NodeStyle("#99d8c9", "#238b45"),
    DATA: NodeStyle("#f0f0f0", "#737373"),
    GPU_KERNEL: NodeStyle("#fdd0a2", "#d94801"),
    ALLOCATION: NodeStyle("#fde0ef", "#c51b7d", shape="box", style="filled,dotted"),
    PARAM: NodeStyle("#ffffff", "#252525", shape="ellipse", style="filled,bold"),
    LITERAL: NodeStyle("#fafafa", "#969696", shape="note", style="filled", fontcolor="#525252", fontsize="8"),
    RETURN: NodeStyle("#ffffff", "#252525", shape="invhouse", style="filled,bold"),
    OTHER: NodeStyle("#e5f5e0", "#41ab5d"),
    SUMMARY: NodeStyle("#ffffff", "#969696", shape="box", style="dashed", fontcolor="#636363"),
    CHAIN: NodeStyle("#f7f7f7", "#969696", shape="box", style="rounded,filled,bold", fontcolor="#525252"),
    REF: NodeStyle("#ffffff", "#bdbdbd", shape="box", style="rounded,dashed", fontcolor="#525252", fontsize="8"),
}

ADDED, REMOVED, CHANGED, UNCHANGED = "added", "removed", "changed", "unchanged"
STATUSES = (ADDED, REMOVED, CHANGED, UNCHANGED)


@dataclass(frozen=True)
class StatusStyle:
    fill: str
    border: str
    fontcolor: str
    extra_style: str = ""  # appended to the category's style (removed ghosts are dashed)
    penwidth: str = "1"


# In diff views the status decides the fill; the category keeps the node shape.
STATUS_STYLE: dict[str, StatusStyle] = {
    ADDED: StatusStyle("#c7e9c0", "#238b45", "#00441b", penwidth="2"),
    REMOVED: StatusStyle("#fee0d2", "#cb181d", "#99000d", extra_style="dashed", penwidth="2"),
    CHANGED: StatusStyle("#fed976", "#e08214", "#7f2704", penwidth="2"),
    UNCHANGED: StatusStyle("#eeeeee", "#bdbdbd", "#636363"),
    # changed too, but in another region than the one the view is on (drawn as context, pale,
    # and not what the view centres on)
    "elsewhere": StatusStyle("#fff3c4", "#f0c27a", "#7f2704"),
}
ELSEWHERE = "elsewhere"

EDGE_COLOUR = {
    None: "#525252",
    ADDED: "#238b45",
    REMOVED: "#cb181d",
    UNCHANGED: "#9e9e9e",
    "replaced": "#cb181d",
    "summary": "#bdbdbd",
}


# ---- label pieces --------------------------------------------------------------------------------
_SHORT_TYPE = {
    "float32": "float",
    "float16": "half",
    "bfloat16": "bf16",
    "float64": "double",
    "bool": "bool",
    "float8e4m3fn": "fp8",
}

# Edges carrying a value of these types are coloured and labelled with the type, so a quantized
# program shows where the converts sit (float32 edges stay plain).
DTYPE_EDGE_COLOUR = {
    "half": "#e6550d",
    "bf16": "#756bb1",
    "fp8": "#8c510a",
    "int8": "#3182bd",
    "uint8": "#3182bd",
    "int32": "#08519c",
    "double": "#636363",
}


def short_type(type_name: str) -> str:
    return _SHORT_TYPE.get(type_name, type_name)


# Shapes and ops are immutable and hashable, and a model repeats a few of them thousands of
# times, so the label pieces are cached (labels are the bulk of building a display graph).
@functools.lru_cache(maxsize=8192)
def short_shape(shape: Shape) -> str:
    """`float 1×16×8×8`; non-standard layouts get a hint, since users chase stray transposes."""
    if shape.is_tuple:
        return "(" + ", ".join(short_shape(s) for s in shape.sub_shapes) + ")"
    if shape.dyn_dims is not None:
        return f"{short_type(shape.type)} " + "×".join(str(d) for d in shape.dyn_dims)
    dims = "×".join(str(x) for x in shape.lens) or "scalar"
    text = f"{short_type(shape.type)} {dims}"
    if shape.broadcasted():
        text += " (bcast)"
    elif not shape.standard():
        text += " (strided)"
    return text


def format_attr_value(v: Any, limit: int = 28) -> str:
    if isinstance(v, Shape):
        text = short_shape(v)
    elif isinstance(v, bool):
        text = "true" if v else "false"
    elif isinstance(v, float):
        text = f"{v:g}"
    elif isinstance(v, tuple):
        text = ",".join(format_attr_value(x, limit) for x in v)
    else:
        text = str(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# GPU ops are still being defined: look for the kernel name and launch size under any of the
# names MIGraphX and our lowering might use, and never fail if none is there.
_KERNEL_KEYS = ("symbol_name", "kernel", "kernel_name", "name")
_LAUNCH_KEYS = (("global", "local"), ("grid", "block"), ("global_size", "local_size"))
_HIDDEN_GPU_ATTRS = (
    frozenset(_KERNEL_KEYS)
    | {k for pair in _LAUNCH_KEYS for k in pair}
    | {"code_object", "source", "binary", "hsaco", "ptx", "output_arg", "key"}
)


def _given(v: Any) -> bool:
    # 0 / "" are the "not compiled yet" defaults of gpu::code_object's fields.
    return v is not None and not (isinstance(v, (str, tuple, int)) and not v)


@functools.lru_cache(maxsize=4096)
def gpu_kernel_info(op: Op) -> tuple[str, str]:
    """(kernel name, launch size text) for a lowered op; empty strings where unknown."""
    attrs = _safe_attrs(op)
    kernel = next((str(attrs[k]) for k in _KERNEL_KEYS if _given(attrs.get(k))), "")
    launch = ""
    for g, b in _LAUNCH_KEYS:
        if _given(attrs.get(g)):
            launch = f"global={format_attr_value(attrs[g])}"
            if _given(attrs.get(b)):
                launch += f" local={format_attr_value(attrs[b])}"
            break
    return kernel, launch


def _safe_attrs(op: Op) -> dict[str, Any]:
    try:
        return dict(op.attrs)
    except Exception:  # noqa: BLE001 - a half-defined GPU op must not break drawing
        return {}


@functools.lru_cache(maxsize=8192)
def key_attrs(op: Op, max_items: int = 3) -> tuple[tuple[str, str], ...]:
    """Attributes worth showing in a node: the non-default ones, bulky GPU fields left out."""
    try:
        # Printing always shows some attributes (conv stride); a label only has room for the
        # ones that differ from the default.
        defaults = {a.name: a.default for a in op.spec.attrs}
        items = [(k, v) for k, v in op.non_default_attrs() if not _same(v, defaults.get(k))]
    except Exception:  # noqa: BLE001 - see _safe_attrs
        items = list(_safe_attrs(op).items())
    skip = _HIDDEN_GPU_ATTRS if op.name.startswith("gpu::") else frozenset({"shape"})
    out = [(k, format_attr_value(v)) for k, v in items if k not in skip]
    return tuple(out[:max_items])


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - numpy-ish values that do not compare to a bool
        return False


def attr_lines(attrs: Iterable[tuple[str, str]], width: int = 40) -> list[str]:
    """Pack `k=v` pairs into lines of about `width` characters."""
    lines: list[str] = []
    cur = ""
    for k, v in attrs:
        item = f"{k}={v}"
        if cur and len(cur) + 1 + len(item) > width:
            lines.append(cur)
            cur = item
        else:
            cur = f"{cur} {item}" if cur else item
    if cur:
        lines.append(cur)
    return lines


def op_summary(names: Iterable[str], limit: int = 4) -> str:
    """`add, mul, relu +2` for the ops of a fused or collapsed region."""
    names = list(names)
    head = ", ".join(names[:limit])
    return head + (f" +{len(names) - limit}" if len(names) > limit else "")


def count_summary(names: Iterable[str], limit: int = 3) -> str:
    """`convolution ×160, add ×160, relu ×160` for a summary node."""
    names = list(names)
    # Literals and params say little about what a stretch of graph does; show ops first.
    ops = [n for n in names if not n.startswith("@")]
    counts: dict[str, int] = {}
    for n in ops or names:
        counts[n] = counts.get(n, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    text = ", ".join(f"{n} ×{c}" for n, c in top)
    return text + (", …" if len(counts) > limit else "")
