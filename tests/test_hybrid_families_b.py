"""More state-space families against transformers (issue 32 item 4): tiny perturbed models,
logits with a right- and a left-padded row, greedy tokens with the cache, the headless
model, and an export that transformers loads with the same logits."""

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


def assert_headless_equal(base: torch.nn.Module, tmp_path) -> None:
    """The headless `...Model` imports with no head and transformers' last hidden states
    (a left-padded row) within 1e-4."""
    ours = archzoo.from_hf(save_hf(base, tmp_path / "base")).eval()
    assert ours.spec.data["head"]["kind"] == "none"
    g = torch.Generator().manual_seed(6)
    ids = torch.randint(3, V, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    with torch.no_grad():
        want = base(input_ids=ids, attention_mask=mask).last_hidden_state
        got = ours(ids, attention_mask=mask).last_hidden_state
    assert (want - got)[mask.bool()].abs().max() <= 1e-4


def assert_export_round_trip(ref: torch.nn.Module, ours, tmp_path) -> dict:
    """`to_hf` writes the type it came from; transformers loads it with nothing missing or
    extra and gives the same logits; the saved config.json is returned."""
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["architecture"] == type(ref).__name__
    back, info = type(ref).from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids = torch.randint(3, V, (2, 8), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert (ref(input_ids=ids).logits - back.eval()(input_ids=ids).logits).abs().max() <= 1e-5
    return json.loads((tmp_path / "out" / "config.json").read_text())


def tiny_mamba_config(cls: type, **extra):
    """Two layers of 64 channels (expand 2 over 32), state 4, step rank 3, conv 3."""
    return cls(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        state_size=4,
        conv_kernel=3,
        time_step_rank=3,
        pad_token_id=0,
        **extra,
    )


@pytest.mark.parametrize(
    "prefix, extra",
    [("Mamba", {}), ("FalconMamba", {"mixer_rms_eps": 1e-5, "tie_word_embeddings": False})],
)
def test_mamba_families_import_with_transformers_logits(tmp_path, prefix, extra):
    """Mamba v1, and Falcon-Mamba with its weightless RMS norms on dt, B and C (an untied
    head: its config's default ties it, published checkpoints do not)."""
    config = tiny_mamba_config(getattr(transformers, f"{prefix}Config"), **extra)
    ref = getattr(transformers, f"{prefix}ForCausalLM")(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    mixer = ours.spec.data["attention"]
    assert (mixer["kind"], mixer["d_inner"], mixer["dt_rank"]) == ("mamba", 64, 3)
    assert mixer["inner_norms"] == (prefix == "FalconMamba")
    if prefix == "FalconMamba":
        assert (mixer["inner_norm_weights"], mixer["norm_eps"]) == (False, 1e-5)
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: the conv window and the SSM state
    saved = assert_export_round_trip(ref, ours, tmp_path)
    assert (saved["expand"], saved["time_step_rank"]) == (2, 3)
    base = getattr(transformers, f"{prefix}Model")(config)
    perturb(base)
    assert_headless_equal(base.eval(), tmp_path)


def tiny_falcon_h1(rms_norm: bool, before_gate: bool = True) -> transformers.FalconH1Config:
    """Two parallel layers: Mamba 2 (4 heads of 8 in 2 groups, state 8, chunks of 4) beside
    GQA 4/2 of 8-wide heads; every muP multiplier set away from 1."""
    return transformers.FalconH1Config(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        mamba_d_ssm=32,
        mamba_n_heads=4,
        mamba_d_head=8,
        mamba_d_state=8,
        mamba_n_groups=2,
        mamba_chunk_size=4,
        mamba_rms_norm=rms_norm,
        mamba_norm_before_gate=before_gate,
        embedding_multiplier=1.5,
        lm_head_multiplier=0.7,
        mlp_multipliers=[0.9, 1.2],
        key_multiplier=0.8,
        attention_in_multiplier=1.1,
        attention_out_multiplier=0.9,
        ssm_in_multiplier=1.2,
        ssm_out_multiplier=0.8,
        ssm_multipliers=[1.1, 0.9, 1.2, 0.8, 1.3],
        max_position_embeddings=64,
        pad_token_id=0,
    )


@pytest.mark.parametrize("rms_norm, before_gate", [(True, True), (False, True), (True, False)])
def test_falcon_h1_imports_with_transformers_logits(tmp_path, rms_norm, before_gate):
    """Attention and Mamba 2 side by side in every layer, with the muP multipliers; the
    Mamba output normalised before its gate, not at all (the config's default), or after."""
    config = tiny_falcon_h1(rms_norm, before_gate)
    ref = transformers.FalconH1ForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    side = ours.spec.data["attention"]
    assert [m["kind"] for m in side["mixers"]] == ["mamba2", "mha"]
    assert (side["input_scales"], side["output_scales"]) == ([1.2, 1.1], [0.8, 0.9])
    want = {(True, True): "norm_then_gate", (False, True): "none", (True, False): "gate_then_norm"}
    assert side["mixers"][0]["output_norm"] == want[rms_norm, before_gate]
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    if not (rms_norm and before_gate):
        return  # the other layouts differ only in the Mamba output norm
    assert_greedy_equal(ref, ours)  # with the cache: keys/values and the state side by side
    saved = assert_export_round_trip(ref, ours, tmp_path)
    assert saved["ssm_multipliers"] == [1.1, 0.9, 1.2, 0.8, 1.3]
    assert abs(saved["key_multiplier"] - 0.8) <= 1e-12
    base = transformers.FalconH1Model(config)
    perturb(base)
    assert_headless_equal(base.eval(), tmp_path)


def test_side_by_side_mixers_are_resolved_and_checked_at_their_paths():
    """Each mixer is resolved like a spec's own component (defaults filled, unknown keys
    named at attention.mixers.N); a layer needs two mixers and one number per mixer."""
    base = {
        "family": "decoder",
        "vocab_size": V,
        "d_model": 32,
        "n_layers": 1,
        "n_heads": 4,
        "d_ff": 64,
        "max_len": 64,
        "position": "rotary",
    }
    side = {"kind": "side_by_side", "mixers": [{"kind": "mamba2", "head_dim": 16}, "mha"]}
    spec = archzoo.load_spec({**base, "attention": side})
    mixers = spec.data["attention"]["mixers"]
    assert mixers[0]["state_size"] == 128 and mixers[1]["kind"] == "mha"
    assert "n_kv_heads" in mixers[1]  # every default explicit
    bad = {**side, "mixers": [{"kind": "mamba2", "head_dimm": 16}], "output_scales": [1.0, 2.0]}
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.build_model({**base, "attention": bad})
    message = str(err.value)
    assert "attention.mixers[0].head_dimm: unknown parameter of attention 'mamba2'" in message
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.build_model({**base, "attention": {**side, "output_scales": [1.0]}})
    assert "attention.output_scales: needs one number per mixer (2), got 1" in str(err.value)
    wide = {**side, "mixers": [{"kind": "mamba2", "head_dim": 48}, "mha"]}
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.build_model({**base, "attention": wide})
    assert "attention.mixers[0].head_dim: 48 does not divide d_inner 64" in str(err.value)


@pytest.mark.parametrize("experts", [4, 0])
def test_granitemoehybrid_imports_with_transformers_logits(tmp_path, experts):
    """Three layers: Mamba 2 (4 heads of 16 in 2 groups, chunks of 4), attention with
    rotary on layer 1, Mamba 2; Granite's multipliers; 4 experts beside the shared SwiGLU,
    or (no experts) the shared SwiGLU alone."""
    config = transformers.GraniteMoeHybridConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=16,
        shared_intermediate_size=24,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        layer_types=["mamba", "attention", "mamba"],
        num_local_experts=experts,
        num_experts_per_tok=2,
        mamba_n_heads=4,
        mamba_d_head=16,
        mamba_d_state=8,
        mamba_n_groups=2,
        mamba_chunk_size=4,
        position_embedding_type="rope",
        embedding_multiplier=1.5,
        residual_multiplier=0.7,
        attention_multiplier=0.3,
        logits_scaling=2.0,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    ref = transformers.GraniteMoeHybridForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    data = ours.spec.data
    assert data["layers"][0]["select"] == [1] and data["layers"][0]["attention"]["scale"] == 0.3
    assert data["ffn"]["kind"] == ("moe" if experts else "glu")
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: recurrent states and keys/values
    saved = assert_export_round_trip(ref, ours, tmp_path)
    assert saved["layer_types"] == ["linear_attention", "full_attention", "linear_attention"]
    if experts:
        return  # the headless model once
    base = transformers.GraniteMoeHybridModel(config)
    perturb(base)
    assert_headless_equal(base.eval(), tmp_path)
