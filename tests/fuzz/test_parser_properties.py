"""Property tests for the IR text parser (issue 14): any valid program round-trips exactly through
print -> parse -> print; any garbage, or any valid text with random edits, gives at most one clean
MigxError (never another exception)."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from migx_explore.compiler import Op, Program, Shape, parse  # noqa: E402
from migx_explore.compiler.errors import MigxError  # noqa: E402
from migx_explore.compiler.printer import print_program  # noqa: E402

TYPES = ["float32", "float16", "int32", "int64", "int8", "bool", "float64", "bfloat16", "uint8"]
UNARY = ["relu", "neg", "abs", "exp", "sigmoid", "tanh", "floor"]
BINARY = ["add", "mul", "sub", "max", "min"]
SETTINGS = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def programs(draw) -> Program:
    """A random valid program: params and literals, then unary / binary pointwise ops, transposes
    and reshapes over them, returning one or more values."""
    p = Program()
    m = p.main
    t = draw(st.sampled_from(TYPES[:4]))
    values = []
    for k in range(draw(st.integers(1, 3))):
        lens = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
        values.append(m.add_parameter(f"in{k}", Shape.of(t, lens)))
    for _ in range(draw(st.integers(0, 2))):
        lens = draw(st.sampled_from([v.shape.lens for v in values]))
        data = draw(st.lists(st.integers(-50, 50), min_size=int(np.prod(lens)), max_size=int(np.prod(lens))))
        values.append(m.add_literal(np.asarray(data).astype(_np(t)).reshape(lens)))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["unary", "binary", "transpose", "reshape"]))
        a = draw(st.sampled_from(values))
        if kind == "unary" and t.startswith("float"):
            values.append(m.add_instruction(Op(draw(st.sampled_from(UNARY))), [a]))
        elif kind == "binary":
            same = [v for v in values if v.shape.lens == a.shape.lens]
            values.append(m.add_instruction(Op(draw(st.sampled_from(BINARY))), [a, draw(st.sampled_from(same))]))
        elif kind == "transpose" and a.shape.ndim > 1:
            perm = draw(st.permutations(range(a.shape.ndim)))
            values.append(m.add_instruction(Op("transpose", permutation=list(perm)), [a]))
        elif kind == "reshape":
            c = a if a.shape.standard() else m.add_instruction(Op("contiguous"), [a])
            values.append(m.add_instruction(Op("reshape", dims=[int(np.prod(a.shape.lens))]), [c]))
    outs = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
    m.add_return(outs)
    return p


def _np(t: str):
    from migx_explore.compiler import dtypes

    return dtypes.np_dtype(t)


@SETTINGS
@given(programs())
def test_valid_text_round_trips_exactly(p):
    text = print_program(p, full=True)
    assert print_program(parse(text), full=True) == text


def parse_cleanly(text: str) -> None:
    """Parse `text`; a MigxError is the only acceptable failure, and its message is one line of
    reasonable length (a location and the problem, perhaps the offending line)."""
    try:
        parse(text)
    except MigxError as e:
        msg = str(e)
        assert msg and len(msg.splitlines()) <= 2 and len(msg) < 2000, msg


@SETTINGS
@given(st.text(max_size=300))
def test_garbage_gives_one_clean_error(text):
    parse_cleanly(text)


LINE_PIECES = [
    "@1",
    "=",
    "@param:x",
    "@literal{1, 2}",
    "->",
    "float_type",
    "{2, 3}",
    "{3, 1}",
    "relu(x)",
    "add(@1,@2)",
    "[permutation={1, 0}]",
    "@return(",
    ")",
    "{",
    "}",
    ",",
    "module:",
    '"main"',
    "\n",
    "-1",
    "99999999999999999999",
    "nan",
    "inf",
    "#0",
    "{ ... }",
    "pointwise",
    ":",
]


@SETTINGS
@given(st.lists(st.sampled_from(LINE_PIECES), max_size=40).map(" ".join))
def test_ir_shaped_garbage_gives_one_clean_error(text):
    parse_cleanly(text)


@SETTINGS
@given(
    programs(),
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from(["del", "dup", "ins"]),
            st.sampled_from(list('{}()[],=@-#:x0 \n9.e"') + ["{-", "}}"]),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_edited_valid_text_gives_one_clean_error(p, edits):
    text = print_program(p, full=True)
    for pos, op, piece in edits:
        i = pos % (len(text) + 1)
        if op == "del":
            text = text[:i] + text[i + 1 :]
        elif op == "dup":
            text = text[:i] + text[i : i + 5] + text[i:]
        else:
            text = text[:i] + piece + text[i:]
    parse_cleanly(text)


@pytest.mark.parametrize(
    "text",
    [
        "x = @param:x -> float_type, " + "{" * 3000,
        "[" * 5000,
        "\n".join(f'module: "m{i}"\n@0 = pointwise(), [m{i + 1}] -> float_type, {{1}}, {{1}}' for i in range(3000)),
    ],
)
def test_deep_nesting_is_a_clean_error(text):
    with pytest.raises(MigxError):
        parse(text)
