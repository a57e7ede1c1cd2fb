"""Mixture of attention heads (`moa`) and the `jetmoe` family (issue 33).

The layer against a dense per-token computation written out here in float64 (each token's
top-k experts: its own queries, causal attention over the shared keys and values, its own
output projection, softmax-of-top-k weights, one bias); the moe ffn's `output_bias` against
the same per-token sum; JetMoE from tiny perturbed transformers models with a padded row
(LM with loss and the pooled router loss, headless, sequence classifier, attention maps)
and its greedy tokens with the cache. (Export round trip: tests/test_export.py's sweep of
every registered type; the zoo spec's count: tests/test_zoo_counts.py from published_configs.)
"""

from __future__ import annotations

import math

import pytest
import torch
import transformers as hf
from hf_util import assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
from archzoo.hf.probe import model_class
from archzoo.parts.registry import get_registry

V = 96
JETMOE = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=2,
    num_key_value_heads=2,
    kv_channels=8,
    intermediate_size=24,
    num_local_experts=4,
    num_experts_per_tok=2,
    max_position_embeddings=64,
    rms_norm_eps=0.3,  # the final norm's only: the blocks' norms stay at 1e-6
    output_router_logits=True,
    aux_loss_coef=0.05,
    pad_token_id=0,
)
SPEC = {
    "family": "decoder",
    "vocab_size": V,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 6,
    "head_dim": 4,
    "d_ff": 16,
    "max_len": 64,
    "dropout": 0.0,
    "block": "pre_ln",
    "norm": "rmsnorm",
    "position": "none",
    "attention": {"kind": "moa", "n_experts": 5, "top_k": 3, "n_kv_heads": 2},
    "ffn": {"kind": "moe", "n_experts": 4, "top_k": 2, "router": "topk_softmax"},
    "head": "lm",
}


def make(task: str, **overrides) -> torch.nn.Module:
    config = hf.AutoConfig.for_model("jetmoe", **{**JETMOE, **overrides})
    conv = get_registry().converter("jetmoe")
    torch.manual_seed(0)
    model = model_class(conv, task, config, None)(config)
    perturb(model, scale=0.1)
    return model.eval()


def captured(model, module, ids) -> tuple[torch.Tensor, torch.Tensor]:
    """The (input, output) of `module` in one forward of `model`."""
    seen = []
    handle = module.register_forward_hook(lambda m, args, out: seen.append((args[0], out)))
    try:
        with torch.no_grad():
            model(ids)
    finally:
        handle.remove()
    x, out = seen[0]
    return x, out[0] if isinstance(out, tuple) else out


def top_k_softmax(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best experts and a softmax over their logits, taken in float32 (as
    transformers' routers do, whatever the model's dtype)."""
    top, experts = logits.topk(k)
    return torch.softmax(top.float(), dim=-1).to(logits.dtype), experts


def dense_moa(attn, x: torch.Tensor) -> torch.Tensor:
    """Per token t and chosen expert e (weight g): q = x_t Wq[e] as Hkv heads, each head j
    attends causally over the shared k_j, v_j; sum_e g * (heads Wo[e]) + bias."""
    B, T, _ = x.shape
    hkv, hd = attn.n_kv, attn.head_dim
    k, v = (x @ attn.kv.weight.T).chunk(2, dim=-1)
    k, v = k.view(B, T, hkv, hd), v.view(B, T, hkv, hd)
    out = torch.zeros_like(x)
    for b in range(B):
        for t in range(T):
            weights, experts = top_k_softmax(attn.router(x[b, t]), attn.top_k)
            for g, e in zip(weights, experts, strict=True):
                q = (x[b, t] @ attn.w_q[e]).view(hkv, hd)
                heads = []
                for j in range(hkv):
                    scores = k[b, : t + 1, j] @ q[j] / math.sqrt(hd)  # (t + 1,)
                    heads.append(torch.softmax(scores, dim=0) @ v[b, : t + 1, j])
                out[b, t] += g * (torch.cat(heads) @ attn.w_out[e])
    return out + attn.out_bias


def dense_moe(ffn, x: torch.Tensor) -> torch.Tensor:
    """Per token: sum over its top-k experts of g * down(silu(gate) * up), plus the bias."""
    out = torch.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            weights, experts = top_k_softmax(ffn.router(x[b, t]), ffn.cfg.top_k)
            for g, e in zip(weights, experts, strict=True):
                gate, up = (x[b, t] @ ffn.w_in[e]).chunk(2)
                out[b, t] += g * ((torch.nn.functional.silu(gate) * up) @ ffn.w_out[e])
    return out + ffn.out_bias


def tiny_moa_model(**ffn) -> archzoo.ZooModel:
    model = archzoo.build_model({**SPEC, "ffn": {**SPEC["ffn"], **ffn}}).double().eval()
    perturb(model, scale=0.3)
    return model


def test_moa_is_the_dense_per_token_mixture_of_heads():
    model = tiny_moa_model()
    attn = model.decoder.blocks[1].attention
    ids = torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(2))
    x, out = captured(model, attn, ids)
    with torch.no_grad():
        assert (out - dense_moa(attn, x)).abs().max() <= 1e-10


def test_moe_output_bias_is_added_after_the_weighted_sum():
    model = tiny_moa_model(output_bias=True)
    ffn = model.decoder.blocks[1].ffn
    assert ffn.out_bias.shape == (32,)
    ids = torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(2))
    x, out = captured(model, ffn, ids)
    with torch.no_grad():
        assert (out - dense_moe(ffn, x)).abs().max() <= 1e-10


def test_moa_needs_n_heads_equal_top_k_times_kv_heads():
    attention = {"kind": "moa", "n_experts": 4, "top_k": 2, "n_kv_heads": 2}
    with pytest.raises(archzoo.SpecError, match=r"n_heads 6 must equal top_k 2 x n_kv_heads"):
        archzoo.build_model({**SPEC, "attention": attention})


@pytest.mark.parametrize("task", ["ForCausalLM", "Model", "ForSequenceClassification"])
def test_jetmoe_outputs_equal_transformers(tmp_path, task):
    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "jetmoe"))
    assert ours.hf_source["model_type"] == "jetmoe"
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, 0)  # the classifier finds each row's last token
    labels = ids.masked_fill(mask == 0, -100) if task == "ForCausalLM" else None
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    name = "last_hidden_state" if task == "Model" else "logits"
    got, want_t = getattr(got, name), getattr(want, name)
    assert got.shape == want_t.shape
    if got.dim() == 2:  # one row of scores per sequence
        assert (got - want_t).abs().max() <= 1e-4
    else:
        assert max_diff_unpadded(got, want_t, mask) <= 1e-4
    if task == "ForCausalLM":  # the LM loss plus 0.05 x the router loss over all 4 routers
        out = ours(ids, attention_mask=mask, labels=labels)
        assert abs(out.aux_loss.item() - want.aux_loss.item()) <= 1e-5
        assert abs(out.loss.item() - want.loss.item()) <= 1e-5


def test_jetmoe_attention_maps_are_transformers_heads(tmp_path):
    """output_attentions: (B, top_k x Hkv, T, T) in transformers' head order (slot-major)."""
    ref = make("Model", attn_implementation="eager")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "jetmoe"))
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
        got = ours(ids, attention_mask=mask, output_attentions=True).attentions
    for a, b in zip(got, want, strict=True):
        keep = mask.bool()[:, None, :, None].expand_as(a)
        assert (a - b).abs()[keep].max() <= 1e-5


def test_jetmoe_greedy_generation_equals_transformers(tmp_path):
    ref = make("ForCausalLM", output_router_logits=False)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "jetmoe"))
    assert_greedy_equal(ref, ours)
