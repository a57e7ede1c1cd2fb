"""Norm and activation options of the long tail's families, each against its formula:
squared ReLU, a LayerNorm scaling by (offset + weight), and one with no scale or shift."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import transformers.activations as hf_act

import archzoo
from archzoo.plugins.ffn.activations import ACTIVATIONS


def norm(**options) -> torch.nn.Module:
    """A layernorm component of width 8 with `options`, its parameters perturbed."""
    spec = {"vocab_size": 16, "d_model": 8, "n_layers": 1, "n_heads": 2, "d_ff": 16}
    model = archzoo.build_model("gpt2", {**spec, "norm": {"kind": "layernorm", **options}})
    layer = model.decoder.final_norm
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(torch.randn(p.shape, generator=g))
    return layer


def test_relu_squared_is_max_0_x_squared_and_transformers_relu2():
    x = torch.linspace(-3, 3, 61, dtype=torch.float64)
    got = ACTIVATIONS["relu_squared"](x)
    assert torch.equal(got, torch.where(x > 0, x * x, torch.zeros_like(x)))
    assert torch.equal(got, hf_act.ACT2FN["relu2"](x))


def test_layernorm_offset_scales_by_offset_plus_weight():
    layer = norm(offset=1.0)
    x = torch.randn(2, 3, 8, dtype=torch.float32)
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    want = (x - mean) / torch.sqrt(var + 1e-5) * (1.0 + layer.weight) + layer.bias
    assert torch.allclose(layer(x), want, atol=1e-6)
    fresh = archzoo.build_model(
        "gpt2", {"n_layers": 1, "norm": {"kind": "layernorm", "offset": 1.0}}
    )
    assert torch.equal(fresh.decoder.final_norm.weight, torch.zeros(768))  # a unit scale


def test_layernorm_without_scale_or_shift_has_no_parameters():
    layer = norm(scale=False, bias=False)
    assert list(layer.parameters()) == []
    x = torch.randn(2, 3, 8)
    want = (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        x.var(-1, unbiased=False, keepdim=True) + 1e-5
    )
    assert torch.allclose(layer(x), want, atol=1e-6)
    shifted = norm(scale=False, bias=True)  # a shift alone
    assert [n for n, _ in shifted.named_parameters()] == ["bias"]
    assert torch.allclose(shifted(x), F.layer_norm(x, (8,)) + shifted.bias, atol=1e-6)
