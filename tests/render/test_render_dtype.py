"""Edges show their element type when it is not float32, so a quantized program shows where the
converts sit (issue 11: renderings show each edge's dtype)."""

from __future__ import annotations

from render_helpers import dot_edges

from migx_explore.compiler.parser import parse
from migx_explore.compiler.pass_infra import PassManager
from migx_explore.compiler.quantize import quantize_pipeline
from migx_explore.render import build_graph, to_dot
from migx_explore.render.style import DTYPE_EDGE_COLOUR

TEXT = """
    x = @param:x -> float32, {2, 3}
    y = @param:y -> float32, {2, 3}
    s = add(x, y) -> float32, {2, 3}
    e = exp(s) -> float32, {2, 3}
    r = @return(e)
"""


def test_float32_edges_stay_plain():
    dot = to_dot(build_graph(parse(TEXT)))
    assert not [a for _, _, a in dot_edges(dot) if a.get("label") in DTYPE_EDGE_COLOUR]


def test_fp16_edges_are_labelled_and_coloured():
    p = parse(TEXT)
    PassManager().run(p, [quantize_pipeline("fp16")])
    edges = dot_edges(to_dot(build_graph(p)))
    half = [a for _, _, a in edges if a.get("label") == "half"]
    assert half, "the half-precision values between the converts are labelled"
    assert all(a.get("color") == DTYPE_EDGE_COLOUR["half"] for a in half)
    assert any(a.get("label") is None for _, _, a in edges)  # the float32 edges at the program's edges
