"""fuse_attention on the forms real exports emit (tests/attention_exports.py: HF BERT, GPT-2 and
Llama through torch's sdpa, both exporters): Q and Kᵀ scaled separately, Where/Add masks from a
bool tensor, the Where(IsNaN(p), 0, p) guard, GQA and rotary embeddings. Each becomes one group
whose numerics match onnxruntime, fully masked rows included (0); the backend emits the guarded
flash-attention kernel and no softmax kernel."""

from __future__ import annotations

import numpy as np
import pytest

from migx_explore.compiler import evaluate, parse
from migx_explore.compiler.onnx import parse_onnx
from migx_explore.compiler.pass_infra import PassManager, make_pass
from migx_explore.compiler.passes.fuse_attention import FindAttention
from migx_explore.compiler.pattern_rewriter import near_misses
from migx_explore.compiler.testing import check_pass
from tests.attention_exports import KINDS, sdpa_attention, sdpa_feeds


def _fused(kind: str, **kw):
    from migx_explore.gpu.pipelines import TARGET_INDEPENDENT, gpu_pipelines

    p = parse_onnx(sdpa_attention(kind, **kw))
    PassManager(validate=True).run(p, [pl for pl in gpu_pipelines() if pl.name in TARGET_INDEPENDENT])
    return p


def _onnxruntime(kind: str) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    model = sdpa_attention(kind)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, sdpa_feeds(kind)
    )[0]


@pytest.mark.parametrize("kind", KINDS)
def test_export_form_becomes_one_group_and_matches_onnxruntime(kind):
    p = _fused(kind)
    groups = [i for i in p.main if i.name == "group"]
    assert len(groups) == 1
    inside = [i.name for i in groups[0].module_inputs[0] if not i.is_builtin()]
    assert inside.count("dot") == 2 and {"isnan", "where"} <= set(inside), inside
    # the separate Q and Kᵀ scales moved into the group: nothing outside multiplies by √(1/√d)
    assert not any(i.name == "mul" and i.outputs and i.outputs[0] is groups[0] for i in p.main)
    want = _onnxruntime(kind)
    np.testing.assert_allclose(evaluate(p, sdpa_feeds(kind))[0], want, rtol=1e-5, atol=1e-5)


def test_fully_masked_rows_give_zero_through_the_guard():
    """Left padding plus the causal mask: batch 1's first three query rows see no key."""
    want = _onnxruntime("gpt2")
    assert not want[1, :3].any() and want[1, 3:].any()
    got = evaluate(_fused("gpt2"), sdpa_feeds("gpt2"))[0]
    assert not got[1, :3].any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_backend_emits_the_guarded_attention_kernel_and_no_softmax(kind):
    from migx_explore.gpu import compile as gpu_compile
    from migx_explore.gpu.runtime.fake import FakeBackend

    compiled = gpu_compile(sdpa_attention(kind), backend=FakeBackend())
    kernels = [i.kernel for i in compiled.steps.info if i.kind == "kernel"]
    assert sum(k.startswith("attention_") and k.endswith("_guarded_kernel") for k in kernels) == 1, kernels
    assert not any("reduce" in k or "softmax" in k for k in kernels), kernels


def test_guard_with_another_fill_is_a_near_miss_that_says_why():
    p = parse_onnx(sdpa_attention("bert", guard_fill=1.0))
    PassManager().run(p, [make_pass("simplify_reshapes"), make_pass("dead_code_elimination")])
    reasons = [m.reason for m in near_misses(p.main, FindAttention())]
    assert any("NaN guard fills with 1.0, not 0" in r for r in reasons), reasons


QKV = """
    q = @param:q -> float_type, {1, 2, 3, 4}
    k = @param:k -> float_type, {1, 2, 4, 3}
    v = @param:v -> float_type, {1, 2, 3, 4}
"""


def test_separate_q_and_k_scales_and_the_nan_guard_move_into_the_group():
    check_pass(
        QKV
        + """
        @3 = @literal{0.7} -> float_type, {1}
        @4 = @literal{0} -> float_type, {1}
        @5 = multibroadcast[out_lens={1, 2, 3, 4}](@3) -> float_type, {1, 2, 3, 4}, {0, 0, 0, 0}
        @6 = mul(q, @5) -> float_type, {1, 2, 3, 4}
        @7 = multibroadcast[out_lens={1, 2, 4, 3}](@3) -> float_type, {1, 2, 4, 3}, {0, 0, 0, 0}
        @8 = mul(@7, k) -> float_type, {1, 2, 4, 3}
        @9 = dot(@6, @8) -> float_type, {1, 2, 3, 3}
        @10 = softmax[axis=3](@9) -> float_type, {1, 2, 3, 3}
        @11 = isnan(@10) -> bool_type, {1, 2, 3, 3}
        @12 = multibroadcast[out_lens={1, 2, 3, 3}](@4) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @13 = where(@11, @12, @10) -> float_type, {1, 2, 3, 3}
        @14 = dot(@13, v) -> float_type, {1, 2, 3, 4}
        @15 = @return(@14)
    """,
        [make_pass("fuse_attention"), make_pass("dead_code_elimination")],
        QKV
        + """
        @3 = group[tag=attention](q, k, v), [attn0] -> float_type, {1, 2, 3, 4}
        @4 = @return(@3)

        module: "attn0" bypass
        x0 = @param:x0 -> float_type, {1, 2, 3, 4}
        x1 = @param:x1 -> float_type, {1, 2, 4, 3}
        x2 = @param:x2 -> float_type, {1, 2, 3, 4}
        @3 = @literal{0.7} -> float_type, {1}
        @4 = @literal{0} -> float_type, {1}
        @5 = dot(x0, x1) -> float_type, {1, 2, 3, 3}
        @6 = multibroadcast[out_lens={1, 2, 3, 3}](@3) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @7 = mul(@5, @6) -> float_type, {1, 2, 3, 3}
        @8 = multibroadcast[out_lens={1, 2, 3, 3}](@3) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @9 = mul(@7, @8) -> float_type, {1, 2, 3, 3}
        @10 = softmax[axis=3](@9) -> float_type, {1, 2, 3, 3}
        @11 = isnan(@10) -> bool_type, {1, 2, 3, 3}
        @12 = multibroadcast[out_lens={1, 2, 3, 3}](@4) -> float_type, {1, 2, 3, 3}, {0, 0, 0, 0}
        @13 = where(@11, @12, @10) -> float_type, {1, 2, 3, 3}
        @14 = dot(@13, x2) -> float_type, {1, 2, 3, 4}
        @15 = @return(@14)
    """,
    )


def test_a_scaled_operand_with_another_user_keeps_its_mul_outside():
    p = parse(
        QKV
        + """
        @3 = @literal{0.7} -> float_type, {1}
        @4 = multibroadcast[out_lens={1, 2, 3, 4}](@3) -> float_type, {1, 2, 3, 4}, {0, 0, 0, 0}
        @5 = mul(q, @4) -> float_type, {1, 2, 3, 4}
        @6 = dot(@5, k) -> float_type, {1, 2, 3, 3}
        @7 = softmax[axis=3](@6) -> float_type, {1, 2, 3, 3}
        @8 = dot(@7, v) -> float_type, {1, 2, 3, 4}
        @9 = @return(@8, @5)
    """
    )
    before = p.copy()
    PassManager().run(p, [make_pass("fuse_attention"), make_pass("dead_code_elimination")])
    group = next(i for i in p.main if i.name == "group")
    assert group.inputs[0].name == "mul"
    rng = np.random.default_rng(0)
    feeds = {
        n: rng.standard_normal(s).astype(np.float32)
        for n, s in (("q", (1, 2, 3, 4)), ("k", (1, 2, 4, 3)), ("v", (1, 2, 3, 4)))
    }
    for got, want in zip(evaluate(p, feeds), evaluate(before, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_real_hf_sdpa_exports_get_one_group_per_layer(family):
    """Where torch and transformers are installed (no download: models built from a config with
    random weights), the TorchScript exporter's form of each family fuses, one group per layer,
    and evaluates like PyTorch."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import io

    import onnx

    from migx_explore.compiler.pass_infra import PassManager
    from migx_explore.gpu.pipelines import TARGET_INDEPENDENT, gpu_pipelines

    small = dict(
        vocab_size=100, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, max_position_embeddings=64
    )
    cfg = {
        "bert": lambda: transformers.BertConfig(hidden_size=64, **small),
        "gpt2": lambda: transformers.GPT2Config(
            vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64, use_cache=False
        ),
        "llama": lambda: transformers.LlamaConfig(hidden_size=64, num_key_value_heads=2, use_cache=False, **small),
    }[family]()
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(cfg, attn_implementation="sdpa").eval()
    ids = np.random.default_rng(0).integers(0, 100, (2, 16)).astype(np.int64)
    mask = np.ones((2, 16), np.int64)
    mask[1, 11:] = 0

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model  # a submodule: its weights export as initializers, not traced constants

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    args = (torch.from_numpy(ids), torch.from_numpy(mask))
    buf = io.BytesIO()
    wrapped = LastHidden().eval()
    with torch.no_grad():
        want = wrapped(*args).numpy()
        torch.onnx.export(
            wrapped, args, buf, input_names=["input_ids", "attention_mask"], opset_version=18, dynamo=False
        )
    p = parse_onnx(onnx.load_from_string(buf.getvalue()))
    PassManager().run(p, [pl for pl in gpu_pipelines() if pl.name in TARGET_INDEPENDENT])
    assert sum(i.name == "group" for i in p.main) == 2
    got = evaluate(p, {"input_ids": ids, "attention_mask": mask})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
