"""Lightning attention (MiniMax) and Kimi Delta Attention against their papers'
recurrences, and the `minimax` and `kimi_linear` families against transformers.

The mixer references below run the layer one token at a time from the published formula
with the module's own weights, in plain loops: chunked prefill must equal them (<= 1e-5 in
float32), and so must decoding token by token through the state cache with a left-padded
row. The family tests import tiny perturbed transformers models: logits with a right- and a
left-padded row within 1e-4, greedy tokens with the cache, the task heads, the export.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny
from hf_util import V, assert_causal_lm_equal, assert_greedy_equal, perturb, save_hf
from test_recurrent_mixers import (
    assert_cached_decoding_equals_full,
    assert_chunked_equals_reference,
    assert_padding_never_reaches_the_state,
    context,
    conv_reference,
)
from torch import Tensor

import archzoo
from archzoo.hf.express import ExportError
from archzoo.parts.converter import ConversionError

transformers = pytest.importorskip("transformers")

D = 32
BASE = {"name": "mixer", "family": "decoder", "position": "none", "head": "lm"}
MIXERS = {  # small blocks, so a 13-token prompt spans several and a remainder
    "lightning": {"block_size": 4, "slope_scale": 0.7},
    "kimi_delta": {"n_heads": 2, "head_dim": 8, "chunk_size": 4},
}


def mixer(name: str) -> torch.nn.Module:
    """The mixer of a one-layer tiny decoder, with perturbed weights (nothing at its init)."""
    torch.manual_seed(0)
    spec = {**tiny(n_layers=1), **BASE, "attention": {"kind": name, **MIXERS[name]}}
    m = archzoo.build_model(spec).decoder.blocks[0].attention
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def lightning_reference(m, x: Tensor) -> Tensor:
    """MiniMax-01 (2025): S_t = lambda_h S_{t-1} + k_t^T v_t, o_t = q_t S_t with lambda_h =
    exp(-s_h), s_h = 2^(-8(h+1)/H) x slope_scale; o RMS-normed over the heads, times
    sigmoid(gate(x)), projected."""
    B, T, _ = x.shape
    H, hd = m.dims.n_heads, m.dims.head_dim
    qkv = F.silu(m.in_proj(x)).view(B, T, H, 3, hd)  # each head's [q | k | v]
    q, k, v = qkv[:, :, :, 0], qkv[:, :, :, 1], qkv[:, :, :, 2]  # (B, T, H, hd)
    lam = [
        torch.exp(torch.tensor(-(2.0 ** (-8 * (h + 1) / H)) * m.cfg.slope_scale)) for h in range(H)
    ]
    S = torch.zeros(B, H, hd, hd)
    out = torch.zeros(B, T, H, hd)
    for t in range(T):
        for h in range(H):
            S[:, h] = lam[h] * S[:, h] + k[:, t, h, :, None] * v[:, t, h, None, :]
            out[:, t, h] = torch.einsum("bk,bkv->bv", q[:, t, h], S[:, h])
    o = out.reshape(B, T, H * hd)
    o = m.norm.weight * o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + m.cfg.norm_eps)
    return m.out_proj(torch.sigmoid(m.out_gate(x)) * o)


def kimi_delta_reference(m, x: Tensor) -> Tensor:
    """Kimi Linear (2025): S_t = diag(a_t) S_{t-1}; S_t += b_t k_t (v_t - S_t^T k_t)^T;
    o_t = S_t^T q_t, with a_t a decay per key channel; o RMS-normed per head, times
    sigmoid(g_b(g_a(x))), projected."""
    B, T, _ = x.shape
    H, dk = m.H, m.dk
    qkv = torch.cat([m.q(x), m.k(x), m.v(x)], dim=-1)
    qkv = F.silu(conv_reference(qkv, m.conv.weight, None))
    q, k, v = (t.reshape(B, T, H, dk) for t in qkv.split(H * dk, dim=-1))
    q = q / (q.pow(2).sum(-1, keepdim=True) + 1e-6).sqrt() / dk**0.5
    k = k / (k.pow(2).sum(-1, keepdim=True) + 1e-6).sqrt()
    step = F.softplus(m.f_b(m.f_a(x)) + m.dt_bias).view(B, T, H, dk)
    a = torch.exp(-m.A_log.exp()[:, None] * step)  # (B, T, H, dk)
    beta = torch.sigmoid(m.b(x))  # (B, T, H)
    S = torch.zeros(B, H, dk, dk)
    out = torch.zeros(B, T, H, dk)
    for t in range(T):
        for h in range(H):
            kt, qt = k[:, t, h], q[:, t, h]  # (B, dk)
            S[:, h] = a[:, t, h, :, None] * S[:, h]
            err = v[:, t, h] - torch.einsum("bkv,bk->bv", S[:, h], kt)
            S[:, h] = S[:, h] + beta[:, t, h, None, None] * kt[:, :, None] * err[:, None, :]
            out[:, t, h] = torch.einsum("bkv,bk->bv", S[:, h], qt)
    gate = m.g_b(m.g_a(x)).view(B, T, H, dk)
    o = m.norm.weight * out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + m.cfg.norm_eps)
    return m.out((o * torch.sigmoid(gate)).reshape(B, T, H * dk))


REFERENCES = {"lightning": lightning_reference, "kimi_delta": kimi_delta_reference}


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_chunked_prefill_equals_the_token_by_token_recurrence(name: str) -> None:
    assert_chunked_equals_reference(mixer(name), REFERENCES[name])


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_cached_decoding_equals_the_full_forward_with_left_padding(name: str) -> None:
    assert_cached_decoding_equals_full(mixer(name))


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_padding_never_reaches_the_state(name: str) -> None:
    assert_padding_never_reaches_the_state(mixer(name))


def test_meta_builds_count_the_papers_parameters() -> None:
    """On meta, every mixer's parameters are the sum of its projections, conv and per-head terms."""
    counts = {
        # qkv (3 x 4 heads of 8), the output gate, the norm, the output projection
        "lightning": D * 96 + D * 32 + 32 + 32 * D,
        # q, k, v (2 heads of 8), conv, decay f_a f_b dt_bias A_log, b, gate g_a g_b, norm, out
        "kimi_delta": 3 * D * 16
        + 48 * 4
        + D * 8
        + 8 * 16
        + 16
        + 2
        + D * 2
        + D * 8
        + 8 * 16
        + 8
        + 16 * D,
    }
    for name, want in counts.items():
        spec = {**tiny(n_layers=1), **BASE, "attention": {"kind": name, **MIXERS[name]}}
        m = archzoo.build_model(spec, device="meta").decoder.blocks[0].attention
        assert all(p.device.type == "meta" for p in m.parameters())
        assert sum(p.numel() for p in m.parameters()) == want, name


def test_normed_residual_block_skips_the_normalised_input() -> None:
    """x1 = a norm(x) + b attention(norm(x)), out = a' norm(x1) + b' ffn(norm(x1))."""
    torch.manual_seed(0)
    scales = {"attention_skip_scale": 1.5, "attention_scale": 0.5}
    scales |= {"ffn_skip_scale": 1.2, "ffn_scale": 0.7}
    spec = {
        **tiny(n_layers=1),
        **BASE,
        "attention": {"kind": "lightning", "block_size": 4},
        "block": {"kind": "normed_residual", **scales},
    }
    block = archzoo.build_model(spec).decoder.blocks[0].eval()
    x = torch.randn(2, 6, D, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        h = block.attention_norm(x)
        x1 = 1.5 * h + 0.5 * block.attention(h, context(6, 6))
        h1 = block.ffn_norm(x1)
        want = 1.2 * h1 + 0.7 * block.ffn(h1)
        got = block(x, context(6, 6))
    assert (got - want).abs().max() <= 1e-6


# --- the minimax family -----------------------------------------------------------------


def assert_left_padded_equal(ref: torch.nn.Module, ours, name: str = "logits") -> None:
    """A left-padded row's outputs at its real tokens within 1e-4 of transformers'."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, V, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    with torch.no_grad():
        want = getattr(ref(input_ids=ids, attention_mask=mask), name)
        got = getattr(ours(ids, attention_mask=mask), name)
    assert (want - got)[mask.bool()].abs().max() <= 1e-4


def minimax_config(**over):
    """Four layers (lightning, softmax, lightning, lightning: three distinct decays), blocks
    of 4 tokens (a 9-token row spans three), 4 experts, MiniMax-01's DeepNet-like alphas."""
    return transformers.MiniMaxConfig(
        **{
            "vocab_size": V,
            "hidden_size": 32,
            "intermediate_size": 24,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 8,
            "layer_types": [
                "linear_attention",
                "full_attention",
                "linear_attention",
                "linear_attention",
            ],
            "block_size": 4,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "full_attn_alpha_factor": 1.5,
            "full_attn_beta_factor": 0.8,
            "linear_attn_alpha_factor": 1.3,
            "linear_attn_beta_factor": 0.9,
            "mlp_alpha_factor": 1.2,
            "mlp_beta_factor": 1.1,
            "max_position_embeddings": 64,
            "pad_token_id": 0,
            **over,
        }
    )


def tiny_minimax(cls: str = "MiniMaxForCausalLM", **over) -> torch.nn.Module:
    torch.manual_seed(0)
    model = getattr(transformers, cls)(minimax_config(**over))
    perturb(model)
    return model.eval()


def test_minimax_imports_with_transformers_logits(tmp_path):
    ref = tiny_minimax()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    data = ours.spec.data
    assert (data["attention"]["kind"], data["block"]["kind"]) == ("lightning", "normed_residual")
    scales = {e["select"][0]: e["attention"]["slope_scale"] for e in data["layers"][1:]}
    assert data["layers"][0]["select"] == [1] and sorted(scales) == [2, 3]
    for i in (2, 3):  # transformers' per-layer decay rates, from the spec's scales
        rate = ref.model.layers[i].self_attn.slope_rate.flatten()
        mine = ours.decoder.blocks[i].attention.slopes()
        assert torch.allclose(rate, mine, rtol=1e-6, atol=0.0)
    assert_causal_lm_equal(ref, ours)  # a right-padded row, and the loss
    assert_left_padded_equal(ref, ours)
    # 20 greedy tokens with the cache: one prompt as transformers' cached generate; a
    # left-padded batch as transformers without the cache, since its cached decoding of a
    # padded row builds the attention mask from layer 0's (empty, lightning) cache and
    # departs from its own uncached forward by ~1e-2 (test_minimax_greedy_with_the_cache)
    g = torch.Generator().manual_seed(4)
    single = torch.randint(3, V, (1, 7), generator=g)
    batch = torch.randint(3, V, (2, 7), generator=g)
    mask = torch.ones_like(batch)
    mask[0, :3] = 0
    kwargs = {"max_new_tokens": 20, "do_sample": False, "pad_token_id": 0}
    assert ours.generate(single, **kwargs).tolist() == ref.generate(single, **kwargs).tolist()
    want = ref.generate(batch, attention_mask=mask, use_cache=False, **kwargs)
    assert ours.generate(batch, attention_mask=mask, **kwargs).tolist() == want.tolist()


def test_minimax_greedy_with_the_cache_equals_transformers(tmp_path):
    """With a softmax attention layer first (transformers' cached decoding is then exact for
    padded rows too), 20 greedy tokens with the cache equal transformers' cached ones."""
    kinds = ["full_attention", "linear_attention", "linear_attention", "linear_attention"]
    ref = tiny_minimax(layer_types=kinds)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert_greedy_equal(ref, ours)  # one prompt and a left-padded batch, both cached


@pytest.mark.parametrize(
    "cls, name",
    [
        ("MiniMaxModel", "last_hidden_state"),
        ("MiniMaxForSequenceClassification", "logits"),
        ("MiniMaxForTokenClassification", "logits"),
        ("MiniMaxForQuestionAnswering", "start_logits"),
    ],
)
def test_minimax_task_heads_import_with_transformers_outputs(tmp_path, cls, name):
    ref = tiny_minimax(cls, num_labels=3)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    g = torch.Generator().manual_seed(6)
    ids = torch.randint(3, V, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # right padding: the classifier reads each row's last real token
    ids = ids.masked_fill(mask == 0, 0)
    with torch.no_grad():
        want = getattr(ref(input_ids=ids, attention_mask=mask), name)
        got = getattr(ours(ids, attention_mask=mask), name)
    if want.dim() >= 2 and want.shape[:2] == mask.shape:
        want, got = want[mask.bool()], got[mask.bool()]
    assert (want - got).abs().max() <= 1e-4


def test_minimax_exports_into_transformers_with_equal_logits(tmp_path):
    ref = tiny_minimax()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    archzoo.to_hf(ours, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["layer_types"] == ref.config.layer_types
    assert (config["full_attn_alpha_factor"], config["mlp_beta_factor"]) == (1.5, 1.1)
    back, info = transformers.MiniMaxForCausalLM.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids = torch.randint(3, V, (2, 9), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert (ref(input_ids=ids).logits - back.eval()(input_ids=ids).logits).abs().max() <= 1e-5


def test_minimax_refuses_decays_off_its_depth_rule(tmp_path):
    """A lightning layer whose slope_scale is not MiniMax's for its depth cannot be exported
    (MiniMaxConfig derives the decays from the layer index), and a checkpoint whose saved
    decay rates disagree with its config is not imported."""
    ref = tiny_minimax()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    layers = [dict(e) for e in ours.spec.data["layers"]]
    layers[1] = {**layers[1], "attention": {**layers[1]["attention"], "slope_scale": 0.5}}
    other = archzoo.build_model({**ours.spec.data, "layers": layers})
    with pytest.raises(ExportError, match=r"layer 2: lightning slope_scale 0.5 is not MiniMax's"):
        archzoo.to_hf(other, tmp_path / "out", model_type="minimax")
    with torch.no_grad():
        ref.model.layers[2].self_attn.slope_rate.mul_(2.0)
    with pytest.raises(ConversionError, match=r"layers\.2\.self_attn\.slope_rate"):
        archzoo.from_hf(save_hf(ref, tmp_path / "bad"))


def test_minimax_zoo_spec_counts_transformers_parameters():
    """zoo/minimax-text-01.yaml on meta has MiniMaxForCausalLM's parameter count for the
    same published config (tests/published_configs.py)."""
    from published_configs import PUBLISHED

    config_cls, kwargs = PUBLISHED["minimax-text-01"]
    config = getattr(transformers, config_cls)(**kwargs)
    with torch.device("meta"):
        ref = transformers.MiniMaxForCausalLM(config)
    model = archzoo.build_model("minimax-text-01", device="meta")
    assert model.num_parameters() == sum(p.numel() for p in ref.parameters())


# --- the kimi_linear family -------------------------------------------------------------


def tiny_kimi(cls: str = "KimiLinearForCausalLM") -> torch.nn.Module:
    """Four layers: KDA (2 heads of 8), MLA (4 heads, no positions), KDA, KDA; FFNs dense,
    routed, routed, dense (4 experts in 2 groups, top 2, a shared expert, nonzero
    correction biases)."""
    config = transformers.KimiLinearConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        qk_rope_head_dim=4,
        qk_nope_head_dim=8,
        v_head_dim=8,
        kv_lora_rank=16,
        layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
        mlp_layer_types=["dense", "sparse", "sparse", "dense"],
        linear_num_heads=2,
        linear_head_dim=8,
        num_local_experts=4,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    model = getattr(transformers, cls)(config)
    perturb(model)
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "e_score_correction_bias"):
                module.e_score_correction_bias.normal_(0.0, 0.1)
    return model.eval()


def test_kimi_linear_imports_with_transformers_logits(tmp_path):
    ref = tiny_kimi()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    data = ours.spec.data
    assert (data["attention"]["kind"], data["position"]["kind"]) == ("kimi_delta", "none")
    assert [(e["select"], sorted(set(e) - {"select"})) for e in data["layers"]] == [
        ([1], ["attention"]),
        ([0, 3], ["ffn"]),
    ]
    latent = ours.decoder.blocks[1].attention.kv_a_norm  # KimiLinearRMSNorm's own epsilon
    assert (latent.cfg.eps, data["norm"]["eps"]) == (1e-6, 1e-5)
    assert_causal_lm_equal(ref, ours)  # a right-padded row, and the loss
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: delta-rule states and the MLA latent


def test_kimi_linear_headless_model_gives_transformers_hidden_states(tmp_path):
    ref = tiny_kimi("KimiLinearModel")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["head"]["kind"] == "none"
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    assert_left_padded_equal(ref, ours, "last_hidden_state")


def test_kimi_linear_exports_into_transformers_with_equal_logits(tmp_path):
    ref = tiny_kimi()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    archzoo.to_hf(ours, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["layer_types"] == ref.config.layer_types
    assert config["mlp_layer_types"] == ref.config.mlp_layer_types
    back, info = transformers.KimiLinearForCausalLM.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids = torch.randint(3, V, (2, 9), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert (ref(input_ids=ids).logits - back.eval()(input_ids=ids).logits).abs().max() <= 1e-5


def test_kimi_linear_zoo_spec_counts_transformers_parameters():
    from published_configs import PUBLISHED

    config_cls, kwargs = PUBLISHED["kimi-linear-48b-a3b"]
    config = getattr(transformers, config_cls)(**kwargs)
    with torch.device("meta"):
        ref = transformers.KimiLinearForCausalLM(config)
    model = archzoo.build_model("kimi-linear-48b-a3b", device="meta")
    assert model.num_parameters() == sum(p.numel() for p in ref.parameters())
