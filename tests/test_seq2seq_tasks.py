"""The task classes of the encoder-decoders: BART/mBART/T5/UMT5 ...ForSequenceClassification
(the decoder state at the last <eos>) and the decoder alone as a causal LM (BART, mBART,
Marian, Pegasus ...ForCausalLM) against transformers: tiny random models, every parameter
perturbed, a right-padded row; logits, losses and greedy generation."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import V, assert_causal_lm_equal, assert_greedy_equal, perturb, save_hf
from test_seq2seq_family import SIZES, restore_sinusoids

import archzoo

T5_SIZES = dict(num_layers=2, d_model=32, num_heads=4, d_kv=8, d_ff=64, vocab_size=V)
# model type -> (HF class prefix, tiny configuration, eos id, decoder start id)
TYPES = {
    "bart": ("Bart", SIZES, 2, 2),
    "mbart": ("MBart", SIZES, 2, 2),
    "marian": ("Marian", SIZES, 2, 2),
    "pegasus": ("Pegasus", SIZES, 2, 2),
    "t5": ("T5", dict(T5_SIZES, feed_forward_proj="relu"), 1, 0),
    "umt5": ("UMT5", dict(T5_SIZES, feed_forward_proj="gated-gelu"), 1, 0),
}
PROBLEMS = {
    "single": dict(num_labels=3),
    "regression": dict(num_labels=1),
    "multi": dict(num_labels=3, problem_type="multi_label_classification"),
}


def tiny(model_type: str, suffix: str, scale: float = 0.05, **overrides) -> torch.nn.Module:
    prefix, sizes, eos, start = TYPES[model_type]
    ids = dict(eos_token_id=eos, decoder_start_token_id=start)
    config = getattr(hf, prefix + "Config")(**{**sizes, **ids, **overrides})
    model = getattr(hf, prefix + suffix)(config)
    perturb(model, scale=scale)
    restore_sinusoids(model)
    return model.eval()


def eos_batch(eos: int, start: int) -> dict[str, torch.Tensor]:
    """Two rows ending in one <eos>, the second right-padded after it; the decoder reads
    them shifted right (transformers' default for these classes)."""
    g = torch.Generator().manual_seed(6)
    ids = torch.randint(3, V, (2, 10), generator=g)
    mask = torch.ones_like(ids)
    ids[0, 9] = eos
    ids[1, 6] = eos
    mask[1, 7:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    dec = torch.cat([torch.full((2, 1), start), ids[:, :-1]], dim=1)
    return {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec}


def labels_for(problem: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    if problem == "single":
        return torch.randint(0, 3, (2,), generator=g)
    if problem == "regression":
        return torch.randn(2, generator=g)
    return torch.randint(0, 2, (2, 3), generator=g).float()


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("model_type", ["bart", "mbart", "t5", "umt5"])
def test_sequence_classification_pools_the_last_eos_as_hf(tmp_path, model_type, problem):
    model = tiny(model_type, "ForSequenceClassification", **PROBLEMS[problem])
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    head = ours.spec.data["head"]
    assert head["kind"] == "classifier" and head["pooling"] == "eos"
    assert head["eos_token_id"] == TYPES[model_type][2]
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters())
    feed, labels = eos_batch(*TYPES[model_type][2:]), labels_for(problem)
    with torch.no_grad():
        ref = model(**feed, labels=labels)
        got = ours(**feed, labels=labels)
    assert (ref.logits - got.logits).abs().max().item() <= 1e-4
    assert abs(ref.loss.item() - got.loss.item()) <= 1e-5


def test_rows_with_different_eos_counts_are_refused_as_in_hf(tmp_path):
    model = tiny("bart", "ForSequenceClassification")
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    feed = eos_batch(2, 2)
    feed["input_ids"][0, 3] = 2  # row 0: two <eos>, row 1: one
    with pytest.raises(ValueError, match="same number of <eos>"):
        model(**feed)
    with pytest.raises(ValueError, match=r"every row of input_ids must hold token 2 .*\[2, 1\]"):
        ours(**feed)
    feed["input_ids"][:, :] = 5  # no <eos> at all
    with pytest.raises(ValueError, match="row 0 of input_ids has no token 2"):
        ours(**feed)


@pytest.mark.parametrize("model_type", ["bart", "mbart", "marian", "pegasus"])
def test_decoder_alone_as_causal_lm_equals_hf(tmp_path, model_type):
    model = tiny(model_type, "ForCausalLM", scale=0.2)  # sharp distributions: no near-ties
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.family == "decoder" and ours.encoder is None
    assert ours.spec.data["n_layers"] == model.config.decoder_layers
    assert ours.spec.data["position"]["count"] == "absolute"
    frozen = sum(m.weight.numel() for m in model.modules() if hasattr(m, "create_weight"))
    cross = sum(
        p.numel() for n, p in model.named_parameters() if ".encoder_attn" in n
    )  # built by transformers, reached by no input
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters()) - frozen - cross
    assert_causal_lm_equal(model, ours)
    assert_greedy_equal(model, ours)
