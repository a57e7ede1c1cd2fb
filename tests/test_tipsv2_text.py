"""TIPSv2's text tower (tipsv2_text_model, issue 33): Tipsv2TextModel from a tiny perturbed
transformers model, saved under OpenCLIP's names as transformers 5.24 saves it, with a right-
or left-padded row (last_hidden_state at the real tokens and the masked-mean pooler_output
within 1e-4, the parameter counts equal), the sinusoid table against transformers' own, and
exported back and loaded by transformers with equal outputs. It is no language model: nothing
generates; Tipsv2TextModel is its only task class. (The zoo spec tipsv2-b14-text's count:
tests/test_zoo_counts.py from published_configs.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import max_diff_unpadded, padded_batch, perturb, save_hf
from safetensors import safe_open
from transformers.models.tipsv2.modeling_tipsv2 import Tipsv2SinusoidalPositionalEmbedding

import archzoo
from archzoo.plugins.position.sinusoidal import sinusoidal_table

V = 96
TIPS = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=16,
    pad_token_id=0,
)


def make(**config) -> hf.Tipsv2TextModel:
    torch.manual_seed(0)
    model = hf.Tipsv2TextModel(hf.Tipsv2TextConfig(**{**TIPS, **config}))
    perturb(model, scale=0.1)
    return model.eval()


def batch(left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Two rows, the second padded (pad id 0) after or before 6 real tokens."""
    ids, mask = padded_batch(V)
    if left:
        mask[1] = mask[1].flip(0)
    ids[1][mask[1] == 0] = 0
    return ids, mask


def test_the_sinusoids_are_transformers_tensor2tensor_halves():
    want = Tipsv2SinusoidalPositionalEmbedding.get_embedding(16, 32)  # (16, 32)
    got = sinusoidal_table(torch.arange(16), 32, frequencies="tensor2tensor", layout="halves")
    assert (got - want).abs().max().item() <= 1e-6


@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
@pytest.mark.parametrize("scale", [True, False], ids=["sqrt-d scaled", "unscaled"])
def test_tipsv2_text_outputs_equal_transformers(tmp_path, scale, left):
    ref = make(scale_sqrt_depth=scale)
    path = save_hf(ref, tmp_path / "tips")
    with safe_open(path / "model.safetensors", "pt") as f:  # OpenCLIP's names on disk
        assert "transformer.resblocks.0.attn.in_proj_weight" in f.keys()
    ours = archzoo.from_hf(path)
    assert ours.hf_source["model_type"] == "tipsv2_text_model"
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    assert ours.spec.data["head"]["pooling"] == "mean"
    ids, mask = batch(left)
    with torch.no_grad():
        want, got = ref(input_ids=ids, attention_mask=mask), ours(ids, attention_mask=mask)
    assert max_diff_unpadded(got.last_hidden_state, want.last_hidden_state, mask) <= 1e-4
    assert (got.sentence_embedding - want.pooler_output).abs().max().item() <= 1e-4


def test_tipsv2_text_exports_back_into_transformers(tmp_path):
    ref = make()
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "tips"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert (report["model_type"], report["architecture"]) == (
        "tipsv2_text_model",
        "Tipsv2TextModel",
    )
    back, info = hf.Tipsv2TextModel.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not any(info.values()), info
    ids, mask = batch(left=False)
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=mask)
        got = back.eval()(input_ids=ids, attention_mask=mask)
    assert max_diff_unpadded(got.last_hidden_state, want.last_hidden_state, mask) <= 1e-5
    assert (got.pooler_output - want.pooler_output).abs().max().item() <= 1e-5
