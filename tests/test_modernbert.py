"""ModernBERT against transformers: alternating sliding-window / global layers with their two
rotary bases, GeGLU, the bias-free layout (and its biased variant), the first layer's missing
norm, and every head (MLM, sequence classification with cls and mean pooling, tokens, QA,
multiple choice); tiny random models, every parameter perturbed, a right-padded row."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from hf_util import V, max_diff_unpadded, perturb, save_hf
from test_encoders import BASE, LAYERS, task_config, task_parity, zoo_import

import archzoo
from archzoo.parts.converter import ConversionError

# 5 layers: 0 and 3 global, the others see local_attention // 2 = 2 keys each side, so at
# 9 tokens the window cuts; special ids inside the tiny vocabulary
WINDOWS = dict(local_attention=4, global_attn_every_n_layers=3)
IDS = dict(pad_token_id=0, bos_token_id=1, cls_token_id=1, eos_token_id=2, sep_token_id=2)
TINY = dict(LAYERS, vocab_size=V, num_hidden_layers=5, max_position_embeddings=64, **WINDOWS, **IDS)
# every bias ModernBERT can switch on, and an untied decoder without one
BIASES = dict(attention_bias=True, mlp_bias=True, norm_bias=True, classifier_bias=True)
UNTIED = dict(decoder_bias=False, tie_word_embeddings=False)
TASKS = (*BASE, "ForMaskedLM", "ForMultipleChoice")
CASES = [
    *[(suffix, "", {}) for suffix in TASKS if suffix != "ForSequenceClassification"],
    *[("ForSequenceClassification", p, {}) for p in ("single", "regression", "multi")],
    ("ForSequenceClassification", "single", dict(classifier_pooling="mean")),
    ("ForMultipleChoice", "", dict(classifier_pooling="mean")),
    ("ForMaskedLM", "", dict(BIASES, **UNTIED)),
    ("ForSequenceClassification", "single", BIASES),
]


def tiny(suffix: str, **overrides) -> torch.nn.Module:
    """A perturbed tiny `ModernBert<suffix>`."""
    model = getattr(hf, "ModernBert" + suffix)(hf.ModernBertConfig(**{**TINY, **overrides}))
    perturb(model)
    return model.eval()


def inputs(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids, the last row (of the last example) right-padded after 5 tokens."""
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    ids = torch.randint(3, V, shape, generator=g).masked_fill(mask == 0, 0)
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize(("suffix", "problem", "over"), CASES)
def test_task_matches_hf_outputs_and_loss(tmp_path, suffix, problem, over):
    model = tiny(suffix, **task_config(suffix, problem, over))
    feed = inputs((2, 3, 9) if suffix == "ForMultipleChoice" else (2, 9))
    ours = task_parity(tmp_path, model, suffix, problem, feed)
    if "classifier_pooling" in over:
        assert ours.spec.data["head"]["pooling"] == "mean"


def test_layers_alternate_windows_and_rotary_bases(tmp_path):
    spec = archzoo.from_hf(save_hf(tiny("Model"), tmp_path / "hf")).spec.data
    assert spec["attention"]["kind"] == "local" and spec["attention"]["window"] == 3
    assert spec["position"]["base"] == 10_000.0
    glob, first = spec["layers"]
    assert glob["select"] == "0:5:3" and glob["attention"]["kind"] == "mha"
    assert glob["position"]["base"] == 160_000.0
    block = {"kind": "pre_ln", "attention_norm": False}
    block |= {"residual_scale": 1.0, "ffn_norm": True}  # added with Granite and Mamba 2
    block |= {"prefix_attention_norm": False}  # added with PEGASUS-X
    assert first == {"select": [0], "block": block}


def test_transformers_4_config_keys_give_the_same_model(tmp_path):
    """config.json as transformers 4 wrote it: global_attn_every_n_layers and the two
    *_rope_theta keys instead of layer_types and per-type rope_parameters."""
    model = tiny("ForMaskedLM")
    new = archzoo.from_hf(save_hf(model, tmp_path / "new"))
    config = json.loads((tmp_path / "new" / "config.json").read_text())
    config.pop("layer_types"), config.pop("rope_parameters")
    config.update(global_rope_theta=160_000.0, local_rope_theta=10_000.0)
    (tmp_path / "new" / "config.json").write_text(json.dumps(config))
    old = archzoo.from_hf(tmp_path / "new")
    assert old.spec.data == new.spec.data
    feed = inputs((2, 9))
    with torch.no_grad():
        want = model(**feed).logits
        got = old(**feed).logits
    assert max_diff_unpadded(got, want, feed["attention_mask"]) <= 1e-4


def test_sparse_prediction_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ConversionError, match="sparse_prediction=true is not supported"):
        archzoo.from_hf(save_hf(tiny("ForMaskedLM", sparse_prediction=True), tmp_path / "hf"))


def test_zoo_import_saves_the_model_hf_computes(tmp_path):
    model = tiny("ForMaskedLM")
    out = zoo_import(tmp_path, model)
    feed = inputs((2, 9))
    with torch.no_grad():
        got, want = archzoo.load(out)(**feed).logits, model(**feed).logits
    assert max_diff_unpadded(got, want, feed["attention_mask"]) <= 1e-4
