"""More export kinds for the GPU table, built the way gpu_transformers.py builds its cases: a
PyTorch module with random weights (no download), exported with torch.onnx.export, so PyTorch runs
the module itself and we run its ONNX export.

    swin   SwinModel, embed 48, depths 2/2/6/2, heads 3/6/12/24, window 7, 224x224 image
           (shifted-window attention: roll, window partition reshapes, relative position bias)
    t5     T5Model (encoder-decoder), d_model 128, 2+2 layers, 4 heads, source 64 and target 32
           tokens (relative attention buckets, cross-attention, RMS layernorm)
    vae    a Stable-Diffusion-style VAE decoder: 4x32x32 latent to a 3x256x256 image through
           GroupNorm/SiLU residual blocks, one spatial self-attention block and three nearest
           2x upsamplings (widths 128/128/64/64)

gpu_transformers.transformer_cases picks these up by name (`--transformers swin,t5,vae`).
"""

from __future__ import annotations

import numpy as np
from gpu_transformers import TransformerCase, _attention, _export, _last_hidden, _randomize_vectors


def hf_swin() -> TransformerCase:
    import torch
    from transformers import SwinConfig, SwinModel

    cfg = SwinConfig(
        image_size=224,
        patch_size=4,
        embed_dim=48,
        depths=[2, 2, 6, 2],
        num_heads=[3, 6, 12, 24],
        window_size=7,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        drop_path_rate=0.0,
    )
    _attention(cfg)
    torch.manual_seed(0)
    model = SwinModel(cfg, add_pooling_layer=False).eval()
    _randomize_vectors(model)
    names = ["pixel_values"]
    x = np.random.default_rng(6).standard_normal((1, 3, 224, 224)).astype(np.float32)
    wrapped = _last_hidden(model, names)
    onnx_model = _export(wrapped, (torch.from_numpy(x),), names)
    return TransformerCase("swin", "hf", onnx_model, {"pixel_values": x}, wrapped.cuda())


def hf_t5() -> TransformerCase:
    import torch
    from transformers import T5Config, T5Model

    cfg = T5Config(
        vocab_size=1000,
        d_model=128,
        d_kv=32,
        d_ff=512,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        dropout_rate=0.0,
        use_cache=False,
    )
    _attention(cfg)
    torch.manual_seed(0)
    model = T5Model(cfg).eval()
    _randomize_vectors(model)
    names = ["input_ids", "decoder_input_ids"]
    rng = np.random.default_rng(7)
    src = rng.integers(0, 1000, (1, 64)).astype(np.int64)
    tgt = rng.integers(0, 1000, (1, 32)).astype(np.int64)
    wrapped = _last_hidden(model, names)
    onnx_model = _export(wrapped, (torch.from_numpy(src), torch.from_numpy(tgt)), names)
    return TransformerCase("t5", "hf", onnx_model, {"input_ids": src, "decoder_input_ids": tgt}, wrapped.cuda())


def _vae_decoder_module():
    import torch
    from torch import nn

    def norm(c: int) -> nn.GroupNorm:
        return nn.GroupNorm(32, c, eps=1e-6)

    class ResBlock(nn.Module):
        def __init__(self, cin: int, cout: int):
            super().__init__()
            self.norm1, self.conv1 = norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.norm2, self.conv2 = norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            h = self.conv1(torch.nn.functional.silu(self.norm1(x)))
            h = self.conv2(torch.nn.functional.silu(self.norm2(h)))
            return self.skip(x) + h

    class SpatialAttention(nn.Module):
        def __init__(self, c: int):
            super().__init__()
            self.norm = norm(c)
            self.qkv = nn.Linear(c, 3 * c)
            self.out = nn.Linear(c, c)

        def forward(self, x):
            b, c, h, w = x.shape
            t = self.norm(x).reshape(b, c, h * w).transpose(1, 2)
            q, k, v = self.qkv(t).chunk(3, dim=-1)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            return x + self.out(a).transpose(1, 2).reshape(b, c, h, w)

    class VaeDecoder(nn.Module):
        def __init__(self, widths=(128, 128, 64, 64)):
            super().__init__()
            self.conv_in = nn.Conv2d(4, widths[0], 3, padding=1)
            self.mid = nn.Sequential(ResBlock(widths[0], widths[0]), SpatialAttention(widths[0]))
            self.mid_out = ResBlock(widths[0], widths[0])
            ups = []
            for i, (cin, cout) in enumerate(zip(widths, widths[1:] + widths[-1:])):
                ups += [ResBlock(cin, cout), ResBlock(cout, cout)]
                if i < len(widths) - 1:
                    ups += [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(cout, cout, 3, padding=1)]
            self.up = nn.Sequential(*ups)
            self.norm_out = norm(widths[-1])
            self.conv_out = nn.Conv2d(widths[-1], 3, 3, padding=1)

        def forward(self, z):
            h = self.mid_out(self.mid(self.conv_in(z)))
            h = self.up(h)
            return self.conv_out(torch.nn.functional.silu(self.norm_out(h)))

    return VaeDecoder()


def vae_decoder() -> TransformerCase:
    import torch

    torch.manual_seed(0)
    model = _vae_decoder_module().eval()
    _randomize_vectors(model)
    z = np.random.default_rng(8).standard_normal((1, 4, 32, 32)).astype(np.float32)
    onnx_model = _export(model, (torch.from_numpy(z),), ["latent"])
    return TransformerCase("vae", "torch", onnx_model, {"latent": z}, model.cuda())


BUILDERS = {"swin": (hf_swin, None), "t5": (hf_t5, None), "vae": (vae_decoder, None)}
