"""Hybrid families against transformers: tiny perturbed models, logits with padded rows and\ngreedy tokens with the cache."""

from __future__ import annotations

import json

import pytest
import torch
from hf_util import (
    V,
    assert_causal_lm_equal,
    assert_greedy_equal,
    assert_left_padded_equal,
    perturb,
    save_hf,
)

import archzoo

transformers = pytest.importorskip("transformers")


def tiny_lfm2() -> torch.nn.Module:
    """Three layers: conv, attention, conv (GQA 4/2, QK norm); SwiGLU 64 -> 48 wide."""
    config = transformers.Lfm2Config(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        block_multiple_of=16,
        max_position_embeddings=64,
        layer_types=["conv", "full_attention", "conv"],
        pad_token_id=0,
    )
    model = transformers.Lfm2ForCausalLM(config)
    perturb(model)
    return model.eval()


def test_lfm2_imports_with_transformers_logits(tmp_path):
    ref = tiny_lfm2()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    layers = ours.spec.data["layers"]
    assert ours.spec.data["attention"]["kind"] == "short_conv"
    assert [entry["select"] for entry in layers] == [[1]] and ours.spec.data["d_ff"] == 48
    assert_causal_lm_equal(ref, ours)  # a right-padded row, and the loss
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


def test_mamba2_imports_with_transformers_logits(tmp_path):
    """Two layers of 4 SSD heads in 2 groups, chunks of 4 (a 10-token row spans three)."""
    config = transformers.Mamba2Config(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_heads=4,
        head_dim=16,
        state_size=8,
        n_groups=2,
        chunk_size=4,
        time_step_limit=(0.0, 5.0),
        pad_token_id=0,
    )
    ref = transformers.Mamba2ForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    mixer = ours.spec.data["attention"]
    assert (mixer["d_inner"], mixer["dt_max"], ours.spec.data["ffn"]["kind"]) == (64, 5.0, "none")
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)
    archzoo.to_hf(ours, tmp_path / "out")  # the step limit goes back into config.json
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (saved["expand"], saved["time_step_limit"]) == (2, [0.0, 5.0])


def test_jamba_imports_with_transformers_logits(tmp_path):
    """Four layers: Mamba with its dt/B/C norms, attention on layers 1 and 3, experts on 0
    and 2 (layer 2: Mamba and experts, layer 1: attention and a dense SwiGLU)."""
    config = transformers.JambaConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        expert_layer_offset=0,
        num_experts=4,
        num_experts_per_tok=2,
        mamba_d_state=4,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    ref = transformers.JambaForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    layers = ours.spec.data["layers"]
    assert [(entry["select"], sorted(set(entry) - {"select"})) for entry in layers] == [
        ([1, 3], ["attention"]),
        ([0, 2], ["ffn"]),
    ]
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


def test_bamba_imports_with_transformers_logits(tmp_path):
    """Three layers: Mamba 2 (4 heads in 2 groups, chunks of 4), attention with rotary on
    half of each head, Mamba 2; a SwiGLU in each."""
    config = transformers.BambaConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_indices=[1],
        mamba_n_heads=4,
        mamba_d_state=8,
        mamba_n_groups=2,
        mamba_chunk_size=4,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    ref = transformers.BambaForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["position"]["fraction"] == 0.5
    assert ours.spec.data["layers"][0]["select"] == [1]
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


def test_qwen3_next_imports_with_transformers_logits(tmp_path):
    """Gated DeltaNet (2 key heads of 8, 4 value heads of 6: the grouped in_proj_qkvz),
    gated attention on layer 1, experts with a gated shared expert; layer 2 dense."""
    config = transformers.Qwen3NextConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        layer_types=["linear_attention", "full_attention", "linear_attention"],
        mlp_only_layers=[2],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=6,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=24,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    ref = transformers.Qwen3NextForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["position"]["fraction"] == 0.25
    assert [(e["select"], sorted(set(e) - {"select"})) for e in ours.spec.data["layers"]] == [
        ([1], ["attention"]),
        ([2], ["ffn"]),
    ]
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


def test_lfm2_moe_imports_with_transformers_logits(tmp_path):
    """LFM2 layers (conv, attention, conv), a dense SwiGLU on layer 0, then 4 experts with
    sigmoid scores, a nonzero choice bias and a routed scale of 1.5."""
    config = transformers.Lfm2MoeConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        layer_types=["conv", "full_attention", "conv"],
        num_dense_layers=1,
        num_experts=4,
        num_experts_per_tok=2,
        routed_scaling_factor=1.5,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    ref = transformers.Lfm2MoeForCausalLM(config)
    perturb(ref)
    with torch.no_grad():
        for layer in ref.model.layers[1:]:
            layer.feed_forward.expert_bias.normal_(0.0, 0.1)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert [(e["select"], sorted(set(e) - {"select"})) for e in ours.spec.data["layers"]] == [
        ([1], ["attention"]),
        ([0], ["ffn"]),
    ]
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


def test_olmo_hybrid_imports_with_transformers_logits(tmp_path):
    """Gated DeltaNet (separate q/k/v of 16/16/24 rows, b up to 2) in pre-LN blocks around
    an OLMo 2 attention block; transformers saves the original names (per-q/k/v convs)."""
    config = transformers.OlmoHybridConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        layer_types=["linear_attention", "full_attention", "linear_attention"],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=6,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=2,
    )
    ref = transformers.OlmoHybridForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["attention"]["beta_scale"] == 2.0
    assert ours.spec.data["layers"][0]["block"]["kind"] == "res_post_ln"
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


def test_nemotron_h_imports_with_transformers_logits(tmp_path):
    """One sublayer per layer: Mamba 2, an MLP alone, attention alone, an MLP alone."""
    config = transformers.NemotronHConfig(
        vocab_size=V,
        hidden_size=32,
        layers_block_type=["linear_attention", "mlp", "full_attention", "mlp"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=48,
        mamba_num_heads=4,
        mamba_head_dim=16,
        ssm_state_size=8,
        n_groups=2,
        chunk_size=4,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    ref = transformers.NemotronHForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    mlps = ours.spec.data["layers"][1]
    assert (mlps["select"], mlps["attention"]["kind"], mlps["ffn"]["kind"]) == (
        [1, 3],
        "none",
        "mlp",
    )
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


# Qwen3.5's tiny sizes: Gated DeltaNet, gated attention, Gated DeltaNet; 2 key heads of 8 and
# 4 value heads of 6 in the mixers, GQA 4/2 of 8 in attention
QWEN3_5_SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    layer_types=["linear_attention", "full_attention", "linear_attention"],
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=6,
    max_position_embeddings=64,
    pad_token_id=0,
)


@pytest.mark.parametrize("task", ["ForCausalLM", "TextModel"])
def test_qwen3_5_moe_text_imports_with_transformers_logits(tmp_path, task):
    """Qwen3-Next's layers with Gated DeltaNet's projections apart, experts everywhere; the
    causal LM (logits, padded rows, greedy tokens) and the headless text model."""
    from transformers.models import qwen3_5_moe
    from transformers.models.qwen3_5_moe import Qwen3_5MoeTextConfig

    config = Qwen3_5MoeTextConfig(
        **QWEN3_5_SIZES,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=24,
    )
    ref = getattr(qwen3_5_moe, f"Qwen3_5Moe{task}")(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["layers"] == [
        {"select": [1], "attention": ours.spec.data["layers"][0]["attention"]}
    ]
    if task == "TextModel":
        ids = torch.randint(3, V, (2, 9), generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            want = ref(input_ids=ids).last_hidden_state
            assert (want - ours(ids).last_hidden_state).abs().max() <= 1e-4
        return
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


def tiny_qwen3_5_text(task: str = "ForCausalLM") -> torch.nn.Module:
    """Three layers: Gated DeltaNet, gated attention, Gated DeltaNet; dense SwiGLU 48 wide."""
    from transformers.models import qwen3_5

    config = qwen3_5.Qwen3_5TextConfig(**QWEN3_5_SIZES, intermediate_size=48, num_labels=3)
    model = getattr(qwen3_5, f"Qwen3_5{task}")(config)
    perturb(model)
    return model.eval()


def test_qwen3_5_text_imports_with_transformers_logits(tmp_path):
    """Qwen3.5's dense text model: Qwen3.5-MoE's mixers with a SwiGLU MLP on every layer."""
    ref = tiny_qwen3_5_text()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    data = ours.spec.data
    assert (data["attention"]["kind"], data["ffn"]["kind"], data["d_ff"]) == (
        "gated_deltanet",
        "glu",
        48,
    )
    assert [(e["select"], e["attention"]["kind"]) for e in data["layers"]] == [([1], "gated_mha")]
    assert_causal_lm_equal(ref, ours)  # a right-padded row, and the loss
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states (and keys/values)


@pytest.mark.parametrize("task", ["TextModel", "TextForSequenceClassification"])
def test_qwen3_5_text_headless_and_classifier_equal_transformers(tmp_path, task):
    """The headless text model's last hidden state and the last-token classifier's logits,
    on a right-padded row (the classifier reads each row's last real token)."""
    ref = tiny_qwen3_5_text(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, V, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = 0, 0
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask)
        got = ours(ids, attention_mask=mask)
    if task == "TextModel":
        keep = mask.bool()
        diff = (want.last_hidden_state - got.last_hidden_state)[keep].abs().max()
    else:
        diff = (want.logits - got.logits).abs().max()
        assert want.logits.shape == (2, 3)
    assert diff <= 1e-4
