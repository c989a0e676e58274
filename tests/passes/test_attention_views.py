"""fold_attention_views (in fuse_attention): the K/V head repeat of grouped-query attention
(Unsqueeze, Expand and a Reshape of the broadcast, or Tile) and Kᵀ's copied transpose are read
by the attention kernel through strides, so lowering leaves no copy kernel in front of the
group, for each export form and repeat factor (MQA included); the folded group computes what
the graph does (reference evaluator, and the fake backend's buffers, against onnxruntime)."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate
from migx_explore.compiler.ir import Instruction
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.pass_infra import PassManager, make_pass
from migx_explore.compiler.passes.fuse_attention import FoldAttentionViews
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.shape import Shape
from migx_explore.compiler.strided_view import axes_of, compose, refine_batch
from migx_explore.compiler.testing import check_pass
from tests.attention_exports import GQA_FORMS, gqa_attention, gqa_feeds, sdpa_attention

HEADS = [(4, 2), (6, 2), (4, 1), (8, 2)]  # (query heads, K/V heads): rep 2, 3, MQA, 4
VIEWS = ("reshape", "transpose", "multibroadcast", "broadcast", "unsqueeze", "squeeze", "slice", "load")


def _onnxruntime(model, feeds) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def copies_feeding(ins: Instruction) -> list[str]:
    """The copy kernels whose results reach `ins` through views only."""
    out, stack = [], list(ins.inputs)
    while stack:
        x = stack.pop()
        if x.name == "gpu::code_object" and x.op["op"] == "contiguous":
            out.append(x.op["symbol_name"])
        elif x.name in VIEWS:
            stack.extend(x.inputs)
    return out


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("heads, kv_heads", HEADS)
@pytest.mark.parametrize("form", GQA_FORMS)
def test_gqa_attention_lowers_with_no_copy_in_front_of_the_group(form, heads, kv_heads, precision):
    from migx_explore.gpu import compile as gpu_compile
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime.fake import FakeBackend

    model = gqa_attention(form, heads=heads, kv_heads=kv_heads)
    compiled = gpu_compile(model, CompileOptions(precision=precision), backend=FakeBackend())
    main = compiled.program.main
    groups = [i for i in main if i.name == "gpu::code_object" and i.op["op"].startswith("group[tag=attention]")]
    assert len(groups) == 1
    assert copies_feeding(groups[0]) == [], str(main)
    assert not any(i.name == "gpu::code_object" and i.op["op"] == "contiguous" for i in main), str(main)
    assert not compiled.steps.host_ops
    fuse = next(r for r in compiled.trace if r.name == "fuse_attention")
    assert [m.rule for m in fuse.matches] == ["find_attention", "fold_attention_views"]
    feeds = gqa_feeds(model)
    want = _onnxruntime(model, feeds)
    tol = 1e-5 if precision == "fp32" else 2e-2
    np.testing.assert_allclose(compiled.run(feeds, mode="eager")[0].astype(np.float32), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("heads, kv_heads", HEADS)
@pytest.mark.parametrize("form", GQA_FORMS)
def test_the_folded_group_evaluates_like_the_graph(form, heads, kv_heads):
    from migx_explore.gpu.pipelines import TARGET_INDEPENDENT, gpu_pipelines

    model = gqa_attention(form, heads=heads, kv_heads=kv_heads)
    p = parse_onnx(model)
    PassManager(validate=True).run(p, [pl for pl in gpu_pipelines() if pl.name in TARGET_INDEPENDENT])
    (group,) = [i for i in p.main if i.name == "group"]
    sub = group.module_inputs[0]
    # K and V come in un-repeated (5-D broadcast, or Tile's [b, rep, kv, s, d] view); the views are inside
    assert not any(x.name in ("reshape", "contiguous") for x in group.inputs)
    assert sum(i.name in ("reshape", "contiguous") for i in sub) >= 2, str(sub)
    feeds = gqa_feeds(model)
    np.testing.assert_allclose(evaluate(p, feeds)[0], _onnxruntime(model, feeds), rtol=1e-5, atol=1e-5)


def test_the_hf_llama_export_form_folds_too():
    """tests/attention_exports.py's Llama layer (rotary embeddings, the scale on Kᵀ, padding and
    causal masks, the NaN guard): the copies of the K/V repeat leave main, the pass's diff
    shows them gone and its matches name the rule."""
    from migx_explore.gpu.pipelines import TARGET_INDEPENDENT, gpu_pipelines

    p = parse_onnx(sdpa_attention("llama"))
    trace = PassManager(validate=True).run(p, [pl for pl in gpu_pipelines() if pl.name in TARGET_INDEPENDENT])
    fuse = next(r for r in trace if r.name == "fuse_attention")
    assert [m.rule for m in fuse.matches] == ["find_attention", "fold_attention_views"]
    before = fuse.before.by_id
    assert sum(before[i][1].name == "contiguous" for i in fuse.diff.removed if i in before) == 2
    assert not any(i.name == "contiguous" for i in p.main)


def test_multi_head_attention_is_a_near_miss_that_says_why():
    from migx_explore.gpu.pipelines import TARGET_INDEPENDENT, gpu_pipelines

    p = parse_onnx(sdpa_attention("bert"))
    PassManager().run(p, [pl for pl in gpu_pipelines() if pl.name in TARGET_INDEPENDENT])
    reasons = [m.reason for m in near_misses(p.main, FoldAttentionViews())]
    assert any("no Q, Kᵀ or V input is a copy made by views" in r for r in reasons), reasons


def test_refine_batch_splits_a_repeated_head_axis_and_refuses_crossing_splits():
    # K repeated: head axis (2, s=512) then (2, 0); Q's head axis one stride of 64
    k = [[(2, 512), (2, 0)], [(8, 1)], [(8, 8)]]
    q = axes_of(Shape.of("float32", [4, 8, 8]))
    lens, strides = refine_batch([q, k], 1)
    assert lens == [2, 2] and strides == [[128, 64, 8, 1], [512, 0, 1, 8]]
    # a head axis of 6 split (2, 3) by one operand and (3, 2) by the other: no single split
    assert refine_batch([[[(2, 3), (3, 0)], [(4, 1)]], [[(3, 0), (2, 1)], [(4, 1)]]], 1) is None
    # a non-batch axis of two strides (a transposed pair merged) is no strided read
    assert refine_batch([[[(2, 8)], [(3, 1), (4, 3)]]], 1) is None


def test_compose_follows_the_dynamo_kt_chain_and_refuses_a_reshape_across_atoms():
    from migx_explore.compiler import parse

    p = parse(
        """
        x = @param:x -> float32, {1, 2, 1, 8, 4}
        b = multibroadcast[out_lens={1, 2, 3, 8, 4}](x) -> float32, {1, 2, 3, 8, 4}, {0, 32, 0, 4, 1}
        r = reshape[dims={6, 8, 4}](b) -> float32, {6, 8, 4}
        t = transpose[permutation={0, 2, 1}](r) -> float32, {6, 4, 8}, {32, 1, 4}
        c = contiguous(t) -> float32, {6, 4, 8}
        kt = reshape[dims={1, 6, 4, 8}](c) -> float32, {1, 6, 4, 8}
        ret = @return(kt)
        """
    )
    chain = [i for i in p.main if i.name in ("reshape", "transpose", "contiguous")]
    src = next(i for i in p.main if i.name == "multibroadcast").shape
    # head axis: K/V head (2, stride 32) then the repeat (3, stride 0); Kᵀ's d and key axes swapped
    assert compose(src, chain) == [[], [(2, 32), (3, 0)], [(4, 1)], [(8, 4)]]
    # [2, 3] transposed and reshaped to [2, 3]: the middle of an atom, no strided read
    shape = Shape.of("float32", [2, 3])
    bad = parse(
        """
        x = @param:x -> float32, {2, 3}
        t = transpose[permutation={1, 0}](x) -> float32, {3, 2}, {1, 3}
        r = reshape[dims={2, 3}](t) -> float32, {2, 3}
        ret = @return(r)
        """
    )
    assert compose(shape, [i for i in bad.main if i.name in ("transpose", "reshape")]) is None


def test_fold_rewrites_the_group_to_read_the_repeat_s_source():
    check_pass(
        """
        q = @param:q -> float_type, {1, 4, 3, 2}
        k = @param:k -> float_type, {1, 2, 3, 2}
        v = @param:v -> float_type, {1, 2, 3, 2}
        @3 = unsqueeze[axes={2}](k) -> float_type, {1, 2, 1, 3, 2}, {12, 6, 6, 2, 1}
        @4 = multibroadcast[out_lens={1, 2, 2, 3, 2}](@3) -> float_type, {1, 2, 2, 3, 2}, {0, 6, 0, 2, 1}
        @5 = contiguous(@4) -> float_type, {1, 2, 2, 3, 2}
        @6 = reshape[dims={1, 4, 3, 2}](@5) -> float_type, {1, 4, 3, 2}
        @7 = transpose[permutation={0, 1, 3, 2}](@6) -> float_type, {1, 4, 2, 3}, {24, 6, 1, 2}
        @8 = unsqueeze[axes={2}](v) -> float_type, {1, 2, 1, 3, 2}, {12, 6, 6, 2, 1}
        @9 = multibroadcast[out_lens={1, 2, 2, 3, 2}](@8) -> float_type, {1, 2, 2, 3, 2}, {0, 6, 0, 2, 1}
        @10 = reshape[dims={1, 4, 3, 2}](@9) -> float_type, {1, 4, 3, 2}
        @11 = dot(q, @7) -> float_type, {1, 4, 3, 3}
        @12 = softmax[axis=3](@11) -> float_type, {1, 4, 3, 3}
        @13 = dot(@12, @10) -> float_type, {1, 4, 3, 2}
        @14 = @return(@13)
    """,
        [make_pass("fuse_attention"), make_pass("dead_code_elimination")],
        """
        q = @param:q -> float_type, {1, 4, 3, 2}
        k = @param:k -> float_type, {1, 2, 3, 2}
        v = @param:v -> float_type, {1, 2, 3, 2}
        @3 = unsqueeze[axes={2}](k) -> float_type, {1, 2, 1, 3, 2}, {12, 6, 6, 2, 1}
        @4 = multibroadcast[out_lens={1, 2, 2, 3, 2}](@3) -> float_type, {1, 2, 2, 3, 2}, {0, 6, 0, 2, 1}
        @5 = unsqueeze[axes={2}](v) -> float_type, {1, 2, 1, 3, 2}, {12, 6, 6, 2, 1}
        @6 = multibroadcast[out_lens={1, 2, 2, 3, 2}](@5) -> float_type, {1, 2, 2, 3, 2}, {0, 6, 0, 2, 1}
        @7 = group[tag=attention](q, @4, @6), [attn0] -> float_type, {1, 4, 3, 2}
        @8 = @return(@7)

        module: "attn0" bypass
        x0 = @param:x0 -> float_type, {1, 4, 3, 2}
        x1 = @param:x1 -> float_type, {1, 2, 2, 3, 2}
        x2 = @param:x2 -> float_type, {1, 2, 2, 3, 2}
        @3 = contiguous(x1) -> float_type, {1, 2, 2, 3, 2}
        @4 = reshape[dims={1, 4, 3, 2}](@3) -> float_type, {1, 4, 3, 2}
        @5 = transpose[permutation={0, 1, 3, 2}](@4) -> float_type, {1, 4, 2, 3}, {24, 6, 1, 2}
        @6 = reshape[dims={1, 4, 3, 2}](x2) -> float_type, {1, 4, 3, 2}
        @7 = dot(x0, @5) -> float_type, {1, 4, 3, 3}
        @8 = softmax[axis=3](@7) -> float_type, {1, 4, 3, 3}
        @9 = dot(@8, @6) -> float_type, {1, 4, 3, 2}
        @10 = @return(@9)
    """,
    )
