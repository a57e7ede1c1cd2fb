"""The BART family of encoder-decoders (Marian, Pegasus, mBART, M2M-100) against transformers:
logits, loss, headless states, greedy and beam generation, save/load, refused variants."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from hf_util import (
    V,
    assert_seq2seq_equal,
    assert_seq2seq_generation_equal,
    max_diff_unpadded,
    padded_batch,
    perturb,
    save_hf,
)

import archzoo
from archzoo import ConversionError

# model type -> (config class, generation class)
TYPES = {
    "marian": ("MarianConfig", "MarianMTModel"),
    "pegasus": ("PegasusConfig", "PegasusForConditionalGeneration"),
    "mbart": ("MBartConfig", "MBartForConditionalGeneration"),
    "m2m_100": ("M2M100Config", "M2M100ForConditionalGeneration"),
}
SIZES = dict(
    vocab_size=V,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
    scale_embedding=True,
    activation_function="gelu",
)


def restore_sinusoids(model: torch.nn.Module) -> None:
    """Marian and Pegasus keep their sinusoidal table as a frozen weight, which `perturb`
    moved; real checkpoints hold the exact table."""
    for module in model.modules():
        if hasattr(module, "create_weight"):
            module.weight.data.copy_(module.create_weight())


def tiny(model_type: str, cls: str | None = None, scale: float = 0.05, **overrides):
    config_cls, lm_cls = TYPES[model_type]
    config = getattr(hf, config_cls)(**{**SIZES, **overrides})
    model = getattr(hf, cls or lm_cls)(config)
    perturb(model, scale=scale)
    restore_sinusoids(model)
    return model.eval()


def batch():
    ids, mask = padded_batch(V)
    ids = ids.masked_fill(mask == 0, SIZES["pad_token_id"])
    dec, _ = padded_batch(V, length=7, real=7)
    return ids, mask, dec


@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_logits_and_loss_equal_hf_and_reload_is_bit_identical(tmp_path, model_type):
    model = tiny(model_type)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters()) - sum(
        m.weight.numel() for m in model.modules() if hasattr(m, "create_weight")
    )
    assert_seq2seq_equal(model, ours, batch(), tmp_path)


@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_headless_model_gives_hf_hidden_states(tmp_path, model_type):
    prefix = TYPES[model_type][0].removesuffix("Config")
    model = tiny(model_type, prefix + "Model")
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.spec.data["head"]["kind"] == "none"
    ids, mask, dec = batch()
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec)
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec)
    diff = max_diff_unpadded(ref.last_hidden_state, got.last_hidden_state, torch.ones_like(dec))
    assert diff <= 1e-4


def prompts():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(3, V, (2, 7), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids[1, 5:] = SIZES["pad_token_id"]
    return ids, mask


@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_greedy_and_beam_generation_equal_hf(tmp_path, model_type):
    model = tiny(model_type, scale=0.2)  # sharp distributions: no near-ties
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask = prompts()
    assert_seq2seq_generation_equal(model, ours, ids, mask)


def test_sinusoidal_variants_equal_hf_tables():
    from archzoo.plugins.position.sinusoidal import sinusoidal_table

    marian = hf.models.marian.modeling_marian.MarianSinusoidalPositionalEmbedding(40, 16)
    got = sinusoidal_table(torch.arange(40), 16, layout="halves")
    assert (marian.create_weight() - got).abs().max().item() <= 1e-6
    m2m = hf.models.m2m_100.modeling_m2m_100.M2M100SinusoidalPositionalEmbedding
    table = m2m.get_embedding(40, 16)  # rows by position id
    got = sinusoidal_table(torch.arange(40), 16, frequencies="tensor2tensor", layout="halves")
    assert (table - got).abs().max().item() <= 1e-5


def test_saved_position_tables_are_checked_and_a_split_vocab_refused(tmp_path):
    """transformers 4 saved Marian's frozen sinusoidal table: the exact table is accepted
    and skipped, a trained one refused; separate decoder vocabularies are refused."""
    from safetensors.torch import load_file, save_file

    model = tiny("marian")
    directory = save_hf(model, tmp_path / "hf")
    state = load_file(directory / "model.safetensors")
    table = model.model.encoder.embed_positions.create_weight()
    ids, mask, dec = batch()
    for shift, ok in ((0.0, True), (0.5, False)):
        state["model.encoder.embed_positions.weight"] = table + shift
        save_file(state, directory / "model.safetensors", metadata={"format": "pt"})
        if ok:
            ours = archzoo.from_hf(directory)
            with torch.no_grad():
                ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
                got = ours(ids, attention_mask=mask, decoder_input_ids=dec).logits
            assert (ref - got).abs().max().item() <= 1e-4
            continue
        with pytest.raises(ConversionError, match="embed_positions.weight is not the sinusoidal"):
            archzoo.from_hf(directory)
    model = tiny("marian", share_encoder_decoder_embeddings=False, decoder_vocab_size=V + 4)
    with pytest.raises(ConversionError, match="share_encoder_decoder_embeddings"):
        archzoo.from_hf(save_hf(model, tmp_path / "split"))


@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_zoo_import_saves_a_loadable_file(tmp_path, model_type):
    from click.testing import CliRunner

    from archzoo.cli.main import main

    model = tiny(model_type)
    out = tmp_path / "m.safetensors"
    result = CliRunner().invoke(
        main, ["import", str(save_hf(model, tmp_path / "hf")), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["family"] == "encoder-decoder"
    ids, mask, dec = batch()
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        got = archzoo.load(out)(ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert (ref - got).abs().max().item() <= 1e-4


# UMT5: T5 with one relative-bias table per self-attention layer (transformers 5 ties its
# head to the token table whatever config.json says; archzoo follows config.json)
def tiny_umt5(cls: str = "UMT5ForConditionalGeneration", scale: float = 0.05, **overrides):
    config = hf.UMT5Config(
        **{
            **dict(
                vocab_size=V,
                d_model=32,
                num_layers=2,
                num_heads=4,
                d_kv=8,
                d_ff=64,
                decoder_start_token_id=0,
                pad_token_id=0,
                eos_token_id=1,
            ),
            **overrides,
        }
    )
    model = getattr(hf, cls)(config)
    perturb(model, scale=scale)
    return model.eval()


@pytest.mark.parametrize(
    "overrides",
    [
        dict(feed_forward_proj="gated-gelu", num_decoder_layers=3),
        dict(feed_forward_proj="relu"),
    ],
    ids=["gated", "relu"],
)
def test_umt5_logits_loss_and_per_layer_tables(tmp_path, overrides):
    model = tiny_umt5(**overrides)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    layers = model.config.num_decoder_layers
    assert len(ours.decoder.position.tables) == layers  # one bias table per layer
    ids, mask = padded_batch(V)
    dec, _ = padded_batch(V, length=7, real=7)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, labels=dec)
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec, labels=dec)
    assert (ref.logits - got.logits).abs().max().item() <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5


def test_umt5_generation_and_headless_models_equal_hf(tmp_path):
    model = tiny_umt5(scale=0.2, feed_forward_proj="gated-gelu")
    ours = archzoo.from_hf(save_hf(model, tmp_path / "lm"))
    ids, mask = prompts()
    for kwargs in ({"max_new_tokens": 20, "min_new_tokens": 20}, {"num_beams": 4}):
        kwargs.setdefault("max_new_tokens", 12)
        expected = model.generate(ids, attention_mask=mask, do_sample=False, **kwargs)
        assert torch.equal(ours.generate(ids, attention_mask=mask, **kwargs), expected)
    ids, mask = padded_batch(V)
    for cls in ("UMT5Model", "UMT5EncoderModel"):
        base = tiny_umt5(cls)
        ours = archzoo.from_hf(save_hf(base, tmp_path / cls))
        extra = {"decoder_input_ids": ids[:, :5]} if cls == "UMT5Model" else {}
        with torch.no_grad():
            ref = base(input_ids=ids, attention_mask=mask, **extra).last_hidden_state
            got = ours(ids, attention_mask=mask, **extra).last_hidden_state
        keep = mask if cls == "UMT5EncoderModel" else torch.ones_like(ids[:, :5])
        assert max_diff_unpadded(ref, got, keep) <= 1e-4
