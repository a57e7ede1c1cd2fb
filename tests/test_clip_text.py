"""CLIP's text tower (clip_text_model, issue 33): the quick_gelu activation against its formula
and transformers', the sentence_embedding head's token pooling (first_eos, max_id) and
projection against a per-row loop, and CLIPTextModel / CLIPTextModelWithProjection from tiny
perturbed transformers models with a right- or left-padded row (last_hidden_state and the
pooled / projected vector within 1e-4, both pooling rules: an end-of-text id, and
transformers' legacy eos_token_id 2, the row's highest id), exported back and loaded by
transformers with equal outputs. CLIP's text tower is no language model: nothing generates.
(The zoo spec's count: tests/test_zoo_counts.py from published_configs.)"""

from __future__ import annotations

import pytest
import torch
import transformers as hf
import transformers.activations as hf_act
from hf_util import max_diff_unpadded, padded_batch, perturb, save_hf

import archzoo
from archzoo.parts.tensor_source import ConversionError
from archzoo.plugins.ffn.activations import ACTIVATIONS
from archzoo.plugins.head.sentence_embedding import at_token

V, EOS = 96, 5
CLIP = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
    projection_dim=16,
    layer_norm_eps=1e-5,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=EOS,
)
TASKS = {"Model": hf.CLIPTextModel, "ModelWithProjection": hf.CLIPTextModelWithProjection}


def make(task: str, **config) -> torch.nn.Module:
    torch.manual_seed(0)
    model = TASKS[task](hf.CLIPTextConfig(**{**CLIP, **config}))
    perturb(model, scale=0.1)
    return model.eval()


def pooled(out) -> torch.Tensor:
    """transformers' sentence vector: text_embeds (with projection) or pooler_output."""
    return out.text_embeds if getattr(out, "text_embeds", None) is not None else out.pooler_output


def batch(left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Two rows with one end-of-text each; the second padded (by pad id 1) left or right."""
    ids, mask = padded_batch(V)  # ids >= 3: no pad, bos or eos
    ids[ids == EOS] = EOS + 1
    ids[0, 8] = EOS  # a token after it too
    if left:
        mask[1] = mask[1].flip(0)
        ids[1, :4] = 1
    else:
        ids[1, 6:] = 1
    ids[1, 9 if left else 5] = EOS
    return ids, mask


def test_quick_gelu_is_x_sigmoid_1_702_x_and_transformers_quick_gelu():
    x = torch.linspace(-6, 6, 121, dtype=torch.float64)
    got = ACTIVATIONS["quick_gelu"](x)
    assert torch.allclose(got, x / (1.0 + torch.exp(-1.702 * x)), rtol=1e-14, atol=0)
    assert torch.equal(got, hf_act.ACT2FN["quick_gelu"](x))


def test_token_pooling_reads_the_first_eos_or_the_highest_id_per_row():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 6, 4, generator=g, dtype=torch.float64)
    ids = torch.tensor([[4, 9, 5, 7, 5, 5], [5, 3, 3, 3, 3, 3], [3, 3, 8, 3, 9, 5]])
    want_eos = torch.stack(
        [hidden[b, next(t for t in range(6) if ids[b, t] == 5)] for b in range(3)]
    )
    assert torch.equal(at_token(hidden, ids, "first_eos", 5), want_eos)
    want_max = torch.stack(
        [hidden[b, max(range(6), key=lambda t: (ids[b, t], -t))] for b in range(3)]
    )
    assert torch.equal(at_token(hidden, ids, "max_id", None), want_max)
    with pytest.raises(ValueError, match="pooling first_eos: row 1 of input_ids has no token 9"):
        at_token(hidden, ids, "first_eos", 9)


def test_the_projection_is_a_bias_free_matrix_after_pooling():
    spec = {"vocab_size": V, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
    head = {"kind": "sentence_embedding", "pooling": "first_eos", "eos_token_id": EOS}
    model = archzoo.build_model("gpt2", {**spec, "head": {**head, "projection": 8}}).eval()
    assert [n for n, _ in model.head.named_parameters()] == ["projection.weight"]
    ids = torch.tensor([[7, 8, EOS, 9], [EOS, 3, 4, EOS]])
    out = model(ids)
    rows = out.last_hidden_state[torch.arange(2), torch.tensor([2, 0])]  # (2, 16)
    want = rows @ model.head.projection.weight.T  # (2, 8)
    assert torch.allclose(out.sentence_embedding, want, atol=1e-6)


@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
@pytest.mark.parametrize("eos", [EOS, 2], ids=["end-of-text id", "legacy eos 2"])
@pytest.mark.parametrize("task", sorted(TASKS))
def test_clip_text_outputs_equal_transformers(tmp_path, task, eos, left):
    ref = make(task, eos_token_id=eos)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "clip"))
    assert ours.hf_source["model_type"] == "clip_text_model"
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters())
    head = ours.spec.data["head"]
    assert head["pooling"] == ("max_id" if eos == 2 else "first_eos")
    assert head["projection"] == (16 if task == "ModelWithProjection" else None)
    ids, mask = batch(left)
    with torch.no_grad():
        want, got = ref(input_ids=ids, attention_mask=mask), ours(ids, attention_mask=mask)
    assert max_diff_unpadded(got.last_hidden_state, want.last_hidden_state, mask) <= 1e-4
    assert got.sentence_embedding.shape == pooled(want).shape
    assert (got.sentence_embedding - pooled(want)).abs().max().item() <= 1e-4


@pytest.mark.parametrize("task", sorted(TASKS))
def test_clip_text_exports_back_into_transformers(tmp_path, task):
    ref = make(task)
    ours = archzoo.from_hf(save_hf(ref, tmp_path / "clip"))
    report = archzoo.to_hf(ours, tmp_path / "out")
    assert (report["model_type"], report["architecture"]) == (
        "clip_text_model",
        ref.__class__.__name__,
    )
    back, info = TASKS[task].from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not any(info.values()), info
    assert back.config.eos_token_id == EOS
    ids, mask = batch(left=False)
    with torch.no_grad():
        want, got = (
            ref(input_ids=ids, attention_mask=mask),
            back.eval()(input_ids=ids, attention_mask=mask),
        )
    assert max_diff_unpadded(got.last_hidden_state, want.last_hidden_state, mask) <= 1e-5
    assert (pooled(got) - pooled(want)).abs().max().item() <= 1e-5


def test_an_end_of_text_id_outside_the_vocabulary_is_refused(tmp_path):
    ref = make("Model")
    ref.config.eos_token_id = V + 3
    with pytest.raises(ConversionError, match=r"eos_token_id=99: CLIP's text tower pools at one"):
        archzoo.from_hf(save_hf(ref, tmp_path / "clip"))
