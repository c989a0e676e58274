"""Every op handler refuses a malformed node with an import error naming the node (exit 2), never
an IndexError / ValueError from inside the handler (exit 3): too few inputs, an empty required
input, and inputs of the wrong rank (issue 24 item 4)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from migx_explore.compiler import Shape
from migx_explore.compiler.errors import ImportError_, MigxError
from migx_explore.compiler.onnx import HANDLERS, MSFT_OPS, import_node
from migx_explore.compiler.onnx.arity import MSFT_MIN_INPUTS

OPSET = 18
# The importer's last resort for a Python error inside a handler: the probes must be refused by a
# check (counts, ranks, attributes) before it.
SAFETY_NET = "cannot import this node"


def _opset(op: str) -> int:
    """18, or the opset that introduced the op (Attention, RMSNormalization, ...)."""
    try:
        return max(OPSET, onnx.defs.get_schema(op, onnx.defs.onnx_opset_version(), "").since_version)
    except onnx.defs.SchemaError:
        return OPSET


def _domain_and_min(op: str) -> tuple[str, int] | None:
    try:
        return "", onnx.defs.get_schema(op, _opset(op), "").min_input
    except onnx.defs.SchemaError:
        pass
    if op in MSFT_OPS:
        return "com.microsoft", MSFT_MIN_INPUTS[op]
    return None


def test_every_msft_handler_declares_its_minimum_input_count():
    missing = sorted(op for op in MSFT_OPS if op not in MSFT_MIN_INPUTS and _domain_and_min(op) is None)
    assert not missing


@pytest.mark.parametrize("op", sorted(HANDLERS))
def test_too_few_inputs_is_an_import_error_naming_the_node(op):
    found = _domain_and_min(op)
    if found is None or found[1] == 0:
        pytest.skip(f"{op}: no schema at opset {OPSET} or no required input")
    domain, low = found
    names = [f"in{k}" for k in range(low - 1)]
    node = helper.make_node(op, names, ["out"], name="the_node", domain=domain)
    with pytest.raises(ImportError_, match=r"node the_node \(" + op + r".*inputs, got"):
        import_node(node, {n: Shape.of("float32", [2, 3]) for n in names}, _opset(op))


@pytest.mark.parametrize("op", sorted(HANDLERS))
def test_wrong_rank_inputs_give_a_clean_error_or_a_program(op):
    """The fewest inputs the op takes, each a float32 scalar: most handlers must refuse (ranks,
    constant operands), some accept; none may crash."""
    domain, low = _domain_and_min(op) or ("", 1)  # no schema (ATen, ImageScaler, ...): one input
    names = [f"in{k}" for k in range(max(low, 1))]
    node = helper.make_node(op, names, ["out"], name="the_node", domain=domain)
    try:
        import_node(node, {n: np.float32(0.5) for n in names}, _opset(op))
    except MigxError as e:
        assert "the_node" in str(e) and SAFETY_NET not in str(e), str(e)


@pytest.mark.parametrize("op", sorted(HANDLERS))
def test_no_inputs_at_all_gives_a_clean_error_or_a_program(op):
    """Handlers without a schema here (ATen, ImageScaler, custom ops) get no input: a clean error."""
    domain = "com.microsoft" if op in MSFT_OPS and _domain_and_min(op) is None else ""
    node = helper.make_node(op, [], ["out"], name="the_node", domain=domain)
    try:
        import_node(node, {}, _opset(op))
    except MigxError as e:
        assert "the_node" in str(e) and SAFETY_NET not in str(e), str(e)


@pytest.mark.parametrize("op", sorted(HANDLERS))
def test_optional_inputs_left_empty_give_a_clean_error_or_a_program(op):
    """Every input past the required ones given as "" (ONNX's empty optional input): handlers must
    treat an empty optional input as absent, and an empty variadic one is refused by the check."""
    try:
        schema = onnx.defs.get_schema(op, _opset(op), "")
    except onnx.defs.SchemaError:
        pytest.skip(f"{op}: no schema")
    low, high = schema.min_input, min(schema.max_input, 8)
    if high <= low:
        pytest.skip(f"{op}: no optional inputs")
    names = [f"in{k}" for k in range(low)] + [""] * (high - low)
    node = helper.make_node(op, names, ["out"], name="the_node")
    for lens in ([2, 3], [1, 2, 3, 4]):
        try:
            import_node(node, {n: Shape.of("float32", lens) for n in names if n}, _opset(op))
        except MigxError as e:
            assert "the_node" in str(e) and SAFETY_NET not in str(e), str(e)


@pytest.mark.parametrize("op", sorted(MSFT_OPS))
def test_contrib_ops_with_extra_empty_inputs_give_a_clean_error_or_a_program(op):
    low = MSFT_MIN_INPUTS.get(op, 1)
    for extra in (0, 3):
        names = [f"in{k}" for k in range(low)] + [""] * extra
        node = helper.make_node(op, names, ["out"], name="the_node", domain="com.microsoft", num_heads=2)
        for lens in ([2, 3, 4], [1, 2, 4, 4]):
            try:
                import_node(node, {n: Shape.of("float32", lens) for n in names if n}, OPSET)
            except MigxError as e:
                assert "the_node" in str(e) and SAFETY_NET not in str(e), str(e)
