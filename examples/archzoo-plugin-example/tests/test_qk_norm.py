"""QK-norm attention: the formula, and a model that trains, saves, loads and decodes."""

from __future__ import annotations

from collections.abc import Iterator

import archzoo_example
import pytest
import torch
from archzoo_example import QKNormAttention

import archzoo
from archzoo import Registry
from archzoo.parts.interfaces import AttentionContext, Dims
from archzoo.parts.masks import AttentionMask

TINY = {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 48, "vocab_size": 64, "max_len": 32}


@pytest.fixture()
def registry() -> Registry:
    reg = Registry(load_entry_points=False)
    info = reg.register_plugin(archzoo_example, "example")
    assert info.status == "ok", info.error
    return reg


@pytest.fixture()
def installed() -> Iterator[None]:
    """`archzoo.load` uses the global registry: make sure it has the plugin (installed, the
    entry point put it there; from a checkout, register it for this test only)."""
    reg = archzoo.get_registry()
    if reg.has("attention", "qk_norm"):
        yield
        return
    assert reg.register_plugin(archzoo_example, "example").status == "ok"
    yield
    reg.unregister_plugin("example")


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm by its definition (Zhang & Sennrich, 2019)."""
    return weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


@pytest.mark.parametrize("causal", [False, True])
def test_qk_norm_is_attention_over_normalised_queries_and_keys(causal):
    torch.manual_seed(0)
    dims = Dims(64, 32, 4, 8, 48, 16, 1, 0.0, 0.0, 0.02)
    from archzoo.plugins.norm.rmsnorm import RMSNorm

    def make_norm(dim=None):
        return RMSNorm(RMSNorm.Config(eps=1e-6), dims, dim=dim)

    layer = QKNormAttention(QKNormAttention.Config(), dims, make_norm=make_norm)
    assert tuple(layer.q_norm.weight.shape) == (8,)
    with torch.no_grad():
        layer.q_norm.weight.uniform_(0.5, 2.0)
        layer.k_norm.weight.uniform_(0.5, 2.0)
    x = torch.randn(2, 6, 32)
    q, k, v = layer.qkv(x).view(2, 6, 3, 4, 8).unbind(2)
    q, k = rms(q, layer.q_norm.weight, 1e-6), rms(k, layer.k_norm.weight, 1e-6)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / 8**0.5
    if causal:
        scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), -torch.inf)
    out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(2, 6, 32)
    ctx = AttentionContext(AttentionMask.build(6, 6, causal=causal))
    torch.testing.assert_close(layer(x, ctx), layer.out(out), atol=1e-5, rtol=1e-5)


def test_the_spec_norm_is_used_per_head(registry):
    spec = {**TINY, "norm": {"kind": "scalenorm", "eps": 1e-5}}
    model = archzoo.build_model("qk-norm-gpt", spec, registry=registry)
    att = model.decoder.blocks[0].attention
    assert (att.q_norm.name, att.k_norm.name) == ("scalenorm", "scalenorm")
    assert att.q_norm.gain.item() == pytest.approx(8**0.5)  # ScaleNorm's g = sqrt(head_dim)


def test_qk_norm_model_trains_saves_loads_and_decodes_with_the_cache(registry, installed, tmp_path):
    torch.manual_seed(0)
    model = archzoo.build_model("qk-norm-gpt", TINY, registry=registry)
    ids = torch.randint(0, 64, (4, 12))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]  # memorising one batch: the loss falls
    model.eval()
    path = tmp_path / "qk.safetensors"
    archzoo.save(model, path)
    loaded = archzoo.load(path)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
        full = model(ids).logits
        cache = model.new_cache(batch=4, capacity=12)
        steps = [model(ids[:, :7], cache=cache).logits]
        steps += [model(ids[:, i : i + 1], cache=cache).logits for i in range(7, 12)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)
    prompt = ids[:, :5]
    cached = model.generate(prompt, max_new_tokens=8, use_cache=True)
    uncached = model.generate(prompt, max_new_tokens=8, use_cache=False)
    assert cached.shape == (4, 13)
    assert torch.equal(cached, uncached)


def test_qk_norm_refuses_a_value_term_position(registry):
    spec = {**TINY, "position": {"kind": "relative", "value_term": True}}
    model = archzoo.build_model("qk-norm-gpt", spec, registry=registry)
    with pytest.raises(ValueError, match="cannot apply position 'relative'"):
        model(torch.randint(0, 64, (1, 4)))
