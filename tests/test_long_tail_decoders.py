"""Issue 33's long-tail decoders (HunYuan dense, OLMo 3, CodeGen, Persimmon, EXAONE 4,
NanoChat, MiniCPM3, Apertus, ...), each from a tiny perturbed transformers model with a
padded row: its LM, headless and task-head classes give transformers' outputs within 1e-4,
and its LM generates transformers' greedy tokens with the cache. The options they brought
are checked against their formulas: a QK norm after the rotation, an RMSNorm without a
scale, xIELU, and the two weight layouts (CodeGen's shards, NanoChat's reversed rotation).
(Export round trips: tests/test_export.py's sweep of every registered type; zoo spec
counts: tests/test_zoo_counts.py from tests/published_configs.py.)"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import transformers as hf
from hf_util import assert_greedy_equal, max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
from archzoo.hf.probe import model_class
from archzoo.parts.converter import ConversionError
from archzoo.parts.hf_transforms import HalvesSwapped, Sharded
from archzoo.parts.registry import get_registry

V = 96
DECODER = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    pad_token_id=0,
)
SLIDING = dict(sliding_window=4, layer_types=["sliding_attention", "full_attention"])
SMALL_MLA = dict(
    num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8
)
SIGMOID_MOE = dict(  # DeepSeek's experts: group routing, a shared expert, a dense layer 0
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    n_shared_experts=1,
    first_k_dense_replace=1,
    n_group=2,
    topk_group=1,
)
FULL_SLIDING = ["full_attention", "sliding_attention"]
COMPASS = {
    **SLIDING,
    "rope_parameters": {"sliding_attention": {"rope_theta": 500.0}, "full_attention": None},
}
CAUSAL = ("ForCausalLM", "Model")
CLASSIFIERS = ("ForSequenceClassification", "ForTokenClassification")

# model_type -> (tiny config keywords, its task classes tested: the LM first)
CASES: dict[str, tuple[dict, tuple[str, ...]]] = {
    "hunyuan_v1_dense": (DECODER, (*CAUSAL, "ForSequenceClassification")),
    "olmo3": ({**DECODER, **SLIDING}, (*CAUSAL, "ForSequenceClassification")),
    "codegen": (
        dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64),
        CAUSAL,
    ),
    "persimmon": (
        {k: v for k, v in DECODER.items() if k not in ("num_key_value_heads", "head_dim")},
        (*CAUSAL, *CLASSIFIERS),
    ),
    "exaone4": ({**DECODER, **SLIDING}, (*CAUSAL, *CLASSIFIERS, "ForQuestionAnswering")),
    "nanochat": (DECODER, CAUSAL),
    "minicpm3": (  # muP's scales at MiniCPM3-4B's values
        {**DECODER, **SMALL_MLA, "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 8},
        (*CAUSAL, "ForSequenceClassification"),
    ),
    "apertus": (DECODER, (*CAUSAL, "ForTokenClassification")),
    "modernbert-decoder": (  # a global layer, then two sliding ones seeing 4 keys
        dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=3)
        | dict(num_attention_heads=4, max_position_embeddings=64, local_attention=8)
        | dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
        | dict(norm_bias=True, classifier_bias=True),
        (*CAUSAL, "ForSequenceClassification"),
    ),
    # MoE: a dense layer before a routed one where the type has them
    "glm4_moe": (
        {**DECODER, **SIGMOID_MOE, "use_qk_norm": True, "attention_bias": True},
        CAUSAL,
    ),
    "dots1": ({**DECODER, **SIGMOID_MOE, "sliding_window": 4, "layer_types": FULL_SLIDING}, CAUSAL),
    "hunyuan_v1_moe": (
        {**DECODER, "num_experts": 4, "moe_topk": 2},
        (*CAUSAL, "ForSequenceClassification"),
    ),
    "ernie4_5_moe": (
        {**DECODER, "moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 16}
        | {"moe_num_shared_experts": 1, "moe_layer_start_index": 1},
        CAUSAL,
    ),
    "deepseek_v2": (
        {**DECODER, **SMALL_MLA, **SIGMOID_MOE, "v_head_dim": 8}
        | {"topk_method": "group_limited_greedy", "routed_scaling_factor": 1.5},
        (*CAUSAL, "ForSequenceClassification"),
    ),
    "dbrx": (  # q/k/v clamped to [-1, 1]
        dict(vocab_size=V, d_model=32, n_heads=4, n_layers=2, max_seq_len=64, pad_token_id=0)
        | {"attn_config": {"kv_n_heads": 2, "clip_qkv": 1.0, "rope_theta": 10000.0}}
        | {"ffn_config": {"ffn_hidden_size": 16, "moe_num_experts": 4, "moe_top_k": 2}},
        CAUSAL,
    ),
    "phimoe": (  # SparseMixer routing with a wide gap (more experts share a softmax)
        {**DECODER, "num_local_experts": 4, "num_experts_per_tok": 2, "router_jitter_noise": 0.2}
        | {"attention_bias": True, "lm_head_bias": True},
        (*CAUSAL, "ForSequenceClassification"),
    ),
    "minimax_m2": (
        {**DECODER, "num_local_experts": 4, "num_experts_per_tok": 2, "rotary_dim": 4},
        CAUSAL,
    ),
    "hy_v3": (  # a routed layer before a dense one, a shared expert two experts wide,
        # sigmoid scores plus the correction bias, weights renormalised x 2.826
        {**DECODER, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}
        | {"mlp_layer_types": ["sparse", "dense"], "num_shared_experts": 2},
        CAUSAL,
    ),
    "cohere_compass_text": (  # Cohere 2's layers rotating by halves with rope_parameters per
        # layer type: a sliding layer (window 4) at base 500, a NoPE global one; logit_scale
        {**DECODER, **COMPASS, "logit_scale": 0.3},
        ("ForCausalLM", "TextModel", "TextForSequenceClassification"),
    ),
}


def make(model_type: str, task: str) -> torch.nn.Module:
    """A perturbed tiny transformers model of `model_type`'s `task` class."""
    kwargs, _ = CASES[model_type]
    config = hf.AutoConfig.for_model(model_type, **kwargs)
    conv = get_registry().converter(model_type)
    torch.manual_seed(0)
    model = model_class(conv, task, config, None)(config)
    perturb(model, scale=0.1)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # the experts' choice bias is a buffer: make it matter too
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.add_(torch.randn(buffer.shape, generator=g) * 0.1)
    return model.eval()


def inputs(model: torch.nn.Module) -> tuple[dict, torch.Tensor]:
    ids, mask = padded_batch(V)
    pad = getattr(model.config, "pad_token_id", None)  # CodeGen's config has none
    if pad is not None:  # a decoder's classifier finds each row's last token by its pads
        ids = ids.masked_fill(mask == 0, pad)
    return {"input_ids": ids, "attention_mask": mask}, mask


def output(out) -> torch.Tensor:
    for name in ("logits", "start_logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise AssertionError(f"no output to compare in {type(out).__name__}")


CASE_TASKS = [(t, task) for t, (_, tasks) in CASES.items() for task in tasks]


@pytest.mark.parametrize(("model_type", "task"), CASE_TASKS)
def test_outputs_equal_transformers(tmp_path, model_type, task):
    ref = make(model_type, task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type))
    assert ours.hf_source["model_type"] == model_type
    batch, mask = inputs(ref)
    with torch.no_grad():
        want, got = output(ref(**batch)), output(ours(**batch))
    assert got.shape == want.shape
    if got.dim() == 2:  # one row of scores per sequence
        mask = torch.ones(got.shape[0], 1, dtype=torch.long)
        got, want = got[:, None], want[:, None]
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    trained = sum(p.numel() for p in ref.parameters() if p.requires_grad)  # ERNIE's choice
    assert ours.num_parameters() == trained  # bias is a frozen parameter there, a buffer here


@pytest.mark.parametrize("model_type", list(CASES))
def test_greedy_generation_equals_transformers(tmp_path, model_type):
    ref = make(model_type, CASES[model_type][1][0])
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type))
    assert_greedy_equal(ref, ours)


# ------------------------------------------------------------------ the options, by formula


def tiny(**parts) -> torch.nn.Module:
    """A tiny perturbed Llama-like decoder with `parts` in its spec."""
    spec = {"vocab_size": V, "d_model": 32, "n_layers": 1, "n_heads": 4, "d_ff": 48}
    parts.setdefault("attention", {"kind": "mha", "fused_qkv": False})
    parts["attention"] = {**parts["attention"], "n_kv_heads": 4}
    model = archzoo.build_model("llama2-7b", {**spec, "max_len": 64, **parts}).eval()
    perturb(model, scale=0.1)
    return model


def test_cohere2_moe_with_sigmoid_routing_rmsnorms_and_a_summed_shared_expert(tmp_path):
    """Cohere 2 MoE's other settings: experts by renormalised sigmoid scores, RMSNorms
    (rms_norm_eps), two shared experts added in full; logits within 1e-4, a padded row."""
    config = hf.AutoConfig.for_model(
        "cohere2_moe",
        **{**DECODER, "intermediate_size": 16, "rms_norm_eps": 1e-5, "sliding_window": 4},
        **{"num_experts": 4, "num_experts_per_tok": 2, "num_shared_experts": 2},
        **{"expert_selection_fn": "sigmoid", "shared_expert_combination_strategy": "sum"},
        layer_types=["sliding_attention", "full_attention"],
    )
    torch.manual_seed(0)
    ref = hf.Cohere2MoeForCausalLM(config)
    perturb(ref, scale=0.1)
    ours = archzoo.from_hf(save_hf(ref.eval(), tmp_path / "hf"))
    assert ours.spec.data["norm"]["kind"] == "rmsnorm"
    assert (ours.spec.data["ffn"]["router"], ours.spec.data["ffn"]["shared_combine"]) == (
        "sigmoid",
        "sum",
    )
    batch, mask = inputs(ref)
    with torch.no_grad():
        assert max_diff_unpadded(ours(**batch).logits, ref(**batch).logits, mask) <= 1e-4


@pytest.mark.parametrize(
    "extra",
    [  # the classifier's other poolings, then a NoPE sliding layer beside a rotating global one
        {"pooling": "mean"},
        {"pooling": "bos"},
        {"rope_parameters": {"sliding_attention": None, "full_attention": {"rope_theta": 50.0}}},
    ],
)
def test_cohere_compass_poolings_and_per_layer_type_rotary(tmp_path, extra):
    """CohereCompassTextForSequenceClassification pooling mean (of every real token's scores)
    and bos (the first token's), and rope_parameters rotating only the global layers: within
    1e-4 of transformers on a padded batch."""
    config = hf.AutoConfig.for_model("cohere_compass_text", **{**DECODER, **COMPASS, **extra})
    torch.manual_seed(0)
    ref = hf.CohereCompassTextForSequenceClassification(config)
    perturb(ref, scale=0.1)
    ours = archzoo.from_hf(save_hf(ref.eval(), tmp_path / "hf"))
    pool = {"mean": ("mean", True), "bos": ("cls", False)}.get(extra.get("pooling"))
    head = ours.spec.data["head"]
    assert (head["pooling"], head.get("pool_scores", False)) == (pool or ("last", False))
    batch, _ = inputs(ref)
    with torch.no_grad():
        assert (ours(**batch).logits - ref(**batch).logits).abs().max() <= 1e-4


def test_cohere_compass_refuses_an_unknown_pooling_and_a_layer_type_without_rope(tmp_path):
    """pooling 'max' and rope_parameters lacking a layer type are refused by name."""
    config = hf.AutoConfig.for_model("cohere_compass_text", **{**DECODER, **COMPASS})
    conv = get_registry().converter("cohere_compass_text")
    arch = {"architectures": ["CohereCompassTextForSequenceClassification"]}
    with pytest.raises(ConversionError, match=r"pooling='max' is not supported: eos, bos, mean"):
        conv.to_spec({**config.to_dict(), **arch, "pooling": "max"})
    rope = {"rope_parameters": {"full_attention": None}}
    with pytest.raises(ConversionError, match=r"an entry \(null: no rotary\) for each of"):
        conv.to_spec({**config.to_dict(), **rope})


def test_moe_shared_combine_mean_averages_the_routed_and_shared_outputs():
    """shared_combine mean: (routed + shared) / 2, the routed part as a dense per-token loop."""
    moe = {"kind": "moe", "n_experts": 4, "top_k": 2, "d_expert": 8, "n_shared": 1}
    model = tiny(ffn={**moe, "router": "topk_softmax", "shared_combine": "mean"}).double()
    ffn = model.decoder.blocks[0].ffn
    x = torch.randn(2, 5, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    h = x.reshape(10, 32)
    top, chosen = ffn.router(h).topk(2, dim=-1)  # (N, k)
    routed = torch.zeros_like(h)
    for n in range(10):
        for w, e in zip(top[n].softmax(-1), chosen[n], strict=True):
            gate, up = (h[n] @ ffn.w_in[e]).chunk(2)
            routed[n] += w * ((F.silu(gate) * up) @ ffn.w_out[e])
    with torch.no_grad():
        want = (routed + ffn.shared(h)) / 2
        got = ffn(x).reshape(10, 32)  # the router's softmax runs in float32 (transformers')
        assert torch.allclose(got, want, atol=1e-6), (got - want).abs().max()
    with pytest.raises(archzoo.SpecError, match="shared_combine"):
        tiny(ffn={**moe, "n_shared": 0, "shared_combine": "mean"})


def test_qk_norm_after_position_normalises_the_rotated_heads():
    """q = norm(rotate(W_q x)), k likewise: the layer's output equals a dense computation."""
    attention = {"kind": "mha", "fused_qkv": False, "qk_norm": "head"}
    model = tiny(attention={**attention, "qk_norm_after_position": True})
    layer = model.decoder.blocks[0].attention
    seen = {}
    layer.register_forward_hook(lambda m, args, out: seen.update(x=args[0], out=out))
    with torch.no_grad():
        model(torch.randint(3, V, (1, 5)))
    x, T = seen["x"], 5
    q = layer.q(x).view(1, T, 4, 8).transpose(1, 2)  # (B, H, T, hd)
    k = layer.k(x).view(1, T, 4, 8).transpose(1, 2)
    v = layer.v(x).view(1, T, 4, 8).transpose(1, 2)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float32) / 8)
    angles = torch.arange(T, dtype=torch.float32)[:, None] * theta  # (T, hd/2)
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)  # (T, hd)

    def rotate(t):
        return t * cos + torch.cat([-t[..., 4:], t[..., :4]], dim=-1) * sin

    def rms(t, w):
        eps = layer.q_norm.cfg.eps
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * w

    with torch.no_grad():
        q, k = rms(rotate(q), layer.q_norm.weight), rms(rotate(k), layer.k_norm.weight)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hd)
        want = layer.out(want.transpose(1, 2).reshape(1, T, 32))
    assert torch.allclose(seen["out"], want, atol=1e-5)
    before = tiny(attention=attention)  # the same weights, normed before the rotation
    before.load_state_dict(model.state_dict())
    ids = torch.randint(3, V, (1, 5))
    with torch.no_grad():
        assert (before(ids).logits - model(ids).logits).abs().max() > 1e-3


def test_qk_norm_after_position_needs_a_per_head_norm():
    with pytest.raises(archzoo.SpecError, match="qk_norm_after_position: needs a per-head"):
        tiny(attention={"kind": "mha", "qk_norm": "full", "qk_norm_after_position": True})


def test_rmsnorm_without_scale_is_x_over_rms():
    model = tiny(norm={"kind": "rmsnorm", "scale": False, "eps": 1e-5})
    layer = model.decoder.final_norm
    assert list(layer.parameters()) == []
    x = torch.randn(2, 3, 32, dtype=torch.float64)
    want = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    assert torch.allclose(layer(x), want, atol=1e-12)


def test_xielu_is_its_formula_and_transformers_activation():
    from archzoo.plugins.ffn.xielu import XIELU

    act = XIELU().double()
    with torch.no_grad():
        act.alpha_p.fill_(0.3)
        act.alpha_n.fill_(-0.2)
    x = torch.linspace(-6, 4, 201, dtype=torch.float64)
    a_p, a_n = math.log1p(math.exp(0.3)), 0.5 + math.log1p(math.exp(-0.2))
    neg = a_n * (torch.expm1(torch.clamp(x, max=-1e-6)) - x) + 0.5 * x
    want = torch.where(x > 0, a_p * x * x + 0.5 * x, neg)
    assert torch.allclose(act(x), want, atol=1e-12)
    theirs = hf.activations.XIELUActivation(dtype=torch.float64)
    theirs.load_state_dict(act.state_dict())
    assert torch.allclose(act(x), theirs(x), atol=1e-12)


def test_xielu_learns_its_scalars():
    model = tiny(ffn={"kind": "mlp", "activation": "xielu", "bias": False})
    model.train()
    ids = torch.randint(3, V, (2, 6))
    model(ids, labels=ids).loss.backward()
    act = model.decoder.blocks[0].ffn.act
    assert act.alpha_p.grad is not None and act.alpha_p.grad.abs().item() > 0
    assert act.alpha_n.grad is not None and act.alpha_n.grad.abs().item() > 0


def test_codegen_shards_hold_q_v_k_per_shard():
    """4 shards of [q | v | k]: shard s holds rows s*E/4 .. of q, then of v, then of k."""
    E = 8
    q, k, v = (torch.arange(E) + 100 * i for i in range(3))
    saved = torch.cat([torch.cat([p[s * 2 : s * 2 + 2] for p in (q, v, k)]) for s in range(4)])
    ours = Sharded().forward([saved], {})[0]
    assert torch.equal(ours, torch.cat([q, k, v]))
    assert torch.equal(Sharded().inverse([ours], {})[0], saved)


def test_halves_swapped_turns_the_rotation_the_other_way():
    """swap . R(a) . swap = R(-a) on each head's halves: NanoChat's rotate_half ([x2, -x1])."""
    t = torch.randn(2 * 8, 3)  # 2 heads of 8 rows
    ctx = {"head_dim": 8, "d_model": 16, "n_heads": 2}
    swapped = HalvesSwapped().forward([t], ctx)[0]
    assert torch.equal(HalvesSwapped().inverse([swapped], ctx)[0], t)
    x = torch.randn(8, dtype=torch.float64)
    a = torch.tensor([0.3, 1.1, -0.7, 2.0], dtype=torch.float64).repeat(2)
    ours = HalvesSwapped().forward([x[:, None]], {"head_dim": 8})[0][:, 0]
    rotated = ours * a.cos() + torch.cat([-ours[4:], ours[:4]]) * a.sin()
    back = HalvesSwapped().forward([rotated[:, None]], {"head_dim": 8})[0][:, 0]
    theirs = x * a.cos() + torch.cat([x[4:], -x[:4]]) * a.sin()
    assert torch.allclose(back, theirs, atol=1e-12)


@pytest.mark.parametrize("training", [False, True])
def test_sparsemixer_picks_weights_and_gradients_equal_transformers(training):
    """Eval: argmax picks and their gap-limited softmax shares; training: the same Gumbel
    samples and coins under one seed, and SparseMixer's gradient estimate into the scores."""
    from transformers.models.phimoe.modeling_phimoe import sparsemixer as theirs

    from archzoo.plugins.ffn.sparsemixer import sparsemixer as ours

    scores = torch.randn(64, 8, dtype=torch.float64) * 2
    results = []
    for fn in (theirs, ours):
        s = scores.clone().requires_grad_()
        torch.manual_seed(5)
        if fn is theirs:
            weights, experts = fn(s, jitter_eps=0.1, training=training, top_k=2)
        else:
            weights, experts = fn(s, 0.1, training)
        (weights * torch.arange(1.0, 3.0, dtype=torch.float64)).sum().backward()
        results.append((weights.detach(), experts, s.grad))
    (w1, e1, g1), (w2, e2, g2) = results
    assert torch.equal(e1, e2) and torch.allclose(w1, w2, atol=1e-12)
    assert torch.allclose(g1, g2, atol=1e-12)
    if not training:  # the first pick is the best score; its share is a softmax over the near
        best = scores.argmax(-1, keepdim=True)
        assert torch.equal(e2[:, :1], best)
        gap = (scores.max(-1, keepdim=True).values - scores) / scores.abs().clamp(
            min=scores.max(-1, keepdim=True).values
        )
        near = scores.masked_fill(gap > 0.2, float("-inf")).softmax(-1)
        assert torch.allclose(w2[:, :1], near.gather(-1, best), atol=1e-12)


@pytest.mark.parametrize("model_type", ["minicpm3", "glm4_moe_lite"])
def test_latent_norms_keep_their_own_epsilon(tmp_path, model_type):
    """MiniCPM3's and GLM-4.7-Flash's q_a / kv_a latent norms use 1e-6 whatever rms_norm_eps
    says (transformers builds them without eps): with rms_norm_eps 0.3 on the model's norms
    the logits still equal transformers' (a shared epsilon would move them by ~1e-1)."""
    kwargs = {**DECODER, **SMALL_MLA, "rms_norm_eps": 0.3}
    if model_type == "glm4_moe_lite":
        kwargs["mlp_layer_types"] = ["dense", "dense"]
    config = hf.AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(0)
    ref = model_class(get_registry().converter(model_type), "ForCausalLM", config, None)(config)
    perturb(ref, scale=0.1)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / model_type))
    assert ours.spec.data["attention"]["latent_norm_eps"] == 1e-6
    batch, mask = inputs(ref)
    with torch.no_grad():
        assert max_diff_unpadded(ours(**batch).logits, ref(**batch).logits, mask) <= 1e-4
