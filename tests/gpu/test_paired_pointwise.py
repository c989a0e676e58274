"""Half-precision elementwise kernels with two elements per thread (gpu/codegen/pointwise_vec.py):
pairs read and written as one 32-bit word, a bias broadcast along rows, a float32 input read as
float2, a transposed input read element by element, and an odd row length that keeps the
one-element kernel. On the fake backend: which kernel the generator writes (and that nvcc builds
it, where installed); on a device: against the reference, and bit-identical to the one-element
kernel."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate, parse

MIXED = """
x = @param:x -> half_type, {4, 6}
y = @param:y -> half_type, {4, 6}
b = @param:b -> half_type, {6}
f = @param:f -> float_type, {4, 6}
@1 = multibroadcast[out_lens={4, 6}](b) -> half_type, {4, 6}, {0, 1}
@2 = add(x, y) -> half_type, {4, 6}
@3 = mul(@2, @1) -> half_type, {4, 6}
@4 = convert[target_type=float16](f) -> half_type, {4, 6}
@5 = add(@3, @4) -> half_type, {4, 6}
@6 = tanh(@5) -> half_type, {4, 6}
@7 = @return(@6)
"""
TRANSPOSED = """
x = @param:x -> bf16_type, {4, 6}
y = @param:y -> bf16_type, {6, 4}
@1 = transpose[permutation={1, 0}](x) -> bf16_type, {6, 4}, {1, 6}
@2 = add(@1, y) -> bf16_type, {6, 4}
@3 = exp(@2) -> bf16_type, {6, 4}
@4 = @return(@3)
"""
ODD = """
x = @param:x -> half_type, {3, 5}
y = @param:y -> half_type, {3, 5}
@1 = add(x, y) -> half_type, {3, 5}
@2 = sqrt(@1) -> half_type, {3, 5}
@3 = @return(@2)
"""
PROGRAMS = {"mixed": (MIXED, True), "transposed": (TRANSPOSED, True), "odd": (ODD, False)}


def _feeds(program) -> dict:
    import ml_dtypes

    rng = np.random.default_rng(0)
    out = {}
    for p in program.main.params():
        a = rng.uniform(0.5, 2.0, p.shape.lens).astype(np.float32)
        types = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
        out[p.param_name] = a.astype(types.get(p.shape.type, np.float32))
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_pair_loop_where_the_layout_allows(name, tmp_path):
    from tests.gpu.test_kernels_compile_offline import NVCC, _nvcc_all, _sources

    text, paired = PROGRAMS[name]
    sources = _sources(parse(text))
    pointwise = {k: v for k, v in sources.items() if "const int i = v * 2;" in v[0]}
    assert bool(pointwise) == paired, list(sources)
    if name == "mixed":
        src = next(iter(pointwise.values()))[0]
        assert "*(const float2*)" in src and "migx::pack2<migx::half_t>" in src
    if NVCC is not None:
        _nvcc_all(sources, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_pair_loop_matches_the_one_element_kernel(name, device, monkeypatch):
    from migx_explore.gpu import compile_program
    from migx_explore.gpu.codegen import pointwise

    program = parse(PROGRAMS[name][0])
    feeds = _feeds(program)
    want = np.asarray(evaluate(program, feeds)[0], np.float64)
    got = {}
    for vectorize in (True, False):
        monkeypatch.setattr(pointwise, "VECTORIZE", vectorize)
        with compile_program(program, backend=device) as compiled:
            got[vectorize] = np.asarray(compiled.run(feeds, mode="graph")[0])
    np.testing.assert_array_equal(got[True].view(np.uint16), got[False].view(np.uint16))
    np.testing.assert_allclose(got[True].astype(np.float64), want, rtol=2e-2, atol=2e-2)
