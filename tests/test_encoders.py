"""The encoder branch against transformers: every type's base model and task heads (MLM,
ELECTRA's discriminator, sequence / token classification, QA, multiple choice) import with
HF's outputs and losses; tiny random models, every parameter perturbed, a right-padded row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers as hf
from click.testing import CliRunner
from hf_util import V, max_diff_unpadded, perturb, save_hf

import archzoo
from archzoo.cli.main import main

LAYERS = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64)
# model type -> (HF class prefix, tiny config, the type's pad id, whether it has token types)
TYPES: dict[str, tuple[str, dict, int, bool]] = {
    "bert": ("Bert", LAYERS, 0, True),
    "roberta": ("Roberta", dict(LAYERS, type_vocab_size=1), 1, False),
    "albert": ("Albert", dict(LAYERS, embedding_size=16), 0, True),
    "xlm-roberta": ("XLMRoberta", dict(LAYERS, type_vocab_size=1), 1, False),
    "distilbert": ("DistilBert", dict(n_layers=2, dim=32, n_heads=4, hidden_dim=64), 0, False),
    "electra": ("Electra", dict(LAYERS, embedding_size=16), 0, True),  # E != d: a projection
}
PROBLEMS = {
    "single": dict(num_labels=3),
    "regression": dict(num_labels=1),
    "multi": dict(num_labels=3, problem_type="multi_label_classification"),
}
BASE = ("Model", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
# model type -> the HF architectures (class suffixes) tested here (the older types' other
# heads are in tests/test_hf_tasks.py)
TASKS: dict[str, tuple[str, ...]] = {
    "bert": ("ForMultipleChoice",),
    "roberta": ("ForMultipleChoice",),
    "albert": ("ForMultipleChoice",),
    "xlm-roberta": (*BASE, "ForMaskedLM", "ForMultipleChoice"),
    "distilbert": (*BASE, "ForMaskedLM", "ForMultipleChoice"),
    "electra": (*BASE, "ForPreTraining", "ForMaskedLM", "ForMultipleChoice"),
}
CASES = [
    (t, suffix, problem)
    for t, suffixes in TASKS.items()
    for suffix in suffixes
    for problem in (tuple(PROBLEMS) if suffix == "ForSequenceClassification" else ("",))
]


def tiny(model_type: str, suffix: str, **overrides) -> torch.nn.Module:
    """A perturbed tiny HF model of class `<Prefix><suffix>`."""
    prefix, sizes, pad, _ = TYPES[model_type]
    config_cls = getattr(hf, prefix + "Config")
    config = config_cls(
        **{
            "vocab_size": V,
            "pad_token_id": pad,
            "max_position_embeddings": 64,
            **sizes,
            **overrides,
        }
    )
    model = getattr(hf, prefix + suffix)(config)
    perturb(model)
    return model.eval()


def inputs(model_type: str, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids with padding (the type's pad id) after 5 tokens in the last row (of the
    last example), and random token types where the type has them."""
    _, _, pad, token_types = TYPES[model_type]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, V, shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[(-1,) * (len(shape) - 1)][5:] = 0
    out = {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}
    if token_types:
        out["token_type_ids"] = torch.randint(0, 2, shape, generator=g)
    return out


def import_and_reload(tmp_path, model):
    """from_hf, then save and load: the same spec and bit-identical tensors."""
    ours = archzoo.from_hf(save_hf(model, tmp_path / "hf"))
    archzoo.save(ours, tmp_path / "m.safetensors")
    again = archzoo.load(tmp_path / "m.safetensors")
    assert again.spec == ours.spec
    a, b = ours.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return ours, again


def check_parity(
    tmp_path, model, feed: dict, labels: dict, ours_labels: torch.Tensor | None, unused: int = 0
):
    """HF's outputs and loss against the imported model's and the reloaded one's (`unused`:
    HF parameters that no output uses and the import leaves out)."""
    ours, again = import_and_reload(tmp_path, model)
    assert ours.num_parameters() == sum(p.numel() for p in model.parameters()) - unused
    with torch.no_grad():
        ref = model(**feed, **labels)
        extra = {} if ours_labels is None else {"labels": ours_labels}
        got = ours(**feed, **extra)
        reloaded = again(**feed, **extra)
    mask = feed["attention_mask"]
    for name in ("last_hidden_state", "logits", "start_logits", "end_logits"):
        r = getattr(ref, name, None)
        if r is None or (name == "last_hidden_state" and "logits" in ref):
            continue
        g = getattr(got, name)
        if r.shape[:2] == mask.shape and r.dim() >= 2:  # per token: real positions only
            diff = max_diff_unpadded(r.reshape(*mask.shape, -1), g.reshape(*mask.shape, -1), mask)
        else:
            diff = (r - g).abs().max().item()
        assert diff <= 1e-4, f"{name}: max |diff| {diff}"
        assert (g - getattr(reloaded, name)).abs().max().item() <= 1e-6
    if labels:
        assert abs(ref.loss.item() - got.loss.item()) <= 1e-5
    return ours


def labels_for(suffix: str, problem: str, shape: tuple[int, ...], mask: torch.Tensor) -> dict:
    """HF's label arguments for a task, drawn at random (-100 on padding for token labels)."""
    g = torch.Generator().manual_seed(3)
    B = shape[0]
    if suffix == "ForMultipleChoice":
        return {"labels": torch.randint(0, shape[1], (B,), generator=g)}
    if suffix == "ForSequenceClassification":
        if problem == "single":
            return {"labels": torch.randint(0, 3, (B,), generator=g)}
        if problem == "regression":
            return {"labels": torch.randn(B, generator=g)}
        return {"labels": torch.randint(0, 2, (B, 3), generator=g).float()}
    if suffix in ("ForTokenClassification", "ForMaskedLM"):
        n = 5 if suffix == "ForTokenClassification" else V
        return {"labels": torch.randint(0, n, shape, generator=g).masked_fill(mask == 0, -100)}
    if suffix == "ForPreTraining":  # replaced (1) or not (0), every token; HF skips padding
        return {"labels": torch.randint(0, 2, shape, generator=g)}
    if suffix == "ForQuestionAnswering":  # 30: outside the sequence, ignored as HF does
        return {"start_positions": torch.tensor([1, 2]), "end_positions": torch.tensor([4, 30])}
    return {}


def task_config(suffix: str, problem: str, over: dict | None = None) -> dict:
    """HF config overrides of a task: its labels (5 tags, or `problem`'s, named)."""
    over = dict(over or {}, **PROBLEMS.get(problem, {}))
    if suffix == "ForTokenClassification":
        over = dict(over, num_labels=5)
    if problem:
        over = dict(over, id2label={i: f"class_{i}" for i in range(over["num_labels"])})
    return over


def task_parity(tmp_path, model, suffix: str, problem: str, feed: dict, unused: int = 0):
    """`check_parity` with random labels for the task; the imported model, its head checked."""
    shape = tuple(feed["input_ids"].shape)
    labels = labels_for(suffix, problem, shape, feed["attention_mask"])
    ours_labels = labels.get("labels")
    if "start_positions" in labels:
        ours_labels = torch.stack([labels["start_positions"], labels["end_positions"]], -1)
    ours = check_parity(tmp_path, model, feed, labels, ours_labels, unused)
    assert ours.spec.data["head"]["kind"] == HEAD_KINDS[suffix]
    return ours


@pytest.mark.parametrize(("model_type", "suffix", "problem"), CASES)
def test_task_matches_hf_outputs_and_loss(tmp_path, model_type, suffix, problem):
    over = task_config(suffix, problem)
    model = tiny(model_type, suffix, **over)
    shape = (2, 3, 9) if suffix == "ForMultipleChoice" else (2, 9)  # (B, C, T) or (B, T)
    feed = inputs(model_type, shape)
    ours = task_parity(tmp_path, model, suffix, problem, feed)
    head = ours.spec.data["head"]
    if problem:
        assert head["labels"] == [f"class_{i}" for i in range(over["num_labels"])]
    if suffix == "ForMultipleChoice":
        with torch.no_grad():
            assert ours(**feed).logits.shape == (2, 3)


HEAD_KINDS = {
    "Model": "none",
    "ForMaskedLM": "mlm",
    "ForPreTraining": "discriminator",
    "ForSequenceClassification": "classifier",
    "ForTokenClassification": "token_classifier",
    "ForQuestionAnswering": "question_answering",
    "ForMultipleChoice": "multiple_choice",
}


def test_multiple_choice_refuses_flat_input_ids(tmp_path):
    ours = archzoo.from_hf(save_hf(tiny("bert", "ForMultipleChoice"), tmp_path / "hf"))
    with pytest.raises(ValueError, match=r"multiple_choice.*\(batch, choices, seq\), got \(2, 9\)"):
        ours(torch.ones(2, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"attention_mask of shape \(2, 9\) does not match"):
        ours(torch.ones(2, 3, 9, dtype=torch.long), attention_mask=torch.ones(2, 9))


@pytest.mark.parametrize(
    ("model_type", "suffix"),
    [("xlm-roberta", "ForMaskedLM"), ("distilbert", "ForMaskedLM"), ("electra", "ForPreTraining")],
)
def test_zoo_import_saves_the_model_hf_computes(tmp_path, model_type, suffix):
    model = tiny(model_type, suffix)
    out = zoo_import(tmp_path, model)
    feed = inputs(model_type, (2, 9))
    with torch.no_grad():
        diff = archzoo.load(out)(**feed).logits - model(**feed).logits
    assert max_diff_unpadded(diff, torch.zeros_like(diff), feed["attention_mask"]) <= 1e-4


def zoo_import(tmp_path, model) -> Path:
    """`zoo import --json` of an HF encoder: the file it saved (its report checked: the
    family, HF's parameter count)."""
    out = tmp_path / "m.safetensors"
    args = ["import", str(save_hf(model, tmp_path / "hf")), "--out", str(out), "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["family"] == "encoder"
    assert report["params"] == sum(p.numel() for p in model.parameters())
    return out
