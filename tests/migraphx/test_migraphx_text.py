"""The MIGraphX printed-program reader (compiler/migraphx_text.py) on texts of every period."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.migraphx_text import is_opaque, parse_migraphx_shape, read_program
from migx_explore.compiler.printer import print_program
from migx_explore.migraphx import read_log

DUMPS = Path("/work/shared/reference/migraphx_dumps")

MULTI = """module: "main"
x = @param:x -> float_type, {2, 3}, {3, 1}
cond = @param:cond -> bool_type, {1}, {0}
@2 = @literal{ ... } -> float_type, {2, 3}, {3, 1} # /enc/w
@3 = add(x,@2) -> float_type, {2, 3}, {3, 1} # /enc/layer/Add
@4 = if(cond), [If_0_if, If_0_else] -> [float_type, {2, 3}, {3, 1}]
@5 = get_tuple_elem[index=0](@4) -> float_type, {2, 3}, {3, 1}
main:#output_0 = @param:main:#output_0 -> float_type, {2, 3}, {3, 1}
@7 = gpu::code_object[code_object=5000,symbol_name=relu_kernel,global=64,local=64,output_arg=1,](@5,main:#output_0) -> float_type, {2, 3}, {3, 1} # /enc/layer/Relu, /enc/layer/Add
@8 = @return(@7) # @output_0:y

module: "If_0_if"
If_0_if:@0 = mul(@3,@3) -> float_type, {2, 3}, {3, 1}
If_0_if:@1 = @return(If_0_if:@0)

module: "If_0_else"
If_0_else:@0 = sub(@3,@3) -> float_type, {2, 3}, {3, 1}
If_0_else:@1 = @return(If_0_else:@0)


"""


def test_multi_module_program_keeps_modules_names_and_opaque_ops():
    r = read_program(MULTI)
    assert not r.problems, r.problems
    p = r.program
    assert list(p.modules) == ["main", "If_0_if", "If_0_else"]
    main = p.modules["main"]
    ops = [i.op.name for i in main]
    assert ops.count("gpu::code_object") == 1 and ops[-1] == "@return"
    code = next(i for i in main if i.op.name == "gpu::code_object")
    assert is_opaque(code.op) and "symbol_name=relu_kernel" in print_program(p)
    assert code.op.get("symbol_name") == "relu_kernel"
    assert [m.name for m in next(i for i in main if i.op.name == "if").module_inputs] == ["If_0_if", "If_0_else"]
    assert not is_opaque(next(i for i in main if i.op.name == "add").op)  # an op of ours, same shape
    # `main:#output_0` (a '#' in a name) is a parameter, not debug symbols
    assert "main:#output_0" in main.param_names()
    # a branch reads main's @3: a parameter of the branch named as MIGraphX printed it
    assert p.modules["If_0_if"].param_names() == ["@3"]


def test_debug_symbols_become_scopes_and_symbols():
    r = read_program(MULTI)
    names = {v: k for k, v in r.names.items()}
    assert r.symbols[names["@7"]] == ("/enc/layer/Relu", "/enc/layer/Add")
    assert r.program.scopes[names["@7"]] == "enc/layer"
    assert r.program.scopes[names["@2"]] == "enc"
    assert names["@8"] not in r.program.scopes  # `@output_0:y` names an output, not a scope


def test_elided_literal_prints_elided_and_takes_no_memory():
    r = read_program("@0 = @literal{ ... } -> float_type, {4096, 4096}, {4096, 1}\n@1 = @return(@0)\n")
    lit = next(iter(r.program.modules["main"])).literal
    assert not any(lit.data.strides) and lit.data.shape == (4096, 4096)
    assert "@literal{ ... }" in print_program(r.program)


def test_values_types_and_target_id():
    text = """x = @param:x -> half_type, {1}, {0}, target_id=0
@1 = @literal{0.5} -> half_type, {1}, {0}, target_id=0
@2 = @literal{1, 0, 1} -> bool_type, {3}, {1}
@3 = convert[target_type=2](x) -> float_type, {1}, {0}, target_id=0
@4 = @return(@3), target_id=0
"""
    r = read_program(text)
    assert not r.problems, r.problems
    ins = list(r.program.modules["main"])
    assert ins[1].literal.data.tolist() == [0.5] and ins[2].literal.data.tolist() == [True, False, True]
    assert ins[3].op.name == "convert" and ins[3].shape.type == "float32"


@pytest.mark.parametrize(
    "text, lens, dyn",
    [
        ("float_type, {1, 3, 224, 224}, {150528, 50176, 224, 1}", (1, 3, 224, 224), None),
        ("float_type, {1, 8, 28, 28}, {0, 1, 0, 0}", (1, 8, 28, 28), None),
        ("float_type, {}, {}", (), None),
        ("dynamic, float_type, {[1, 4, 2], [3, 3, 0]}", (4, 3), [(1, 4, (2,)), (3, 3, ())]),  # ROCm 5.3-5.6
        ("dynamic, float_type, {[ 1, 4, {2} ], [ 3, 3, {} ]}", (4, 3), [(1, 4, (2,)), (3, 3, ())]),  # 5.7-7.2
        ("dynamic, float_type, {[1..4], 3}", (4, 3), [(1, 4, ()), (3, 3, ())]),  # develop 2026
    ],
)
def test_shapes_of_every_period(text, lens, dyn):
    s = parse_migraphx_shape(text)
    assert s.lens == lens
    if dyn is not None:
        assert [(d.min, d.max, d.optimals) for d in s.dyn_dims] == dyn


def test_tuple_and_symbolic_shapes():
    t = parse_migraphx_shape("[float_type, {2}, {1}, int64_type, {2}, {1}]")
    assert [s.type for s in t.sub_shapes] == ["float32", "int64"]
    sym = parse_migraphx_shape("float_type, {n, 3}, {3, 1}")
    assert sym.dyn_dims is not None and sym.lens[1] == 3


def test_unknown_op_draws_but_does_not_evaluate():
    r = read_program("x = @param:x -> float_type, {2}, {1}\n@1 = foo_bar[k=1](x) -> float_type, {2}, {1}\n@2 = @return(@1)\n")
    assert r.opaque["foo_bar"] == 1 and "foo_bar[k=1](x)" in print_program(r.program)
    with pytest.raises(MigxError, match="foo_bar .* no reference"):
        evaluate(r.program, {"x": np.zeros(2, np.float32)})


def test_garbled_lines_are_reported_with_their_line_numbers_and_reading_goes_on():
    text = """x = @param:x -> float_type, {2}, {1}
@1 = relu(x -> float_type, {2}, {1}
@2 = relu(x) -> float_type, {2}
@3 = add(x,@9) -> float_type, {2}, {1}
this is no instruction
@5 = relu(@3) -> flaot_type, {2}, {1}
@6 = @return(@3)
"""
    r = read_program(text)
    lines = sorted({p.line for p in r.problems})
    assert lines == [2, 3, 4, 5, 6], [str(p) for p in r.problems]
    assert any("@9 is not defined" in str(p) for p in r.problems)
    assert r.program.modules["main"].return_instruction() is not None


@pytest.mark.parametrize("name", sorted(p.name for p in DUMPS.glob("*.txt")))
def test_real_dumps_from_migraphx_docs_read_cleanly(name):
    log = read_log(str(DUMPS / name))
    assert log.kind == "program"
    assert not log.problems, [str(p) for p in log.problems]
    assert log.program.modules["main"].return_instruction() is not None or "read" in name or "fp16" in name


def test_parameter_names_with_spaces_and_inputs_naming_them():
    r = read_program("input 1 = @param:input 1 -> float_type, {2}, {1}\n@1 = relu(input 1) -> float_type, {2}, {1}\n")
    assert r.program.modules["main"].param_names() == ["input 1"]
    assert not r.problems, [str(p) for p in r.problems]


def test_elided_literals_of_two_reads_compare_without_touching_their_values():
    from migx_explore.compiler.snapshot import diff, snapshot

    text = "@0 = @literal{ ... } -> float_type, {64, 64}, {64, 1}\n@1 = @return(@0)\n"
    a, b = snapshot(read_program(text).program), snapshot(read_program(text).program)
    assert diff(a, b).is_noop
