"""Multi-head latent attention (DeepSeek-V2/V3): its latent cache, absorbed decoding, and the
DeepSeek-V3 converter against transformers (tiny random models, every parameter perturbed)."""

from __future__ import annotations

import pytest
import torch
from hf_util import perturb

import archzoo
from archzoo.costs import model_costs
from archzoo.interfaces import AttentionContext
from archzoo.masks import AttentionMask

V = 96
RANK, ROPE, NOPE, VDIM = 16, 4, 8, 6


def mla_model(n_layers: int = 2, **attention) -> archzoo.ZooModel:
    spec = {
        "family": "decoder",
        "vocab_size": V,
        "d_model": 32,
        "n_heads": 4,
        "head_dim": ROPE,
        "n_layers": n_layers,
        "d_ff": 48,
        "max_len": 64,
        "dropout": 0.0,
        "position": {"kind": "rotary", "interleaved": True},
        "norm": "rmsnorm",
        "block": "pre_ln",
        "ffn": {"kind": "glu"},
        "head": {"kind": "lm", "tie": False},
        "attention": {
            "kind": "mla",
            "kv_lora_rank": RANK,
            "qk_nope_head_dim": NOPE,
            "v_head_dim": VDIM,
            **attention,
        },
    }
    torch.manual_seed(0)
    model = archzoo.build_model(spec)
    perturb(model, scale=0.1)
    return model.eval()


def left_padded(batch: int = 3, length: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(3, V, (batch, length), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    mask[2, :1] = 0
    return ids, mask


@pytest.mark.parametrize("absorb", [True, False])
@pytest.mark.parametrize("q_lora_rank", [None, 12])
@torch.no_grad()
def test_cached_decoding_equals_uncached(absorb, q_lora_rank):
    """Prefill 5 tokens, then one token at a time from the latent cache: the logits of every
    step equal one uncached forward over the whole left-padded sequence."""
    model = mla_model(absorb=absorb, q_lora_rank=q_lora_rank)
    ids, mask = left_padded()
    want = model(ids, attention_mask=mask).logits
    cache = model.decoder.new_cache(ids.shape[0], ids.shape[1])
    prefill = model(ids[:, :5], attention_mask=mask[:, :5], cache=cache).logits
    steps = [prefill]
    for t in range(5, ids.shape[1]):
        out = model(ids[:, t : t + 1], attention_mask=mask[:, : t + 1], cache=cache)
        steps.append(out.logits)
    got = torch.cat(steps, dim=1)
    keep = mask.bool()
    assert (got - want).abs()[keep].max().item() <= 1e-5


@torch.no_grad()
def test_absorbed_and_expanded_attention_agree_on_one_step():
    """Folding kv_b into the query and output is the same function as expanding the latent."""
    model = mla_model()
    att = model.decoder.blocks[0].attention
    g = torch.Generator().manual_seed(0)
    q_nope = torch.randn(2, 4, 3, NOPE, generator=g)
    q_rope = torch.randn(2, 4, 3, ROPE, generator=g)
    c = torch.randn(2, 1, 7, RANK, generator=g)
    k_rope = torch.randn(2, 1, 7, ROPE, generator=g)
    mask = AttentionMask(q_len=3, k_len=7, causal=True, q_offset=4)
    ctx = AttentionContext(mask=mask)
    a = att.absorbed(q_nope, q_rope, c, k_rope, ctx)
    b = att.expanded(q_nope, q_rope, c, k_rope, ctx)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cache_stores_latent_and_rotary_key_only(dtype):
    """Bytes per token: (kv_lora_rank + rotary key width) x layers x dtype bytes, as measured
    on the allocated cache and as `zoo build --json` reports it."""
    model = mla_model(n_layers=3).to(dtype)
    cache = model.decoder.new_cache(2, 10)
    per_token = cache.memory_bytes() / (2 * 10)
    size = torch.finfo(dtype).bits // 8
    assert per_token == (RANK + ROPE) * 3 * size
    shapes = {(layer.k.shape, layer.v.shape) for layer in cache.layers}
    assert shapes == {((2, 1, 10, RANK), (2, 1, 10, ROPE))}
    reported = model_costs(model)["kv_cache_bytes_per_token"]
    assert reported[str(dtype).removeprefix("torch.")] == (RANK + ROPE) * 3 * size


def test_mla_compiles_fullgraph():
    model = mla_model(q_lora_rank=12)
    ids, mask = left_padded()
    with torch.no_grad():
        want = model(ids, attention_mask=mask).logits
        got = torch.compile(model, fullgraph=True)(ids, attention_mask=mask).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
