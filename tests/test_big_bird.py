"""BigBird against transformers: every task head in block_sparse mode at a length where HF
really runs its sparse path, and in original_full mode; HF's fallback to full attention on
short inputs; tiny random models, every parameter perturbed, a right-padded row."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf
from click.testing import CliRunner
from hf_util import V, max_diff_unpadded, perturb, save_hf
from test_encoders import HEAD_KINDS, PROBLEMS, check_parity, labels_for

import archzoo
from archzoo.cli.main import main
from archzoo.parts.converter import ConversionError

BLOCK, DRAWS = 4, 2
SPARSE_FROM = (5 + 2 * DRAWS) * BLOCK + 1  # HF attends densely up to (5 + 2r) blocks
LONG = 50  # 13 blocks (the last one partial): HF pads to 52 and runs block-sparse
SUFFIXES = (
    "Model",
    "ForMaskedLM",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForMultipleChoice",
)
DEAD_POOLER = ("ForSequenceClassification", "ForTokenClassification")
CASES = [
    (mode, suffix, problem)
    for mode in ("block_sparse", "original_full")
    for suffix in SUFFIXES
    for problem in (tuple(PROBLEMS) if suffix == "ForSequenceClassification" else ("",))
    if mode == "block_sparse" or suffix in ("Model", "ForMaskedLM", "ForSequenceClassification")
]


def tiny(suffix: str, mode: str = "block_sparse", **overrides) -> torch.nn.Module:
    """A perturbed tiny HF BigBird of class `BigBird<suffix>` in eval mode."""
    config = hf.BigBirdConfig(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        block_size=BLOCK,
        num_random_blocks=DRAWS,
        attention_type=mode,
        **overrides,
    )
    model = getattr(hf, "BigBird" + suffix)(config)
    perturb(model)
    return model.eval()


def inputs(shape: tuple[int, ...], real: int = 30) -> dict[str, torch.Tensor]:
    """Random ids and token types; the last row is padded after `real` tokens (3 blocks)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][real:] = 0
    types = torch.randint(0, 2, shape, generator=g)
    return {
        "input_ids": ids.masked_fill(mask == 0, 0),
        "attention_mask": mask,
        "token_type_ids": types,
    }


@pytest.mark.parametrize(("mode", "suffix", "problem"), CASES)
def test_task_matches_hf_outputs_and_loss(tmp_path, mode, suffix, problem):
    over = dict(PROBLEMS.get(problem, {}))
    if suffix == "ForTokenClassification":
        over = dict(num_labels=5)
    model = tiny(suffix, mode, **over)
    shape = (2, 3, LONG) if suffix == "ForMultipleChoice" else (2, LONG)
    feed = inputs(shape)
    labels = labels_for(suffix, problem, shape, feed["attention_mask"])
    pooler = model.base_model.pooler  # HF's pooler is dead weight under these two heads
    unused = sum(p.numel() for p in pooler.parameters()) if suffix in DEAD_POOLER else 0
    ours = check_parity(tmp_path, model, feed, labels, labels.get("labels"), unused)
    assert model.base_model.attention_type == mode  # HF kept its sparse path at this length
    head = ours.spec.data["head"]
    assert head["kind"] == HEAD_KINDS[suffix]
    attention = ours.spec.data["attention"]
    assert attention["kind"] == ("bigbird" if mode == "block_sparse" else "mha")


def test_sparse_path_differs_from_full_attention_and_short_input_falls_back(tmp_path):
    sparse = tiny("Model")
    full = tiny("Model", "original_full")
    full.load_state_dict(sparse.state_dict())
    ours = archzoo.from_hf(save_hf(sparse, tmp_path / "hf"))
    feed = inputs((2, LONG))
    mask = feed["attention_mask"]
    with torch.no_grad():
        got = ours(**feed).last_hidden_state
        dense = full(**feed).last_hidden_state
    assert max_diff_unpadded(got, dense, mask) > 1e-3  # the sparse pattern matters here
    short = inputs((2, SPARSE_FROM - 1), real=20)  # HF falls back to full attention
    with torch.no_grad():
        got = ours(**short).last_hidden_state
        want = tiny("Model").eval()
        want.load_state_dict(sparse.state_dict())
        ref = want(**short).last_hidden_state
    assert want.attention_type == "original_full"
    assert max_diff_unpadded(got, ref, short["attention_mask"]) <= 1e-4


def test_first_block_attention_equals_its_dense_reference():
    """The blocked ITC path equals the dense computation with block 0 counted 1 + r times."""
    from archzoo.plugins.attention.bigbird import itc_attention, itc_dense_bias

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 37, 8, generator=g) for _ in range(3))
    pad = torch.ones(2, 37, dtype=torch.bool)
    pad[1, 25:] = False
    keep, bias = itc_dense_bias(37, 4, 3, q.device)
    scores = (q @ k.transpose(-1, -2)) * 8**-0.5 + bias
    scores = scores.masked_fill(~(keep & pad[:, None, None, :]), float("-inf"))
    want = (scores.softmax(-1) @ v).transpose(1, 2)  # (B, T, H, hd)
    got = itc_attention(q, k, v, block=4, key_padding=pad, scale=8**-0.5, first_count=3)
    assert (got - want).abs().max().item() <= 1e-5


def test_pretraining_checkpoint_imports_its_mlm_head(tmp_path):
    """BigBirdForPreTraining: the MLM logits are HF's prediction_logits (NSP is dropped)."""
    model = tiny("ForPreTraining")
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    assert ours.spec.data["head"] == {**ours.spec.data["head"], "kind": "mlm", "pooler": True}
    feed = inputs((2, LONG))
    with torch.no_grad():
        want, got = model(**feed).prediction_logits, ours(**feed).logits
    assert max_diff_unpadded(got, want, feed["attention_mask"]) <= 1e-4


def test_question_answering_is_refused_naming_why(tmp_path):
    model = tiny("ForQuestionAnswering")
    with pytest.raises(ConversionError, match=r"qa_classifier.*question tokens"):
        archzoo.from_hf(save_hf(model, tmp_path / "hf"))


def test_zoo_import_saves_the_model_hf_computes(tmp_path):
    model = tiny("ForMaskedLM")
    out = tmp_path / "m.safetensors"
    args = ["import", str(save_hf(model, tmp_path / "hf")), "--out", str(out), "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["params"] == sum(p.numel() for p in model.parameters())
    feed = inputs((2, LONG))
    with torch.no_grad():
        diff = archzoo.load(out)(**feed).logits - model(**feed).logits
    assert max_diff_unpadded(diff, torch.zeros_like(diff), feed["attention_mask"]) <= 1e-4
