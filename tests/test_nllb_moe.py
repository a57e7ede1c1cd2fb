"""NLLB-MoE (issue 33): top-2 routed experts with capacity over the call's tokens, from a tiny
perturbed transformers model with a padded row. transformers 5.24 cannot be the oracle as
shipped: NllbMoeExperts.forward one-hot encodes the already one-hot top-1 mask, so only
experts 0 and 1 ever run. The oracle here is transformers with exactly that line fixed
(`fix_nllb_moe_dispatch`); the tests show the bug and the fix, and check archzoo's MoE layer
against a per-token loop as well."""

from __future__ import annotations

import json
import math

import pytest
import torch
import transformers as hf
from hf_util import V, max_diff_unpadded, padded_batch, perturb, save_hf
from transformers.models.nllb_moe import modeling_nllb_moe

import archzoo
from archzoo.parts.converter import ConversionError

CONFIG = dict(
    vocab_size=V,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
    num_experts=4,
    encoder_sparse_step=2,  # layer 1 of each stack routed, layer 0 dense
    decoder_sparse_step=2,
    expert_capacity=3,
    decoder_start_token_id=2,
)


def fixed_experts_forward(self, hidden_states, router_mask, router_probs):
    """NllbMoeExperts.forward of transformers 5.24 with its one bug fixed.

    transformers builds the dispatch as one_hot(router_mask).permute(2, 1, 0), but router_mask
    is already the (N, E) one-hot top-1 mask: the "expert" axis it loops over is the one-hot
    value, so expert_1 runs every first choice and expert_0 every other non-zero weight. Here
    expert e runs the tokens whose combine weight router_probs[:, e] is non-zero (a first or
    second choice kept under capacity), fairseq's Top2Gate dispatch. Weighting, the
    moe_token_dropout scale and the index_add are transformers' own lines."""
    final_hidden_states = torch.zeros_like(hidden_states)
    for e in range(self.num_experts):
        top_x = router_probs[:, e].nonzero().squeeze(-1)  # the fix: tokens routed to e
        if top_x.numel() == 0:
            continue
        current = self[f"expert_{e}"](hidden_states[top_x]) * router_probs[top_x, e, None]
        if self.moe_token_dropout > 0:
            if self.training:
                current = self.token_dropout(current)
            else:
                current *= 1 - self.moe_token_dropout
        final_hidden_states.index_add_(0, top_x, current.to(hidden_states.dtype))
    return final_hidden_states


def fix_nllb_moe_dispatch(monkeypatch) -> None:
    monkeypatch.setattr(modeling_nllb_moe.NllbMoeExperts, "forward", fixed_experts_forward)


def tiny(task: str = "ForConditionalGeneration", **over) -> torch.nn.Module:
    config = hf.NllbMoeConfig(**{**CONFIG, **over})
    torch.manual_seed(0)
    model = getattr(hf, f"NllbMoe{task}")(config)
    perturb(model, scale=0.1)
    return model.eval()


def routed_experts(model: torch.nn.Module, ids: torch.Tensor) -> set[int]:
    """The experts the encoder's routed layer picks (first or second) for `ids`."""
    seen: list[torch.Tensor] = []
    router = model.get_encoder().layers[1].ffn.router
    handle = router.register_forward_hook(lambda m, a, out: seen.append(out[1]))
    with torch.no_grad():
        model(ids, decoder_input_ids=ids[:, :3])
    handle.remove()
    return set(seen[0].nonzero()[:, 1].tolist())


def test_unpatched_transformers_runs_experts_0_and_1_only_and_the_fix_runs_the_routed_ones(
    monkeypatch,
):
    """With tokens routed to experts 2 and 3 (the router's own choice, checked), filling those
    experts' weights with 1000 leaves transformers 5.24's logits unchanged, and changes them
    with the dispatch fixed. When the first half fails, transformers fixed NllbMoeExperts and
    the patch can go."""
    model = tiny()
    ids = padded_batch(V)[0]
    assert routed_experts(model, ids) & {2, 3}
    dec = ids[:, :5]
    with torch.no_grad():
        before = model(ids, decoder_input_ids=dec).logits
        fix_nllb_moe_dispatch(monkeypatch)
        fixed = model(ids, decoder_input_ids=dec).logits
        assert (fixed - before).abs().max() > 1e-3  # the fix changes the numbers
        for name, p in model.named_parameters():
            if ".experts.expert_2." in name or ".experts.expert_3." in name:
                p.fill_(1e3)
        assert not torch.equal(model(ids, decoder_input_ids=dec).logits, fixed)
        monkeypatch.undo()  # transformers as shipped: experts 2 and 3 never run
        assert torch.equal(model(ids, decoder_input_ids=dec).logits, before)


def loop_reference(layer, h: torch.Tensor, capacity: int, drop: float) -> torch.Tensor:
    """Top2Gate token by token: softmax, best two, each expert's queue filled with every
    token's first choice in order and then the second choices, the kept probabilities
    renormalised, sum of w * expert(h) times (1 - drop)."""
    probs = layer.router(h).float().softmax(-1)
    best = [probs[n].topk(2).indices.tolist() for n in range(h.shape[0])]
    load = [0] * probs.shape[1]
    kept = [[False, False] for _ in best]
    for slot in (0, 1):
        for n, pair in enumerate(best):
            e = pair[slot]
            kept[n][slot] = load[e] < capacity
            load[e] += 1
    out = torch.zeros_like(h)
    for n, pair in enumerate(best):
        w = [probs[n, e].item() * k for e, k in zip(pair, kept[n], strict=True)]
        total = max(sum(w), torch.finfo(torch.float32).eps)
        for e, wi in zip(pair, w, strict=True):
            a = torch.relu(h[n] @ layer.w_in[e] + layer.b_in[e])
            out[n] += wi / total * (a @ layer.w_out[e] + layer.b_out[e]) * (1 - drop)
    return out


@pytest.mark.parametrize("fraction", [0.25, 1.0])
def test_moe_layer_equals_a_token_loop_and_the_fixed_transformers_layer(
    tmp_path, monkeypatch, fraction
):
    """The encoder's routed layer alone on 2 rows x 8 tokens: archzoo's capacity over the
    batch at eval (ceil(0.25 x 16) = 4 slots per expert drops some) equals the loop and the
    fixed transformers NllbMoeSparseMLP with moe_eval_capacity_token_fraction 0.25."""
    fix_nllb_moe_dispatch(monkeypatch)
    ref = tiny(moe_eval_capacity_token_fraction=fraction)
    ours = archzoo.from_hf(save_hf(tiny(), tmp_path))  # fraction 1 imports; set it below
    layer = ours.encoder.blocks[1].ffn
    assert layer.name == "moe" and layer.cfg.capacity_over == "batch"
    layer.cfg.eval_capacity_fraction = fraction
    h = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        got, want = layer(h), ref.model.encoder.layers[1].ffn(h)
        loop = loop_reference(layer, h.view(16, 32), math.ceil(fraction * 16), 0.2)
        unlimited = loop_reference(layer, h.view(16, 32), 16, 0.2)
    assert (got - loop.view(2, 8, 32)).abs().max().item() <= 1e-5
    assert (got - want).abs().max().item() <= 1e-5
    assert ((loop - unlimited).abs().max().item() > 1e-3) == (fraction < 1)  # drops bite


def test_batch_capacity_queues_second_choices_behind_all_first_choices():
    """within_batch_capacity against a loop over slots then tokens (fairseq's Top2Gate)."""
    from archzoo.plugins.ffn.moe import within_batch_capacity

    experts = torch.randint(0, 3, (12, 2), generator=torch.Generator().manual_seed(4))
    want = torch.zeros(12, 2)
    load = [0, 0, 0]
    for slot in (0, 1):
        for n in range(12):
            want[n, slot] = float(load[experts[n, slot]] < 3)
            load[experts[n, slot]] += 1
    assert torch.equal(within_batch_capacity(experts, 3, 3), want)
    assert 0 < want.sum() < 24


@pytest.mark.parametrize("task", ["ForConditionalGeneration", "Model"])
def test_logits_match_fixed_transformers_with_a_padded_row(tmp_path, monkeypatch, task):
    fix_nllb_moe_dispatch(monkeypatch)
    ref = tiny(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path))
    assert ours.hf_source["model_type"] == "nllb-moe"
    assert [b.ffn.name for b in ours.encoder.blocks] == ["mlp", "moe"]
    assert [b.ffn.name for b in ours.decoder.blocks] == ["mlp", "moe"]
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, ref.config.pad_token_id)
    dec, dec_mask = padded_batch(V, length=6, real=4)
    feed = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec}
    feed["decoder_attention_mask"] = dec_mask
    name = "logits" if task != "Model" else "last_hidden_state"
    with torch.no_grad():
        want, got = getattr(ref(**feed), name), getattr(ours(**feed), name)
    assert got.shape == want.shape
    assert max_diff_unpadded(got, want, dec_mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_greedy_generation_equals_fixed_transformers(tmp_path, monkeypatch):
    fix_nllb_moe_dispatch(monkeypatch)
    ref = tiny()
    ours = archzoo.from_hf(save_hf(ref, tmp_path))
    ids, mask = padded_batch(V, length=8, real=5)
    kwargs = {"max_new_tokens": 10, "min_new_tokens": 10, "do_sample": False}
    want = ref.generate(ids, attention_mask=mask, **kwargs)
    assert torch.equal(ours.generate(ids, attention_mask=mask, **kwargs), want)


def test_export_round_trip_loads_in_fixed_transformers_with_equal_logits(tmp_path, monkeypatch):
    """to_hf writes one fc1/fc2 per expert and the sparse steps; transformers (dispatch fixed:
    to_hf's probe runs it) loads them with nothing missing and equal logits."""
    fix_nllb_moe_dispatch(monkeypatch)
    ref = tiny()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "in"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["model_type"] == "nllb-moe"
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (config["encoder_sparse_step"], config["num_experts"], config["expert_capacity"]) == (
        2,
        4,
        3,
    )
    back, info = hf.NllbMoeForConditionalGeneration.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, mask = padded_batch(V)
    feed = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": ids[:, :5]}
    with torch.no_grad():
        assert (back.eval()(**feed).logits - ref(**feed).logits).abs().max() <= 1e-5


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("second_expert_policy", "random", "second_expert_policy='random' is not supported"),
        ("batch_prioritized_routing", True, "batch_prioritized_routing=True is not supported"),
        ("moe_eval_capacity_token_fraction", 0.5, "does not see the padding"),
    ],
)
def test_settings_archzoo_cannot_run_are_refused_by_name(key, value, message):
    from archzoo.parts.registry import get_registry

    config = hf.NllbMoeConfig(**CONFIG).to_dict()
    with pytest.raises(ConversionError, match=message):
        get_registry().converter("nllb-moe").to_spec({**config, key: value})
