"""Mixture of experts against transformers' MoE blocks, a per-token reference and HF's aux loss."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import max_diff_unpadded, padded_batch, perturb
from transformers.models.mixtral.modeling_mixtral import (
    MixtralSparseMoeBlock,
    load_balancing_loss_func,
)
from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

import archzoo
from archzoo.plugins.ffn.routing import load_balancing_loss

D, F_EXPERT, E, K, V = 32, 24, 4, 2, 96


def moe_model(**ffn) -> archzoo.ZooModel:
    spec = {
        "family": "decoder",
        "vocab_size": V,
        "d_model": D,
        "n_heads": 4,
        "n_layers": 2,
        "d_ff": F_EXPERT,
        "dropout": 0.0,
        "position": "rotary",
        "norm": "rmsnorm",
        "attention": {"kind": "mha", "fused_qkv": False, "bias": False},
        "head": {"kind": "lm", "tie": False},
        "ffn": {"kind": "moe", "n_experts": E, "top_k": K, **ffn},
    }
    torch.manual_seed(0)
    return archzoo.build_model(spec)


@torch.no_grad()
def copy_experts(ours, hf_block) -> None:
    """HF's router (E, D), gate_up (E, 2F, D) and down (E, D, F) into archzoo's x @ W layout."""
    ours.router.weight.copy_(hf_block.gate.weight)
    ours.w_in.copy_(hf_block.experts.gate_up_proj.transpose(1, 2))
    ours.w_out.copy_(hf_block.experts.down_proj.transpose(1, 2))


def reference_moe(ffn, x: torch.Tensor) -> torch.Tensor:
    """Token by token, expert by expert: sum_k weight_k * expert_k(x) (independent of grouping)."""
    h = x.reshape(-1, x.shape[-1])
    probs = ffn.router(h).float().softmax(-1)
    out = torch.zeros_like(h)
    for n in range(h.shape[0]):
        w, idx = probs[n].topk(ffn.cfg.top_k)
        if ffn.cfg.normalize:
            w = w / w.sum()
        for weight, e in zip(w, idx.tolist(), strict=True):
            gate, up = (h[n] @ ffn.w_in[e]).chunk(2)
            out[n] += weight.to(h.dtype) * ((torch.nn.functional.silu(gate) * up) @ ffn.w_out[e])
    return out.reshape(x.shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grouped_experts_equal_per_token_reference(dtype):
    model = moe_model().to(dtype)
    perturb(model)
    ffn = model.decoder.blocks[0].ffn
    x = torch.randn(3, 5, D, dtype=dtype, requires_grad=True)
    got = ffn(x)
    want = reference_moe(ffn, x)
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(got, want, atol=tol, rtol=0)
    grad_out = torch.randn_like(got)
    g_got = torch.autograd.grad(got, (x, ffn.w_in, ffn.w_out), grad_out)
    g_want = torch.autograd.grad(want, (x, ffn.w_in, ffn.w_out), grad_out)
    for a, b in zip(g_got, g_want, strict=True):
        torch.testing.assert_close(a, b, atol=tol * 10, rtol=0)


@pytest.mark.parametrize("kind", ["mixtral", "qwen3_norm", "qwen3_plain"])
def test_moe_block_equals_transformers(kind):
    if kind == "mixtral":
        config = hf.MixtralConfig(
            hidden_size=D, intermediate_size=F_EXPERT, num_local_experts=E, num_experts_per_tok=K
        )
        ref, ours_cfg = MixtralSparseMoeBlock(config), {}
    else:
        norm = kind == "qwen3_norm"
        config = hf.Qwen3MoeConfig(
            hidden_size=D,
            moe_intermediate_size=F_EXPERT,
            num_experts=E,
            num_experts_per_tok=K,
            norm_topk_prob=norm,
        )
        ref, ours_cfg = Qwen3MoeSparseMoeBlock(config), {"normalize": norm}
    torch.nn.init.normal_(ref.gate.weight, std=0.5)
    for p in (ref.experts.gate_up_proj, ref.experts.down_proj):
        torch.nn.init.normal_(p, std=0.1)
    ours = moe_model(**ours_cfg).decoder.blocks[0].ffn
    copy_experts(ours, ref)
    x = torch.randn(2, 9, D)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=0)


def test_shared_expert_with_gate_equals_qwen2_moe():
    config = hf.Qwen2MoeConfig(
        hidden_size=D,
        moe_intermediate_size=F_EXPERT,
        shared_expert_intermediate_size=40,
        num_experts=E,
        num_experts_per_tok=K,
        norm_topk_prob=False,
    )
    ref = Qwen2MoeSparseMoeBlock(config)
    for p in ref.parameters():
        torch.nn.init.normal_(p, std=0.2)
    ours = moe_model(normalize=False, n_shared=1, d_shared=40, shared_gate=True).decoder.blocks[0]
    ffn = ours.ffn
    copy_experts(ffn, ref)
    with torch.no_grad():
        s = ref.shared_expert
        ffn.shared.up.weight.copy_(torch.cat([s.gate_proj.weight, s.up_proj.weight]))
        ffn.shared.down.weight.copy_(s.down_proj.weight)
        ffn.shared_gate.weight.copy_(ref.shared_expert_gate.weight)
        x = torch.randn(2, 7, D)
        torch.testing.assert_close(ffn(x), ref(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("masked", [False, True])
def test_load_balancing_loss_equals_transformers(masked):
    g = torch.Generator().manual_seed(3)
    logits = [torch.randn(2 * 6, E, generator=g) for _ in range(3)]
    mask = torch.ones(2, 6, dtype=torch.long)
    if masked:
        mask[1, 4:] = 0
    want = load_balancing_loss_func(tuple(logits), E, K, mask if masked else None)
    got = load_balancing_loss(logits, E, K, mask if masked else None)
    assert abs(got.item() - want.item()) <= 1e-6
    # and the paper's formula by hand: E * sum_e f_e P_e over unmasked rows
    keep = mask.reshape(-1).bool()
    rows = torch.cat([lg[keep] for lg in logits]).softmax(-1)
    f = torch.zeros(E)
    for e in rows.topk(K, dim=-1).indices.reshape(-1).tolist():
        f[e] += 1
    by_hand = E * ((f / rows.shape[0]) * rows.mean(0)).sum()
    assert abs(got.item() - by_hand.item()) <= 1e-6


def tiny_mixtral() -> hf.MixtralForCausalLM:
    torch.manual_seed(0)
    config = hf.MixtralConfig(
        vocab_size=V,
        hidden_size=D,
        intermediate_size=F_EXPERT,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=E,
        num_experts_per_tok=K,
        max_position_embeddings=64,
        router_aux_loss_coef=0.02,
        output_router_logits=True,
        attn_implementation="eager",
    )
    model = hf.MixtralForCausalLM(config)
    perturb(model, scale=0.1)
    return model.eval()


@torch.no_grad()
def mixtral_to_archzoo(ref: hf.MixtralForCausalLM) -> archzoo.ZooModel:
    """Copy a tiny Mixtral by hand (names local to this test, not a converter)."""
    model = moe_model(aux_loss_coef=0.02)
    model.spec.data["attention"]["n_kv_heads"] = 2
    spec = model.spec.to_dict()
    spec["attention"]["n_kv_heads"] = 2
    spec["norm"] = {"kind": "rmsnorm", "eps": ref.config.rms_norm_eps}
    spec["position"] = {"kind": "rotary", "base": ref.config.rope_parameters["rope_theta"]}
    model = archzoo.build_model(spec).eval()
    m = ref.model
    model.decoder.embedding.word.weight.copy_(m.embed_tokens.weight)
    for ours, theirs in zip(model.decoder.blocks, m.layers, strict=True):
        for o, t in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "o_proj")):
            getattr(ours.attention, o).weight.copy_(getattr(theirs.self_attn, t).weight)
        ours.attention_norm.weight.copy_(theirs.input_layernorm.weight)
        ours.ffn_norm.weight.copy_(theirs.post_attention_layernorm.weight)
        copy_experts(ours.ffn, theirs.mlp)
    model.decoder.final_norm.weight.copy_(m.norm.weight)
    model.head.proj.weight.copy_(ref.lm_head.weight)
    return model


def test_mixtral_logits_loss_and_aux_loss_equal_transformers():
    ref = tiny_mixtral()
    ours = mixtral_to_archzoo(ref)
    ids, mask = padded_batch(V)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    assert max_diff_unpadded(got.logits, want.logits, mask) <= 1e-4
    assert abs(got.aux_loss.item() - want.aux_loss.item()) <= 1e-5
    assert abs(got.loss.item() - want.loss.item()) <= 1e-5


def test_mixtral_greedy_generation_matches_transformers():
    ref = tiny_mixtral()
    ours = mixtral_to_archzoo(ref)
    ref.config.output_router_logits = False  # transformers' aux loss fails on cached steps
    prompt = torch.randint(3, V, (2, 6), generator=torch.Generator().manual_seed(5))
    mask = torch.ones_like(prompt)
    mask[1, :2] = 0  # left padding
    kwargs = {"max_new_tokens": 20, "do_sample": False, "pad_token_id": 0}
    want = ref.generate(prompt, attention_mask=mask, **kwargs)
    got = ours.generate(prompt, attention_mask=mask, **kwargs)
    assert got.tolist() == want.tolist()


def test_tiny_moe_trains_and_every_expert_learns():
    model = moe_model(jitter=0.01)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.randint(0, V, (8, 16), generator=torch.Generator().manual_seed(0))
    losses = []
    for _ in range(30):
        out = model(ids, labels=ids)
        opt.zero_grad()
        out.loss.backward()
        for block in model.decoder.blocks:
            per_expert = block.ffn.w_in.grad.abs().sum(dim=(1, 2))  # (E,)
            assert (per_expert > 0).all(), "an expert received no gradient"
        opt.step()
        losses.append(out.loss.item())
    assert losses[-1] < 0.6 * losses[0]


def test_aux_loss_and_gradients_equal_under_activation_checkpointing():
    model = moe_model()
    perturb(model)
    ids = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    results = []
    for checkpointing in (False, True):
        for stack in (model.decoder,):
            stack.checkpointing = checkpointing
        model.train()
        out = model(ids, labels=ids)
        model.zero_grad()
        out.loss.backward()
        results.append(
            (out.aux_loss.detach(), model.decoder.blocks[1].ffn.router.weight.grad.clone())
        )
    torch.testing.assert_close(results[0][0], results[1][0], atol=0, rtol=0)
    torch.testing.assert_close(results[0][1], results[1][1], atol=1e-7, rtol=0)


def test_dense_and_moe_layers_mix_through_layers():
    spec = {
        "family": "decoder",
        "vocab_size": V,
        "d_model": D,
        "n_heads": 4,
        "n_layers": 4,
        "d_ff": 64,
        "head": "lm",
        "ffn": {"kind": "glu"},
        "layers": [{"select": "1::2", "ffn": {"kind": "moe", "n_experts": E, "top_k": K}}],
    }
    model = archzoo.build_model(spec, device="meta")
    kinds = [b.ffn.name for b in model.decoder.blocks]
    assert kinds == ["glu", "moe", "glu", "moe"]
    moe = model.decoder.blocks[1].ffn
    per_expert = 3 * D * 64
    assert moe.active_parameters() == D * E + K * per_expert


def test_moe_compiles_fullgraph():
    model = moe_model()
    perturb(model)
    model.eval()
    ids = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(ids).logits
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        got = compiled(ids).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_bad_moe_configs_are_located():
    with pytest.raises(archzoo.SpecError) as err:
        moe_model(top_k=5)
    assert "top_k 5 exceeds n_experts 4" in str(err.value)
    with pytest.raises(archzoo.SpecError) as err:
        moe_model(expert="mlp", activation="swiglu")
    assert "activation" in str(err.value)
