"""Export small Hugging Face transformers (random weights, built from a config: no download) to
ONNX with both torch exporters, for studying the attention forms real exports emit:

    bert   BertModel with a padding mask      gpt2   GPT2Model with a padding mask (and causal)
    llama  LlamaModel, GQA (4 query heads, 2 KV heads), rotary embeddings, padding mask

each with attn_implementation "eager" and "sdpa", each through torch.onnx.export(dynamo=False)
(the TorchScript exporter) and dynamo=True. Every export runs in its own process (they are
independent and the dynamo exporter is slow); each writes NAME.onnx and NAME.npz (the feeds and
PyTorch's last_hidden_state) into --out, plus summary.json (op histogram or the error per export).

    python3 benchmarks/hf_exports.py --out /tmp/hf [--seq 16] [--jobs 12]
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

MODELS = ("bert", "gpt2", "llama")
IMPLS = ("eager", "sdpa")
EXPORTERS = ("legacy", "dynamo")


def build(name: str, impl: str, seq: int):
    """(module taking the feeds in order, feeds) for one HF model family."""
    import torch
    from transformers import AutoModel, BertConfig, GPT2Config, LlamaConfig

    if name == "bert":
        cfg = BertConfig(
            vocab_size=100,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    elif name == "gpt2":
        cfg = GPT2Config(
            vocab_size=100,
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            use_cache=False,
        )
    else:
        cfg = LlamaConfig(
            vocab_size=100,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            max_position_embeddings=64,
            use_cache=False,
        )
    torch.manual_seed(0)
    model = AutoModel.from_config(cfg, attn_implementation=impl).eval()
    ids = np.random.default_rng(0).integers(0, 100, (2, seq)).astype(np.int64)
    mask = np.ones((2, seq), np.int64)
    mask[1, seq - 5 :] = 0  # padding at the end of the second row
    names = ["input_ids", "attention_mask"]

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return LastHidden().eval(), dict(zip(names, (ids, mask)))


def export_one(job: tuple[str, str, str, int, str]) -> dict:
    name, impl, exporter, seq, out = job
    tag = f"{name}_{impl}_{exporter}"
    try:
        import onnx
        import torch

        module, feeds = build(name, impl, seq)
        args = tuple(torch.from_numpy(v) for v in feeds.values())
        with torch.no_grad():
            expected = module(*args).numpy()
        path = Path(out) / f"{tag}.onnx"
        with torch.no_grad():
            torch.onnx.export(
                module,
                args,
                str(path),
                input_names=list(feeds),
                output_names=["hidden"],
                opset_version=18,
                dynamo=exporter == "dynamo",
            )
        m = onnx.load(str(path), load_external_data=True)
        onnx.save(m, str(path))  # one self-contained file (dynamo may write external data)
        np.savez(Path(out) / f"{tag}.npz", expected=expected, **feeds)
        ops = Counter(n.op_type for n in m.graph.node)
        return {"tag": tag, "ok": True, "nodes": len(m.graph.node), "ops": dict(sorted(ops.items()))}
    except Exception as e:  # noqa: BLE001 - recorded per export, the others go on
        return {
            "tag": tag,
            "ok": False,
            "error": f"{type(e).__name__}: {str(e)[:400]}",
            "trace": traceback.format_exc()[-1500:],
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=12)
    a = ap.parse_args()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    jobs = [(m, i, e, a.seq, a.out) for m in MODELS for i in IMPLS for e in EXPORTERS]
    with ProcessPoolExecutor(a.jobs) as pool:
        results = list(pool.map(export_one, jobs))
    (Path(a.out) / "summary.json").write_text(json.dumps(results, indent=1))
    for r in results:
        print(r["tag"], "ok" if r["ok"] else r["error"], file=sys.stderr)


if __name__ == "__main__":
    main()
