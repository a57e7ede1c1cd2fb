"""Gemma 2 and Gemma 3 (text) imported from tiny random checkpoints (logits, loss and greedy
generation equal transformers'), soft-capping against its formula (attention scores: dense,
sliding window, cached; final logits), and layers with rotary positions of their own."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers as hf
from conftest import tiny
from hf_util import V, assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask
from archzoo.plugins.attention.local import LocalPattern
from archzoo.plugins.attention.softcap import soft_cap
from archzoo.plugins.attention.sparse import blocked_attention, dense_attention, flex_attention

ATTN_CAP, FINAL_CAP = 5.0, 3.0
SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=64,
    sliding_window=4,  # shorter than the test sequences, so the window matters
    attn_implementation="eager",
)

CASES = {
    "gemma2": lambda: hf.Gemma2ForCausalLM(
        hf.Gemma2Config(
            **SIZES,
            attn_logit_softcapping=ATTN_CAP,
            final_logit_softcapping=FINAL_CAP,
            query_pre_attn_scalar=24,
        )
    ),
    "gemma3_text": lambda: hf.Gemma3ForCausalLM(
        hf.Gemma3TextConfig(
            **SIZES,
            final_logit_softcapping=FINAL_CAP,
            query_pre_attn_scalar=24,
            sliding_window_pattern=2,  # sliding, global, sliding
            rope_parameters={  # global layers: their own base and a linear RoPE scaling
                "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 5000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
            },
        )
    ),
}


@torch.no_grad()
def sharpen(model: torch.nn.Module) -> None:
    """Larger query/key and embedding weights: scores and logits reach where tanh bends."""
    for name, p in model.named_parameters():
        if any(part in name for part in ("q_proj", "k_proj", "embed_tokens")):
            p.mul_(4.0)


def imported(tmp_path, name):
    torch.manual_seed(0)
    ref = CASES[name]()
    perturb(ref, scale=0.1)
    sharpen(ref)
    ref.eval()
    return ref, archzoo.from_hf(save_hf(ref, tmp_path / name))


@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_and_loss_equal_transformers(tmp_path, name):
    ref, ours = imported(tmp_path, name)
    ids, mask = padded_batch(V)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
        chunked = ours(ids, attention_mask=mask, labels=labels, return_logits=False)
    assert max_diff_unpadded(got.logits, want.logits, mask) <= 1e-4
    assert abs(got.loss.item() - want.loss.item()) <= 1e-5
    assert abs(chunked.loss.item() - want.loss.item()) <= 1e-5
    assert want.logits.abs().max() > 0.5 * FINAL_CAP  # the final cap bends these logits


@pytest.mark.parametrize("name", sorted(CASES))
def test_soft_capping_changes_the_logits(tmp_path, name):
    """Turning either cap off moves the logits far beyond the parity tolerance."""
    _, ours = imported(tmp_path, name)
    ids, mask = padded_batch(V)
    with torch.no_grad():
        base = ours(ids, attention_mask=mask).logits
        caps = ("head.softcap", "attention.softcap") if name == "gemma2" else ("head.softcap",)
        for key in caps:
            uncapped = archzoo.build_model(ours.spec, overrides={key: None})
            if key == "attention.softcap":  # the sliding layers' attention too
                layers = [
                    {**e, "attention": {**e["attention"], "softcap": None}}
                    for e in ours.spec.data["layers"]
                ]
                uncapped = archzoo.build_model(ours.spec, overrides={key: None, "layers": layers})
            uncapped.load_state_dict(ours.state_dict())
            uncapped.eval()
            diff = (uncapped(ids, attention_mask=mask).logits - base).abs().max().item()
            assert diff > 1e-2, key


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_probabilities_equal_transformers(tmp_path, name):
    ref, ours = imported(tmp_path, name)
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
        got = ours(ids, attention_mask=mask, output_attentions=True).attentions
    keep = mask.bool()[:, None, :, None]  # real queries
    for g, w in zip(got, want, strict=True):
        assert ((g - w).abs() * keep).max() <= 1e-5


@pytest.mark.parametrize("name", sorted(CASES))
def test_greedy_generation_equals_transformers(tmp_path, name):
    ref, ours = imported(tmp_path, name)
    assert_greedy_equal(ref, ours)


def test_gemma2_layers_alternate_sliding_and_global(tmp_path):
    _, ours = imported(tmp_path, "gemma2")
    blocks = ours.decoder.blocks
    assert [b.attention.name for b in blocks] == ["local", "mha", "local"]
    assert blocks[0].attention.cfg.window == 4
    assert all(b.attention.scale == pytest.approx(24**-0.5) for b in blocks)
    assert {b.name for b in blocks} == {"sandwich_ln"}


def test_gemma3_layers_rotate_by_their_own_base(tmp_path):
    """Sliding layers rotate with base 50, the global one with base 5000 scaled 2x (linear)."""
    _, ours = imported(tmp_path, "gemma3_text")
    stack = ours.decoder
    assert [b.attention.name for b in stack.blocks] == ["local", "mha", "local"]
    assert stack.position_of == [0, None, 0]
    assert stack.position.cfg.base == 5000.0 and stack.position.cfg.scaling == "linear"
    (local,) = stack.layer_positions
    assert local.cfg.base == 50.0 and local.cfg.scaling == "none"
    pos = torch.arange(6)[None]
    cos, _ = local.prepare(pos, pos)
    want = torch.cos(pos[0, :, None] * 50.0 ** (-torch.arange(0, 16, 2) / 16))
    assert torch.allclose(cos[0, 0], want, atol=1e-6)
    cos, _ = stack.position.prepare(pos, pos)
    want = torch.cos(pos[0, :, None] / 2.0 * 5000.0 ** (-torch.arange(0, 16, 2) / 16))
    assert torch.allclose(cos[0, 0], want, atol=1e-6)


def test_a_layer_position_may_not_embed():
    spec = tiny(
        family="decoder", position="rotary", layers=[{"select": [1], "position": "learned"}]
    )
    with pytest.raises(archzoo.SpecError, match="layers.position.kind: .*once per stack"):
        archzoo.load_spec(spec)


def test_headless_gemma_models_import(tmp_path):
    torch.manual_seed(0)
    for name, model in (
        ("gemma", hf.GemmaModel(hf.GemmaConfig(**{**SIZES, "num_key_value_heads": 1}))),
        ("gemma2", hf.Gemma2Model(hf.Gemma2Config(**SIZES))),
        ("gemma3_text", hf.Gemma3TextModel(hf.Gemma3TextConfig(**SIZES))),
    ):
        perturb(model, scale=0.1)
        model.eval()
        ours = archzoo.from_hf(save_hf(model, tmp_path / name))
        assert ours.spec.data["head"]["kind"] == "none"
        ids, mask = padded_batch(V)
        with torch.no_grad():
            want = model(input_ids=ids, attention_mask=mask).last_hidden_state
            got = ours(ids, attention_mask=mask).last_hidden_state
        assert max_diff_unpadded(got, want, mask) <= 1e-4, name


# ---------------------------------------------------------------- the components


def reference_attention(q, k, v, keep, scale, cap):
    """softmax(cap * tanh(q k^T * scale / cap)) v over the kept keys, written out."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scores = cap * torch.tanh((q @ k.transpose(-1, -2)) * scale / cap)
    scores = scores.masked_fill(~keep, float("-inf"))
    probs = torch.nan_to_num(scores.softmax(-1))  # rows with no key: zeros
    return probs @ v


def qkv(T: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 4, T, 8, generator=g) * 3
    k = torch.randn(2, 2, T, 8, generator=g) * 3
    v = torch.randn(2, 2, T, 8, generator=g)
    pad = torch.ones(2, T, dtype=torch.bool)
    pad[0, :3] = False
    pad[1, -4:] = False
    return q, k, v, pad


def test_soft_cap_is_the_formula():
    x = torch.linspace(-50, 50, 101)
    assert torch.allclose(soft_cap(x, 5.0), 5.0 * torch.tanh(x / 5.0))
    assert soft_cap(x, 5.0).abs().max() <= 5.0
    assert torch.allclose(soft_cap(torch.tensor([0.01]), 5.0), torch.tensor([0.01]), atol=1e-6)


@pytest.mark.parametrize("impl", ["dense", "blocked", "flex"])
def test_sliding_window_soft_capping_equals_the_formula(impl):
    T, window, cap = 21, 5, 2.0
    q, k, v, pad = qkv(T)
    pattern = LocalPattern(window, 8)
    mask = AttentionMask(T, T, causal=True, key_padding=pad, pattern=pattern)
    want = reference_attention(q, k, v, mask.allowed(), 8**-0.5, cap)
    run = {"dense": dense_attention, "blocked": blocked_attention, "flex": flex_attention}[impl]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex without compile: the unfused fallback
        got = run(q, k, v, pattern, causal=True, key_padding=pad, softcap=cap)
    real = mask.allowed().any(-1, keepdim=True)  # queries with some key
    assert ((got - want).abs() * real).max() <= 1e-5


def tiny_capped(attention: dict, **more):
    spec = tiny(
        family="decoder",
        position="rotary",
        norm="rmsnorm",
        attention={"n_kv_heads": 2, "softcap": 2.0, **attention},
        head={"kind": "lm", "softcap": 4.0},
        **more,
    )
    torch.manual_seed(0)
    model = archzoo.build_model(spec)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0)  # large scores: the cap decides
    return model.eval()


@pytest.mark.parametrize("attention", [{"kind": "mha"}, {"kind": "local", "window": 3}])
def test_capped_attention_layer_equals_the_formula(attention):
    model = tiny_capped(attention)
    att = model.decoder.blocks[0].attention
    x = torch.randn(2, 9, model.spec.data["d_model"])
    pad = torch.ones(2, 9, dtype=torch.bool)
    pad[1, 6:] = False
    mask = AttentionMask.build(9, 9, causal=True, key_padding=pad)
    with torch.no_grad():
        got = att(x, AttentionContext(mask))
        q, k, v = att.project(x, AttentionContext(mask), None)
        keep = mask.allowed()
        if attention["kind"] == "local":
            keep = keep & LocalPattern(3, 8).allowed(torch.arange(9)[:, None], torch.arange(9), 9)
        ref = reference_attention(q, k, v, keep, att.head_dim**-0.5, 2.0)
        ref = att.out(ref.transpose(1, 2).reshape(2, 9, -1))
    assert (got - ref)[pad].abs().max() <= 1e-5


@pytest.mark.parametrize("attention", [{"kind": "mha"}, {"kind": "local", "window": 3}])
def test_capped_attention_decodes_with_the_cache_as_the_full_forward(attention):
    # float64: the weights are scaled by 8, so fp32 rounding alone moves these logits by ~1e-4
    # on either path (each measured against a float64 run); in float64 the two paths must
    # agree to rounding, which also holds the capped softmax to the model's dtype
    model = tiny_capped(attention).double()
    ids = torch.randint(0, model.spec.data["vocab_size"], (2, 12), generator=torch.Generator())
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding
    with torch.no_grad():
        full = model(ids, attention_mask=mask).logits
        cache = model.new_cache(2, 12)
        steps = [model(ids[:, :5], attention_mask=mask[:, :5], cache=cache).logits]
        for t in range(5, 12):
            steps.append(
                model(ids[:, t : t + 1], attention_mask=mask[:, : t + 1], cache=cache).logits
            )
    cached = torch.cat(steps, dim=1)
    assert max_diff_unpadded(cached, full, mask) <= 1e-9  # logits of size ~4, float64


def test_lm_head_soft_caps_the_logits():
    model = tiny_capped({"kind": "mha"})
    ids = torch.randint(0, model.spec.data["vocab_size"], (2, 7))
    with torch.no_grad():
        hidden = model(ids).last_hidden_state
        raw = model.head.proj(hidden)
        logits = model.head(hidden)
    assert raw.abs().max() > 4.0  # the cap bends these
    assert torch.allclose(logits, 4.0 * torch.tanh(raw / 4.0), atol=1e-6)
    labels = ids.clone()
    plain = model(ids, labels=labels).loss
    chunked = model(ids, labels=labels, return_logits=False).loss
    assert abs(plain.item() - chunked.item()) <= 1e-6
