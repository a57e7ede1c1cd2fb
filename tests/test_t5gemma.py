"""T5Gemma's balanced pairs against transformers: logits with a right-padded row (two-sided
encoder windows, soft caps, sandwich norms), headless and encoder states, greedy generation
with the cache, export round trip; unbalanced pairs refused by name."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, assert_seq2seq_equal, max_diff_unpadded, perturb, save_hf

import archzoo
from archzoo.parts.converter import ConversionError

STACK = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    query_pre_attn_scalar=8,
    sliding_window=3,  # narrower than the rows: the windows matter
    attn_logit_softcapping=5.0,
    final_logit_softcapping=3.0,
    pad_token_id=0,
    eos_token_id=1,
    bos_token_id=2,
)


def tiny(cls: str = "T5GemmaForConditionalGeneration", scale: float = 0.05, **decoder):
    enc = hf.T5GemmaModuleConfig(**STACK)
    dec = hf.T5GemmaModuleConfig(**{**STACK, "num_hidden_layers": 3, **decoder})
    config = hf.T5GemmaConfig(encoder=enc, decoder=dec, vocab_size=V)
    config.decoder_start_token_id = 2
    # T5GemmaEncoderModel requires it; the classifiers then read the encoder alone
    config.is_encoder_decoder = not ("Encoder" in cls or "Classification" in cls)
    config.num_labels = 3
    model = getattr(hf, cls)(config)
    perturb(model, scale=scale)
    return model.eval()


def batch(length: int = 12, real: int = 7):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, (2, length), generator=g)
    mask = torch.ones_like(ids)
    mask[1, real:] = 0  # right padding
    ids[1, real:] = 0
    return ids, mask, torch.randint(3, V, (2, 6), generator=g)


def test_logits_loss_and_counts_equal_hf(tmp_path):
    model = tiny()
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    assert_seq2seq_equal(model, ours, batch(), tmp_path)


@pytest.mark.parametrize("cls", ["T5GemmaModel", "T5GemmaEncoderModel"])
def test_headless_and_encoder_states_equal_hf(tmp_path, cls):
    model = tiny(cls)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask, dec = batch()
    inputs = {"input_ids": ids, "attention_mask": mask}
    if cls == "T5GemmaModel":
        inputs["decoder_input_ids"] = dec
    with torch.no_grad():
        ref = model(**inputs).last_hidden_state
        got = ours(ids, attention_mask=mask, decoder_input_ids=inputs.get("decoder_input_ids"))
    keep = torch.ones_like(dec) if cls == "T5GemmaModel" else mask
    assert max_diff_unpadded(ref, got.last_hidden_state, keep) <= 1e-4


@pytest.mark.parametrize("cls", ["ForSequenceClassification", "ForTokenClassification"])
def test_encoder_classifiers_equal_hf_and_export(tmp_path, cls):
    model = tiny("T5Gemma" + cls)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    ids, mask, _ = batch()
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, attention_mask=mask).logits
    keep = mask.bool() if cls == "ForTokenClassification" else slice(None)
    assert (ref - got).abs()[keep].max().item() <= 1e-4  # real tokens, or one row each
    archzoo.to_hf(ours, tmp_path / "out")
    back = getattr(hf, "T5Gemma" + cls).from_pretrained(tmp_path / "out").eval()
    assert back.config.is_encoder_decoder is False
    with torch.no_grad():
        again = back(input_ids=ids, attention_mask=mask).logits
    assert (again - ref).abs().max().item() <= 1e-5


def test_encoder_decoder_classifiers_are_refused_by_name(tmp_path):
    model = tiny("T5GemmaForSequenceClassification")
    model.config.is_encoder_decoder = True
    with pytest.raises(ConversionError, match="is_encoder_decoder=true is not supported"):
        archzoo.from_hf(save_hf(model, tmp_path / "hf"))


def test_greedy_generation_with_the_cache_equals_hf(tmp_path):
    model = tiny(scale=0.3)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask, _ = batch()
    kwargs = {"max_new_tokens": 12, "min_new_tokens": 12}
    for rows in (slice(0, 1), slice(0, 2)):
        want = model.generate(ids[rows], attention_mask=mask[rows], do_sample=False, **kwargs)
        got = ours.generate(ids[rows], attention_mask=mask[rows], use_cache=True, **kwargs)
        assert got.tolist() == want.tolist()


def test_export_loads_in_transformers_with_equal_logits(tmp_path):
    model = tiny()
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    archzoo.to_hf(ours, tmp_path / "out")
    back, info = hf.T5GemmaForConditionalGeneration.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids, mask, dec = batch()
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        got = back.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert (ref - got).abs().max().item() <= 1e-5


def test_unbalanced_pairs_are_refused_by_name(tmp_path):
    path = save_hf(tiny(hidden_size=16, head_dim=4), tmp_path / "hf")
    with pytest.raises(ConversionError, match="encoder.hidden_size=32 and decoder.hidden_size=16"):
        archzoo.from_hf(path)
