"""Issue 33's new components and the families they bring.

Differential attention (`diff_mha`, DiffLlama): the layer against the formula written out
here in float64 (two softmax maps per head pair, lambda from its four vectors and
lambda_init by depth, the RMS norm over the pair's doubled values) and, layer by layer,
against transformers' DiffLlamaAttention; the `diffllama` family from a tiny perturbed
transformers model with a padded row (LM, headless and task heads within 1e-4) and its
greedy tokens with the cache. (Export round trip: tests/test_export.py's sweep of every
registered type; the zoo spec's count: tests/test_zoo_counts.py from published_configs.)
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
DIFFLLAMA = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    pad_token_id=0,
)
TASKS = (
    "ForCausalLM",
    "Model",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
)


def make(task: str) -> torch.nn.Module:
    config = hf.AutoConfig.for_model("diffllama", **DIFFLLAMA)
    conv = get_registry().converter("diffllama")
    torch.manual_seed(0)
    model = model_class(conv, task, config, None)(config)
    perturb(model, scale=0.1)
    return model.eval()


def output(out) -> torch.Tensor:
    for name in ("logits", "start_logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    raise AssertionError(f"no output to compare in {type(out).__name__}")


@pytest.mark.parametrize("task", TASKS)
def test_diffllama_outputs_equal_transformers(tmp_path, task):
    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "diffllama"))
    assert ours.hf_source["model_type"] == "diffllama"
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, 0)  # the classifier finds each row's last token
    with torch.no_grad():
        want = output(ref(input_ids=ids, attention_mask=mask))
        got = output(ours(input_ids=ids, attention_mask=mask))
    assert got.shape == want.shape
    if got.dim() == 2:  # one row of scores per sequence
        mask = torch.ones(got.shape[0], 1, dtype=torch.long)
        got, want = got[:, None], want[:, None]
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_diffllama_greedy_generation_equals_transformers(tmp_path):
    ref = make("ForCausalLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "diffllama"))
    assert_greedy_equal(ref, ours)


def captured(model: torch.nn.Module, modules: list[torch.nn.Module], *args, **kwargs) -> list:
    """Each module's (input, output) in one forward call of `model`."""
    seen: list = [None] * len(modules)

    def keep(i):
        def hook(module, inputs, kw, out):
            x = inputs[0] if inputs else kw["hidden_states"]
            seen[i] = (x, out[0] if isinstance(out, tuple) else out)

        return hook

    handles = [m.register_forward_hook(keep(i), with_kwargs=True) for i, m in enumerate(modules)]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return seen


def test_each_layer_equals_transformers_diffllama_attention(tmp_path):
    """Layer by layer (lambda_init 0.2, 0.356, 0.471 by depth), each diff_mha maps the
    input transformers' DiffLlamaAttention got to its output, on a padded batch."""
    ref = make("Model")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "diffllama"))
    ids, mask = padded_batch(V)
    theirs = captured(ref, [layer.self_attn for layer in ref.layers], ids, attention_mask=mask)
    mine = captured(ours, [b.attention for b in ours.decoder.blocks], ids, attention_mask=mask)
    for i, ((x_ref, out_ref), (x_ours, out_ours)) in enumerate(zip(theirs, mine, strict=True)):
        assert ours.decoder.blocks[i].attention.lambda_init == ref.layers[i].self_attn.lambda_init
        assert ours.decoder.blocks[i].attention.lambda_init == 0.8 - 0.6 * math.exp(-0.3 * i)
        assert max_diff_unpadded(x_ours, x_ref, mask) <= 1e-5  # the same input reaches both
        assert max_diff_unpadded(out_ours, out_ref, mask) <= 1e-5


def dense_differential(attn, x: torch.Tensor) -> torch.Tensor:
    """The formula: query heads i and i + H/2 give softmax maps A1, A2 (causal, no
    position) over the value [v_j | v_{j + Hkv/2}] of query head i's kv head j;
    (A1 - lambda A2) V is RMS-normed over its 2 hd features, scaled by 1 - lambda_init,
    and the H/2 pairs go through the output projection."""
    B, T, _ = x.shape
    H, Hkv, hd = attn.n_heads, attn.n_kv, attn.head_dim
    q = (x @ attn.q.weight.T).view(B, T, H, hd)
    k = (x @ attn.k.weight.T).view(B, T, Hkv, hd)
    v = (x @ attn.v.weight.T).view(B, T, Hkv, hd)
    lam = (
        torch.exp(attn.lambda_q1 @ attn.lambda_k1)
        - torch.exp(attn.lambda_q2 @ attn.lambda_k2)
        + attn.lambda_init
    )
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    pairs = []
    for i in range(H // 2):
        maps = []
        for head in (i, i + H // 2):
            j = head // (H // Hkv)
            scores = q[:, :, head] @ k[:, :, j].transpose(1, 2) / math.sqrt(hd)  # (B, T, T)
            maps.append(torch.softmax(scores.masked_fill(future, -math.inf), dim=-1))
        j = i // (H // Hkv)
        value = torch.cat([v[:, :, j], v[:, :, j + Hkv // 2]], dim=-1)  # (B, T, 2 hd)
        o = (maps[0] - lam * maps[1]) @ value
        o = o / torch.sqrt(o.pow(2).mean(-1, keepdim=True) + attn.cfg.pair_norm_eps)
        pairs.append((1 - attn.lambda_init) * o)
    return torch.cat(pairs, dim=-1) @ attn.out.weight.T


@pytest.mark.parametrize(("n_kv", "lambda_init"), [(2, None), (4, 0.5)])
def test_diff_mha_is_the_differential_attention_formula(n_kv, lambda_init):
    spec = {"vocab_size": V, "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 48}
    attention = {"kind": "diff_mha", "fused_qkv": False, "bias": False, "n_kv_heads": n_kv}
    attention["lambda_init"] = lambda_init
    model = archzoo.build_model(
        "llama2-7b", {**spec, "max_len": 64, "position": "none", "attention": attention}
    )
    model = model.double().eval()
    perturb(model, scale=0.3)
    attn = model.decoder.blocks[1].attention
    expected_init = 0.8 - 0.6 * math.exp(-0.3) if lambda_init is None else lambda_init
    assert attn.lambda_init == expected_init
    ids = torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(2))
    ((x, out),) = captured(model, [attn], ids)
    with torch.no_grad():
        # float64 throughout except lambda's two dot products, summed in float32 (as
        # transformers does): 1e-6, not 1e-12
        assert (out - dense_differential(attn, x)).abs().max() <= 1e-6


def test_diff_mha_needs_an_even_number_of_kv_heads():
    spec = {"n_layers": 1, "d_model": 48, "n_heads": 6, "d_ff": 48, "vocab_size": V}
    attention = {"kind": "diff_mha", "fused_qkv": False, "n_kv_heads": 3}
    with pytest.raises(archzoo.SpecError, match="differential pairs need an even count"):
        archzoo.build_model("llama2-7b", {**spec, "attention": attention})
