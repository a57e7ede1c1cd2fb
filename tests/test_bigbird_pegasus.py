"""BigBird-Pegasus against transformers: logits and loss with the encoder on HF's block-sparse
path and in original_full mode, the headless and QA models, greedy and beam generation from
long prompts, reload, and the refused architectures; tiny random models, every parameter
perturbed, a right-padded row."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, assert_seq2seq_generation_equal, max_diff_unpadded, perturb, save_hf
from test_encoders import import_and_reload
from test_seq2seq_family import SIZES

import archzoo
from archzoo import ConversionError

LONG, SHORT = 50, 30  # 13 blocks of 4: HF's sparse path; 30 <= (5 + 2 * 2) * 4 = 36: full


def tiny(cls: str = "ForConditionalGeneration", scale: float = 0.05, **overrides):
    """A perturbed tiny HF BigBirdPegasus<cls>, encoder blocks of 4 with 2 random draws."""
    sizes = dict(SIZES, max_position_embeddings=128, block_size=4, num_random_blocks=2)
    config = hf.BigBirdPegasusConfig(**{**sizes, **overrides})
    model = getattr(hf, "BigBirdPegasus" + cls)(config)
    perturb(model, scale=scale)
    return model.eval()


def batch(length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Source ids (the last row padded after 30 tokens), its mask, decoder ids."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, (2, length), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    return ids.masked_fill(mask == 0, 0), mask, torch.randint(3, V, (2, 7), generator=g)


@pytest.mark.parametrize(("mode", "length"), [("block_sparse", LONG), ("original_full", SHORT)])
def test_logits_and_loss_equal_hf_and_reload_is_bit_identical(tmp_path, mode, length):
    model = tiny(attention_type=mode)
    ours, _ = import_and_reload(tmp_path, model)  # save and load: bit-identical
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    kinds = (ours.spec.data["attention"]["kind"], ours.spec.data["decoder"]["attention"]["kind"])
    assert kinds == ("bigbird" if mode == "block_sparse" else "mha", "mha")
    ids, mask, dec = batch(length)
    labels = dec.roll(-1, 1)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, labels=labels)
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec, labels=labels)
    assert model.model.encoder.attention_type == mode  # HF kept its sparse path
    assert (ref.logits - got.logits).abs().max().item() <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5


def test_sparse_encoder_differs_from_full_attention(tmp_path):
    sparse = tiny("Model")
    full = tiny("Model", attention_type="original_full")
    full.load_state_dict(sparse.state_dict())
    ours = archzoo.from_hf(save_hf(sparse, tmp_path / "hf"))
    ids, mask, dec = batch(LONG)
    with torch.no_grad():
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec)
        ref = sparse(input_ids=ids, attention_mask=mask, decoder_input_ids=dec)
        dense = full(input_ids=ids, attention_mask=mask, decoder_input_ids=dec)
    assert ours.spec.data["head"]["kind"] == "none"
    assert (ref.last_hidden_state - got.last_hidden_state).abs().max().item() <= 1e-4
    enc_ref, enc_got = ref.encoder_last_hidden_state, got.encoder_last_hidden_state
    assert max_diff_unpadded(enc_ref, enc_got, mask) <= 1e-4
    assert max_diff_unpadded(dense.encoder_last_hidden_state, enc_got, mask) > 1e-3


def test_question_answering_equals_hf(tmp_path):
    model = tiny("ForQuestionAnswering")
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask, dec = batch(LONG)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec)
        got = ours(ids, attention_mask=mask, decoder_input_ids=dec)
    for name in ("start_logits", "end_logits"):
        assert (getattr(ref, name) - getattr(got, name)).abs().max().item() <= 1e-4


def test_greedy_and_beam_generation_equal_hf(tmp_path):
    model = tiny(scale=0.2)  # sharp distributions: no near-ties
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask, _ = batch(LONG)
    assert_seq2seq_generation_equal(model, ours, ids, mask)
    assert model.model.encoder.attention_type == "block_sparse"


@pytest.mark.parametrize("cls", ["ForSequenceClassification", "ForCausalLM"])
def test_unsupported_architectures_are_refused_naming_why(tmp_path, cls):
    with pytest.raises(ConversionError, match=f"BigBirdPegasus{cls} is not supported: "):
        archzoo.from_hf(save_hf(tiny(cls), tmp_path / "hf"))
