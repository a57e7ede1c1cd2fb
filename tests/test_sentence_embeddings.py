"""A sentence-transformers directory imports as a headless encoder whose `none` head pools
(and normalises) a sentence_embedding, equal to the computation from HF's hidden states."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from hf_util import V, perturb, save_hf

import archzoo

SIZES = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64)
TRANSFORMER = {
    "idx": 0,
    "name": "0",
    "path": "",
    "type": "sentence_transformers.models.Transformer",
}
NORMALIZE = {
    "idx": 2,
    "name": "2",
    "path": "2_Normalize",
    "type": "sentence_transformers.models.Normalize",
}


def sentence_transformers_dir(tmp_path, mode: str = "mean", normalize: bool = True):
    """A tiny BertModel saved as sentence-transformers saves one: the HF checkpoint at the
    top, modules.json, and the pooling module's config."""
    model = hf.BertModel(hf.BertConfig(vocab_size=V, max_position_embeddings=64, **SIZES))
    perturb(model)
    directory = save_hf(model.eval(), tmp_path / "st")
    pooling = {"word_embedding_dimension": 32, "include_prompt": True}
    for m in ("cls", "mean", "max", "mean_sqrt_len"):
        pooling[f"pooling_mode_{m}_{'token' if m == 'cls' else 'tokens'}"] = m == mode
    (directory / "1_Pooling").mkdir()
    (directory / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    modules = [
        TRANSFORMER,
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if normalize:
        modules.append(NORMALIZE)
        (directory / "2_Normalize").mkdir()
    (directory / "modules.json").write_text(json.dumps(modules))
    return model, directory


def batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, V, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0  # right-padded rows
    mask[2, 7:] = 0
    return ids, mask


def test_mean_pooled_normalised_embeddings_equal_the_reference(tmp_path):
    model, directory = sentence_transformers_dir(tmp_path)
    ours = archzoo.from_hf(directory)
    assert ours.spec.data["head"] == {
        "kind": "sentence_embedding",
        "pooler": True,
        "pooling": "mean",
        "eos_token_id": None,
        "projection": None,
        "normalize": True,
    }
    ids, mask = batch()
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, D)
        m = mask[..., None].float()
        reference = torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)
        got = ours(ids, attention_mask=mask).sentence_embedding
    assert got.shape == (3, 32)
    assert (got - reference).abs().max().item() <= 1e-5
    assert torch.allclose(got.norm(dim=-1), torch.ones(3), atol=1e-6)
    # the padded row's embedding is that of its real tokens alone
    with torch.no_grad():
        alone = ours(ids[1:2, :4]).sentence_embedding
    assert (alone - got[1:2]).abs().max().item() <= 1e-5
    # saved and loaded, the settings travel with the weights
    archzoo.save(ours, tmp_path / "m.safetensors")
    again = archzoo.load(tmp_path / "m.safetensors")
    with torch.no_grad():
        assert torch.equal(again(ids, attention_mask=mask).sentence_embedding, got)


@pytest.mark.parametrize("mode", ["cls", "max"])
def test_other_pooling_modes_without_normalize(tmp_path, mode):
    model, directory = sentence_transformers_dir(tmp_path, mode, normalize=False)
    ours = archzoo.from_hf(directory)
    ids, mask = batch()
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        if mode == "cls":
            reference = hidden[:, 0]
        else:
            reference = hidden.masked_fill(mask[..., None] == 0, -1e9).max(1).values
        got = ours(ids, attention_mask=mask).sentence_embedding
    assert (got - reference).abs().max().item() <= 1e-5


def test_unsupported_modules_and_pooling_are_named(tmp_path):
    _, directory = sentence_transformers_dir(tmp_path, "mean_sqrt_len")
    with pytest.raises(archzoo.ConversionError, match=r"1_Pooling.*pooling_mode_mean_sqrt_len"):
        archzoo.from_hf(directory)
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    (directory / "modules.json").write_text(json.dumps([TRANSFORMER, dense]))
    with pytest.raises(
        archzoo.ConversionError, match=r"modules.json: module .*Dense.* not supported"
    ):
        archzoo.from_hf(directory)
