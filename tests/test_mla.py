"""Multi-head latent attention (DeepSeek-V2/V3): its latent cache, absorbed decoding, and the
DeepSeek-V3 converter against transformers (tiny random models, every parameter perturbed)."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import (
    assert_causal_lm_equal,
    assert_greedy_equal,
    perturb,
    save_hf,
    table_export,
)

import archzoo
from archzoo.parts.costs import model_costs
from archzoo.parts.interfaces import AttentionContext
from archzoo.parts.masks import AttentionMask

V = 96
RANK, ROPE, NOPE, VDIM = 16, 4, 8, 6


DEEPSEEK_MOE = {
    "kind": "moe",
    "n_experts": 8,
    "top_k": 2,
    "d_expert": 16,
    "router": "sigmoid",
    "choice_bias": True,
    "n_groups": 4,
    "topk_groups": 2,
    "routed_scale": 2.5,
    "n_shared": 1,
}


def mla_model(n_layers: int = 2, ffn: dict | None = None, **attention) -> archzoo.ZooModel:
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
        "ffn": ffn or {"kind": "glu"},
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


def test_mla_with_grouped_moe_compiles_fullgraph():
    """MLA and a DeepSeek-routed MoE (sigmoid, 4 groups, choice bias) in one compiled graph."""
    model = mla_model(q_lora_rank=12, ffn=DEEPSEEK_MOE)
    for block in model.decoder.blocks:
        block.ffn.score_bias.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(1))
    ids, mask = left_padded()
    with torch.no_grad():
        want = model(ids, attention_mask=mask).logits
        got = torch.compile(model, fullgraph=True)(ids, attention_mask=mask).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


# ---------------------------------------------------------------- DeepSeek-V3 vs transformers


def tiny_deepseek(q_lora_rank: int | None = 12) -> hf.DeepseekV3ForCausalLM:
    """3 layers (the first dense), 8 experts in 4 groups (2 kept), top-2, a shared expert;
    every parameter and the routing correction bias perturbed."""
    config = hf.DeepseekV3Config(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_routed_experts=8,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        routed_scaling_factor=2.5,
        kv_lora_rank=RANK,
        q_lora_rank=q_lora_rank,
        qk_rope_head_dim=ROPE,
        qk_nope_head_dim=NOPE,
        v_head_dim=VDIM,
        max_position_embeddings=64,
        attn_implementation="eager",
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = hf.DeepseekV3ForCausalLM(config)
    perturb(model, scale=0.1)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for layer in model.model.layers[1:]:
            bias = layer.mlp.gate.e_score_correction_bias
            bias.copy_(torch.randn(bias.shape, generator=g) * 0.3)
    return model.eval()


@pytest.fixture(scope="module")
def deepseek_pairs(tmp_path_factory):
    """(transformers, archzoo) models by query layout, imported once per module on demand."""
    made: dict = {}

    def get(q_lora_rank: int | None = 12):
        if q_lora_rank not in made:
            ref = tiny_deepseek(q_lora_rank)
            ours = archzoo.from_hf(save_hf(ref, tmp_path_factory.mktemp("deepseek")))
            made[q_lora_rank] = ref, ours
        return made[q_lora_rank]

    return get


@pytest.fixture
def deepseek_pair(deepseek_pairs):
    return deepseek_pairs(12)


@pytest.mark.parametrize("q_lora_rank", [12, None])
def test_deepseek_v3_imports_as_mla_and_grouped_moe(deepseek_pairs, q_lora_rank):
    ref, ours = deepseek_pairs(q_lora_rank)
    blocks = ours.decoder.blocks
    assert [b.ffn.name for b in blocks] == ["glu", "moe", "moe"]
    assert {b.attention.name for b in blocks} == {"mla"}
    bias = ref.model.layers[2].mlp.gate.e_score_correction_bias
    assert torch.equal(blocks[2].ffn.score_bias, bias)
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


@pytest.mark.parametrize("q_lora_rank", [12, None])
def test_deepseek_v3_logits_and_loss_equal_transformers(deepseek_pairs, q_lora_rank):
    ref, ours = deepseek_pairs(q_lora_rank)
    assert_causal_lm_equal(ref, ours)


def test_deepseek_v3_greedy_generation_equals_transformers(deepseek_pair):
    ref, ours = deepseek_pair
    assert_greedy_equal(ref, ours)


def test_deepseek_v3_yarn_scale_and_rotary_equal_transformers(tmp_path):
    """YaRN rope_parameters: stretched frequencies, cos/sin magnitude mscale/mscale_all_dim,
    and softmax scale x mscale(mscale_all_dim)^2 (DeepSeek's yarn_get_mscale)."""
    ref = tiny_deepseek()
    ref.config.rope_parameters = {
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 16,
        "mscale": 0.8,
        "mscale_all_dim": 1.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
    }
    ref = hf.DeepseekV3ForCausalLM(ref.config).eval()
    perturb(ref, scale=0.1)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "yarn"))
    scale = ours.decoder.blocks[0].attention.scale
    assert scale == pytest.approx(ref.model.layers[0].self_attn.scaling, rel=1e-12)
    assert scale != (NOPE + ROPE) ** -0.5
    ids = torch.randint(3, V, (2, 40), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        diff = (ours(ids).logits - ref(input_ids=ids).logits).abs().max().item()
    assert diff <= 1e-4


def test_deepseek_v3_export_round_trip_through_the_table(deepseek_pair, tmp_path):
    """The same table maps back: archzoo tensors -> HF names equal the checkpoint's tensors."""
    from safetensors.torch import load_file

    ref, ours = deepseek_pair
    saved = load_file(str(save_hf(ref, tmp_path / "hf") / "model.safetensors"))
    back = table_export(ref, ours)
    assert set(back) == set(saved)
    for key, value in saved.items():
        assert torch.equal(back[key], value), key


def test_deepseek_v3_zoo_spec_builds_on_meta_quickly_with_its_published_sizes():
    """671B on meta in under 5 s (tests/test_zoo_counts.py checks the count against
    DeepseekV3ForCausalLM on meta); active parameters and KV bytes by the formulas."""
    import time

    archzoo.build_model("gpt2", {"n_layers": 1}, device="meta")  # plugins loaded already
    start = time.perf_counter()
    model = archzoo.build_model("deepseek-v3", device="meta")
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"meta build of deepseek-v3 took {elapsed:.2f}s"
    assert all(p.is_meta for p in model.parameters())
    total = model.num_parameters()
    assert total == 671_026_404_352
    costs = model_costs(model)
    idle_experts = (256 - 8) * 3 * 7168 * 2048  # routed experts a token does not use
    assert costs["params_active"] == total - 58 * idle_experts  # 58 MoE layers
    assert costs["kv_cache_bytes_per_token"]["bfloat16"] == (512 + 64) * 61 * 2
