"""Transformer models for the GPU benchmark, built from Hugging Face configs (random weights, no
download) and exported with torch.onnx.export, so both sides run the same network: PyTorch runs
the HF module itself (eager, CUDA graph, torch.compile + CUDA graph) and we run its ONNX export.

    bert   BertModel, hidden 256, 4 layers, 4 heads, seq 128, with an attention_mask input whose
           last 16 positions are padding (the exported padding-mask form)
    gpt2   GPT2Model, n_embd 128, 4 layers, 4 heads, seq 128 (the exported causal-mask form)
    llama  LlamaModel, hidden 128, 4 layers, 4 query heads sharing 2 K/V heads (GQA), rotary
           embeddings, seq 64
    vit    ViTModel, hidden 192, 4 layers, 3 heads (head dim 64), 224x224 image, 16x16 patches
           (197 tokens, no mask)
    whisper  WhisperEncoder, d_model 128, 2 layers, 4 heads, 80 mel bins x 512 frames (256
           positions after the strided convolution, no mask)
    convnext ConvNextModel, widths 32/64/128/256, depths 1/1/3/1, 128x128 image (no attention:
           depthwise 7x7 convolutions, channels-last layernorms, GELU MLPs)

Biases and layernorm parameters are randomised (fresh HF models have zero biases and unit
scales, which constant folding would unfairly delete). Attention is HF's "sdpa" implementation
(torch's scaled_dot_product_attention, the transformers default) on both sides: PyTorch runs its
fused kernels, and the export carries the decomposed form (Q and Kᵀ scaled separately, a
Where-built mask, the IsNaN guard) that fuse_attention turns into one kernel. ATTENTION =
"eager" gives the older matmul/softmax/matmul form. Where transformers or the exporter is
missing or fails, an equivalent network from migx_explore's built-in transformer builder stands
in (recorded as source "builtin").
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

SEQ = 128
PADDING = 16
ATTENTION = "sdpa"


@dataclass
class TransformerCase:
    name: str
    source: str  # "hf" or "builtin"
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]  # ONNX input name -> value
    torch_module: Any  # a torch.nn.Module on the GPU taking the feeds' tensors in input order
    note: str = ""


def _attention(cfg) -> None:
    for attr in ("_attn_implementation", "attn_implementation"):
        try:
            setattr(cfg, attr, ATTENTION)
        except Exception:  # noqa: BLE001 - newer configs make one of them a property
            pass


def _randomize_vectors(model) -> None:
    """Fresh HF models have zero biases and unit layernorm scales, which our constant folding
    would delete (and torch.compile would not): give every 1-D parameter trained-looking values."""
    import torch

    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.05 * torch.randn(p.shape, generator=g))


def _export(module, args: tuple, names: list[str]) -> onnx.ModelProto:
    import torch

    buf = io.BytesIO()
    errors = []
    for dynamo in (False, True):
        try:
            with torch.no_grad():
                torch.onnx.export(
                    module,
                    args,
                    buf,
                    input_names=names,
                    output_names=["hidden"],
                    opset_version=18,
                    do_constant_folding=True,
                    dynamo=dynamo,
                )
            return onnx.load_from_string(buf.getvalue())
        except Exception as e:  # noqa: BLE001 - try the other exporter
            errors.append(f"dynamo={dynamo}: {type(e).__name__}: {str(e)[:200]}")
            buf = io.BytesIO()
    raise RuntimeError("; ".join(errors))


def _last_hidden(model, names: list[str]):
    """module(*tensors) -> last_hidden_state of the HF model (what both sides compute)."""
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *xs):
            return self.model(**dict(zip(names, xs))).last_hidden_state

    return LastHidden().eval()


def hf_bert() -> TransformerCase:
    import torch
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=1000,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=SEQ,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    _attention(cfg)
    torch.manual_seed(0)
    model = BertModel(cfg, add_pooling_layer=False).eval()
    _randomize_vectors(model)
    names = ["input_ids", "attention_mask"]
    ids = np.random.default_rng(0).integers(0, 1000, (1, SEQ)).astype(np.int64)
    mask = np.ones((1, SEQ), np.int64)
    mask[:, SEQ - PADDING :] = 0
    wrapped = _last_hidden(model, names)
    onnx_model = _export(wrapped, (torch.from_numpy(ids), torch.from_numpy(mask)), names)
    return TransformerCase("bert", "hf", onnx_model, {"input_ids": ids, "attention_mask": mask}, wrapped.cuda())


def hf_gpt2() -> TransformerCase:
    import torch
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(
        vocab_size=1000,
        n_embd=128,
        n_layer=4,
        n_head=4,
        n_positions=SEQ,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
    )
    _attention(cfg)
    torch.manual_seed(0)
    model = GPT2Model(cfg).eval()
    _randomize_vectors(model)
    names = ["input_ids"]
    ids = np.random.default_rng(1).integers(0, 1000, (1, SEQ)).astype(np.int64)
    wrapped = _last_hidden(model, names)
    onnx_model = _export(wrapped, (torch.from_numpy(ids),), names)
    return TransformerCase("gpt2", "hf", onnx_model, {"input_ids": ids}, wrapped.cuda())


def hf_llama() -> TransformerCase:
    import torch
    from transformers import LlamaConfig, LlamaModel

    seq = 64
    cfg = LlamaConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=512,
        max_position_embeddings=seq,
        use_cache=False,
    )
    _attention(cfg)
    torch.manual_seed(0)
    model = LlamaModel(cfg).eval()
    _randomize_vectors(model)
    names = ["input_ids"]
    ids = np.random.default_rng(2).integers(0, 1000, (1, seq)).astype(np.int64)
    wrapped = _last_hidden(model, names)
    onnx_model = _export(wrapped, (torch.from_numpy(ids),), names)
    return TransformerCase("llama", "hf", onnx_model, {"input_ids": ids}, wrapped.cuda())


def _image_case(name: str, model, size: int, seed: int) -> TransformerCase:
    import torch

    torch.manual_seed(0)
    _randomize_vectors(model)
    names = ["pixel_values"]
    x = np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype(np.float32)
    wrapped = _last_hidden(model.eval(), names)
    onnx_model = _export(wrapped, (torch.from_numpy(x),), names)
    return TransformerCase(name, "hf", onnx_model, {"pixel_values": x}, wrapped.cuda())


def hf_vit() -> TransformerCase:
    import torch
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(
        hidden_size=192,
        num_hidden_layers=4,
        num_attention_heads=3,
        intermediate_size=768,
        image_size=224,
        patch_size=16,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    _attention(cfg)
    torch.manual_seed(0)
    return _image_case("vit", ViTModel(cfg, add_pooling_layer=False), 224, 3)


def hf_convnext() -> TransformerCase:
    import torch
    from transformers import ConvNextConfig, ConvNextModel

    cfg = ConvNextConfig(hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 3, 1], image_size=128)
    torch.manual_seed(0)
    return _image_case("convnext", ConvNextModel(cfg), 128, 4)


def hf_whisper_encoder() -> TransformerCase:
    import torch
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    positions = 256  # the encoder wants exactly 2 x max_source_positions input frames
    cfg = WhisperConfig(
        d_model=128,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=512,
        num_mel_bins=80,
        max_source_positions=positions,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    _attention(cfg)
    torch.manual_seed(0)
    model = WhisperEncoder(cfg).eval()
    _randomize_vectors(model)
    names = ["input_features"]
    x = np.random.default_rng(5).standard_normal((1, 80, 2 * positions)).astype(np.float32)
    wrapped = _last_hidden(model, names)
    onnx_model = _export(wrapped, (torch.from_numpy(x),), names)
    return TransformerCase("whisper", "hf", onnx_model, {"input_features": x}, wrapped.cuda())


def builtin_case(name: str, d_model: int, why: str) -> TransformerCase:
    from gpu_onnx_torch import OnnxTorch

    from migx_explore.models.transformer import transformer

    model = transformer(seq=SEQ, d_model=d_model, heads=4, d_ff=4 * d_model, layers=4)
    x = np.random.default_rng(2).standard_normal((1, SEQ, d_model)).astype(np.float32)
    net = OnnxTorch(model)
    return TransformerCase(name, "builtin", model, {"hidden": x}, net, note=why)


def transformer_cases(names: list[str]) -> list[TransformerCase]:
    """The HF cases named; a failed language model is replaced by the built-in transformer of its
    width, a failed image/audio model (no built-in counterpart) is left out with a message."""
    builders = {
        "bert": (hf_bert, 256),
        "gpt2": (hf_gpt2, 128),
        "llama": (hf_llama, 128),
        "vit": (hf_vit, None),
        "whisper": (hf_whisper_encoder, None),
        "convnext": (hf_convnext, None),
    }
    from gpu_export_kinds import BUILDERS as MORE_KINDS  # swin, t5, vae: beside this file, not to grow it

    builders.update(MORE_KINDS)
    out = []
    for n in names:
        if n not in builders:
            raise SystemExit(f"gpu_transformers: unknown model {n!r} (known: {', '.join(builders)})")
        build, d = builders[n]
        try:
            out.append(build())
        except Exception as e:  # noqa: BLE001 - no transformers, or the export failed
            why = f"HF build/export failed: {type(e).__name__}: {str(e)[:300]}"
            if d is None:
                print(f"{n}: left out: {why}", flush=True)
            else:
                out.append(builtin_case(n, d, why))
    return out
