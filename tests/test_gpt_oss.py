"""GPT-OSS: attention sinks against their formula (dense, sliding-window, cached), and the
gpt_oss converter against transformers (logits, loss, router loss, greedy generation)."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from conftest import tiny
from hf_util import (
    V,
    assert_greedy_equal,
    max_diff_unpadded,
    padded_batch,
    perturb,
    save_hf,
    table_export,
)

import archzoo
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask
from archzoo.plugins.attention.local import LocalPattern
from archzoo.plugins.attention.sinks import sink_attention
from archzoo.plugins.attention.sparse import attend

B, H, HKV, T, HD = 3, 4, 2, 11, 8


def sink_formula(q, k, v, keep, sinks, scale):
    """p_j = e^(s_j) / (sum_i e^(s_i) + e^sink) in float64, masked keys 0; out = p @ v."""
    rep = q.shape[1] // k.shape[1]
    k, v = (t.double().repeat_interleave(rep, dim=1) for t in (k, v))  # (B, H, Tk, hd)
    e = torch.exp((q.double() @ k.transpose(-1, -2)) * scale)  # (B, H, Tq, Tk)
    e = e * keep.double()
    p = e / (e.sum(-1, keepdim=True) + torch.exp(sinks.double()).view(1, -1, 1, 1))
    return p @ v, p


def qkv_and_sinks(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, HD, generator=g)
    k, v = (torch.randn(B, HKV, T, HD, generator=g) for _ in range(2))
    sinks = torch.randn(H, generator=g) * 2
    pad = torch.ones(B, T, dtype=torch.bool)
    pad[1, 7:] = False  # right-padded row
    pad[2, :4] = False  # left-padded row: its first queries see no key at all
    return q, k, v, sinks, pad


def causal_keep(pad: torch.Tensor, window: int | None = None) -> torch.Tensor:
    i = torch.arange(T)
    keep = i[None, :] <= i[:, None]
    if window is not None:
        keep = keep & (i[None, :] > i[:, None] - window)
    return keep[None, None] & pad[:, None, None, :]  # (B, 1, Tq, Tk)


@pytest.mark.parametrize("impl", ["sdpa", "flex"])
def test_dense_sinks_equal_the_formula(impl):
    q, k, v, sinks, pad = qkv_and_sinks()
    mask = AttentionMask.build(T, T, causal=True, key_padding=pad)
    got = sink_attention(q, k, v, mask, sinks, scale=HD**-0.5, impl=impl)
    want, _ = sink_formula(q, k, v, causal_keep(pad), sinks, HD**-0.5)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=0)
    assert got[2, :, :4].abs().max() == 0  # no key: the sink takes everything, output 0


@pytest.mark.parametrize("impl", ["blocked", "dense", "flex"])
def test_sliding_window_sinks_equal_the_formula(impl):
    q, k, v, sinks, pad = qkv_and_sinks(1)
    mask = AttentionMask.build(T, T, causal=True, key_padding=pad)
    mask = mask.with_pattern(LocalPattern(3, block=4))
    got = attend(q, k, v, mask, scale=None, impl=impl, sinks=sinks)
    want, _ = sink_formula(q, k, v, causal_keep(pad, window=3), sinks, HD**-0.5)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=0)


def sink_model(position: str = "rotary") -> archzoo.ZooModel:
    """A tiny decoder whose odd layers use a 4-key sliding window, every layer with sinks."""
    attn = {"kind": "mha", "n_kv_heads": 2, "fused_qkv": False, "sinks": True}
    spec = tiny(
        family="decoder",
        n_layers=3,
        position=position,
        attention=attn,
        layers=[{"select": [1], "attention": {**attn, "kind": "local", "window": 4}}],
        head={"kind": "lm", "tie": False},
    )
    torch.manual_seed(0)
    model = archzoo.build_model(spec).eval()
    with torch.no_grad():
        for block in model.decoder.blocks:
            block.attention.sinks.normal_(0, 2.0)  # zero-initialised: make them matter
    return model


@pytest.mark.parametrize("layer", [0, 1])
def test_attention_module_with_sinks_equals_the_formula(layer):
    """The component (its projections, GQA, mask and, for `local`, the window) by hand."""
    model = sink_model(position="none")
    attention = model.decoder.blocks[layer].attention
    x = torch.randn(B, T, 32, generator=torch.Generator().manual_seed(2))
    _, _, _, _, pad = qkv_and_sinks()
    ctx = AttentionContext(AttentionMask.build(T, T, causal=True, key_padding=pad))
    with torch.no_grad():
        got = attention(x, ctx)
        q, k, v = attention.q(x), attention.k(x), attention.v(x)
        q, k, v = (t.view(B, T, -1, HD).transpose(1, 2) for t in (q, k, v))  # (B, h, T, hd)
        keep = causal_keep(pad, window=4 if layer == 1 else None)
        out, _ = sink_formula(q, k, v, keep, attention.sinks, HD**-0.5)
        want = attention.out(out.transpose(1, 2).reshape(B, T, H * HD).float())
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_attention_probabilities_with_sinks_equal_the_formula():
    model = sink_model(position="none")
    ids = torch.randint(1, 50, (B, T), generator=torch.Generator().manual_seed(3))
    _, _, _, _, pad = qkv_and_sinks()
    with torch.no_grad():
        out = model(
            ids, attention_mask=pad.long(), output_attentions=True, output_hidden_states=True
        )
        attention = model.decoder.blocks[0].attention
        x = model.decoder.blocks[0].attention_norm(out.hidden_states[0])
        q, k, v = (getattr(attention, n)(x).view(B, T, -1, HD).transpose(1, 2) for n in "qkv")
        _, want = sink_formula(q, k, v, causal_keep(pad), attention.sinks, HD**-0.5)
    got = out.attentions[0]
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=0)
    assert got.sum(-1).max() < 1  # the sink keeps a share of every row


def test_cached_decoding_with_sinks_equals_the_full_forward():
    """Dense and sliding layers with sinks: one token at a time through the KV cache (the
    window layer's ring buffer) gives the logits of the whole sequence at once."""
    model = sink_model()
    prompt, new = 6, 9
    ids = torch.randint(1, 50, (2, prompt + new), generator=torch.Generator().manual_seed(4))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # left padding
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = model.new_cache(2, prompt + new)
    with torch.no_grad():
        full = model(ids, attention_mask=mask, position_ids=pos).logits
        steps = [
            model(
                ids[:, :prompt],
                attention_mask=mask[:, :prompt],
                position_ids=pos[:, :prompt],
                cache=cache,
            ).logits
        ]
        for t in range(prompt, prompt + new):
            step = model(
                ids[:, t : t + 1],
                attention_mask=mask[:, : t + 1],
                position_ids=pos[:, t : t + 1],
                cache=cache,
            )
            steps.append(step.logits)
    stepped = torch.cat(steps, dim=1)
    keep = mask.bool()
    assert (stepped - full).abs()[keep].max() <= 1e-5
    without = sink_model()
    with torch.no_grad():
        for block in without.decoder.blocks:
            block.attention.sinks.fill_(-1e4)  # a sink that takes nothing: plain attention
        plain = without(ids, attention_mask=mask, position_ids=pos).logits
    assert (plain - full).abs()[keep].max() > 1e-2  # the sinks change the model


def test_sinks_default_off_and_counted():
    spec = tiny(family="decoder", attention={"kind": "mha", "n_kv_heads": 2})
    off = archzoo.build_model(spec, device="meta")
    on = archzoo.build_model(
        {**spec, "attention": {**spec["attention"], "sinks": True}}, device="meta"
    )
    assert off.decoder.blocks[0].attention.sinks is None
    assert on.num_parameters() - off.num_parameters() == 2 * 4  # one logit per head and layer


# ---------------------------------------------------------------- the gpt_oss converter

SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=24,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_local_experts=4,
    num_experts_per_tok=2,
    sliding_window=4,  # shorter than the test sequences
    max_position_embeddings=64,
    swiglu_limit=0.3,  # small, so that the clamps of the expert unit are active
    swiglu_alpha=1.5,
    output_router_logits=True,
    router_aux_loss_coef=0.02,
    attn_implementation="eager",
)


def tiny_gpt_oss(cls: str = "GptOssForCausalLM"):
    torch.manual_seed(0)
    ref = getattr(hf, cls)(hf.GptOssConfig(**SIZES))
    perturb(ref, scale=0.1)  # sinks, router and expert biases included
    return ref.eval()


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    ref = tiny_gpt_oss()
    return ref, archzoo.from_hf(save_hf(ref, tmp_path_factory.mktemp("gpt_oss")))


def test_spec_reads_layer_types_yarn_sinks_and_the_expert_unit(imported):
    _, ours = imported
    kinds = [block.attention.name for block in ours.decoder.blocks]
    assert kinds == ["local", "mha", "local"]  # HF's default: sliding on even layers
    assert ours.decoder.blocks[0].attention.cfg.window == 4
    assert all(block.attention.sinks is not None for block in ours.decoder.blocks)
    ffn = ours.spec.data["ffn"]
    assert (ffn["activation"], ffn["glu_alpha"], ffn["glu_limit"]) == ("swiglu_clamped", 1.5, 0.3)
    assert (ffn["router"], ffn["router_bias"], ffn["expert_bias"]) == ("topk_softmax", True, True)
    assert ours.spec.data["position"]["scaling"] == "yarn"


def test_logits_loss_and_router_loss_equal_transformers(imported):
    ref, ours = imported
    ids, mask = padded_batch(V, length=12, real=7)  # a right-padded row
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    assert max_diff_unpadded(got.logits, want.logits, mask) <= 1e-4
    assert abs(got.loss.item() - want.loss.item()) <= 1e-5
    assert abs(got.aux_loss.item() - want.aux_loss.item()) <= 1e-5


def test_greedy_generation_equals_transformers(imported):
    ref, ours = imported
    ref.config.output_router_logits = False  # transformers' router loss fails on cached steps
    assert_greedy_equal(ref, ours)


def test_headless_model_equals_transformers(tmp_path):
    ref = tiny_gpt_oss("GptOssModel")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "base"))
    assert ours.spec.data["head"]["kind"] == "none"
    ids, mask = padded_batch(V, length=12, real=7)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask).last_hidden_state
    assert max_diff_unpadded(got, want, mask) <= 1e-4


def test_export_through_the_table_gives_back_the_checkpoint(imported):
    """The same table maps back, gate/up re-interleaved: every HF tensor is equal."""
    ref, ours = imported
    back = table_export(ref, ours)
    want = ref.state_dict()
    assert set(back) == set(want)
    for key, value in want.items():
        assert torch.equal(back[key], value), key


def test_unsupported_configs_are_refused(tmp_path):
    from archzoo.parts.converter import ConversionError

    converter = archzoo.get_registry().converter("gpt_oss")
    config = hf.GptOssConfig(**SIZES).to_dict()
    with pytest.raises(ConversionError, match="quantization_config"):
        converter.to_spec({**config, "quantization_config": {"quant_method": "mxfp4"}})
    with pytest.raises(ConversionError, match="layer_types"):
        converter.to_spec({**config, "layer_types": ["chunked_attention"] * 3})


def test_clamped_swiglu_equals_transformers_gate():
    """GPT-OSS's unit on interleaved gate/up, as transformers applies it, by its parts."""
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    from archzoo.plugins.ffn.activations import clamped_swiglu

    experts = GptOssExperts(hf.GptOssConfig(**SIZES))
    x = torch.randn(5, 48, generator=torch.Generator().manual_seed(5))  # (N, 2F) interleaved
    want = experts._apply_gate(x)
    got = clamped_swiglu(x[:, 0::2], x[:, 1::2], alpha=1.5, limit=0.3)
    assert (x.abs() > 0.3).any()  # the clamps are exercised
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_grouped_and_dense_expert_paths_agree_with_biases(imported):
    """The eager grouped path and the compile-friendly dense one, with expert biases."""
    from archzoo.plugins.ffn.routing import route

    _, ours = imported
    ffn = ours.decoder.blocks[1].ffn
    h = torch.randn(13, 32, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        weights, experts = route(ffn.router(h), 2, "topk_softmax", True)
        grouped = ffn.experts(h, weights, experts)
        dense = ffn.dense_experts(h, weights, experts)
    torch.testing.assert_close(grouped, dense, atol=1e-5, rtol=0)


def test_compiled_fullgraph_with_sinks_equals_eager():
    """Compiled on CPU (no FlexAttention logsumexp there) the sinks take the SDPA path, and
    the sliding layer the dense one: one graph, the eager logits."""
    model = sink_model()
    ids = torch.randint(1, 50, (2, 9), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        eager = model(ids).logits
        compiled = torch.compile(model, fullgraph=True)(ids).logits
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=0)
