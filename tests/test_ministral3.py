"""Ministral 3 (issue 33): Mistral's layout on YaRN rotary with Llama 4's query scaling by
position, 1 + beta ln(1 + floor(i / original_max_position_embeddings)), from a tiny perturbed
transformers model with a padded row: every task class within 1e-4, greedy generation with
the cache (a left-padded row too), and the scaling checked against its formula. (Export
round trip: tests/test_export.py's sweep; zoo spec count: tests/test_zoo_counts.py.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from hf_util import assert_greedy_equal, max_diff_unpadded, perturb, save_hf
from test_long_tail_decoders import DECODER, inputs, output

import archzoo
from archzoo.parts.converter import ConversionError
from archzoo.parts.registry import get_registry

# YaRN x4 over an original length of 4: rows of 10 reach floor(i / 4) = 2
ROPE = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 4.0,
    "original_max_position_embeddings": 4,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "llama_4_scaling_beta": 0.5,
}
TASKS = (
    "ForCausalLM",
    "Model",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
)


def tiny(task: str = "ForCausalLM", **rope) -> torch.nn.Module:
    config = hf.Ministral3Config(**DECODER, rope_parameters={**ROPE, **rope})
    torch.manual_seed(0)
    model = getattr(hf, f"Ministral3{task}")(config)
    perturb(model, scale=0.1)
    return model.eval()


@pytest.mark.parametrize("task", TASKS)
def test_task_outputs_equal_transformers_with_a_padded_row(tmp_path, task):
    ref = tiny(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path))
    assert ours.hf_source["model_type"] == "ministral3"
    attention = ours.spec.data["attention"]
    assert (attention["temperature_floor"], attention["temperature_offset"]) == (4, 0)
    assert ours.spec.data["position"]["scaling"] == "yarn"
    batch, mask = inputs(ref)
    with torch.no_grad():
        want, got = output(ref(**batch)), output(ours(**batch))
    assert got.shape == want.shape
    if got.dim() == 2:  # one row of scores per sequence
        mask, got, want = torch.ones(got.shape[0], 1, dtype=torch.long), got[:, None], want[:, None]
    assert max_diff_unpadded(got, want, mask) <= 1e-4
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())


def test_greedy_generation_equals_transformers(tmp_path):
    ref = tiny()
    assert_greedy_equal(ref, archzoo.from_hf(save_hf(ref, tmp_path)))


def test_query_scaling_starts_at_the_original_length(tmp_path):
    """beta 0 imports without the scaling; below i = 4 (floor(i / 4) = 0, scale 1) the logits
    equal beta 0.5's, from there on they differ. (The scale's formula, offset 0 and 1, is
    tests/test_llama4_text.py::test_query_temperature_is_its_formula.)"""
    ours = archzoo.from_hf(save_hf(tiny(), tmp_path / "a"))
    assert ours.spec.data["attention"]["temperature_scale"] == 0.5
    flat = archzoo.from_hf(save_hf(tiny(llama_4_scaling_beta=0.0), tmp_path / "b"))
    assert flat.spec.data["attention"].get("temperature_floor") is None
    ids = torch.randint(3, 96, (1, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = ours(ids).logits, flat(ids).logits
    assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert (a[:, 4:] - b[:, 4:]).abs().max() > 1e-3


def test_a_config_without_the_scaling_keys_is_refused():
    config = hf.Ministral3Config(**DECODER, rope_parameters=dict(ROPE)).to_dict()
    del config["rope_parameters"]["llama_4_scaling_beta"]
    with pytest.raises(ConversionError, match="llama_4_scaling_beta"):
        get_registry().converter("ministral3").to_spec(config)
