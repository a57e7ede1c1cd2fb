"""from_hf: tiny random HF checkpoints import with the same logits and loss as transformers."""

from __future__ import annotations

import json

import pytest
import torch
from hf_util import V, max_diff_unpadded, padded_batch, perturb, save_hf, tiny_hf

import archzoo
from archzoo import ConversionError


def decoder_case(tmp_path, model):
    perturb(model)
    model.eval()
    directory = save_hf(model, tmp_path / "hf")
    ours = archzoo.from_hf(directory)
    ids, mask = padded_batch(V)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(ids, attention_mask=mask, labels=labels)
    return ref, got, mask, ours, directory


CASES = {
    "gpt2": lambda: tiny_hf("gpt2"),
    "bert": lambda: tiny_hf("bert"),
    "bert-untied": lambda: tiny_hf("bert", num_hidden_layers=1, tie_word_embeddings=False),
    "roberta": lambda: tiny_hf("roberta"),
    "llama": lambda: tiny_hf("llama"),
    "bloom": lambda: tiny_hf("bloom"),
    "gpt_neox": lambda: tiny_hf("gpt_neox", rotary_pct=0.5),
    "openai-gpt": lambda: __import__("transformers").OpenAIGPTLMHeadModel(
        __import__("transformers").OpenAIGPTConfig(
            vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=4
        )
    ),
}

SEQ2SEQ = {
    "t5": lambda: tiny_hf(
        "t5",
        num_decoder_layers=3,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
    ),
    "t5-gated-untied": lambda: tiny_hf(
        "t5", d_kv=16, feed_forward_proj="gated-gelu", tie_word_embeddings=False
    ),
    "bart": lambda: tiny_hf(
        "bart", decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=48
    ),
}


@pytest.mark.parametrize("name", sorted(SEQ2SEQ))
def test_seq2seq_import_matches_hf_logits_and_loss(tmp_path, name):
    model = SEQ2SEQ[name]()
    perturb(model)
    model.eval()
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    ids, mask = padded_batch(V, length=11, real=7)
    dec, dec_mask = padded_batch(V, length=8, real=5)
    labels = dec.masked_fill(dec_mask == 0, -100)
    with torch.no_grad():
        ref = model(
            input_ids=ids,
            attention_mask=mask,
            decoder_input_ids=dec,
            decoder_attention_mask=dec_mask,
            labels=labels,
        )
        got = ours(
            ids,
            attention_mask=mask,
            decoder_input_ids=dec,
            decoder_attention_mask=dec_mask,
            labels=labels,
        )
    assert max_diff_unpadded(ref.logits, got.logits, dec_mask) <= 1e-4
    assert (
        max_diff_unpadded(ref.encoder_last_hidden_state, got.encoder_last_hidden_state, mask)
        <= 1e-4
    )
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_import_matches_hf_logits_and_loss(tmp_path, model_type):
    hf_model = CASES[model_type]()
    ref, got, mask, ours, _ = decoder_case(tmp_path, hf_model)
    assert max_diff_unpadded(ref.logits, got.logits, mask) <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    # untied BERT in transformers 5 keeps `cls.predictions.bias` although forward never uses it
    unused = {"cls.predictions.bias"} if model_type == "bert-untied" else set()
    hf_count = sum(p.numel() for n, p in hf_model.named_parameters() if n not in unused)
    assert ours.num_parameters() == hf_count


@pytest.mark.parametrize("name", sorted(CASES) + sorted(SEQ2SEQ))
def test_import_then_save_and_load_gives_identical_logits(tmp_path, name):
    ours = archzoo.from_hf(save_hf({**CASES, **SEQ2SEQ}[name](), tmp_path / "hf"))
    archzoo.save(ours, tmp_path / "m.safetensors")
    again = archzoo.load(tmp_path / "m.safetensors").eval()
    assert again.spec == ours.spec
    ids, mask = padded_batch(V)
    extra = {"decoder_input_ids": ids[:, :5]} if name in SEQ2SEQ else {}
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, **extra).logits
        b = again(ids, attention_mask=mask, **extra).logits
    assert torch.equal(a, b)


def test_unknown_model_type_lists_supported(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no_such_type"}))
    with pytest.raises(
        ConversionError, match="unsupported model_type 'no_such_type'; supported: .*gpt2"
    ):
        archzoo.from_hf(tmp_path)


def test_missing_unexpected_and_misshaped_tensors_are_named(tmp_path):
    from safetensors.torch import load_file, save_file

    directory = save_hf(CASES["gpt2"](), tmp_path / "hf")
    weights = directory / "model.safetensors"
    state = load_file(weights)
    state.pop("transformer.h.1.mlp.c_fc.bias")
    state["transformer.extra.weight"] = torch.zeros(3)
    save_file(state, weights, metadata={"format": "pt"})
    with pytest.raises(ConversionError) as err:
        archzoo.from_hf(directory)
    assert "missing tensors: transformer.h.1.mlp.c_fc.bias" in str(err.value)
    assert "unexpected tensors: transformer.extra.weight" in str(err.value)

    state = load_file(weights)
    state["transformer.h.1.mlp.c_fc.bias"] = torch.zeros(7)
    state.pop("transformer.extra.weight")
    save_file(state, weights, metadata={"format": "pt"})
    with pytest.raises(
        archzoo.WeightsError, match="mis-shaped tensors: decoder.blocks.1.ffn.fc_in.bias"
    ):
        archzoo.from_hf(directory)


def test_pickle_checkpoints_are_never_read(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ConversionError, match="pickle files are never read"):
        archzoo.from_hf(tmp_path)
