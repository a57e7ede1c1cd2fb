"""Positions counted over real tokens (`count: tokens`): RoBERTa, XLM-R, Longformer and M2M-100
number positions from the input ids as transformers does, so left- and right-padded batches give
HF's outputs at every position, pads included, and left-padded generation HF's tokens."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import TINY, V, perturb, save_hf
from test_seq2seq_family import SIZES

import archzoo
from archzoo.plugins.position.counting import token_positions

PAD = 1
SEQ2SEQ = {k: v for k, v in SIZES.items() if k not in ("vocab_size", "pad_token_id")}
# model type -> (config class, model class, tiny configuration)
TYPES = {
    "roberta": ("RobertaConfig", "RobertaModel", TINY["roberta"][2]),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaModel", TINY["roberta"][2]),
    "m2m_100": ("M2M100Config", "M2M100ForConditionalGeneration", SEQ2SEQ),
    "longformer": (
        "LongformerConfig",
        "LongformerModel",
        {**TINY["roberta"][2], "attention_window": 4},
    ),
}


def tiny(model_type: str, scale: float = 0.05) -> torch.nn.Module:
    config_cls, model_cls, sizes = TYPES[model_type]
    config = getattr(hf, config_cls)(vocab_size=V, pad_token_id=PAD, **sizes)
    model = getattr(hf, model_cls)(config)
    perturb(model, scale=scale)
    return model.eval()


def padded(side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Three rows of 9: full, 3 pads, 6 pads on `side` (pads hold the pad id)."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, V, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    for row, pads in ((1, 3), (2, 6)):
        cols = slice(0, pads) if side == "left" else slice(9 - pads, 9)
        mask[row, cols] = 0
    return ids.masked_fill(mask == 0, PAD), mask


def test_token_positions_equal_hf_numbering():
    ids, _ = padded("left")
    numbered = hf.models.roberta.modeling_roberta.RobertaEmbeddings
    for past in (0, 4):
        want = numbered.create_position_ids_from_input_ids(ids, PAD, past)  # padding_idx based
        got = token_positions(ids, PAD, past) + PAD + 1  # archzoo ids + offset = HF ids
        assert torch.equal(got, want)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("model_type", sorted(TYPES))
def test_padded_batches_equal_hf_at_every_position(tmp_path, model_type, side):
    model = tiny(model_type)
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.spec.data["position"]["count"] == "tokens"
    ids, mask = padded(side)
    feed = {"attention_mask": mask}
    if model_type == "m2m_100":  # the decoder's inputs padded on the same side
        dec, dec_mask = padded(side)
        feed.update(decoder_input_ids=dec[:, :7], decoder_attention_mask=dec_mask[:, :7])
    with torch.no_grad():
        ref = model(input_ids=ids, **feed)
        got = ours(ids, **feed)
    if model_type == "m2m_100":
        assert (ref.encoder_last_hidden_state - got.encoder_last_hidden_state).abs().max() <= 1e-4
        assert (ref.logits - got.logits).abs().max().item() <= 1e-4
    else:
        assert (ref.last_hidden_state - got.last_hidden_state).abs().max().item() <= 1e-4


def test_m2m100_left_padded_generation_equals_hf(tmp_path):
    model = tiny("m2m_100", scale=0.2)  # sharp distributions: no near-ties
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask = padded("left")
    for kwargs in (
        {"max_new_tokens": 15, "min_new_tokens": 15},
        {"num_beams": 3, "max_new_tokens": 8},
    ):
        want = model.generate(ids, attention_mask=mask, do_sample=False, **kwargs)
        got = ours.generate(ids, attention_mask=mask, **kwargs)
        assert torch.equal(got, want), (kwargs, got, want)


def test_count_tokens_needs_a_pad_id_and_a_pad_row():
    spec = {
        "name": "counted",
        "family": "encoder",
        "vocab_size": V,
        "d_model": 32,
        "n_layers": 1,
        "n_heads": 4,
        "d_ff": 64,
        "max_len": 16,
        "position": {"kind": "learned", "count": "tokens"},
        "head": "none",
    }
    with pytest.raises(archzoo.SpecError) as err:
        archzoo.build_model(spec, device="meta")
    message = str(err.value)
    assert "count: tokens numbers positions around pad_token_id" in message
    assert "offset >= 1" in message
