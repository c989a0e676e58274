"""Issue 26 item 4: misuse of the Python API gives one clear error; a user pass that raises or
mutates the IR illegally is shown as failed, named, with the user's exception, and verify() says so."""

from __future__ import annotations

import pytest

from migx_explore.compiler import matcher as mt
from migx_explore.compiler import pattern_rewriter as rw
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.op import Op
from migx_explore.session import Session
from migx_explore.verification import verify_session

AFTER = "optimize_rewrite.propagate_precision"


@pytest.fixture
def s():
    return Session.from_model("mlp")


@pytest.mark.parametrize("where", [None, 1.5, ["a"], True])
def test_goto_with_a_wrong_type_is_a_clear_error(s, where):
    with pytest.raises(MigxError, match="goto needs a pass path .* or a position"):
        s.goto(where)


def test_from_onnx_on_a_directory_says_it_is_a_directory(tmp_path):
    with pytest.raises(MigxError, match="is a directory"):
        Session.from_onnx(str(tmp_path))


def test_a_rule_whose_check_raises_fails_named_with_the_users_exception(s):
    def check(module, match):
        raise KeyError("my rule's bug")

    path = s.insert_pass(rw.rule("raiser", mt.name("relu"), lambda m, r: None, check=check), after=AFTER)
    s.run()
    rec = s.trace.records[s.trace.failed_index]
    assert rec.path == path and rec.status == "failed"
    assert "raiser" in s.trace.error and "KeyError" in s.trace.error and "my rule's bug" in s.trace.error
    assert s.goto(path).status == "failed"
    with pytest.raises(MigxError, match="stopped early: pass optimize_rewrite.raiser raised KeyError"):
        s.goto("fusion.fuse_pointwise")
    report = verify_session(s)
    assert not report.ok and "raiser" in report.error


def test_an_illegal_mutation_by_a_user_pass_is_blamed_on_it(s):
    """The pass pokes an instruction behind the Module API and says it changed nothing: validation
    still runs after it, and the failure names it (not the next built-in pass)."""

    def sneaky(module):
        for ins in module:
            if ins.name == "relu":
                ins._op = Op("dot")  # dot needs two inputs: the module is now invalid
        return False

    path = s.insert_pass(sneaky, after=AFTER)
    s.run()
    assert s.trace.records[s.trace.failed_index].path == path
    assert s.trace.error.startswith(f"pass {path} ")
    assert not verify_session(s).ok


def test_an_illegal_rule_rewrite_is_reported_by_verify(s):
    def to_dot(module, match):
        match.root._op = Op("dot")

    path = s.insert_pass(rw.rule("illegal_dot", mt.name("relu"), to_dot), after=AFTER)
    report = verify_session(s)
    assert not report.ok and f"pass {path} left an invalid module" in report.error
    assert "error: pass" in str(report)
