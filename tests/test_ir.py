"""Core IR: shapes, ops, mutation API, validation, provenance, snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import Op, Program, Shape, diff, evaluate, parse, snapshot
from migx_explore.compiler.errors import AttributeError_, IRError, ShapeError, UnknownOpError, ValidationError
from migx_explore.compiler.shape import DynDim


# ---- shapes -------------------------------------------------------------------------------------
def test_standard_shape_strides_and_sizes():
    s = Shape.of("float32", (2, 3, 4))
    assert s.strides == (12, 4, 1)
    assert s.standard() and s.packed() and not s.transposed() and not s.broadcasted()
    assert s.elements() == 24 and s.bytes() == 96


def test_transposed_broadcast_sliced_scalar():
    t = Shape.of("float16", (4, 3), (1, 4))
    assert t.transposed() and t.packed() and not t.standard()
    b = Shape.of("float32", (2, 3), (0, 1))
    assert b.broadcasted() and not b.packed() and b.element_space() == 3 and b.bytes() == 12
    sl = Shape.of("int8", (2, 2), (4, 1))  # a 2x2 window of a 2x4 buffer
    assert not sl.packed() and sl.element_space() == 6
    sc = Shape.scalar("int64")
    assert sc.scalar_shape() and sc.lens == (1,) and sc.elements() == 1


def test_from_permutation_nhwc():
    s = Shape.from_permutation("float32", (1, 8, 5, 5), (0, 2, 3, 1))
    assert s.strides == (200, 1, 40, 8)
    assert s.permutation() == (0, 2, 3, 1)
    assert s.with_lens((1, 4, 5, 5)).strides == (100, 1, 20, 4)


@pytest.mark.parametrize("t", ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64", "bool"])
def test_all_dtypes_print_and_parse(t):
    p = Program()
    x = p.main.add_parameter("x", Shape.of(t, (2, 2)))
    p.main.add_return([p.main.add_instruction(Op("identity"), [x])])
    assert parse(str(p)) == p


def test_dynamic_shape_text():
    s = Shape.dynamic("float32", [DynDim(1, 4), 16])
    assert s.dynamic_shape and str(s) == "dynamic, float32, {[1..4], 16}"
    from migx_explore.compiler import parse_shape

    assert parse_shape(str(s)) == s


# ---- ops ----------------------------------------------------------------------------------------
def test_op_defaults_validation_and_equality():
    a = Op("convolution", padding=(1, 1))
    assert a["stride"] == (1, 1) and a["group"] == 1
    assert a == Op("convolution", padding=[1, 1]) and hash(a) == hash(Op("convolution", padding=(1, 1)))
    with pytest.raises(AttributeError_, match="unknown attribute"):
        Op("convolution", pading=(1, 1))
    with pytest.raises(AttributeError_, match="must be one of"):
        Op("pooling", mode="median")
    with pytest.raises(UnknownOpError, match="did you mean"):
        Op("convolutoin")


def test_shape_rule_errors_name_the_op():
    p = Program()
    x = p.main.add_parameter("x", Shape.of("float32", (2, 3)))
    y = p.main.add_parameter("y", Shape.of("float32", (3, 2)))
    with pytest.raises(ShapeError, match="add: input dimensions differ"):
        p.main.add_instruction(Op("add"), [x, y])


# ---- mutation API -------------------------------------------------------------------------------
def _chain():
    p = Program()
    m = p.main
    x = m.add_parameter("x", Shape.of("float32", (4,)))
    a = m.add_instruction(Op("relu"), [x])
    b = m.add_instruction(Op("neg"), [a])
    m.add_return([b])
    return p, m, x, a, b


def test_ids_are_stable_and_replace_keeps_id():
    p, m, x, a, b = _chain()
    old_id = a.id
    m.replace_instruction(a, Op("sigmoid"))
    assert a.id == old_id and a.name == "sigmoid"
    assert [i.name for i in m] == ["@param", "sigmoid", "neg", "@return"]


def test_replace_all_uses_records_provenance():
    p, m, x, a, b = _chain()
    p.begin_epoch()
    c = m.insert_instruction(b, Op("exp"), [x])
    m.replace_all_uses(a, c)
    assert a.id in c.origin
    assert b.inputs == (c,) and a.outputs == ()
    m.remove_instruction(a)
    p.validate()


def test_provenance_context():
    p, m, x, a, b = _chain()
    p.begin_epoch()
    with p.provenance([a, b]):
        c = m.insert_instruction(b, Op("exp"), [x])
    assert set(c.origin) == {a.id, b.id}


def test_remove_with_users_is_refused():
    p, m, x, a, b = _chain()
    with pytest.raises(IRError, match="still used by"):
        m.remove_instruction(a)


def test_iteration_survives_removal_and_insertion():
    p, m, x, a, b = _chain()
    seen = []
    for ins in m:
        seen.append(ins.name)
        if ins is a:
            m.insert_after(a, Op("exp"), [a])
    assert seen == ["@param", "relu", "exp", "neg", "@return"]


def test_move_and_sort():
    p, m, x, a, b = _chain()
    m.move_instruction(b, a)  # now neg precedes its input
    with pytest.raises(ValidationError, match="before it is defined"):
        m.validate()
    m.sort()
    m.validate()
    assert [i.name for i in m] == ["@param", "relu", "neg", "@return"]


def test_validate_catches_bad_shape_and_dangling_use():
    p, m, x, a, b = _chain()
    a._shape = Shape.of("float32", (5,))  # corrupt the stored shape behind the API's back
    with pytest.raises(ValidationError, match=r"relu .*stored shape"):
        m.validate()
    p2, m2, x2, a2, b2 = _chain()
    b2._inputs = [x2]  # drop a use without updating x2's use list
    # relu still lists neg as a user, but neg no longer uses it: caught at relu.
    with pytest.raises(ValidationError, match=r"relu \(#\d+\): use list names #\d+ \(neg\) which does not use it"):
        m2.validate()


def test_validate_recomputes_a_shape_whose_op_or_inputs_changed_since_it_passed():
    # Validation skips shapes that passed with the very same op and shape objects; anything
    # written over since, the instruction's own shape or an input's, is recomputed and caught.
    p, m, x, a, b = _chain()
    m.validate()
    m.validate()  # the second one reuses what passed
    x._shape = Shape.of("float32", (5,))  # behind the API: relu's input shape is a new object
    with pytest.raises(ValidationError, match=r"relu .*stored shape"):
        m.validate()
    p, m, x, a, b = _chain()
    m.validate()
    b._op = Op("transpose", permutation=[0, 1])  # a new op object on an unchanged input
    with pytest.raises(ValidationError, match=r"neg|transpose"):
        m.validate()


def test_values_cannot_cross_modules():
    p, m, x, a, b = _chain()
    sub = p.create_module("sub")
    with pytest.raises(IRError, match="cannot cross modules"):
        sub.add_instruction(Op("relu"), [x])


# ---- snapshots and diffs ------------------------------------------------------------------------
def test_snapshot_diff_added_removed_changed():
    p, m, x, a, b = _chain()
    s0 = snapshot(p)
    p.begin_epoch()
    c = m.insert_instruction(b, Op("exp"), [x])
    m.replace_all_uses(a, c)
    m.remove_instruction(a)
    m.replace_instruction(b, Op("abs"))
    s1 = snapshot(p)
    d = diff(s0, s1)
    assert d.added == {c.id} and d.removed == {a.id} and b.id in d.changed
    assert d.replaced_by[a.id] == (c.id,)
    assert diff(s1, snapshot(p)).is_noop


def test_snapshot_reuses_unchanged_modules_and_shares_literals():
    p = Program()
    w = p.main.add_literal(np.ones((64, 64), np.float32))
    p.main.add_return([w])
    s0, s1 = snapshot(p), snapshot(p)
    assert s0.modules[0] is s1.modules[0]
    q = s0.to_program()
    assert q.main.first.literal.data is w.literal.data  # no copy of weights
    assert q == p


def test_literal_data_is_immutable():
    p = Program()
    w = p.main.add_literal(np.zeros(3, np.float32))
    with pytest.raises(ValueError):
        w.literal.data[0] = 1


def test_program_copy_keeps_ids_and_evaluates_the_same():
    p, m, *_ = _chain()
    q = p.copy()
    assert [i.id for i in q.main] == [i.id for i in p.main]
    feed = {"x": np.array([-1, 0, 1, 2], np.float32)}
    np.testing.assert_array_equal(evaluate(p, feed)[0], evaluate(q, feed)[0])
