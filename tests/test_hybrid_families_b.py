"""More state-space families against transformers (issue 32 item 4): tiny perturbed models,
logits with a right- and a left-padded row, greedy tokens with the cache, the headless
model, and an export that transformers loads with the same logits."""

from __future__ import annotations

import json

import pytest
import torch
from hf_util import V, assert_causal_lm_equal, assert_greedy_equal, perturb, save_hf

import archzoo

transformers = pytest.importorskip("transformers")


def assert_left_padded_equal(ref: torch.nn.Module, ours) -> None:
    """A left-padded row's logits at its real tokens within 1e-4 of transformers'."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, V, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    assert (want - got)[mask.bool()].abs().max() <= 1e-4


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
