"""LongT5 (local and transient-global encoders) against transformers: logits, loss, headless
and encoder states, greedy and beam generation, the blocked path against the dense
reference, save/load and export."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from click.testing import CliRunner
from hf_util import (
    TINY,
    V,
    assert_seq2seq_equal,
    assert_seq2seq_generation_equal,
    max_diff_unpadded,
    perturb,
    save_hf,
)

import archzoo
from archzoo.cli.main import main

ATTENTION = {"local": "block_local", "transient-global": "transient_global"}
SIZES = {  # T5's tiny sizes; blocks of 4 tokens, buckets that reach across several blocks
    **TINY["t5"][2],
    "vocab_size": V,
    "local_radius": 3,
    "global_block_size": 4,
    "relative_attention_num_buckets": 16,
    "relative_attention_max_distance": 20,
    "decoder_start_token_id": 0,
    "pad_token_id": 0,
    "eos_token_id": 1,
}


def tiny(kind: str, cls: str = "LongT5ForConditionalGeneration", scale: float = 0.05, **extra):
    config = hf.LongT5Config(**{**SIZES, "encoder_attention_type": kind, **extra})
    model = getattr(hf, cls)(config)
    perturb(model, scale=scale)
    return model.eval()


def batch(length: int = 22, real: int = 13):
    """Two rows longer than five blocks, the second right-padded after `real` tokens."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, (2, length), generator=g)
    mask = torch.ones_like(ids)
    mask[1, real:] = 0
    ids[1, real:] = SIZES["pad_token_id"]
    dec = torch.randint(3, V, (2, 7), generator=g)
    return ids, mask, dec


@pytest.mark.parametrize("kind", sorted(ATTENTION))
def test_logits_and_loss_equal_hf_and_reload_is_bit_identical(tmp_path, kind):
    model = tiny(kind)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.spec.data["encoder"]["attention"]["kind"] == ATTENTION[kind]
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    assert_seq2seq_equal(model, ours, batch(), tmp_path)


@pytest.mark.parametrize("kind", sorted(ATTENTION))
def test_zoo_import_then_export_loads_in_transformers_with_equal_logits(tmp_path, kind):
    model = tiny(kind)
    out = tmp_path / "m.safetensors"
    args = ["import", str(save_hf(model, tmp_path / "hf")), "--out", str(out), "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["params"] == sum(p.numel() for p in model.parameters())
    archzoo.to_hf(archzoo.load(out), tmp_path / "out")
    back, info = hf.LongT5ForConditionalGeneration.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert back.config.encoder_attention_type == kind
    assert back.config.local_radius == SIZES["local_radius"]
    ids, mask, dec = batch()
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        got = back.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert (ref - got).abs().max().item() <= 1e-5


@pytest.mark.parametrize("kind", sorted(ATTENTION))
@pytest.mark.parametrize("cls", ["LongT5Model", "LongT5EncoderModel"])
def test_headless_and_encoder_models_give_hf_hidden_states(tmp_path, kind, cls):
    model = tiny(kind, cls)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.spec.data["head"]["kind"] == "none"
    ids, mask, dec = batch()
    inputs = {"input_ids": ids, "attention_mask": mask}
    if cls == "LongT5Model":
        inputs["decoder_input_ids"] = dec
    with torch.no_grad():
        ref = model(**inputs).last_hidden_state
        got = ours(ids, attention_mask=mask, decoder_input_ids=inputs.get("decoder_input_ids"))
    keep = torch.ones_like(dec) if cls == "LongT5Model" else mask
    assert max_diff_unpadded(ref, got.last_hidden_state, keep) <= 1e-4


@pytest.mark.parametrize("kind", sorted(ATTENTION))
def test_greedy_and_beam_generation_equal_hf(tmp_path, kind):
    model = tiny(kind, scale=0.2)  # sharp distributions: no near-ties
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask, _ = batch(length=18, real=11)
    assert_seq2seq_generation_equal(model, ours, ids, mask)


@pytest.mark.parametrize("kind", sorted(ATTENTION))
@pytest.mark.parametrize("length", [3, 9, 22])  # under one block, a partial last block, many
def test_blocked_path_equals_the_dense_reference(tmp_path, kind, length):
    """The 3-block windows give the (T, T) band computation, padding and partial blocks
    included; with grouped heads too."""
    ours = archzoo.from_hf(save_hf(tiny(kind), tmp_path / "hf"))
    spec = ours.spec.data
    dense = archzoo.build_model(spec, {"encoder.attention.impl": "dense"}).eval()
    dense.load_state_dict(ours.state_dict())
    ids, mask, dec = batch(length, real=min(length, 13) - 1)
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, decoder_input_ids=dec).logits
        b = dense(ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert (a - b).abs().max().item() <= 1e-5


def test_probabilities_cover_only_the_window_and_rows_are_finite(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny("local"), tmp_path / "hf"))
    ids, mask, dec = batch()
    with torch.no_grad():
        out = ours(ids, attention_mask=mask, decoder_input_ids=dec, output_attentions=True)
    probs = out.encoder_attentions[0]  # (B, H, T, T)
    pos = torch.arange(ids.shape[1])
    far = (pos[:, None] - pos[None, :]).abs() > SIZES["local_radius"]
    assert probs[..., far].abs().max().item() == 0.0
    real = mask[:, None, :, None].bool().expand_as(probs)
    assert torch.allclose(probs.sum(-1)[real[..., 0]], torch.tensor(1.0), atol=1e-6)
    assert torch.isfinite(out.logits).all()


def test_transient_global_without_a_summary_table_is_refused():
    spec = dict(
        family="encoder",
        vocab_size=V,
        d_model=32,
        n_layers=1,
        n_heads=4,
        d_ff=64,
        position="t5_relative",
        attention={"kind": "transient_global", "radius": 3, "global_block": 4},
        norm="rmsnorm",
        head="none",
    )
    model = archzoo.build_model(spec)
    with pytest.raises(ValueError, match="t5_windowed with global_table: true"):
        model(torch.randint(0, V, (1, 9)))
