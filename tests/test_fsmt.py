"""FSMT (fairseq's WMT19 models) against transformers: a source and a target vocabulary of
different sizes (`decoder.vocab_size`), three token tables untied or all tied, fairseq's
sinusoidal positions from padding_idx + 1: logits with right- and left-padded rows, greedy
and beam tokens with the cache, the export round trip, and the refusals. (The zoo spec's
count is tests/test_zoo_counts.py; the export sweep of every type is tests/test_export.py.)

transformers' FSMT decoder drops its causal mask whenever it caches (use_cache defaults to
True), so its full forwards here pass use_cache=False; generation is unaffected (one new
token a step)."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import assert_seq2seq_generation_equal, padded_batch, perturb, save_hf

import archzoo
from archzoo import ConversionError, SpecError

SRC, TGT, PAD = 96, 80, 1
SIZES = dict(
    langs=["en", "de"],
    src_vocab_size=SRC,
    tgt_vocab_size=TGT,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=48,
    max_position_embeddings=64,
    num_beams=1,  # FSMTConfig's default is 5: plain greedy unless a test asks for beams
)


def restore_sinusoids(model: torch.nn.Module) -> None:
    """`perturb` moved FSMT's saved sinusoid tables; checkpoints hold the exact table."""
    for m in model.modules():
        if hasattr(m, "make_positions"):
            m.weight.data.copy_(m.get_embedding(*m.weight.shape, m.padding_idx))


def tiny(cls: str = "FSMTForConditionalGeneration", scale: float = 0.1, **overrides):
    torch.manual_seed(0)
    model = getattr(hf, cls)(hf.FSMTConfig(**{**SIZES, **overrides}))
    perturb(model, scale=scale)
    restore_sinusoids(model)
    return model.eval()


def inputs(side: str = "right"):
    """Source rows padded on `side` with pad ids, target rows of the target vocabulary."""
    ids, mask = padded_batch(SRC)
    if side == "left":
        ids, mask = ids.flip(1), mask.flip(1)
    ids = ids.masked_fill(mask == 0, PAD)
    dec = torch.randint(3, TGT, (2, 7), generator=torch.Generator().manual_seed(1))
    return ids, mask, dec


def hf_logits(model, ids, mask, dec) -> torch.Tensor:
    with torch.no_grad():
        out = model(ids, attention_mask=mask, decoder_input_ids=dec, use_cache=False)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state  # FSMTModel: logits


def frozen_count(model) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if "embed_positions" not in n)


@pytest.mark.parametrize("cls", ["FSMTForConditionalGeneration", "FSMTModel"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_logits_equal_transformers_with_a_padded_row(tmp_path, cls, side):
    ref = tiny(cls)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    data = ours.spec.data
    assert (data["vocab_size"], data["decoder"]["vocab_size"]) == (SRC, TGT)
    assert not data["tie_embeddings"] and not data["head"]["tie"]
    ids, mask, dec = inputs(side)
    with torch.no_grad():
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec).logits
    want = hf_logits(ref, ids, mask, dec)
    assert got.shape == want.shape == (2, 7, TGT)
    assert (got - want).abs().max().item() <= 1e-4
    assert ours.num_parameters() == frozen_count(ref)  # less the two sinusoid tables


def test_tied_tables_are_one_parameter_and_export_tied(tmp_path):
    """tie_word_embeddings ties the encoder's, decoder's and output tables (transformers saves
    the decoder's alone): one parameter here, and the export loads tied, with equal logits."""
    ref = tiny(tgt_vocab_size=SRC, tie_word_embeddings=True)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    assert ours.spec.data["tie_embeddings"] and ours.spec.data["head"]["tie"]
    word = ours.encoder.embedding.word_weight()
    assert word is ours.decoder.embedding.word_weight() and word is ours.head.proj.weight
    ids, mask, _ = inputs()
    dec = torch.randint(3, SRC, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert (got - hf_logits(ref, ids, mask, dec)).abs().max().item() <= 1e-4
    assert ours.num_parameters() == frozen_count(ref)
    archzoo.to_hf(ours, tmp_path / "out")
    back, info = hf.FSMTForConditionalGeneration.from_pretrained(
        tmp_path / "out", output_loading_info=True
    )
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert back.config.tie_word_embeddings
    assert (hf_logits(back.eval(), ids, mask, dec) - got).abs().max().item() <= 1e-4


def test_greedy_and_beam_tokens_with_the_cache_equal_transformers(tmp_path):
    ref = tiny()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    ids, mask, _ = inputs()
    assert_seq2seq_generation_equal(ref, ours, ids, mask)
    out = ours.generate(ids, attention_mask=mask, max_new_tokens=20, min_new_tokens=20)
    assert len(set(out[:, 1:-1].flatten().tolist())) > 2  # not one repeated token


@pytest.mark.parametrize("cls", ["FSMTForConditionalGeneration", "FSMTModel"])
def test_export_round_trip_loads_in_transformers_with_equal_logits(tmp_path, cls):
    ref = tiny(cls)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "hf"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert report["model_type"] == "fsmt"
    back, info = getattr(hf, cls).from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert (back.config.src_vocab_size, back.config.tgt_vocab_size) == (SRC, TGT)
    ids, mask, dec = inputs("left")
    assert (
        hf_logits(back.eval(), ids, mask, dec) - hf_logits(ref, ids, mask, dec)
    ).abs().max() <= 1e-5
    again = archzoo.from_hf(tmp_path / "out")
    assert again.spec.data == {**ours.spec.data, "name": again.spec.name}


def test_a_trained_position_table_is_refused_by_name(tmp_path):
    ref = tiny()
    with torch.no_grad():
        ref.model.encoder.embed_positions.weight[5] += 0.5
    with pytest.raises(ConversionError, match="embed_positions.weight is not the sinusoidal table"):
        archzoo.from_hf(save_hf(ref, tmp_path / "hf"))


SPEC = dict(
    name="two-vocabularies",
    family="encoder-decoder",
    vocab_size=50,
    d_model=16,
    n_layers=1,
    n_heads=2,
    pad_token_id=1,
    tie_embeddings=False,
    head={"kind": "lm", "tie": True},
    decoder={"vocab_size": 40},
)


def test_a_decoder_vocabulary_sizes_the_decoder_table_the_head_and_its_ids():
    model = archzoo.build_model(SPEC)
    assert model.encoder.embedding.word_weight().shape == (50, 16)
    assert model.decoder.embedding.word_weight().shape == (40, 16)
    assert model.head.proj.weight is model.decoder.embedding.word_weight()
    out = model(torch.randint(0, 50, (1, 5)), decoder_input_ids=torch.randint(0, 40, (1, 3)))
    assert out.logits.shape == (1, 3, 40)
    with pytest.raises(ValueError, match=r"decoder_input_ids holds ids outside \[0, 40\)"):
        model(torch.randint(0, 50, (1, 5)), decoder_input_ids=torch.full((1, 3), 45))
    with pytest.raises(SpecError, match="tie_embeddings shares one token table, but the stacks'"):
        archzoo.load_spec({**SPEC, "tie_embeddings": True})
