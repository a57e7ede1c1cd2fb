"""Component options of the long tail's families, each against its formula: squared ReLU, a
LayerNorm scaling by (offset + weight) and one with no scale or shift, and Granite's
constant multipliers on the token vectors, the sublayer outputs and the logits."""

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


def tiny(**parts) -> torch.nn.Module:
    """A tiny perturbed Llama-like decoder with `parts` in its spec."""
    spec = {"vocab_size": 32, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
    spec = {**spec, "attention": {"kind": "mha", "n_kv_heads": 2}, **parts}
    torch.manual_seed(0)
    model = archzoo.build_model("llama2-7b", spec).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model


def test_embedding_multiplier_multiplies_the_token_vectors():
    model = tiny(embedding={"kind": "token", "multiplier": 12.0})
    ids = torch.tensor([[3, 5, 7]])
    word = model.decoder.embedding.word.weight
    assert torch.equal(model.decoder.embedding(ids), word[ids] * 12.0)


def test_residual_scale_multiplies_each_sublayer_output_before_the_add():
    model = tiny(block={"kind": "pre_ln", "residual_scale": 0.22})
    plain = tiny()
    plain.load_state_dict(model.state_dict())
    block, ref = model.decoder.blocks[0], plain.decoder.blocks[0]
    captured = {}
    ref.register_forward_hook(lambda m, args, out: captured.update(x=args[0], ctx=args[1]))
    ids = torch.tensor([[3, 5, 7, 9]])
    with torch.no_grad():
        plain(ids)
        x, ctx = captured["x"], captured["ctx"]
        h = x + 0.22 * ref.attention(ref.attention_norm(x), ctx)  # the formula, by hand
        want = h + 0.22 * ref.ffn(ref.ffn_norm(h))
        assert torch.allclose(block(x, ctx), want, atol=1e-6)


def test_sandwich_residual_scale_multiplies_each_normalised_output_before_the_add():
    model = tiny(block={"kind": "sandwich_ln", "residual_scale": 0.3})
    block = model.decoder.blocks[0]
    captured = {}
    block.register_forward_pre_hook(lambda m, args: captured.update(x=args[0], ctx=args[1]))
    ids = torch.tensor([[3, 5, 7, 9]])
    with torch.no_grad():
        model(ids)
        x, ctx = captured["x"], captured["ctx"]
        a = block.attention_out_norm(block.attention(block.attention_norm(x), ctx))
        h = x + 0.3 * a  # the formula, by hand
        want = h + 0.3 * block.ffn_out_norm(block.ffn(block.ffn_norm(h)))
        assert torch.allclose(block(x, ctx), want, atol=1e-6)


def test_logit_scale_multiplies_the_logits_and_the_chunked_loss_agrees():
    model = tiny(head={"kind": "lm", "tie": False, "logit_scale": 0.125})
    plain = tiny(head={"kind": "lm", "tie": False})
    plain.load_state_dict(model.state_dict())
    ids = torch.tensor([[3, 5, 7, 9, 11]])
    with torch.no_grad():
        got, want = model(ids).logits, plain(ids).logits * 0.125
        assert torch.allclose(got, want, atol=1e-6)
        hidden = model.decoder.final_norm(torch.randn(1, 5, 16))
        chunked = model.head.hidden_loss(hidden, ids)
        whole = F.cross_entropy(model.head(hidden)[0, :-1], ids[0, 1:])
    assert abs(chunked.item() - whole.item()) < 1e-5
