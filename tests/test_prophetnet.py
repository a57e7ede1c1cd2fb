"""ProphetNet against transformers: every architecture's outputs with padded rows (the
encoder's and the decoder's), the n-gram loss, greedy and beam tokens with the cache, the
export round trip and the refused settings. (The zoo spec's count is tests/test_zoo_counts.py;
the n-stream attention against a loop over streams is tests/test_ngram_streams.py.)

transformers' `logits` are the first predicting stream's (the tokens' own stream is
`last_hidden_state`), `logits_ngram` the others'; its loss averages every stream's token loss
against the same labels. Decoder rows here reach past buckets / 2 so the logarithmic buckets
count too."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import assert_seq2seq_generation_equal, padded_batch, perturb, save_hf

import archzoo
from archzoo import ConversionError

V = 99
SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    encoder_ffn_dim=48,
    decoder_ffn_dim=40,
    num_encoder_layers=2,
    num_decoder_layers=2,
    num_encoder_attention_heads=4,
    num_decoder_attention_heads=4,
    max_position_embeddings=64,
    ngram=3,
    num_buckets=8,
    relative_max_distance=10,
)


def tiny(cls: str = "ProphetNetForConditionalGeneration", **overrides):
    torch.manual_seed(0)
    model = getattr(hf, cls)(hf.ProphetNetConfig(**{**SIZES, **overrides}))
    perturb(model, scale=0.1)
    return model.eval()


def inputs():
    """Encoder rows (the second right-padded), decoder rows of 12 (the second with 3 pads)."""
    ids, mask = padded_batch(V)
    dec = torch.randint(3, V, (2, 12), generator=torch.Generator().manual_seed(1))
    dec_mask = torch.ones_like(dec)
    dec_mask[1, -3:] = 0
    return ids, mask, dec, dec_mask


def diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a - b).abs().max().item()


@pytest.mark.parametrize("ngram", [3, 1])
def test_logits_and_ngram_logits_equal_transformers_with_padded_rows(tmp_path, ngram):
    ref = tiny(ngram=ngram)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert ours.spec.data["decoder"]["embedding"]["predict_streams"] == ngram
    ids, mask, dec, dec_mask = inputs()
    with torch.no_grad():
        want = ref(ids, attention_mask=mask, decoder_input_ids=dec, decoder_attention_mask=dec_mask)
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec, decoder_attention_mask=dec_mask)
    assert diff(got.logits, want.logits) <= 1e-4  # (2, 12, V): predicting stream 0
    if ngram == 1:
        assert got.logits_ngram is None and want.logits_ngram is None
    else:  # (2, 2, 12, V): streams 1, 2
        assert diff(got.logits_ngram, want.logits_ngram) <= 1e-4
    assert diff(got.encoder_last_hidden_state, want.encoder_last_hidden_state) <= 1e-4
    assert ours.num_parameters() == ref.num_parameters()


def test_the_headless_model_returns_the_tokens_stream_and_its_attentions(tmp_path):
    ref = tiny("ProphetNetModel")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert ours.spec.data["head"]["kind"] == "none"
    ids, mask, dec, dec_mask = inputs()
    kwargs = dict(attention_mask=mask, decoder_input_ids=dec, decoder_attention_mask=dec_mask)
    with torch.no_grad():
        want = ref(ids, **kwargs, output_attentions=True, output_hidden_states=True)
        got = ours(ids, **kwargs, output_attentions=True, output_hidden_states=True)
    assert diff(got.last_hidden_state, want.last_hidden_state) <= 1e-4  # (2, 12, 32)
    assert got.logits is None and got.logits_ngram is None
    for g, w in zip(got.decoder_hidden_states, want.decoder_hidden_states, strict=True):
        assert diff(g, w) <= 1e-4  # the tokens' stream before each layer and after the last
    for g, w in zip(got.decoder_attentions, want.decoder_attentions, strict=True):
        assert diff(g, w) <= 1e-5  # the tokens' stream's probabilities (B, H, T, T)
    assert ours.num_parameters() == ref.num_parameters()


def test_the_loss_averages_every_stream_as_transformers(tmp_path):
    ref = tiny()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    ids, mask, _, _ = inputs()
    labels = torch.randint(3, V, (2, 9), generator=torch.Generator().manual_seed(2))
    labels[1, -2:] = -100
    dec = ref._shift_right(labels)
    with torch.no_grad():
        want = ref(ids, attention_mask=mask, decoder_input_ids=dec, labels=labels).loss
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec, labels=labels).loss
        chunked = ours(
            ids, attention_mask=mask, decoder_input_ids=dec, labels=labels, return_logits=False
        ).loss
        logits = ours(ids, attention_mask=mask, decoder_input_ids=dec)
    assert abs(got.item() - want.item()) <= 1e-5 and abs(chunked.item() - want.item()) <= 1e-5
    every = torch.cat([logits.logits[:, None], logits.logits_ngram], 1)  # (B, 3, T, V)
    by_hand = torch.nn.functional.cross_entropy(
        every.flatten(0, 2), labels[:, None].expand(-1, 3, -1).flatten(), ignore_index=-100
    )
    assert abs(by_hand.item() - want.item()) <= 1e-5


def test_the_causal_lm_scores_unshifted_labels_as_transformers(tmp_path):
    ref = tiny("ProphetNetForCausalLM")
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert ours.family == "decoder" and ours.spec.data["head"]["shift"] is False
    _, _, dec, dec_mask = inputs()
    labels = dec.masked_fill(dec_mask == 0, -100)
    with torch.no_grad():
        want = ref(dec, attention_mask=dec_mask, labels=labels)
        got = ours(dec, attention_mask=dec_mask, labels=labels)
    assert diff(got.logits, want.logits) <= 1e-4
    assert diff(got.logits_ngram, want.logits_ngram) <= 1e-4
    assert abs(got.loss.item() - want.loss.item()) <= 1e-5
    cross = sum(p.numel() for n, p in ref.named_parameters() if ".cross_attn" in n)
    assert ours.num_parameters() == ref.num_parameters() - cross  # its unused cross-attention


def test_the_causal_lm_greedy_tokens_with_the_cache_equal_transformers(tmp_path):
    """Unpadded prompts: transformers' cached steps drop the decoder's attention mask, so a
    left-padded prompt's later steps attend to its pads there (archzoo masks them)."""
    ref = tiny("ProphetNetForCausalLM", ngram=2)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    prompt = inputs()[2][:, :5]
    ones = torch.ones_like(prompt)
    kwargs = dict(max_new_tokens=15, min_new_tokens=15)
    expected = ref.generate(prompt, attention_mask=ones, do_sample=False, **kwargs)
    assert torch.equal(ours.generate(prompt, attention_mask=ones, **kwargs), expected)


@pytest.mark.parametrize("cls", ["ProphetNetEncoder", "ProphetNetDecoder"])
def test_the_standalone_stacks_equal_transformers(tmp_path, cls):
    ref = tiny(cls)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert ours.family == cls.removeprefix("ProphetNet").lower()
    ids, mask, dec, dec_mask = inputs()
    x, m = (ids, mask) if cls.endswith("Encoder") else (dec, dec_mask)
    with torch.no_grad():
        want = ref(x, attention_mask=m).last_hidden_state
        got = ours(x, attention_mask=m).last_hidden_state
    assert diff(got, want) <= 1e-4


def test_greedy_and_beam_tokens_with_the_cache_equal_transformers(tmp_path):
    ref = tiny(ngram=2)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    ids, mask, _, _ = inputs()
    assert_seq2seq_generation_equal(ref, ours, ids, mask)
    out = ours.generate(ids, attention_mask=mask, max_new_tokens=20, min_new_tokens=20)
    assert len(set(out[:, 1:-1].flatten().tolist())) > 2  # not one repeated token


EXPORTED = [
    "ProphetNetForConditionalGeneration",
    "ProphetNetModel",
    "ProphetNetEncoder",
    "ProphetNetForCausalLM",
    "ProphetNetDecoder",
]


@pytest.mark.parametrize("cls", EXPORTED)
def test_export_round_trip_loads_in_transformers_with_equal_outputs(tmp_path, cls):
    """A decoder alone is exported with add_cross_attention false: no unused weights."""
    ref = tiny(cls, pad_token_id=1)  # positions from padding_idx + 1 = 2
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert ours.spec.data["position"]["offset"] == 2
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert (report["model_type"], report["architecture"]) == ("prophetnet", cls)
    back, info = getattr(hf, cls).from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert back.config.max_position_embeddings == 64
    ids, mask, dec, dec_mask = inputs()
    two = dict(decoder_input_ids=dec) if "Model" in cls or "Generation" in cls else {}
    if ours.family == "decoder":  # the decoder alone reads the decoder rows
        ids, mask = dec, dec_mask
        assert not back.config.add_cross_attention
    assert cls.endswith("Encoder") or back.config.ngram == 3
    with torch.no_grad():
        a, b = (m(ids, attention_mask=mask, **two) for m in (back.eval(), ref))
    key = "last_hidden_state" if cls.endswith(("Model", "Encoder", "Decoder")) else "logits"
    assert diff(a[key], b[key]) <= 1e-5
    again = archzoo.from_hf(tmp_path / "out")
    assert again.spec.data == {**ours.spec.data, "name": again.spec.name}


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"disable_ngram_loss": True}, "disable_ngram_loss=True is not supported"),
        ({"eps": 0.1}, "eps=0.1 is not supported"),
    ],
)
def test_a_loss_archzoo_does_not_compute_is_refused_by_name(tmp_path, setting, message):
    with pytest.raises(ConversionError, match=message):
        archzoo.from_hf(save_hf(tiny(**setting), tmp_path / "hf"))
