"""compiler/inputs.py: random inputs that respect how the model uses each input."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import Op, Program, Shape
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.inputs import RandomInputsError, input_roles, model_inputs, random_inputs
from migx_explore.compiler.pass_infra import make_numeric_config


def _prog():
    p = Program()
    return p, p.main


def test_indices_stay_below_the_rows_of_the_table_they_index():
    p, m = _prog()
    ids = m.add_parameter("ids", Shape.of("int64", [4, 64]))
    types = m.add_parameter("types", Shape.of("int64", [4, 64]))
    words = m.add_instruction(Op("gather", axis=0), [m.add_literal(np.zeros((30, 8), np.float32)), ids])
    # through a reshape and a convert, into a 2-row table
    t = m.add_instruction(Op("convert", target_type="int32"), [m.add_instruction(Op("reshape", dims=[256]), [types])])
    tt = m.add_instruction(Op("gather", axis=0), [m.add_literal(np.zeros((2, 8), np.float32)), t])
    m.add_return([words, tt])
    roles = input_roles(p)
    assert (roles["ids"].kind, roles["ids"].bound) == ("index", 30)
    assert (roles["types"].kind, roles["types"].bound) == ("index", 2) and "table of 2" in roles["types"].why
    feeds = model_inputs(p, seed=3)
    assert feeds["ids"].max() < 30 and feeds["ids"].max() >= 4  # spans the vocabulary, not just [0, 4)
    assert set(np.unique(feeds["types"])) == {0, 1}
    assert make_numeric_config(p).random_inputs


def test_smallest_table_wins_and_gather_axis_is_respected():
    p, m = _prog()
    i = m.add_parameter("i", Shape.of("int32", [16]))
    a = m.add_instruction(Op("gather", axis=1), [m.add_literal(np.zeros((9, 5), np.float32)), i])
    b = m.add_instruction(Op("gather", axis=0), [m.add_literal(np.zeros((7, 2), np.float32)), i])
    m.add_return([a, b])
    assert input_roles(p)["i"].bound == 5


def test_onehot_and_gathernd_indices():
    p, m = _prog()
    k = m.add_parameter("k", Shape.of("int64", [6]))
    oh = m.add_instruction(Op("onehot", depth=3, axis=-1), [k, m.add_literal(np.array([0, 1], np.float32))])
    q = m.add_parameter("q", Shape.of("int64", [5, 2]))
    g = m.add_instruction(Op("gathernd"), [m.add_literal(np.zeros((4, 6), np.float32)), q])
    m.add_return([oh, g])
    roles = input_roles(p)
    assert roles["k"].bound == 3 and roles["q"].bound == 4


@pytest.mark.parametrize("pattern", ["where", "bool", "additive", "scaled", "equal"])
def test_masks_are_padding_masks_of_zeros_and_ones(pattern):
    p, m = _prog()
    mask = m.add_parameter("mask", Shape.of("int64", [3, 16]))
    x = m.add_parameter("x", Shape.of("float32", [3, 16]))
    f = m.add_instruction(Op("convert", target_type="float32"), [mask])
    if pattern == "where":
        b = m.add_instruction(Op("convert", target_type="bool"), [mask])
        out = m.add_instruction(Op("where"), [b, x, x])
    elif pattern == "bool":
        out = m.add_instruction(Op("convert", target_type="bool"), [mask])
    elif pattern == "additive":  # (1 - mask) * -10000
        out = m.add_instruction(Op("sub"), [m.add_literal(np.ones((3, 16), np.float32)), f])
    elif pattern == "scaled":  # mask * -1e9
        out = m.add_instruction(Op("mul"), [f, m.add_literal(np.full((3, 16), -1e9, np.float32))])
    else:
        out = m.add_instruction(Op("equal"), [mask, m.add_literal(np.zeros((3, 16), np.int64))])
    m.add_return([out])
    assert input_roles(p)["mask"].kind == "mask"
    v = model_inputs(p, seed=1)["mask"]
    assert set(np.unique(v)) <= {0, 1} and v.dtype == np.int64
    assert np.all(v[:, 0] == 1)  # never a fully masked row
    assert np.all(np.diff(v, axis=1) <= 0)  # ones then zeros
    assert input_roles(p)["x"].kind == "value"


def test_shape_like_inputs_are_refused_with_a_hint():
    p, m = _prog()
    x = m.add_parameter("x", Shape.of("float32", [1, 4]))
    target = m.add_parameter("target", Shape.of("float32", [3, 4]))
    m.add_return([m.add_instruction(Op("multibroadcast"), [x, target])])
    assert input_roles(p)["target"].kind == "shape"
    with pytest.raises(RandomInputsError, match="'target' is shape-like.*--inputs FEED.npz"):
        model_inputs(p)


def test_an_input_read_as_a_value_and_as_a_broadcast_reference_is_a_value():
    """The importer's broadcasts on a dynamic input take the input itself as the 2-input
    multibroadcast's shape reference; its values are still read elsewhere (a QDQ CNN over a batch
    range: verify refused its image input as shape-like)."""
    p, m = _prog()
    x = m.add_parameter("x", Shape.of("float32", [3, 4]))
    s = m.add_parameter("s", Shape.of("float32", [1]))
    m.add_return([m.add_instruction(Op("mul"), [x, m.add_instruction(Op("multibroadcast"), [s, x])])])
    assert input_roles(p)["x"].kind == "value"
    assert model_inputs(p)["x"].shape == (3, 4)


def test_plain_inputs_keep_the_old_random_stream():
    p, m = _prog()
    x = m.add_parameter("x", Shape.of("float32", [5]))
    n = m.add_parameter("n", Shape.of("int32", [5]))
    m.add_return([m.add_instruction(Op("relu"), [x]), m.add_instruction(Op("neg"), [n])])
    rng = np.random.default_rng(7)
    want_x = rng.uniform(-1, 1, (5,)).astype(np.float32)
    want_n = rng.integers(0, 4, (5,)).astype(np.int32)
    got = random_inputs(p, 7)
    np.testing.assert_array_equal(got["x"], want_x)
    np.testing.assert_array_equal(got["n"], want_n)
    np.testing.assert_array_equal(model_inputs(p, 7)["x"], got["x"])


def test_failure_on_random_inputs_says_they_were_random():
    p, m = _prog()
    i = m.add_parameter("i", Shape.of("int64", [4]))
    j = m.add_instruction(Op("add"), [i, m.add_literal(np.full(4, 10, np.int64))])  # not followed: add
    m.add_return([m.add_instruction(Op("gather", axis=0), [m.add_literal(np.zeros((3, 2), np.float32)), j])])
    with pytest.raises(MigxError, match="on random inputs: pass real inputs with --inputs FEED.npz"):
        make_numeric_config(p)
    ok = make_numeric_config(p, {"i": np.array([-10, -9, -8, -10])})
    assert not ok.random_inputs


def test_float_inputs_in_one_minus_x_are_not_masks():
    p, m = _prog()
    a = m.add_parameter("alpha", Shape.of("float32", [8]))
    m.add_return(
        [
            m.add_instruction(Op("sub"), [m.add_literal(np.ones(8, np.float32)), a]),
            m.add_instruction(Op("mul"), [a, m.add_literal(np.full(8, 1e3, np.float32))]),
        ]
    )
    assert input_roles(p)["alpha"].kind == "value"
