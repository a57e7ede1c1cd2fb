"""Falcon, StableLM, Phi-3 and MPT imported from tiny random checkpoints (each variant of the
architecture flags): logits, loss, headless hidden states and greedy generation equal
transformers', and the converter table maps the archzoo tensors back to the saved ones."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import (
    V,
    assert_causal_lm_equal,
    assert_greedy_equal,
    max_diff_unpadded,
    padded_batch,
    perturb,
    save_hf,
    table_export,
)

import archzoo

TINY = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
PHI3 = dict(TINY, intermediate_size=48, pad_token_id=0, bos_token_id=1, eos_token_id=2)
FALCON = dict(TINY, max_position_embeddings=64)

# case -> (transformers class prefix, config keyword arguments)
CASES: dict[str, tuple[str, dict]] = {
    "falcon-new": (  # two LayerNorms per block, grouped q|k|v with 2 kv heads, no biases
        "Falcon",
        dict(FALCON, new_decoder_architecture=True, num_kv_heads=2, bias=False),
    ),
    "falcon-new-one-norm": (
        "Falcon",
        dict(FALCON, new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=1),
    ),
    "falcon-mqa": (  # old architecture: multi-query, parallel attention, one LayerNorm, biases
        "Falcon",
        dict(FALCON, multi_query=True, parallel_attn=True, bias=True, ffn_hidden_size=48),
    ),
    "falcon-sequential": (  # old architecture, per-head q|k|v, attention then MLP
        "Falcon",
        dict(FALCON, multi_query=False, parallel_attn=False, bias=True),
    ),
    "falcon-alibi": (
        "Falcon",
        dict(FALCON, alibi=True, multi_query=False, parallel_attn=True, bias=True),
    ),
    "stablelm": (  # quarter rotary, sequential residual, no q/k/v biases
        "StableLm",
        dict(TINY, intermediate_size=48, num_key_value_heads=2, max_position_embeddings=64),
    ),
    "stablelm-parallel-qknorm": (  # half rotary, q/k/v biases, per-head QK LayerNorms
        "StableLm",
        dict(
            TINY,
            intermediate_size=48,
            num_key_value_heads=2,
            max_position_embeddings=64,
            partial_rotary_factor=0.5,
            use_qkv_bias=True,
            qk_layernorm=True,
            use_parallel_residual=True,
        ),
    ),
    "phi3": (  # fused q|k|v and gate|up, GQA
        "Phi3",
        dict(PHI3, num_key_value_heads=2, max_position_embeddings=64),
    ),
    "phi3-longrope-window": (  # LongRoPE past 16 positions, sliding window, partial rotary
        "Phi3",
        dict(
            PHI3,
            max_position_embeddings=64,
            original_max_position_embeddings=16,
            partial_rotary_factor=0.5,
            rope_parameters={
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "short_factor": [1.0, 1.3],
                "long_factor": [2.0, 5.0],
            },
            sliding_window=6,
        ),
    ),
    "mpt": (
        "Mpt",
        dict(vocab_size=V, d_model=32, n_layers=2, n_heads=4, max_seq_len=64),
    ),
    "mpt-clip-scale": (  # 6 heads: ALiBi slopes of a non-power of two; clipped q/k/v
        "Mpt",
        dict(
            vocab_size=V,
            d_model=48,
            n_layers=2,
            n_heads=6,
            max_seq_len=64,
            attn_config={"clip_qkv": 0.3, "softmax_scale": 0.2},
        ),
    ),
}


def hf_model(name: str, suffix: str = "ForCausalLM") -> torch.nn.Module:
    prefix, kwargs = CASES[name]
    config = getattr(hf, prefix + "Config")(**kwargs)
    torch.manual_seed(0)
    model = getattr(hf, prefix + suffix)(config)
    perturb(model, scale=0.1)
    return model.eval()


def imported(tmp_path, name: str, suffix: str = "ForCausalLM"):
    ref = hf_model(name, suffix)
    return ref, archzoo.from_hf(save_hf(ref, tmp_path / name))


@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_and_loss_equal_transformers(tmp_path, name):
    ref, ours = imported(tmp_path, name)
    assert_causal_lm_equal(ref, ours)


@pytest.mark.parametrize("name", sorted(CASES))
def test_headless_model_gives_the_hidden_states(tmp_path, name):
    ref, ours = imported(tmp_path, name, "Model")
    assert ours.spec.data["head"]["kind"] == "none"
    ids, mask = padded_batch(V)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask).last_hidden_state
    assert max_diff_unpadded(got, want, mask) <= 1e-4


@pytest.mark.parametrize("name", sorted(CASES))
def test_greedy_generation_equals_transformers(tmp_path, name):
    ref, ours = imported(tmp_path, name)
    assert_greedy_equal(ref, ours)


@pytest.mark.parametrize("name", sorted(CASES))
def test_export_round_trip_through_the_table(tmp_path, name):
    """archzoo tensors -> HF names through the same table equal the checkpoint's tensors."""
    from safetensors.torch import load_file

    ref, ours = imported(tmp_path, name)
    back = table_export(ref, ours)
    saved = load_file(str(tmp_path / name / "model.safetensors"))
    tied = {"lm_head.weight"} if ours.spec.data["head"]["tie"] else set()
    assert set(back) == set(saved) - tied  # a tied head is left out: HF ties it on load
    for key, value in saved.items():
        if key in back:
            assert torch.equal(back[key], value), key


def test_falcon_variants_build_the_layouts_they_name(tmp_path):
    """Each flag lands where it should: kv heads, block, norm sharing, positions."""

    def spec(name: str) -> dict:
        prefix, kwargs = CASES[name]
        config = getattr(hf, prefix + "Config")(**kwargs).to_dict()
        converter = archzoo.get_registry().converter(config["model_type"])
        return archzoo.load_spec(converter.to_spec(config)).data

    new, one, mqa, seq, alibi = (
        spec(n)
        for n in (
            "falcon-new",
            "falcon-new-one-norm",
            "falcon-mqa",
            "falcon-sequential",
            "falcon-alibi",
        )
    )
    assert [s["attention"]["n_kv_heads"] for s in (new, mqa, seq)] == [2, 1, 4]
    parallel = {"kind": "parallel", "branches_first": True}  # (attn + mlp) + x
    assert new["block"] == {**parallel, "shared_norm": False}
    assert one["block"] == mqa["block"] == {**parallel, "shared_norm": True}
    assert seq["block"] == "pre_ln" or seq["block"]["kind"] == "pre_ln"
    assert alibi["position"] == {"kind": "alibi", "scaled": True, "form": "key_bf16"}
    # the old multi-query layout broadcasts its key/value head; FalconLinear adds bias apart
    reach = [s["attention"]["kv_heads_reach_kernel"] for s in (new, mqa)]
    assert reach == ["grouped", "broadcast"]
    assert new["attention"]["bias_add"] == new["ffn"]["bias_add"] == "after_matmul"
    assert (new["attention"]["bias"], mqa["attention"]["bias"]) == (False, True)
    assert mqa["d_ff"] == 48 and new["d_ff"] == 128


@pytest.mark.parametrize("kv", [1, 2, 4])
def test_kv_grouped_rows_give_q_k_v_blocks_and_back(kv):
    """[g: q_1 .. q_r | k_g | v_g] built by hand -> [q | k | v]; the inverse restores it."""
    from archzoo.parts.hf_transforms import KVGrouped

    heads, hd = 4, 3
    g = torch.Generator().manual_seed(0)
    q = torch.randn(heads, hd, 5, generator=g)
    k, v = torch.randn(kv, hd, 5, generator=g), torch.randn(kv, hd, 5, generator=g)
    r = heads // kv
    grouped = torch.cat(
        [torch.cat([q[j * r : (j + 1) * r], k[j : j + 1], v[j : j + 1]]) for j in range(kv)]
    )
    ctx = {"n_heads": heads, "attention": {"n_kv_heads": kv}}
    (got,) = KVGrouped().forward([grouped.reshape(-1, 5)], ctx)
    assert torch.equal(got, torch.cat([q, k, v]).reshape(-1, 5))
    (back,) = KVGrouped().inverse([got], ctx)
    assert torch.equal(back, grouped.reshape(-1, 5))
    bias = grouped[..., 0].reshape(-1)  # a vector (the bias) takes the same path
    assert torch.equal(KVGrouped().forward([bias], ctx)[0], got[:, 0])


def test_longrope_recache_marks_the_cache_stale_once_at_the_switch():
    """Phi-3 recomputes the cache when a sequence first passes original_max_len; plain
    longrope (and the other schemes) keep cached keys."""
    _, kwargs = CASES["phi3-longrope-window"]
    config = hf.Phi3Config(**kwargs).to_dict()
    spec = archzoo.get_registry().converter("phi3").to_spec(config)
    assert spec["position"]["recache"] is True and spec["position"]["original_max_len"] == 16
    phi3 = archzoo.build_model(spec, device="meta")
    assert [phi3.stale_cache(n, n + 1) for n in (15, 16, 17)] == [False, True, False]
    spec["position"]["recache"] = False
    plain = archzoo.build_model(spec, device="meta")
    assert not any(plain.stale_cache(n, n + 1) for n in (15, 16, 17))
