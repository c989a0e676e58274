"""eliminate_data_type, eliminate_data_type_for_gpu and propagate_precision."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import parse
from migx_explore.compiler.pass_infra import make_pass, run_passes
from migx_explore.compiler.testing import assert_same_outputs, check_pass

MIXED = """
    x = @param:x -> double_type, {2, 3}
    t = @param:t -> float_type, {5, 3}
    i = @param:i -> int64_type, {4}
    @3 = exp(x) -> double_type, {2, 3}
    @4 = gather[axis=0](t, i) -> float_type, {4, 3}
    @5 = @return(@3, @4)
"""


def test_eliminate_data_type_wraps_ops_in_converts():
    check_pass(
        MIXED,
        [make_pass("eliminate_data_type", unsupported_types=("float64",), target_type="float32")],
        """
        x = @param:x -> double_type, {2, 3}
        t = @param:t -> float_type, {5, 3}
        i = @param:i -> int64_type, {4}
        @3 = convert[target_type=float32](x) -> float_type, {2, 3}
        @4 = exp(@3) -> float_type, {2, 3}
        @5 = convert[target_type=float64](@4) -> double_type, {2, 3}
        @6 = gather[axis=0](t, i) -> float_type, {4, 3}
        @7 = @return(@5, @6)
    """,
    )


def test_quant_dot_computes_as_dot_and_a_tuple_result_converts_per_element():
    # MIGraphX TEST_CASE(quant): quant_dot's general_data_type is dot
    check_pass(
        """
        x = @param:x -> int8_type, {2, 2}
        y = @param:y -> int8_type, {2, 2}
        @2 = quant_dot(x, y) -> int32_type, {2, 2}
        @3 = @return(@2)
    """,
        [make_pass("eliminate_data_type", unsupported_types=("int8",), target_type="float32")],
        """
        x = @param:x -> int8_type, {2, 2}
        y = @param:y -> int8_type, {2, 2}
        a = convert[target_type=float32](x) -> float_type, {2, 2}
        b = convert[target_type=float32](y) -> float_type, {2, 2}
        d = dot(a, b) -> float_type, {2, 2}
        c = convert[target_type=int32](d) -> int32_type, {2, 2}
        @3 = @return(c)
    """,
    )
    check_pass(
        """
        d = @param:d -> double_type, {3, 5}
        t = topk[k=2,axis=1,largest=true](d) -> tuple_type, {(double_type, {3, 2}), (int64_type, {3, 2})}
        v = get_tuple_elem[index=0](t) -> double_type, {3, 2}
        i = get_tuple_elem[index=1](t) -> int64_type, {3, 2}
        r = @return(v, i)
    """,
        [make_pass("eliminate_data_type", unsupported_types=("float64",), target_type="float32")],
        """
        d = @param:d -> double_type, {3, 5}
        f = convert[target_type=float32](d) -> float_type, {3, 5}
        t = topk[k=2,axis=1,largest=true](f) -> tuple_type, {(float_type, {3, 2}), (int64_type, {3, 2})}
        fv = get_tuple_elem[index=0](t) -> float_type, {3, 2}
        v = convert[target_type=float64](fv) -> double_type, {3, 2}
        i = get_tuple_elem[index=1](t) -> int64_type, {3, 2}
        r = @return(v, i)
    """,
    )


def test_unsupported_ops_limits_the_rewrite():
    q = parse(MIXED)
    trace = run_passes(q, [make_pass("eliminate_data_type", unsupported_types=("float64",), unsupported_ops=("dot",))])
    assert not trace.records[0].changed


def test_for_gpu_runs_steps_as_children():
    p, q = parse(MIXED), parse(MIXED)
    trace = run_passes(q, [make_pass("eliminate_data_type_for_gpu", disable_64bit=True)])
    top = trace.records[0]
    kids = [trace.records[i] for i in top.children]
    assert [k.name for k in kids] == ["eliminate_data_type"] * 4
    # a fed index keeps 64 bits: 2^32 + 1 narrowed to int32 would be the valid index 1 (issue 40)
    assert [k.changed for k in kids] == [True, False, False, False]
    g = next(i for i in q.main if i.name == "gather")
    assert g.inputs[1].name == "@param" and g.inputs[1].shape.type == "int64"
    assert_same_outputs(
        p,
        q,
        {"x": np.ones((2, 3)), "t": np.arange(15, dtype=np.float32).reshape(5, 3), "i": np.array([0, 4, -1, 2])},
        rtol=1e-6,
    )


def test_64bit_is_kept_without_disable_64bit_and_int64_arithmetic_stays():
    q = parse(MIXED)
    assert not run_passes(q, [make_pass("eliminate_data_type_for_gpu")]).records[0].changed
    text = """
        a = @param:a -> int64_type, {3}
        @1 = add(a, a) -> int64_type, {3}
        @2 = @return(@1)
    """
    trace = run_passes(parse(text), [make_pass("eliminate_data_type_for_gpu", disable_64bit=True)])
    assert not trace.records[0].changed


def test_integer_dot_computes_in_float():
    text = """
        a = @param:a -> int32_type, {2, 3}
        b = @param:b -> int32_type, {3, 2}
        @2 = dot(a, b) -> int32_type, {2, 2}
        @3 = @return(@2)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [make_pass("eliminate_data_type_for_gpu")])
    d = next(i for i in q.main if i.name == "dot")
    assert d.shape.type == "float32" and q.main.output_shapes()[0].type == "int32"
    assert_same_outputs(p, q, {"a": np.arange(6).reshape(2, 3), "b": np.arange(6).reshape(3, 2) - 2})


HALF = """
    x = @param:x -> half_type, {2, 8}
    @1 = exp(x) -> half_type, {2, 8}
    @2 = reduce_sum[axes={1}](@1) -> half_type, {2, 1}
    @3 = convert[target_type=float32](@2) -> float_type, {2, 1}
    @4 = @return(@3)
"""


def test_propagate_precision_upgrades_the_inputs_of_an_upcast():
    check_pass(
        HALF,
        [make_pass("propagate_precision")],
        """
        x = @param:x -> half_type, {2, 8}
        @1 = convert[target_type=float32](x) -> float_type, {2, 8}
        @2 = exp(@1) -> float_type, {2, 8}
        @3 = reduce_sum[axes={1}](@2) -> float_type, {2, 1}
        @4 = @return(@3)
    """,
        rtol=1e-2,
    )


def test_propagate_precision_upgrades_the_users_of_a_downcast():
    text = """
        x = @param:x -> float_type, {4}
        @1 = convert[target_type=float16](x) -> half_type, {4}
        @2 = exp(@1) -> half_type, {4}
        @3 = sqrt(@2) -> half_type, {4}
        @4 = @return(@3)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [make_pass("propagate_precision")])
    assert [(i.name, i.shape.type) for i in q.main if not i.is_builtin()] == [
        ("exp", "float32"),
        ("sqrt", "float32"),
        ("convert", "float16"),
    ]
    assert_same_outputs(p, q, rtol=2e-3)


def test_propagate_precision_stops_at_integral_float_crossings():
    text = """
        x = @param:x -> int32_type, {4}
        @1 = neg(x) -> int32_type, {4}
        @2 = convert[target_type=float32](@1) -> float_type, {4}
        @3 = @return(@2)
    """
    assert not run_passes(parse(text), [make_pass("propagate_precision")]).records[0].changed


def test_propagate_precision_reads_through_broadcast_scalars_and_converts_but_not_bool():
    # a broadcast scalar constant does not stop the chain (MIGraphX's shape::scalar()); the
    # int32 -> float32 convert in the chain becomes int32 -> float64 (MIGraphX upgrades converts)
    text = """
        x = @param:x -> int32_type, {1, 4}
        @1 = @literal{1} -> float_type, {1}, {0}
        @2 = convert[target_type=float32](x) -> float_type, {1, 4}
        @3 = multibroadcast[out_lens={1, 4}](@1) -> float_type, {1, 4}, {0, 0}
        @4 = add(@2, @3) -> float_type, {1, 4}
        @5 = convert[target_type=float64](@4) -> double_type, {1, 4}
        @6 = @return(@5)
    """
    p, q = parse(text), parse(text)
    run_passes(q, [make_pass("propagate_precision")])
    assert [(i.name, i.shape.type) for i in q.main if i.name in ("add", "convert")][0] == ("convert", "float64")
    assert next(i for i in q.main if i.name == "add").shape.type == "float64"
    assert_same_outputs(p, q)
    # float -> bool -> not -> int64: bool(0.5) is true, int64(0.5) is 0, so nothing is upgraded
    boolean = """
        x = @param:x -> float_type, {1, 8}
        @1 = sigmoid(x) -> float_type, {1, 8}
        @2 = convert[target_type=bool](@1) -> bool_type, {1, 8}
        @3 = not(@2) -> bool_type, {1, 8}
        @4 = convert[target_type=int64](@3) -> int64_type, {1, 8}
        @5 = @return(@4)
    """
    assert not run_passes(parse(boolean), [make_pass("propagate_precision")]).records[0].changed


WIDEN_DOT = """
    x = @param:x -> float_type, {3, 2, 4}
    w = @literal{0.5, -1, 0.25, 2, 1.5, -0.75, 1, 0.125, -2, 0.5, 3, -1} -> half_type, {4, 3}
    b = @literal{0.5, 1, -1.5, 2, -0.5, 0.25} -> half_type, {2, 3}
    @3 = convert[target_type=float16](x) -> half_type, {3, 2, 4}
    @4 = reshape[dims={6, 4}](@3) -> half_type, {6, 4}
    @5 = dot(@4, w) -> half_type, {6, 3}
    @6 = reshape[dims={3, 2, 3}](@5) -> half_type, {3, 2, 3}
    @7 = slice[axes={0},starts={1},ends={2}](@6) -> half_type, {1, 2, 3}
    @8 = squeeze[axes={0}](@7) -> half_type, {2, 3}
    @9 = add(@8, b) -> half_type, {2, 3}
    @10 = @return(@9)
"""


def test_propagate_precision_multiplies_a_narrowed_input_in_float32():
    """At fp16 the float32 input's convert before a GEMM was a kernel of its own: the GEMM now
    reads the input (through its reshape) against float32 weights, and the narrowing sinks
    through the views to the add, which fuse_pointwise then folds it into."""
    p, q = parse(WIDEN_DOT), parse(WIDEN_DOT)
    run_passes(q, [make_pass("propagate_precision"), make_pass("dead_code_elimination")])
    body = {i.name: i for i in q.main if not i.is_builtin() and not i.op.has("view")}
    assert body["dot"].shape.type == "float32" and body["dot"].inputs[0].inputs[0].is_param()
    assert body["dot"].inputs[1].shape.type == "float32"
    assert [u.name for u in body["convert"].outputs] == ["add"]
    assert_same_outputs(p, q, rtol=1e-2, atol=1e-2)


def test_propagate_precision_keeps_a_narrowed_gemm_of_two_run_time_values():
    text = WIDEN_DOT.replace(
        "w = @literal{0.5, -1, 0.25, 2, 1.5, -0.75, 1, 0.125, -2, 0.5, 3, -1} -> half_type", "w = @param:w -> half_type"
    )
    q = parse(text)
    run_passes(q, [make_pass("propagate_precision")])
    assert next(i for i in q.main if i.name == "dot").shape.type == "float16"


def test_propagate_precision_keeps_a_large_narrowed_gemm_in_half():
    """Past WIDEN_DOT_MAX_MACS a float32 GEMM (no tensor cores) costs more than the convert."""
    from migx_explore.compiler.passes import propagate_precision

    q = parse(WIDEN_DOT)
    old = propagate_precision.WIDEN_DOT_MAX_MACS
    propagate_precision.WIDEN_DOT_MAX_MACS = 6 * 3 * 4 - 1
    try:
        run_passes(q, [make_pass("propagate_precision")])
    finally:
        propagate_precision.WIDEN_DOT_MAX_MACS = old
    assert next(i for i in q.main if i.name == "dot").shape.type == "float16"


POOLER = """
    x = @param:x -> half_type, {1, 2, 4}
    w = @literal{0.5, -1, 0.25, 2, 1.5, -0.75, 1, 0.125, -2, 0.5, 3, -1} -> half_type, {4, 3}
    @2 = exp(x) -> half_type, {1, 2, 4}
    @3 = convert[target_type=float32](@2) -> float_type, {1, 2, 4}
    @4 = slice[axes={1},starts={0},ends={1}](@2) -> half_type, {1, 1, 4}, {8, 4, 1}
    @5 = squeeze[axes={1}](@4) -> half_type, {1, 4}, {8, 1}
    @6 = dot(@5, w) -> half_type, {1, 3}
    @7 = tanh(@6) -> half_type, {1, 3}
    @8 = @return(@3, @7)
"""


def test_propagate_precision_multiplies_the_widened_output_a_gemm_also_reads():
    """BERT's pooler at fp16: the last hidden state is returned as float32 and its first token
    feeds a GEMM. The GEMM reads the float32 copy, so the hidden state has one (half) reader
    left, the convert, and the layernorm kernel that makes it can write the float32 output
    (bert_encoder at fp16: 24 kernels, as at fp32)."""
    p, q = parse(POOLER), parse(POOLER)
    run_passes(q, [make_pass("propagate_precision"), make_pass("dead_code_elimination")])
    dot = next(i for i in q.main if i.name == "dot")
    src = dot.inputs[0]
    while src.op.has("view"):
        src = src.inputs[0]
    # (propagate_precision then also computes the exp in float32 for its float32 reader)
    assert dot.shape.type == "float32" and src.shape.type == "float32" and src.name in ("convert", "exp")
    assert not any(i.name == "slice" and i.shape.type == "float16" for i in q.main)
    assert_same_outputs(p, q, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("values,narrowed", [("0, 4, -1, 2", True), ("0, 1099511627776, -1, 2", False)])
def test_for_gpu_narrows_only_literal_indices_that_fit(values, narrowed):
    q = parse(
        f"""
        t = @param:t -> float_type, {{5, 3}}
        i = @literal{{{values}}} -> int64_type, {{4}}
        @2 = gather[axis=0](t, i) -> float_type, {{4, 3}}
        @3 = @return(@2)
        """
    )
    run_passes(q, [make_pass("eliminate_data_type_for_gpu", disable_64bit=True)])
    g = next(i for i in q.main if i.name == "gather")
    assert (g.inputs[1].name == "convert" and g.inputs[1].shape.type == "int32") is narrowed
