"""Kolibri-1 (kolibri1, issue 33): moe's `sigmoid_logits` router (experts picked by the raw
logits plus the choice bias, weighed by the sigmoid of their logits) against a per-token loop
in float64, and the family from tiny perturbed transformers models with a random correction
bias and a padded row: Kolibri1ForCausalLM (logits and loss) and Kolibri1Model within 1e-4,
greedy tokens with the cache, an export that transformers loads with equal logits. (The
export sweep: tests/test_export.py; the zoo spec's count: tests/test_zoo_counts.py.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
from archzoo.plugins.ffn.routing import route

V = 96
KOLIBRI = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    moe_intermediate_size=16,
    shared_expert_intermediate_size=24,
    num_experts=8,
    num_experts_per_tok=2,
    sliding_window=4,  # shorter than the rows
    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
    norm_topk_prob=True,
    rms_norm_eps=1e-5,
    pad_token_id=0,
)
CLASSES = {"ForCausalLM": hf.Kolibri1ForCausalLM, "Model": hf.Kolibri1Model}


def make(task: str, **config) -> torch.nn.Module:
    torch.manual_seed(0)
    model = CLASSES[task](hf.AutoConfig.for_model("kolibri1", **{**KOLIBRI, **config}))
    perturb(model, scale=0.1)
    g = torch.Generator().manual_seed(1)
    for name, buffer in model.named_buffers():  # a correction bias that changes the picks
        if name.endswith("e_score_correction_bias"):
            buffer.copy_(torch.randn(buffer.shape, generator=g))
    return model.eval()


@pytest.mark.parametrize("normalize", [False, True])
def test_sigmoid_logits_picks_by_logits_plus_bias_and_weighs_by_their_sigmoid(normalize):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 8, generator=g, dtype=torch.float64) * 3
    bias = torch.randn(8, generator=g, dtype=torch.float64)
    weights, experts = route(logits, 2, "sigmoid_logits", normalize, choice_bias=bias)
    for n in range(64):
        picked = sorted(range(8), key=lambda e: -(logits[n, e] + bias[e]).item())[:2]
        assert experts[n].tolist() == picked
        want = torch.sigmoid(logits[n, picked])
        want = want / want.sum() if normalize else want
        assert torch.allclose(weights[n].double(), want, rtol=1e-6)
    by_scores = route(logits, 2, "sigmoid", normalize, choice_bias=bias)[1]
    assert not torch.equal(by_scores, experts)  # DeepSeek-V3's choice differs


@pytest.mark.parametrize("task", sorted(CLASSES))
def test_kolibri1_outputs_equal_transformers(tmp_path, task):
    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "kolibri1"))
    assert ours.hf_source["model_type"] == "kolibri1"
    assert ours.spec.data["ffn"]["router"] == "sigmoid_logits"
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    ids, mask = padded_batch(V)
    labels = ids.masked_fill(mask == 0, -100) if task == "ForCausalLM" else None
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    name = "logits" if task == "ForCausalLM" else "last_hidden_state"
    assert max_diff_unpadded(getattr(got, name), getattr(want, name), mask) <= 1e-4
    if labels is not None:
        assert abs(got.loss.item() - want.loss.item()) <= 1e-5


def test_kolibri1_greedy_tokens_equal_transformers(tmp_path):
    ref = make("ForCausalLM")
    assert_greedy_equal(ref, archzoo.from_hf(save_hf(ref, tmp_path / "kolibri1")))


def test_kolibri1_exports_back_with_its_correction_bias(tmp_path):
    ref = make("ForCausalLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "kolibri1"))
    assert archzoo.to_hf(ours, tmp_path / "out")["model_type"] == "kolibri1"
    back, info = hf.Kolibri1ForCausalLM.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not any(info.values()), info
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = back.eval()(input_ids=ids, attention_mask=mask).logits
    assert max_diff_unpadded(got, want, mask) <= 1e-5
