"""Zamba (v1) against transformers (issue 32 item 4): Mamba layers with several heads (each its
own x_proj and dt_proj, mamba `heads`) and one transformer block shared by the hybrid layers
(`shared_transformer`), tiny perturbed models: logits with a right- and a left-padded row,
greedy tokens with the cache, the headless model, sequence classification, and an export
transformers loads with the same logits."""

from __future__ import annotations

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
from test_hybrid_families_b import assert_export_round_trip, assert_headless_equal

import archzoo

transformers = pytest.importorskip("transformers")

TYPES = ["mamba", "hybrid", "mamba", "hybrid"]  # the shared block before layers 1 and 3


def tiny_zamba(**extra) -> transformers.ZambaConfig:
    """Four layers of 32 channels, two of them hybrid; Mamba over 64 channels in 2 heads of
    32, state 8, step rank 3; the shared attention 4 heads of 16 over 64 channels, GQA 4/2."""
    config = dict(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=4,
        layers_block_type=TYPES,
        n_mamba_heads=2,
        mamba_d_state=8,
        mamba_dt_rank=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    return transformers.ZambaConfig(**{**config, **extra})


@pytest.mark.parametrize("extra", [{}, {"hidden_act": "silu", "n_mamba_heads": 4}])
def test_zamba_imports_with_transformers_logits(tmp_path, extra):
    config = tiny_zamba(**extra)
    ref = transformers.ZambaForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["attention"]["heads"] == config.n_mamba_heads
    assert [e["select"] for e in ours.spec.data["layers"]] == [[1, 3]]
    blocks = ours.decoder.blocks
    assert blocks[1].attention.shared is blocks[3].attention.shared  # one set of weights
    assert ours.num_parameters() == ref.num_parameters()
    assert_causal_lm_equal(ref, ours)  # a right-padded row
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: keys and values per use, Mamba states
    saved = assert_export_round_trip(ref, ours, tmp_path)
    assert saved["layers_block_type"] == [t.replace("mamba", "linear_attention") for t in TYPES]
    assert saved["n_mamba_heads"] == config.n_mamba_heads
    if extra:
        return
    base = transformers.ZambaModel(config)
    perturb(base)
    assert_headless_equal(base.eval(), tmp_path)


def test_zamba_sequence_classification_matches_transformers(tmp_path):
    ref = transformers.ZambaForSequenceClassification(tiny_zamba(num_labels=3))
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    assert ours.spec.data["head"]["kind"] == "classifier"
    ids = torch.randint(3, V, (2, 9), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = 0, 0  # right padding: the last real token is read
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    assert (want - got).abs().max() <= 1e-4


def test_a_mamba_activation_other_than_silu_is_refused(tmp_path):
    ref = transformers.ZambaForCausalLM(tiny_zamba(hidden_mamba_act="gelu"))
    with pytest.raises(archzoo.ConversionError) as err:
        archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert "hidden_mamba_act" in str(err.value)
