"""Built-in example models, built in code with onnx.helper and seeded weights (no downloads).

list_models()                   -> names
get_model(name)                 -> onnx.ModelProto
load(name, **input_dims)        -> Program   e.g. load("dynamic_mlp", x=[8, 64])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import onnx

from .bert_encoder import bert_encoder
from .bilstm import bilstm
from .cnn import mobilenet, resnet18, resnet_block
from .gpt2_decode import gpt2_decode
from .llama_decoder import llama_decoder
from .mlp import dynamic_mlp, mlp
from .transformer import transformer
from .unet_unnamed import unet_unnamed
from .yolo import yolo
from .yolo_e2e import yolo_e2e
from .yolov8 import yolov8
from .yolov10n import yolov10n

_MODELS: dict[str, tuple[Callable[[], onnx.ModelProto], str]] = {
    "resnet_block": (resnet_block, "two ResNet basic blocks (conv-bn-relu, residual add), 1x16x32x32"),
    "resnet18": (resnet18, "ResNet-18 layout, 1x3x224x224 -> 1000 logits"),
    "mobilenet": (mobilenet, "MobileNetV2 inverted residuals (1x1 expand, depthwise 3x3, 1x1 project, ReLU6)"),
    "yolo": (yolo, "YOLOv8-style Conv+SiLU, C2f, SPPF, Resize upsample + Concat, detect head"),
    "yolo_e2e": (
        yolo_e2e,
        "YOLOv10-style end-to-end detector: DFL head, NMS-free TopK / GatherElements / GatherND post-processing",
    ),
    "yolov8": (
        yolov8,
        "full YOLOv8-shaped detector (backbone, PAN neck, 3-scale head, DFL; n width, l "
        "depth): ~800 instructions, the real-size example",
    ),
    "yolov10n": (
        yolov10n,
        "YOLOv10n-shaped export with Ultralytics' node names (/model.2/m.0/cv1/conv/Conv): "
        "SCDown, PSA attention, C2fCIB, one-to-one v10Detect + TopK post-processing; "
        "~725 instructions, the explorer's speed benchmark",
    ),
    "bilstm": (
        bilstm,
        "2-layer bidirectional LSTM (seq 32, hidden 96) as torch.onnx exports it; "
        "rewrite_rnn unrolls it to thousands of instructions (the big-graph example)",
    ),
    "transformer": (transformer, "encoder layer: attention with a -inf causal mask, LayerNorm, Erf GELU"),
    "mlp": (mlp, "Gemm/ReLU classifier on 1x784"),
    "dynamic_mlp": (dynamic_mlp, "MatMul/Add MLP with a symbolic batch dim"),
    "gpt2_decode": (gpt2_decode, "GPT-2-style decoder step, 4 layers d128, KV cache (dims P = past, T = new tokens)"),
    "bert_encoder": (
        bert_encoder,
        "BERT-style encoder, 4 layers, node names as torch.onnx writes them "
        "(/bert/encoder/layer.N/attention/self/query/MatMul): scoped",
    ),
    "llama_decoder": (
        llama_decoder,
        "Llama-style decoder, 4 layers (RMSNorm, causal attention, SiLU-gated MLP) "
        "as the dynamo exporter writes it: scopes in metadata_props",
    ),
    "unet_unnamed": (unet_unnamed, "small U-Net with no node names (the explorer derives its groups from the graph)"),
}


def list_models() -> list[str]:
    return list(_MODELS)


def describe(name: str) -> str:
    return _entry(name)[1]


def _entry(name: str):
    try:
        return _MODELS[name]
    except KeyError:
        from migx_explore.compiler.errors import MigxError

        raise MigxError(f"unknown built-in model {name!r}; built-in models: {', '.join(_MODELS)}") from None


@functools.cache
def _serialized(name: str) -> bytes:
    return _entry(name)[0]().SerializeToString()


def get_model(name: str) -> onnx.ModelProto:
    """A fresh ModelProto (weights are seeded, so identical on every call; built once per process)."""
    return onnx.load_model_from_string(_serialized(name))


def load(name: str, *, feed=None, **input_dims: Sequence[int]):
    """Import a built-in model; keyword arguments fix input dims by ONNX input name or dim_param
    name (`load("gpt2_decode", P=127, T=1)`); `feed` takes every input's dims from its arrays."""
    from migx_explore.compiler.onnx import parse_onnx

    _entry(name)
    return parse_onnx(_serialized(name), input_dims=input_dims or None, feed=feed)


__all__ = ["describe", "get_model", "list_models", "load"]
