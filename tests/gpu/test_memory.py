"""memory_coloring: no two live values share bytes, checked statically and by running the arena
plan with every region poisoned (NaN) as soon as its value is dead."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore import models
from migx_explore.compiler import evaluate
from migx_explore.compiler.inputs import random_inputs
from migx_explore.gpu import compile_program
from migx_explore.gpu.ops import output_buffers
from migx_explore.gpu.passes.memory_coloring import assign_offsets, live_intervals

from .op_cases import CASES


def _load_root(v):
    """The `load` a value lives in (views and kernel outputs followed, stopping at the load)."""
    while v.name != "load":
        if v.name == "get_tuple_elem":
            v = output_buffers(v.inputs[0])[v.op["index"]]
            continue
        alias = v.op.spec.output_alias
        if alias is None or v.is_builtin():
            return None
        v = v.inputs[alias(v.op, [i.shape for i in v.inputs])]
    return v


def load_intervals(main):
    instrs = list(main)
    span = {}
    for k, ins in enumerate(instrs):
        for v in ins.inputs:
            r = _load_root(v)
            if r is not None:
                s = span.setdefault(r.id, [k, k])
                s[0], s[1] = min(s[0], k), max(s[1], k)
    loads = {i.id: i for i in instrs if i.name == "load"}
    return {a: (loads[a], s[0], s[1]) for a, s in span.items()}


def assert_no_live_overlap(main):
    iv = list(load_intervals(main).values())
    for i, (a, s1, e1) in enumerate(iv):
        for b, s2, e2 in iv[i + 1 :]:
            if s1 <= e2 and s2 <= e1 and a.inputs[0] is b.inputs[0]:
                oa, ob = a.op["offset"], b.op["offset"]
                assert oa + a.shape.bytes() <= ob or ob + b.shape.bytes() <= oa, (
                    f"live buffers overlap: #{a.id} [{oa}, +{a.shape.bytes()}) and #{b.id} [{ob}, +{b.shape.bytes()})"
                )


def run_poisoned(compiled, feeds):
    """Run eagerly on the fake backend, poisoning each buffer right after its last use."""
    be = compiled.backend
    main = compiled.program.main
    order = {ins.id: k for k, ins in enumerate(main)}
    dead_after: dict[int, list] = {}
    for load, _, end in load_intervals(main).values():
        dead_after.setdefault(end, []).append(load)
    steps, info = compiled.steps.steps, compiled.steps.info
    last_step = {order[i.ins_id]: k for k, i in enumerate(info)}
    wrapped = []
    for k, (step, inf) in enumerate(zip(steps, info)):
        idx = order[inf.ins_id]

        def run(step=step, idx=idx, k=k):
            r = step()
            if last_step[idx] == k:
                for later in sorted(i for i in dead_after if i <= idx):
                    for load in dead_after.pop(later):
                        be.view(compiled.state.addresses[load.id], load.shape)[...] = np.nan
            return r

        wrapped.append(run)
    compiled.steps.steps = wrapped
    try:
        return compiled.run(feeds)
    finally:
        compiled.steps.steps = steps


PROGRAMS = {
    "resnet_block": lambda: models.load("resnet_block"),
    "yolo": lambda: models.load("yolo"),
    "conv_bias_relu": CASES["conv_bias_relu"],
    "layernorm": CASES["layernorm"],
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_arena_plan_survives_poisoning(fake, name):
    program = PROGRAMS[name]()
    feeds = random_inputs(program, seed=3)
    with compile_program(program, backend=fake) as c:
        assert_no_live_overlap(c.program.main)
        got = run_poisoned(c, feeds)
        for g, w in zip(got, evaluate(program, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)
        mem = c.memory()
        assert mem.arena_bytes < mem.naive_bytes or mem.buffers <= 2


def test_poisoning_catches_a_broken_plan(fake):
    program = models.load("resnet_block")
    feeds = random_inputs(program, seed=3)
    with compile_program(program, backend=fake) as c:
        main = c.program.main
        loads = [i for i in main if i.name == "load"]
        for ld in loads:  # everything at offset 0: live values now share bytes
            main.replace_instruction(ld, ld.op.with_(offset=0))
        with pytest.raises(AssertionError):
            assert_no_live_overlap(main)
        c.recompile(program=c.program)  # finalize the broken plan: the poisoned run must go wrong
        got = run_poisoned(c, feeds)
        assert not all(np.allclose(g, w, rtol=1e-3, atol=1e-4) for g, w in zip(got, evaluate(program, feeds)))


def test_assign_offsets_first_fit():
    sizes = {1: 1000, 2: 1000, 3: 500, 4: 2000}
    spans = {1: (0, 2), 2: (2, 4), 3: (3, 5), 4: (5, 6)}
    offs, peak = assign_offsets(sizes, spans)
    for a in sizes:
        for b in sizes:
            if a < b and spans[a][0] <= spans[b][1] and spans[b][0] <= spans[a][1]:
                assert offs[a] + sizes[a] <= offs[b] or offs[b] + sizes[b] <= offs[a]
    assert peak < sum(-(-s // 256) * 256 for s in sizes.values())


def test_liveness_extends_through_views_and_returns():
    import migx_explore.gpu.ops  # noqa: F401  (registers hip::allocate for the parser)
    from migx_explore.compiler import parse

    p = parse("""
        x = @param:x -> float_type, {4, 4}, {4, 1}
        @1 = hip::allocate[shape={float_type, {4, 4}, {4, 1}}]() -> float_type, {4, 4}, {4, 1}
        @2 = gpu::precompile_op[op=relu](x,@1) -> float_type, {4, 4}, {4, 1}
        @3 = transpose[permutation={1, 0}](@2) -> float_type, {4, 4}, {1, 4}
        @4 = hip::allocate[shape={float_type, {4, 4}, {4, 1}}]() -> float_type, {4, 4}, {4, 1}
        @5 = gpu::precompile_op[op=neg](@3,@4) -> float_type, {4, 4}, {4, 1}
        @6 = @return(@5, @3)
    """)
    spans = live_intervals(p.main)
    ids = [i.id for i in p.main if i.name == "hip::allocate"]
    end = len(p.main)  # returned values live past the last instruction
    assert spans[ids[0]] == (2, end)  # read through the transpose by @5, and returned through it
    assert spans[ids[1]] == (5, end)
