"""The example plugin's components against the formulas of their papers."""

from __future__ import annotations

import archzoo_example
import pytest
import torch
import torch.nn.functional as F
from archzoo_example import ScaleNorm, TalkingHeadsAttention

import archzoo
import archzoo.specs.spec
from archzoo import Registry
from archzoo.parts.interfaces import AttentionContext, Dims
from archzoo.parts.masks import AttentionMask

TINY = {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 48, "vocab_size": 64, "max_len": 16}


def dims(d_model: int = 32, n_heads: int = 4) -> Dims:
    return Dims(
        vocab_size=64,
        d_model=d_model,
        n_heads=n_heads,
        head_dim=d_model // n_heads,
        d_ff=4 * d_model,
        max_len=16,
        n_layers=1,
        dropout=0.0,
        attention_dropout=0.0,
        init_std=0.02,
    )


@pytest.fixture()
def registry() -> Registry:
    reg = Registry(load_entry_points=False)
    info = reg.register_plugin(archzoo_example, "example")
    assert info.status == "ok", info.error
    return reg


def test_plugin_registers_its_components_and_zoo_dir(registry):
    info = registry.plugins["example"]
    assert info.components == ["norm:scalenorm", "attention:talking_heads", "attention:qk_norm"]
    assert info.zoo_dirs == [str(archzoo_example.ZOO_DIR)]
    assert {"talking-heads-gpt", "qk-norm-gpt"} <= set(archzoo.specs.spec.list_models(registry))


def test_scalenorm_is_gain_times_unit_vector():
    norm = ScaleNorm(ScaleNorm.Config(), dims(d_model=16))
    assert norm.gain.item() == pytest.approx(4.0)  # sqrt(16)
    x = torch.randn(2, 3, 16)
    expected = 4.0 * x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    torch.testing.assert_close(norm(x), expected)
    assert torch.equal(norm(torch.zeros(1, 16)), torch.zeros(1, 16))  # eps: no 0/0


def reference_talking_heads(x, layer, causal):
    """Shazeer et al. (2020), eq. by eq.: J = QK^T/sqrt(d); J' = J P_l; W = softmax(J'); W P_w V."""
    B, T, _ = x.shape
    H, hd = layer.n_heads, layer.head_dim
    q, k, v = layer.qkv(x).split(H * hd, dim=-1)
    q, k, v = (t.view(B, T, H, hd) for t in (q, k, v))
    logits = torch.einsum("bqhd,bkhd->bqkh", q, k) / hd**0.5  # (B, Tq, Tk, H)
    logits = logits @ layer.score_mix  # mix heads: last axis h -> g
    if causal:
        logits = logits.masked_fill(~torch.ones(T, T).tril().bool()[None, :, :, None], -1e30)
    weights = logits.softmax(dim=2) @ layer.prob_mix
    out = torch.einsum("bqkh,bkhd->bqhd", weights, v).reshape(B, T, H * hd)
    return layer.out(out)


@pytest.mark.parametrize("causal", [False, True])
def test_talking_heads_matches_the_paper(causal):
    torch.manual_seed(0)
    layer = TalkingHeadsAttention(TalkingHeadsAttention.Config(), dims())
    with torch.no_grad():
        layer.score_mix.copy_(torch.randn(4, 4))
        layer.prob_mix.copy_(torch.randn(4, 4))
    x = torch.randn(2, 5, 32)
    ctx = AttentionContext(AttentionMask.build(5, 5, causal=causal))
    torch.testing.assert_close(layer(x, ctx), reference_talking_heads(x, layer, causal))


def test_identity_mixes_are_plain_multi_head_attention():
    torch.manual_seed(0)
    layer = TalkingHeadsAttention(TalkingHeadsAttention.Config(), dims())
    layer.init_weights(0.02)
    x = torch.randn(2, 5, 32)
    q, k, v = (t.view(2, 5, 4, 8).transpose(1, 2) for t in layer.qkv(x).split(32, dim=-1))
    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hd)
    expected = layer.out(sdpa.transpose(1, 2).reshape(2, 5, 32))
    ctx = AttentionContext(AttentionMask.build(5, 5, causal=True))
    torch.testing.assert_close(layer(x, ctx), expected)


def test_zoo_spec_builds_trains_and_decodes_with_a_cache(registry):
    torch.manual_seed(0)
    model = archzoo.build_model("talking-heads-gpt", TINY, registry=registry)
    block = model.decoder.blocks[0]
    assert isinstance(block.attention, TalkingHeadsAttention)
    assert isinstance(block.attention_norm, ScaleNorm)
    torch.testing.assert_close(block.attention.score_mix.detach(), torch.eye(4))
    ids = torch.randint(0, 64, (2, 6))
    out = model(ids, labels=ids)
    assert out.logits.shape == (2, 6, 64)
    out.loss.backward()
    assert block.attention.score_mix.grad.abs().sum() > 0
    assert block.attention_norm.gain.grad is not None
    model.eval()
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache(batch=2, capacity=8)
        steps = [model(ids[:, :4], cache=cache).logits]
        steps += [model(ids[:, i : i + 1], cache=cache).logits for i in (4, 5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
