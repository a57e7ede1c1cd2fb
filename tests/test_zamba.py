"""Zamba 2 against transformers (issue 32 item 4): Mamba 2 layers with a transformer block
shared across the hybrid layers (`shared_transformer`), tiny perturbed models: logits with a
right- and a left-padded row, greedy tokens with the cache, the headless model, sequence
classification, an export transformers loads with the same logits, and the sharing itself
(one set of parameters, saved once, stepped once)."""

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

HYBRID = ["mamba", "hybrid", "mamba", "hybrid", "hybrid"]  # layers 1, 3, 4: uses 0, 1, 2


def tiny_zamba2(**extra) -> transformers.Zamba2Config:
    """Five layers of 32 channels, three of them hybrid over two shared blocks (uses 0 and 2
    run block 0, use 1 block 1); Mamba 2 with 4 heads of 16 in 2 groups, state 8, chunks of
    4; the shared attention 4 heads of 16 over 64 channels with rotary, adapters of rank 4."""
    config = dict(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=5,
        layers_block_type=HYBRID,
        mamba_d_state=8,
        n_mamba_heads=4,
        mamba_ngroups=2,
        chunk_size=4,
        num_attention_heads=4,
        intermediate_size=48,
        num_mem_blocks=2,
        adapter_rank=4,
        use_shared_attention_adapter=True,
        use_mem_rope=True,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    return transformers.Zamba2Config(**{**config, **extra})


# one block, GQA 4/2 without q/k/v adapters, no positions, a SwiGLU FFN
PLAIN = dict(
    num_mem_blocks=1,
    num_key_value_heads=2,
    use_shared_attention_adapter=False,
    use_mem_rope=False,
    hidden_act="silu",
)


@pytest.mark.parametrize("extra", [{}, PLAIN], ids=["two-blocks-rotary-adapters", "plain"])
def test_zamba2_imports_with_transformers_logits(tmp_path, extra):
    config = tiny_zamba2(**extra)
    ref = transformers.Zamba2ForCausalLM(config)
    perturb(ref)
    ref.eval()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf")).eval()
    layers = ours.spec.data["layers"]
    blocks = {entry["attention"]["shared_block"]: entry["select"] for entry in layers}
    assert blocks == ({0: [1, 4], 1: [3]} if not extra else {0: [1, 3, 4]})
    assert ours.num_parameters() == ref.num_parameters()  # the shared blocks counted once
    assert_causal_lm_equal(ref, ours)
    assert_left_padded_equal(ref, ours)
    assert_greedy_equal(ref, ours)  # with the cache: keys and values per use, Mamba states
    saved = assert_export_round_trip(ref, ours, tmp_path)
    assert saved["layers_block_type"] == [t.replace("mamba", "linear_attention") for t in HYBRID]
    assert saved["num_mem_blocks"] == config.num_mem_blocks
    if extra:
        return
    base = transformers.Zamba2Model(config)
    perturb(base)
    assert_headless_equal(base.eval(), tmp_path)


def test_zamba2_sequence_classification_matches_transformers(tmp_path):
    ref = transformers.Zamba2ForSequenceClassification(tiny_zamba2(num_labels=3))
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


def test_the_shared_block_is_one_set_of_parameters(tmp_path):
    """Layers 1 and 4 hold the same module (layer 3 another); it is saved once, loads back
    tied, and one optimizer step moves it once whatever the number of uses."""
    ref = transformers.Zamba2ForCausalLM(tiny_zamba2())
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    blocks = ours.decoder.blocks
    assert blocks[1].attention.shared is blocks[4].attention.shared
    assert blocks[1].attention.shared is not blocks[3].attention.shared
    assert blocks[1].attention.q_adapter is not blocks[4].attention.q_adapter  # per use
    archzoo.save(ours, tmp_path / "m.safetensors")
    again = archzoo.load(tmp_path / "m.safetensors")
    q1, q4 = (again.decoder.blocks[j].attention.shared.attention.q.weight for j in (1, 4))
    assert q1 is q4 and torch.equal(q1, blocks[1].attention.shared.attention.q.weight)
    before = q1.detach().clone()
    opt = torch.optim.SGD(again.parameters(), lr=0.1)
    ids = torch.randint(3, V, (1, 6))
    again(ids, labels=ids).loss.backward()
    grad = q1.grad.clone()
    opt.step()
    torch.testing.assert_close(q1.detach(), before - 0.1 * grad)


def test_layers_naming_one_block_must_agree_on_its_options():
    base = {
        "family": "decoder",
        "vocab_size": V,
        "d_model": 32,
        "n_layers": 2,
        "n_heads": 4,
        "head_dim": 16,
        "d_ff": 48,
        "max_len": 64,
        "ffn": "none",
        "block": {"kind": "pre_ln", "attention_norm": False, "ffn_norm": False},
        "attention": {"kind": "shared_transformer", "mixer": {"kind": "mamba2", "head_dim": 16}},
    }
    archzoo.build_model(base)  # agreeing: builds
    layers = [{"select": [1], "attention": {**base["attention"], "d_ff": 24}}]
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.build_model({**base, "layers": layers})
    assert (
        "layers: layer 1: attention 'shared_transformer' builds the shared block 0 with "
        "{'n_kv_heads': None, 'scale': None, 'd_ff': 24, 'activation': 'geglu', "
        "'ffn_bias': False}, layer 0 with {'n_kv_heads': None, 'scale': None, 'd_ff': None"
    ) in str(err.value)
    layers[0]["attention"]["shared_block"] = 1  # a block of its own: builds
    archzoo.build_model({**base, "layers": layers})
    bad = {**base["attention"], "mixer": {"kind": "mamba2", "head_dim": 48}}
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.build_model({**base, "attention": bad})
    assert "attention.mixer.head_dim: 48 does not divide d_inner 64" in str(err.value)


def test_attention_adapters_that_transformers_cannot_run_are_refused(tmp_path):
    """GQA with q/k/v adapters: transformers' k and v adapters are 2 x hidden_size wide and
    its own forward fails; the import says so instead of importing something else."""
    ref = transformers.Zamba2ForCausalLM(tiny_zamba2(num_key_value_heads=2))
    with pytest.raises(archzoo.ConversionError) as err:
        archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert "use_shared_attention_adapter with q, k or v narrower than 2 x hidden_size" in str(
        err.value
    )
