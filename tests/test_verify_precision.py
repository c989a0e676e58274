"""verify knows precision (issue 37): the threshold follows the precision values were computed in
(int8 after lowering renames the quantize ops, too), and a pass that leaves the error unchanged
is never the one blamed; the report says which pass the error came from."""

from __future__ import annotations

from types import SimpleNamespace

from migx_explore.compiler import parse
from migx_explore.compiler.verify import program_compute_type
from migx_explore.verification import _error_source, _first_failure_that_added_error

QDQ = """
x = @param:x -> float_type, {4}
s = @literal{0.1} -> float_type, {1}
z = @literal{0} -> int8_type, {1}
s4 = multibroadcast[out_lens={4}](s) -> float_type, {4}, {0}
z4 = multibroadcast[out_lens={4}](z) -> int8_type, {4}, {0}
q = quantizelinear(x, s4, z4) -> int8_type, {4}
d = dequantizelinear(q, s4, z4) -> float_type, {4}
@r = @return(d)
"""


def test_int8_compute_is_seen_from_the_values_not_only_the_op_names():
    p = parse(QDQ)
    assert program_compute_type(p) == "int8"
    # what lowering does: the quantize op is renamed (here to a plain convert of a float)
    text = QDQ.replace("quantizelinear(x, s4, z4)", "convert[target_type=int8](x)")
    text = text.replace("dequantizelinear(q, s4, z4)", "convert[target_type=float](q)")
    assert program_compute_type(parse(text)) == "int8"


def _rec(path, rms, threshold):
    return SimpleNamespace(path=path, numeric=SimpleNamespace(rms=rms, threshold=threshold, ok=rms <= threshold))


def test_a_pass_that_leaves_the_error_unchanged_is_not_blamed():
    checked = [
        _rec("required.simplify_qdq", 1.6e-3, 0.1),
        _rec("optimize_rewrite.optimize_module", 2.53e-3, 0.1),
        _rec("backend.lowering", 2.53e-3, 9.5e-6),  # a tighter threshold, the same error
        _rec("backend.eliminate_contiguous", 2.53e-3, 9.5e-6),
    ]
    assert _first_failure_that_added_error(checked) is None
    rec, before, after = _error_source(checked, checked[-1])
    assert rec.path == "required.simplify_qdq" and (before, after) == (0.0, 1.6e-3)


def test_a_pass_that_adds_error_over_its_threshold_is_blamed():
    checked = [_rec("a", 1e-7, 1e-5), _rec("b", 3e-3, 1e-5), _rec("c", 3e-3, 1e-5)]
    assert _first_failure_that_added_error(checked).path == "b"
    assert _error_source(checked, checked[1])[0].path == "b"
